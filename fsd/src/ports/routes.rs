//! `POST /api/port-watch`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRef, State};
use axum::response::Response;
use axum::routing::post;
use fsd_api::ports::PortWatchRequest;

use super::readiness::readiness;
use crate::error::ApiError;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;
use fsd_process::ProcessService;

/// The domain's routes.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<ProcessService>: FromRef<S>,
{
    Router::new().route("/api/port-watch", post(watch))
}

pub async fn watch(
    State(processes): State<Arc<ProcessService>>,
    JsonBody(req): JsonBody<PortWatchRequest>,
) -> Result<Response, ApiError> {
    Ok(sse_response(readiness(&processes, req)?))
}
