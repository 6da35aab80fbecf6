//! `/api/session/*`, `/api/execute`, its stream and `/api/execute/signal`.

use axum::extract::{FromRef, Request, State};
use axum::http::{HeaderMap, Uri, header};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use fsd_api::exec::{
    CommandSignalRequest, CommandSignalResponse, CommandStdinRequest, CommandStdinResponse,
    CreateSessionRequest, CreateSessionResponse, DeleteSessionRequest, DeleteSessionResponse,
    ExecuteRequest, ListSessionsResponse,
};

use super::ExecState;
use super::error::RequestError;
use super::ops::{self, Executed};
use super::request::signal_named;
use crate::error::ApiError;
use crate::time::now_rfc3339;
use crate::wire::json::{parse, read_body};
use crate::wire::sse::sse_response;

/// The domain's routes.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    ExecState: FromRef<S>,
{
    Router::new()
        .route("/api/session/create", post(create_session))
        .route("/api/session/list", get(list_sessions))
        .route("/api/session/delete", post(delete_session))
        .route("/api/execute", post(execute))
        .route("/api/execute/stream", post(execute_stream))
        .route("/api/execute/signal", post(signal_command))
        .route("/api/execute/stdin", post(command_stdin))
}

pub async fn create_session(
    State(state): State<ExecState>,
    request: Request,
) -> Result<Json<CreateSessionResponse>, ApiError> {
    let bytes = read_body(request).await?;
    // The reference accepts an empty body as "all defaults".
    let req: CreateSessionRequest = if bytes.iter().all(u8::is_ascii_whitespace) {
        CreateSessionRequest::default()
    } else {
        parse(&bytes)?
    };
    Ok(Json(ops::create_session(&state, req).await?))
}

pub async fn list_sessions(State(state): State<ExecState>) -> Json<ListSessionsResponse> {
    Json(ops::list_sessions(&state).await)
}

pub async fn delete_session(
    State(state): State<ExecState>,
    crate::wire::json::JsonBody(req): crate::wire::json::JsonBody<DeleteSessionRequest>,
) -> Result<Json<DeleteSessionResponse>, ApiError> {
    Ok(Json(ops::delete_session(&state, req).await?))
}

pub async fn execute(
    State(state): State<ExecState>,
    headers: HeaderMap,
    uri: Uri,
    body: axum::body::Bytes,
) -> Result<Json<Executed>, ApiError> {
    let req: ExecuteRequest = parse(&body)?;
    let session_id = session_from(&state, req.session_id.as_deref(), &headers, &uri)?;
    Ok(Json(ops::execute(&state, req, session_id).await?))
}

/// `POST /api/execute/stream`: [`ops::execute_stream`]'s events as SSE.
pub async fn execute_stream(
    State(state): State<ExecState>,
    headers: HeaderMap,
    uri: Uri,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let req: ExecuteRequest = parse(&body)?;
    let session_id = session_from(&state, req.session_id.as_deref(), &headers, &uri)?;
    Ok(sse_response(
        ops::execute_stream(&state, req, session_id).await?,
    ))
}

/// `POST /api/execute/signal`: a signal for the command a `foreground` stream runs.
pub async fn signal_command(
    State(state): State<ExecState>,
    headers: HeaderMap,
    uri: Uri,
    crate::wire::json::JsonBody(req): crate::wire::json::JsonBody<CommandSignalRequest>,
) -> Result<Json<CommandSignalResponse>, ApiError> {
    let session_id = session_from(&state, req.session_id.as_deref(), &headers, &uri)?;
    let signal = signal_named(&req.signal)?;
    let job = req
        .command_id
        .parse::<u64>()
        .map_err(|_| RequestError::CommandId)?;
    let running = state
        .sessions
        .signal_streamed(&session_id, job, signal)
        .await?;
    Ok(Json(CommandSignalResponse {
        success: true,
        session_id,
        command_id: req.command_id,
        signal: signal.as_str().to_string(),
        running,
        timestamp: now_rfc3339(),
    }))
}

/// `POST /api/execute/stdin`: bytes for the stdin of the command a `foreground` stream
/// runs with `stdinPipe`, and end of file after them with `close`.
pub async fn command_stdin(
    State(state): State<ExecState>,
    headers: HeaderMap,
    uri: Uri,
    crate::wire::json::JsonBody(req): crate::wire::json::JsonBody<CommandStdinRequest>,
) -> Result<Json<CommandStdinResponse>, ApiError> {
    let session_id = session_from(&state, req.session_id.as_deref(), &headers, &uri)?;
    let job = req
        .command_id
        .parse::<u64>()
        .map_err(|_| RequestError::CommandId)?;
    let (bytes, wait) = super::stdin_write(&req.write)?;
    let written = state
        .sessions
        .write_streamed_stdin(&session_id, job, &bytes, req.write.close, wait)
        .await
        .map_err(|err| super::wire_error::streamed_stdin(err, &session_id, &req.command_id))?;
    Ok(Json(CommandStdinResponse {
        success: true,
        session_id,
        command_id: req.command_id,
        written: written.bytes as u64,
        closed: written.closed,
        timestamp: now_rfc3339(),
    }))
}

/// The session a command targets: the body's `sessionId`, else the reference's fallbacks
/// (`X-Session-Id`, `?session=`/`?sessionId=`, and `Authorization: Bearer` when no API token
/// is configured), else the default session.
pub fn session_from(
    state: &ExecState,
    body: Option<&str>,
    headers: &HeaderMap,
    uri: &Uri,
) -> Result<String, ApiError> {
    let from_query = uri.query().and_then(|query| {
        query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            (key == "session" || key == "sessionId").then(|| value.to_string())
        })
    });
    let from_bearer = (!state.auth_enabled)
        .then(|| {
            headers
                .get(header::AUTHORIZATION)?
                .to_str()
                .ok()?
                .strip_prefix("Bearer ")
                .map(str::to_string)
        })
        .flatten();
    let chosen = body
        .map(str::to_string)
        .or_else(|| {
            headers
                .get("x-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
        .or(from_query)
        .or(from_bearer);
    ops::session_of(chosen.as_deref())
}
