//! `/api/session/*`, `/api/execute`, its stream and `/api/execute/signal`.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Uri, header};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use fsd_api::DISABLE_SESSION_TOKEN;
use fsd_api::exec::{
    CommandSignalRequest, CommandSignalResponse, CommandStdinRequest, CommandStdinResponse,
    CreateSessionRequest, CreateSessionResponse, DeleteSessionRequest, DeleteSessionResponse,
    ExecEvent, ExecuteRequest, ListSessionsResponse,
};
use futures_util::{StreamExt, stream};

use super::error::RequestError;
use super::ops::{self, Executed};
use super::request::{CommandRequest, signal_named};
use crate::error::ApiError;
use crate::state::AppState;
use crate::wire::json::{parse, read_body};
use crate::wire::sse::sse_response;
use crate::wire::time::now_rfc3339;
use fsd_process::{CommandSpec, ExecError, Live, Since, Stream, Streamed};
use tokio::sync::{mpsc, oneshot};

/// The domain's routes.
pub fn router() -> Router<AppState> {
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
    State(state): State<AppState>,
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

pub async fn list_sessions(State(state): State<AppState>) -> Json<ListSessionsResponse> {
    Json(ops::list_sessions(&state).await)
}

pub async fn delete_session(
    State(state): State<AppState>,
    crate::wire::json::JsonBody(req): crate::wire::json::JsonBody<DeleteSessionRequest>,
) -> Result<Json<DeleteSessionResponse>, ApiError> {
    Ok(Json(ops::delete_session(&state, req).await?))
}

pub async fn execute(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    body: axum::body::Bytes,
) -> Result<Json<Executed>, ApiError> {
    let req: ExecuteRequest = parse(&body)?;
    let session_id = session_from(&state, req.session_id.as_deref(), &headers, &uri)?;
    Ok(Json(ops::execute(&state, req, session_id).await?))
}

/// `start` (with pid, session and process ids), the output as it comes, then `complete`
/// with the real exit code once the process has exited. The command runs as a background
/// process of the session, so it does not hold the session, and is listed with processes.
pub async fn execute_stream(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let (req, session_id, spec) = prepare(&state, &headers, &uri, &body).await?;
    // A sessionless command has no shell state to keep: it streams as the reference's.
    if req.foreground == Some(true) && session_id != DISABLE_SESSION_TOKEN {
        return stream_in_shell(&state, req, session_id, spec).await;
    }
    let process = state.processes.start(&session_id, &spec, None).await?;
    let (info, events) = process.events(Since::default());
    let start = ExecEvent::Start {
        command: info.command,
        timestamp: now_rfc3339(),
        pid: Some(info.pid),
        session_id: Some(session_id),
        process_id: Some(info.id),
        command_id: None,
    };
    let wire = events.map(|event| match event {
        Live::Output(stream, data, _) => output_event(stream, data),
        Live::Exit(code) => ExecEvent::Complete {
            exit_code: code,
            timestamp: now_rfc3339(),
        },
    });
    Ok(sse_response(stream::once(async { start }).chain(wire)))
}

/// A `foreground` stream: the command runs in the session's shell on a task of its own,
/// which stops it if the stream's reader goes away (the session must not stay busy with a
/// command nobody reads). Events: `start` once the command has its turn (with its
/// `commandId`), its output as it is written, then `complete`, or `error` with the code
/// `/api/execute` would have answered.
async fn stream_in_shell(
    state: &AppState,
    req: ExecuteRequest,
    session_id: String,
    spec: CommandSpec,
) -> Result<Response, ApiError> {
    // A session that cannot be had is an error of the request, before any event.
    state.sessions.get_or_create(&session_id).await?;
    let timeout = req
        .timeout_ms
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis);
    let (sink, receiver) = mpsc::channel::<Streamed>(16);
    let (ended, end) = oneshot::channel();
    let sessions = state.sessions.clone();
    let session = session_id.clone();
    tokio::spawn(async move {
        let result = sessions
            .exec_streamed(&session, &spec, timeout, &sink)
            .await;
        drop(sink);
        let _ = ended.send(result);
    });
    let command = req.command;
    let events = stream::unfold(receiver, |mut receiver| async move {
        let event = receiver.recv().await?;
        Some((event, receiver))
    })
    .map(move |event| match event {
        Streamed::Started { job } => ExecEvent::Start {
            command: command.clone(),
            timestamp: now_rfc3339(),
            pid: None,
            session_id: Some(session_id.clone()),
            process_id: None,
            command_id: Some(job.to_string()),
        },
        Streamed::Output(stream, data) => output_event(stream, data),
    });
    let last = stream::once(async move {
        let timestamp = now_rfc3339();
        match end.await {
            Ok(Ok(exit_code)) => ExecEvent::Complete {
                exit_code,
                timestamp,
            },
            Ok(Err(err)) => {
                let timed_out = matches!(err, ExecError::Timeout { .. });
                let exit_code = match &err {
                    ExecError::ShellExited { code, .. } => Some(*code),
                    _ => None,
                };
                let error = ApiError::from(err);
                ExecEvent::Error {
                    code: Some(error.code.as_str().to_string()),
                    error: error.message,
                    timestamp,
                    timed_out,
                    exit_code,
                }
            }
            Err(_) => ExecEvent::Error {
                error: "the command's runner ended without a result".into(),
                timestamp,
                code: None,
                timed_out: false,
                exit_code: None,
            },
        }
    });
    Ok(sse_response(events.chain(last)))
}

/// `POST /api/execute/signal`: a signal for the command a `foreground` stream runs.
pub async fn signal_command(
    State(state): State<AppState>,
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
    State(state): State<AppState>,
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

fn output_event(stream: Stream, data: String) -> ExecEvent {
    let timestamp = now_rfc3339();
    match stream {
        Stream::Stdout => ExecEvent::Stdout { data, timestamp },
        Stream::Stderr => ExecEvent::Stderr { data, timestamp },
    }
}

/// Parses an execute body, picks its session and checks its command, cwd and env.
async fn prepare(
    state: &AppState,
    headers: &HeaderMap,
    uri: &Uri,
    body: &[u8],
) -> Result<(ExecuteRequest, String, CommandSpec), ApiError> {
    let req: ExecuteRequest = parse(body)?;
    let session_id = session_from(state, req.session_id.as_deref(), headers, uri)?;
    let spec = CommandRequest::for_execute(&req)?
        .spec(&state.paths, &session_id)
        .await?;
    Ok((req, session_id, spec))
}

/// The session a command targets: the body's `sessionId`, else the reference's fallbacks
/// (`X-Session-Id`, `?session=`/`?sessionId=`, and `Authorization: Bearer` when no API token
/// is configured), else the default session.
pub fn session_from(
    state: &AppState,
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
