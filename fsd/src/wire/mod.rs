//! HTTP plumbing shared by every route module: accepting connections (and acknowledging
//! what they send at once), the JSON body extractor, timestamps, SSE responses, auth, and
//! the unknown-route fallback.

pub mod accept;
pub mod auth;
pub mod connections;
pub mod json;
pub mod memory;
pub mod quickack;
pub mod sse;
pub mod time;
pub mod unread;

use crate::error::ApiError;

/// Unknown method or path: the reference's 404 envelope.
pub async fn not_found() -> ApiError {
    ApiError::not_found_route()
}
