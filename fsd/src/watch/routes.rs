//! `POST /api/watch` and `POST /api/watch/check`, over the domain's operations.

use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use axum::{Json, Router};
use fsd_api::watch::{CheckChangesRequest, CheckChangesResponse, WatchRequest};

use super::operations::{changes, events};
use crate::error::ApiError;
use crate::state::AppState;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;

/// The domain's routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/watch", post(watch))
        .route("/api/watch/check", post(check))
}

pub async fn watch(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<WatchRequest>,
) -> Result<Response, ApiError> {
    Ok(sse_response(events(&state, &req).await?))
}

pub async fn check(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<CheckChangesRequest>,
) -> Result<Json<CheckChangesResponse>, ApiError> {
    changes(&state, &req).await.map(Json)
}
