//! `/languages`: what a client (an editor's language menu) can compile and run here — the check
//! engine's language registry (built-in plus the operator's file), probed on the host side.

use crate::state::AppState;
use crate::types::LanguageInfo;

pub fn list(st: &AppState) -> Vec<LanguageInfo> {
    st.languages
        .probe(None)
        .into_iter()
        .map(|l| LanguageInfo {
            id: l.id,
            name: l.name,
            source: l.source,
            compile: l.compile,
            run: l.run,
            available: l.available,
            reason: l.reason,
        })
        .collect()
}
