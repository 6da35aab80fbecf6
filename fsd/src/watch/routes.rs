//! `POST /api/watch` and `POST /api/watch/check`, over the domain's operations.

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::response::Response;
use axum::routing::post;
use axum::{Json, Router};
use fsd_api::watch::{CheckChangesRequest, CheckChangesResponse, WatchRequest};

use super::WatchService;
use super::operations::{changes, events};
use crate::error::ApiError;
use crate::paths::Paths;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;

/// The domain's routes.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<WatchService>: FromRef<S>,
    Paths: FromRef<S>,
{
    Router::new()
        .route("/api/watch", post(watch))
        .route("/api/watch/check", post(check))
}

pub async fn watch(
    State(watches): State<Arc<WatchService>>,
    State(paths): State<Paths>,
    JsonBody(req): JsonBody<WatchRequest>,
) -> Result<Response, ApiError> {
    Ok(sse_response(events(&watches, &paths, &req).await?))
}

pub async fn check(
    State(watches): State<Arc<WatchService>>,
    State(paths): State<Paths>,
    JsonBody(req): JsonBody<CheckChangesRequest>,
) -> Result<Json<CheckChangesResponse>, ApiError> {
    changes(&watches, &paths, &req).await.map(Json)
}
