//! Code context routes: `/api/contexts` (create, list, delete), `POST /api/execute/code`
//! (SSE) and `GET /api/interpreter/health`.

use std::sync::Arc;

use axum::extract::{FromRef, Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use fsd_api::interpreter::{
    CreateContextRequest, CreateContextResponse, DeleteContextResponse, ExecuteCodeRequest,
    ListContextsResponse,
};

use super::InterpreterService;
use super::ops;
use super::wire_error::CodeExecutionFailure;
use crate::error::ApiError;
use crate::paths::Paths;
use crate::time::now_rfc3339;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<InterpreterService>: FromRef<S>,
    Paths: FromRef<S>,
{
    Router::new()
        .route("/api/contexts", post(create).get(list))
        .route("/api/contexts/{id}", delete(remove))
        .route("/api/execute/code", post(execute))
        .route("/api/interpreter/health", get(health))
}

pub async fn create(
    State(interpreters): State<Arc<InterpreterService>>,
    State(paths): State<Paths>,
    JsonBody(req): JsonBody<CreateContextRequest>,
) -> Result<Json<CreateContextResponse>, ApiError> {
    Ok(Json(ops::create_context(&interpreters, &paths, req).await?))
}

pub async fn list(
    State(interpreters): State<Arc<InterpreterService>>,
) -> Json<ListContextsResponse> {
    Json(ops::list_contexts(&interpreters))
}

pub async fn remove(
    State(interpreters): State<Arc<InterpreterService>>,
    Path(id): Path<String>,
) -> Result<Json<DeleteContextResponse>, ApiError> {
    Ok(Json(ops::delete_context(&interpreters, id).await?))
}

/// Streams the call's events as they come; failures before the call starts answer the
/// reference's `{error, code, details}` body.
pub async fn execute(
    State(interpreters): State<Arc<InterpreterService>>,
    JsonBody(req): JsonBody<ExecuteCodeRequest>,
) -> Response {
    match ops::execute_code(&interpreters, req).await {
        Ok(events) => sse_response(events).into_response(),
        Err(error) => CodeExecutionFailure(error).into_response(),
    }
}

pub async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "success": true,
        "status": "healthy",
        "timestamp": now_rfc3339(),
    }))
}
