//! Port-watch errors on the wire.

use super::error::PortWatchRequestError;
use crate::error::ApiError;

impl From<PortWatchRequestError> for ApiError {
    fn from(err: PortWatchRequestError) -> Self {
        let message = err.to_string();
        match err {
            PortWatchRequestError::Port => Self::validation("port", message, "INVALID_PORT"),
            PortWatchRequestError::Path => Self::validation("path", message, "INVALID_PATH"),
            PortWatchRequestError::StatusRange => {
                Self::validation("statusMin", message, "INVALID_RANGE")
            }
        }
    }
}
