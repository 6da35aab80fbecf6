//! Code context routes: `/api/contexts` (create, list, delete), `POST /api/execute/code`
//! (SSE) and `GET /api/interpreter/health`.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use fsd_api::interpreter::{
    CreateContextRequest, CreateContextResponse, DeleteContextResponse, ExecuteCodeRequest,
    ListContextsResponse,
};

use super::ops;
use super::wire_error::CodeExecutionFailure;
use crate::error::ApiError;
use crate::state::AppState;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;
use crate::wire::time::now_rfc3339;

/// Events buffered between a call and its client.
const EVENT_QUEUE: usize = 256;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/contexts", post(create).get(list))
        .route("/api/contexts/{id}", delete(remove))
        .route("/api/execute/code", post(execute))
        .route("/api/interpreter/health", get(health))
}

pub async fn create(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<CreateContextRequest>,
) -> Result<Json<CreateContextResponse>, ApiError> {
    Ok(Json(ops::create_context(&state, req).await?))
}

pub async fn list(State(state): State<AppState>) -> Json<ListContextsResponse> {
    Json(ops::list_contexts(&state))
}

pub async fn remove(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<DeleteContextResponse>, ApiError> {
    Ok(Json(ops::delete_context(&state, id).await?))
}

/// Streams the call's events as they come; failures before the call starts answer the
/// reference's `{error, code, details}` body.
pub async fn execute(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<ExecuteCodeRequest>,
) -> Response {
    let context = match state.interpreters.get(&req.context_id) {
        Ok(context) => context,
        Err(error) => return CodeExecutionFailure(error).into_response(),
    };
    let (sender, receiver) = tokio::sync::mpsc::channel(EVENT_QUEUE);
    let (started, start) = tokio::sync::oneshot::channel();
    let service = state.interpreters.clone();
    let timeout = req
        .timeout_ms
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis);
    tokio::spawn(async move {
        // The call goes on if the client leaves: its context stays consistent.
        service
            .execute(
                context,
                req.code,
                req.language.as_deref(),
                timeout,
                sender,
                started,
            )
            .await;
    });
    match start.await {
        Ok(Ok(())) => {
            let events = futures_util::stream::unfold(receiver, |mut receiver| async move {
                receiver.recv().await.map(|event| (event, receiver))
            });
            sse_response(events).into_response()
        }
        Ok(Err(error)) => CodeExecutionFailure(error).into_response(),
        Err(_) => CodeExecutionFailure(crate::interpreter::InterpreterError::Protocol(
            "the call ended before it started".into(),
        ))
        .into_response(),
    }
}

pub async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "success": true,
        "status": "healthy",
        "timestamp": now_rfc3339(),
    }))
}
