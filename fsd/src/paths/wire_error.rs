//! Path errors on the wire.

use fsd_api::ErrorCode;
use serde_json::json;

use super::error::PathError;
use crate::error::ApiError;

impl From<PathError> for ApiError {
    fn from(err: PathError) -> Self {
        let message = err.to_string();
        match err {
            PathError::Invalid { field, reason } => Self::validation(field, reason, "INVALID_PATH"),
            PathError::OutsideRoots { path } => Self::outside_roots(message, path),
            PathError::DaemonProc { path } => Self::new(ErrorCode::PermissionDenied, message)
                .with_context(json!({ "path": path }))
                .with_suggestion("The /proc entries of the sandbox's own processes are readable"),
        }
    }
}
