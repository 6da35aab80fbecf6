//! Tunnel errors on the wire.

use fsd_api::ErrorCode;
use serde_json::json;

use super::error::TunnelRequestError;
use crate::error::ApiError;

impl From<TunnelRequestError> for ApiError {
    fn from(err: TunnelRequestError) -> Self {
        let message = err.to_string();
        let field = match err {
            TunnelRequestError::Mode => "mode",
            TunnelRequestError::Port => "port",
            TunnelRequestError::TokenMissing | TunnelRequestError::TokenUnexpected => "token",
            TunnelRequestError::Id { field } | TunnelRequestError::Milliseconds { field, .. } => {
                field
            }
        };
        Self::validation(field, message, "INVALID_TUNNEL_REQUEST")
    }
}

impl From<fsd_tunnels::TunnelError> for ApiError {
    fn from(err: fsd_tunnels::TunnelError) -> Self {
        let message = err.to_string();
        match err {
            fsd_tunnels::TunnelError::NotFound { binary } => {
                Self::new(ErrorCode::CloudflaredNotFound, message)
                    .with_context(json!({ "binary": binary }))
            }
            fsd_tunnels::TunnelError::Start(_) => Self::new(ErrorCode::TunnelStartError, message),
            fsd_tunnels::TunnelError::Conflict(_) => {
                Self::new(ErrorCode::TunnelRunConflict, message)
            }
        }
    }
}
