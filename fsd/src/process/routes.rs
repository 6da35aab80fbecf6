//! Route handlers for `/api/process/*`.

use axum::extract::{FromRef, Path, Query, State};
use axum::response::Response;
use axum::routing;
use axum::{Json, Router};
use fsd_api::process::{
    GetProcessResponse, KillAllResponse, KillProcessResponse, ListProcessesResponse,
    ProcessLogsResponse, SignalRequest, SignalResponse, StartProcessRequest, StartProcessResponse,
    StdinRequest, StdinResponse,
};

use futures_util::{StreamExt, stream};
use serde::Deserialize;

use fsd_process::Since;

use super::ProcessState;
use super::ops;
use crate::error::ApiError;
use crate::exec::signal_named;
use crate::time::now_rfc3339;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;

/// The domain's routes.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    ProcessState: FromRef<S>,
{
    Router::new()
        .route("/api/process/start", routing::post(start))
        .route("/api/process/list", routing::get(list))
        .route("/api/process/kill-all", routing::delete(kill_all))
        .route("/api/process/{id}", routing::get(get).delete(kill))
        .route("/api/process/{id}/logs", routing::get(logs))
        .route("/api/process/{id}/stream", routing::get(stream))
        .route("/api/process/{id}/signal", routing::post(signal))
        .route("/api/process/{id}/stdin", routing::post(stdin))
}

pub async fn start(
    State(state): State<ProcessState>,
    JsonBody(req): JsonBody<StartProcessRequest>,
) -> Result<Json<StartProcessResponse>, ApiError> {
    Ok(Json(ops::start(&state, req).await?))
}

#[derive(Deserialize)]
pub struct ListQuery {
    status: Option<String>,
}

pub async fn list(
    State(state): State<ProcessState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<ListProcessesResponse>, ApiError> {
    Ok(Json(ops::list(&state, query.status.as_deref())?))
}

pub async fn get(
    State(state): State<ProcessState>,
    Path(id): Path<String>,
) -> Result<Json<GetProcessResponse>, ApiError> {
    Ok(Json(ops::get(&state, &id)?))
}

pub async fn kill(
    State(state): State<ProcessState>,
    Path(id): Path<String>,
) -> Result<Json<KillProcessResponse>, ApiError> {
    Ok(Json(ops::kill(&state, id).await?))
}

/// `POST /api/process/{id}/signal`: any signal, by name or number, to the process's tree.
pub async fn signal(
    State(state): State<ProcessState>,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<SignalRequest>,
) -> Result<Json<SignalResponse>, ApiError> {
    let signal = signal_named(&req.signal)?;
    let signalled = state.processes.signal(&id, signal)?;
    Ok(Json(SignalResponse {
        success: true,
        process_id: id,
        signal: signal.as_str().to_string(),
        signalled: signalled as u64,
        timestamp: now_rfc3339(),
    }))
}

/// `POST /api/process/{id}/stdin`: bytes to a process started with `stdin: "pipe"`, and
/// end of file after them with `close`.
pub async fn stdin(
    State(state): State<ProcessState>,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<StdinRequest>,
) -> Result<Json<StdinResponse>, ApiError> {
    let (bytes, wait) = crate::exec::stdin_write(&req)?;
    let written = state
        .processes
        .write_stdin(&id, &bytes, req.close, wait)
        .await?;
    Ok(Json(StdinResponse {
        success: true,
        process_id: id,
        written: written.bytes as u64,
        closed: written.closed,
        timestamp: now_rfc3339(),
    }))
}

pub async fn kill_all(State(state): State<ProcessState>) -> Json<KillAllResponse> {
    Json(ops::kill_all(&state).await)
}

/// `?stdoutSince=&stderrSince=`: absolute byte offsets to read each stream from.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SinceQuery {
    stdout_since: Option<String>,
    stderr_since: Option<String>,
}

impl SinceQuery {
    /// The offsets asked for; one that is no count of bytes names its field.
    fn since(&self) -> Result<Since, ApiError> {
        let parse = |value: &Option<String>, field: &str| match value.as_deref() {
            None | Some("") => Ok(0),
            Some(text) => text.parse::<u64>().map_err(|_| {
                ApiError::validation(field, "must be a byte offset (0 or more)", "INVALID_OFFSET")
            }),
        };
        Ok(Since {
            stdout: parse(&self.stdout_since, "stdoutSince")?,
            stderr: parse(&self.stderr_since, "stderrSince")?,
        })
    }
}

pub async fn logs(
    State(state): State<ProcessState>,
    Path(id): Path<String>,
    Query(query): Query<SinceQuery>,
) -> Result<Json<ProcessLogsResponse>, ApiError> {
    Ok(Json(ops::logs(&state, id, query.since()?).await?))
}

/// `process_info`, the output kept (from the offsets asked for), live output, then `exit`
/// and the end of the stream. Output events carry the offset to reconnect from.
pub async fn stream(
    State(state): State<ProcessState>,
    Path(id): Path<String>,
    Query(query): Query<SinceQuery>,
) -> Result<Response, ApiError> {
    let (info_event, live) = ops::log_events(&state, &id, query.since()?)?;
    Ok(sse_response(stream::once(async { info_event }).chain(live)))
}
