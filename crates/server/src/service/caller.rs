//! Who is calling: a token's public id and role (every adapter authenticates into one), and the
//! role checks the service makes.

use corral_store::Role;

use crate::error::ApiError;

/// Who is calling. Everything a caller owns is keyed by `id` (the token's public id).
#[derive(Debug, Clone)]
pub struct Caller {
    pub id: String,
    pub role: Role,
}

impl Caller {
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
