//! Watch errors on the wire: the request's, and the engine's when a watch cannot start.

use fsd_api::ErrorCode;
use serde_json::json;

use super::error::WatchRequestError;
use crate::error::ApiError;

impl From<WatchRequestError> for ApiError {
    fn from(err: WatchRequestError) -> Self {
        let message = err.to_string();
        match err {
            WatchRequestError::Path => Self::validation("path", message, "INVALID_PATH"),
            WatchRequestError::IncludeAndExclude => {
                Self::validation("include", message, "INVALID_PATTERN")
            }
            WatchRequestError::Pattern { field, .. } => {
                Self::validation(field, message, "INVALID_PATTERN")
            }
            WatchRequestError::EventType(_) => Self::validation("events", message, "INVALID_EVENT"),
            WatchRequestError::Token | WatchRequestError::FutureToken => {
                Self::validation("since", message, "INVALID_VERSION")
            }
            WatchRequestError::Outside { found: None } => {
                Self::new(ErrorCode::PermissionDenied, message)
            }
            WatchRequestError::Outside {
                found: Some((path, workspace)),
            } => Self::new(ErrorCode::PermissionDenied, message)
                .with_context(json!({ "path": path, "workspace": workspace })),
            WatchRequestError::Missing(_) => Self::new(ErrorCode::FileNotFound, message),
            WatchRequestError::Start(_) => Self::new(ErrorCode::WatchStartError, message),
        }
    }
}

impl From<fsd_watch::WatchError> for ApiError {
    fn from(err: fsd_watch::WatchError) -> Self {
        match err {
            fsd_watch::WatchError::NotFound(path) => Self::new(
                ErrorCode::FileNotFound,
                format!("Path does not exist: {}", path.display()),
            ),
            fsd_watch::WatchError::NotDirectory(path) => Self::new(
                ErrorCode::NotDirectory,
                format!("Path is not a directory: {}", path.display()),
            ),
            fsd_watch::WatchError::Elsewhere(_) => {
                Self::new(ErrorCode::PermissionDenied, err.to_string())
            }
            other => Self::new(ErrorCode::WatchStartError, other.to_string()),
        }
    }
}
