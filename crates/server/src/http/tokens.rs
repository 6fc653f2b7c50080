//! `POST /tokens`, `DELETE /tokens/{id}` (admins) and `GET /whoami`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::json::ApiJson;
use crate::error::{ApiError, ErrorBody};
use crate::http::path::Path;
use crate::service::caller::Caller;
use crate::service::tokens;
use crate::state::SharedState;

#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RoleName {
    Admin,
    Staff,
    Student,
    Worker,
}

impl From<RoleName> for corral_store::Role {
    fn from(r: RoleName) -> Self {
        match r {
            RoleName::Admin => corral_store::Role::Admin,
            RoleName::Staff => corral_store::Role::Staff,
            RoleName::Student => corral_store::Role::Student,
            RoleName::Worker => corral_store::Role::Worker,
        }
    }
}

impl From<corral_store::Role> for RoleName {
    fn from(r: corral_store::Role) -> Self {
        match r {
            corral_store::Role::Admin => RoleName::Admin,
            corral_store::Role::Staff => RoleName::Staff,
            corral_store::Role::Student => RoleName::Student,
            corral_store::Role::Worker => RoleName::Worker,
        }
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    pub role: RoleName,
    /// A label for people (who holds it).
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TokenResponse {
    /// The secret: shown once, stored only as a hash.
    pub token: String,
    /// The token's public id.
    pub id: String,
    pub role: RoleName,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WhoAmI {
    pub id: String,
    pub role: RoleName,
}

/// Create an API token (admin).
#[utoipa::path(
    post, path = "/tokens", tag = "admin",
    request_body(content = TokenRequest, example = json!({"role": "student", "name": "fuzz"})),
    responses(
        (status = 201, description = "Created; the secret is shown only now", body = TokenResponse,
            links(("RevokeToken" = (operation_id = "revoke_token", parameters(("id" = "$response.body#/id")))))),
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 422, description = "Unknown role", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn create_token(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<TokenRequest>,
) -> Result<(StatusCode, Json<TokenResponse>), ApiError> {
    let name = req.name.unwrap_or_default();
    let t = tokens::create(&st, &caller, req.role.into(), &name).await?;
    Ok((
        StatusCode::CREATED,
        Json(TokenResponse {
            token: t.secret,
            id: t.info.id,
            role: t.info.role.into(),
        }),
    ))
}

/// Revoke an API token (admin).
#[utoipa::path(
    delete, path = "/tokens/{id}", tag = "admin",
    params(("id" = String, Path, description = "The token's public id", example = "0123456789abcdef")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 404, description = "No such live token", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn revoke_token(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    tokens::revoke(&st, &caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Who this token is.
#[utoipa::path(
    get, path = "/whoami", tag = "admin",
    responses(
        (status = 200, description = "The caller", body = WhoAmI),
        (status = 401, description = "No or unknown token", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn whoami(Extension(caller): Extension<Caller>) -> Json<WhoAmI> {
    Json(WhoAmI {
        id: caller.id,
        role: caller.role.into(),
    })
}
