//! API tokens: created and revoked by admins; the first admin token at the first start.

use corral_store::{NewToken, Role, Store};

use crate::error::{ApiError, ServerError};
use crate::service::caller::Caller;
use crate::state::SharedState;

/// Creates a token (admins only); its secret is in the answer and nowhere else.
pub async fn create(
    st: &SharedState,
    caller: &Caller,
    role: Role,
    name: &str,
) -> Result<NewToken, ApiError> {
    caller.require_admin()?;
    if name.len() > 200 {
        return Err(ApiError::unprocessable("name is longer than 200 bytes"));
    }
    let t = st.store.create_token(role, name).await?;
    tracing::info!(by = %caller.id, token = %t.info.id, role = %t.info.role, "token created");
    Ok(t)
}

/// Revokes a live token (admins only; 404 when there is none with this id).
pub async fn revoke(st: &SharedState, caller: &Caller, id: &str) -> Result<(), ApiError> {
    caller.require_admin()?;
    // The store gives back the jobs its remote workers hold in the same step (other nodes'
    // workers hear of them by the store's notification or their next poll).
    if st.store.revoke_token(id).await? {
        st.queue.work.notify_waiters();
        // This node's connections hear of it at once; other nodes' at their next poll.
        st.revocations.note([id.to_string()]);
        // Its kept sandboxes go now (a busy one when its run ends): nobody may use them again.
        st.sandboxes.revoke(id).drop_blocking();
        st.metrics.held_sandboxes.set(st.sandboxes.len() as i64);
        Ok(())
    } else {
        Err(ApiError::not_found(format!("no live token {id:?}")))
    }
}

/// When the store has no admin token yet, creates one and returns its secret (the first start).
/// Nodes starting together on one database create one between them: the store checks and
/// creates in one step.
pub async fn first_admin_token(store: &dyn Store) -> Result<Option<String>, ServerError> {
    Ok(store
        .create_first_admin("first admin")
        .await?
        .map(|t| t.secret))
}
