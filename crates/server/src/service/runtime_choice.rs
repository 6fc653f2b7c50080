//! A runtime a grading request names (`"runtime"` of `/check` and `/submissions`) may not undo
//! what a suite keeps from the submission.
//!
//! A check50 problem's hidden checks are kept from the submission's programs by a Landlock
//! layer, which gVisor does not have: a request that moves such a check from the host's kernel
//! to gVisor would let the submission read (and print in a public check's output) the hidden
//! checks' source and expected output. The suite, its language and the operator's `[runtime]`
//! settings may still put it under gVisor — that is their authors' choice, and documented.

use corral_checks::shared::settings::runtime_of;
use corral_checks::Suite;
use corral_sandbox::{Runtime, RuntimePolicy};

use crate::error::ApiError;
use crate::state::SharedState;

/// Refuses (422) a `requested` runtime under which a check of `suite` that hides something with
/// Landlock would run under gVisor although, without the request, it would run natively.
pub fn refuse_lost_hiding(
    st: &SharedState,
    suite: &Suite,
    requested: Option<Runtime>,
) -> Result<(), ApiError> {
    let Some(requested) = requested else {
        return Ok(());
    };
    let server = st.config.runtime;
    let policy = |r| -> Result<RuntimePolicy, ApiError> {
        Ok(RuntimePolicy {
            default: server
                .resolve(r)
                .map_err(|e| ApiError::unprocessable(e.to_string()))?,
            force_gvisor: server.force_gvisor,
        })
    };
    let (asked, otherwise) = (policy(Some(requested))?, policy(None)?);
    for check in suite.checks.iter().filter(|c| c.hides_with_landlock()) {
        let under = |p| runtime_of(suite, check, &st.languages, p);
        if under(&asked) == Runtime::Gvisor && under(&otherwise) == Runtime::Native {
            return Err(ApiError::unprocessable(format!(
                "runtime \"gvisor\": check {:?} keeps its hidden checks from the submission with \
                 Landlock, which gVisor does not have (under it, the submission could read them); \
                 leave out \"runtime\" to grade as the suite says",
                check.id
            )));
        }
    }
    Ok(())
}
