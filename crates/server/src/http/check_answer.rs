//! What `POST /check` answers once a grading is done, streamed or not: CS50's shape or corral's
//! report (with the suite's order), and the editor's revision recorded from it.

use corral_checks::{Report, View};
use serde_json::Value;

use crate::error::ApiError;
use crate::service::caller::Caller;
use crate::service::revisions;
use crate::state::SharedState;

/// How a check's report is answered, once graded.
pub(super) struct Answer {
    /// The suite's id.
    pub suite: String,
    /// `?format=json` (else CS50's shape).
    pub corral_format: bool,
    /// The editor's language and the upload's files, to keep as a revision.
    pub revision: Option<(String, Vec<corral_store::RevisionFile>)>,
}

impl Answer {
    /// The answer's body for `report`; records the revision when one was asked for.
    pub(super) async fn of(
        self,
        st: &SharedState,
        caller: &Caller,
        report: &Report,
        view: View,
    ) -> Result<Value, ApiError> {
        tracing::info!(caller = %caller.id, suite = %self.suite, passed = report.passed(), "check");
        if !self.corral_format {
            return Ok(report.to_cs50(view));
        }
        let mut v = report.to_json(view);
        // The suite's order of the checks (a JSON object's keys have none).
        v["order"] = Value::from(
            report
                .results
                .iter()
                .map(|r| r.id.clone())
                .collect::<Vec<_>>(),
        );
        if let Some((language, files)) = self.revision {
            let meta =
                revisions::record_check(st, caller, language, &self.suite, files, report).await?;
            v["revision"] = serde_json::to_value(meta).map_err(ApiError::internal)?;
        }
        Ok(v)
    }
}
