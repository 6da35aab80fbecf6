//! Search errors on the wire: a pattern or glob that does not compile names its field.

use fsd_api::ErrorCode;
use fsd_search::SearchError;
use serde_json::json;

use crate::error::ApiError;

impl From<SearchError> for ApiError {
    fn from(err: SearchError) -> Self {
        let message = err.to_string();
        match err {
            SearchError::Pattern(reason) => Self::validation("pattern", reason, "INVALID_PATTERN"),
            SearchError::Glob { .. } => Self::validation("globs", message, "INVALID_PATTERN"),
            SearchError::Root { path } => {
                Self::new(ErrorCode::FileNotFound, message).with_context(json!({ "path": path }))
            }
        }
    }
}
