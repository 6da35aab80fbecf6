//! `POST /api/port-watch`.

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use fsd_api::ports::PortWatchRequest;

use super::readiness::readiness;
use crate::error::ApiError;
use crate::state::AppState;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;

/// The domain's routes.
pub fn router() -> Router<AppState> {
    Router::new().route("/api/port-watch", post(watch))
}

pub async fn watch(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<PortWatchRequest>,
) -> Result<Response, ApiError> {
    Ok(sse_response(readiness(&state, req)?))
}
