//! Sending a finished submission's callback again (`POST /submissions/{id}/callback`, staff):
//! after a receiver was down for longer than the tries last, or lost what it was sent. The
//! callback goes back to `pending`, due now, with its tries counted afresh, and this node's
//! deliverer is woken; any node may deliver it.

use corral_store::{Job, Redelivery};

use crate::error::{ApiError, ErrorKind};
use crate::service::caller::Caller;
use crate::state::SharedState;

/// Puts submission `id`'s callback back to be delivered (staff only): the submission as it is
/// now; 404 unknown, 409 not finished, without a callback URL, or with a try under way.
pub async fn redeliver(st: &SharedState, caller: &Caller, id: &str) -> Result<Job, ApiError> {
    caller.require_staff()?;
    let conflict = |code, message: String| ApiError::new(ErrorKind::Conflict, code, message);
    match st.store.redeliver_callback(id, &caller.id).await? {
        Redelivery::Pending(job) => {
            st.queue.finished.callback_due();
            tracing::info!(caller = %caller.id, submission = %id, "callback to be delivered again");
            Ok(*job)
        }
        Redelivery::NotFound => Err(ApiError::not_found(format!("no submission {id:?}"))),
        Redelivery::NotFinished(state) => Err(conflict(
            "not_finished",
            format!(
                "submission {id} is still {}: its callback is sent when it is judged",
                state.as_str()
            ),
        )),
        Redelivery::NoCallback => Err(conflict(
            "no_callback",
            format!("submission {id} has no callback_url"),
        )),
        Redelivery::Delivering => Err(conflict(
            "callback_delivering",
            format!(
                "a try of submission {id}'s callback is under way: ask again once it is \
                 recorded (within submissions.callback_timeout)"
            ),
        )),
    }
}
