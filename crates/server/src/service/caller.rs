//! Who is calling: a token's public id and role (every adapter authenticates into one), and the
//! role checks and rate limits the service applies.

use corral_store::Role;

use crate::error::ApiError;
use crate::service::token_cache::Vouched;
use crate::state::SharedState;

/// Who is calling. Everything a caller owns is keyed by `id` (the token's public id).
#[derive(Debug, Clone)]
pub struct Caller {
    pub id: String,
    pub role: Role,
    /// The token's name (a student's: what the gradebook shows).
    pub name: String,
}

/// The answer to a request whose token was revoked while it waited.
pub fn revoked() -> ApiError {
    ApiError::unauthorized("this token was revoked")
}

impl Caller {
    /// The caller a token's secret stands for (401 when unknown or revoked).
    pub async fn of_token(st: &SharedState, secret: &str) -> Result<Caller, ApiError> {
        if secret.len() > 256 {
            return Err(ApiError::unauthorized("unknown or revoked token"));
        }
        let hash = corral_store::sha256_hex(secret.as_bytes());
        if let Some(t) = st.token_cache.get(&hash, &st.revocations) {
            return Ok(Caller {
                id: t.id,
                role: t.role,
                name: t.name,
            });
        }
        let info = st
            .store
            .token_by_secret(secret)
            .await?
            .ok_or_else(|| ApiError::unauthorized("unknown or revoked token"))?;
        st.token_cache.put(
            hash,
            Vouched {
                id: info.id.clone(),
                role: info.role,
                name: info.name.clone(),
            },
        );
        Ok(Caller {
            id: info.id,
            role: info.role,
            name: info.name,
        })
    }

    /// Resolves once this caller's token is revoked (never without authentication).
    pub async fn revoked(&self, st: &SharedState) {
        if st.config.dev_no_auth {
            return std::future::pending().await;
        }
        st.revocations.revoked(&self.id).await
    }

    /// Runs `work` (a long-poll) while the caller's token is live: 401 as soon as it is revoked.
    pub async fn while_live<T>(
        &self,
        st: &SharedState,
        work: impl std::future::Future<Output = Result<T, ApiError>>,
    ) -> Result<T, ApiError> {
        tokio::select! {
            r = work => r,
            _ = self.revoked(st) => Err(revoked()),
        }
    }

    /// Counts a request against the caller's rate limit (429 with the wait when over it).
    pub fn admit(&self, st: &SharedState) -> Result<(), ApiError> {
        let limits = &st.config.rate_limit;
        let rate = match self.role {
            Role::Student => limits.student,
            Role::Staff => limits.staff,
            Role::Admin => limits.admin,
            // Workers long-poll and post results; the queue bounds their work.
            Role::Worker => limits.admin,
        };
        if let Err(wait) = st.limiter.check(&self.id, rate) {
            st.metrics
                .rejected
                .with_label_values(&["rate_limited"])
                .inc();
            return Err(ApiError::rate_limited(wait));
        }
        Ok(())
    }

    pub fn require_staff(&self) -> Result<(), ApiError> {
        if self.role.is_staff() {
            Ok(())
        } else {
            Err(ApiError::forbidden("this needs a staff or admin token"))
        }
    }
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.role == Role::Admin {
            Ok(())
        } else {
            Err(ApiError::forbidden("this needs an admin token"))
        }
    }
    /// Only worker tokens: an admin's token does not take jobs by accident.
    pub fn require_worker(&self) -> Result<(), ApiError> {
        if self.role == Role::Worker {
            Ok(())
        } else {
            Err(ApiError::forbidden(
                "this needs a worker token (corral token create --role worker)",
            ))
        }
    }
}
