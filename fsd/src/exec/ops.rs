//! The domain's typed operations: a request in, a result or an [`ApiError`] out, no HTTP.
//! The routes and the 0.12 `/rpc` are codecs over these; a stream's events are framed by
//! each transport its own way.

use std::time::Duration;

use base64_simd::STANDARD as BASE64;
use fsd_api::DISABLE_SESSION_TOKEN;
use fsd_api::exec::{
    BackgroundStarted, CreateSessionRequest, CreateSessionResponse, DeleteSessionRequest,
    DeleteSessionResponse, ExecEvent, ExecResult, ExecuteRequest, ListSessionsResponse,
    SessionInfo,
};
use fsd_process::{CommandSpec, ExecError, Live, SessionOptions, Since, Stream, Streamed};
use futures_util::StreamExt;
use futures_util::stream::{self, BoxStream};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use super::ExecState;
use super::error::RequestError;
use super::request::{
    CommandRequest, DEFAULT_SESSION, checked_env, checked_session_id, existing_dir,
};
use crate::channel::receiver_stream;
use crate::error::ApiError;
use crate::time::now_rfc3339;

/// What `execute` answers: a command started in the background, or one run to its end.
#[derive(Serialize)]
#[serde(untagged)]
pub enum Executed {
    Started(BackgroundStarted),
    Finished(ExecResult),
}

/// `start` (with pid, session and process ids), the output as it comes, then `complete`
/// with the real exit code once the process has exited. The command runs as a background
/// process of the session, so it does not hold the session, and is listed with processes.
/// With `foreground`, it runs in the session's shell instead (see [`stream_in_shell`]).
pub async fn execute_stream(
    state: &ExecState,
    req: ExecuteRequest,
    session_id: String,
) -> Result<BoxStream<'static, ExecEvent>, ApiError> {
    let spec = CommandRequest::for_execute(&req)?
        .spec(&state.paths, &session_id)
        .await?;
    // A sessionless command has no shell state to keep: it streams as the reference's.
    if req.foreground == Some(true) && session_id != DISABLE_SESSION_TOKEN {
        return stream_in_shell(state, req, session_id, spec).await;
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
    Ok(stream::once(async { start }).chain(wire).boxed())
}

/// A `foreground` stream: the command runs in the session's shell on a task of its own,
/// which stops it if the stream's reader goes away (the session must not stay busy with a
/// command nobody reads). Events: `start` once the command has its turn (with its
/// `commandId`), its output as it is written, then `complete`, or `error` with the code
/// `/api/execute` would have answered.
async fn stream_in_shell(
    state: &ExecState,
    req: ExecuteRequest,
    session_id: String,
    spec: CommandSpec,
) -> Result<BoxStream<'static, ExecEvent>, ApiError> {
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
    let events = receiver_stream(receiver).map(move |event| match event {
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
    Ok(events.chain(last).boxed())
}

/// A line of output as its event.
fn output_event(stream: Stream, data: String) -> ExecEvent {
    let timestamp = now_rfc3339();
    match stream {
        Stream::Stdout => ExecEvent::Stdout { data, timestamp },
        Stream::Stderr => ExecEvent::Stderr { data, timestamp },
    }
}

/// Runs `req` in `session_id` to its end (its output whole), or starts it in the
/// background with `background: true`.
pub async fn execute(
    state: &ExecState,
    req: ExecuteRequest,
    session_id: String,
) -> Result<Executed, ApiError> {
    let spec = CommandRequest::for_execute(&req)?
        .spec(&state.paths, &session_id)
        .await?;
    if req.stdin_pipe && req.background != Some(true) {
        return Err(ApiError::validation(
            "stdinPipe",
            "a command answered whole cannot be written to while it runs: stream it \
             (/api/execute/stream with foreground) or start it in the background",
            "INVALID_STDIN",
        ));
    }
    if req.background == Some(true) {
        let info = state
            .processes
            .start(&session_id, &spec, None)
            .await?
            .info();
        return Ok(Executed::Started(BackgroundStarted {
            success: true,
            process_id: info.id,
            pid: info.pid,
            command: info.command,
            timestamp: info.start_time,
        }));
    }
    let timeout = req
        .timeout_ms
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis);
    let finished = state.sessions.exec(&session_id, &spec, timeout).await?;
    let (stdout, stdout_base64) = text_and_exact(finished.stdout);
    let (stderr, stderr_base64) = text_and_exact(finished.stderr);
    Ok(Executed::Finished(ExecResult {
        success: finished.exit_code == 0,
        exit_code: finished.exit_code,
        stdout,
        stderr,
        stdout_base64,
        stderr_base64,
        truncated: finished.truncated,
        command: req.command,
        duration: finished.duration.as_millis() as u64,
        timestamp: now_rfc3339(),
        session_id,
    }))
}

/// Makes a session (its id given or generated) with its environment, directory and
/// command timeout.
pub async fn create_session(
    state: &ExecState,
    req: CreateSessionRequest,
) -> Result<CreateSessionResponse, ApiError> {
    let id = match req.id {
        Some(id) => {
            checked_session_id(&id, "id")?;
            id
        }
        None => generated_id(),
    };
    let env = match req.env {
        Some(env) => checked_env(env.into_iter().map(|(k, v)| (k, Some(v))))?,
        None => Vec::new(),
    };
    let cwd = match req.cwd {
        Some(cwd) => Some(existing_dir(&state.paths, None, &cwd).await?),
        None => None,
    };
    let options = SessionOptions {
        env,
        cwd,
        command_timeout: req
            .command_timeout_ms
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis),
    };
    let session = state.sessions.create(id.clone(), options).await?;
    Ok(CreateSessionResponse {
        success: true,
        id: id.clone(),
        data: SessionInfo {
            id,
            cwd: session
                .cwd()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            shell_pid: session.shell_pid(),
            command_timeout_ms: session.command_timeout.map(|t| t.as_millis() as u64),
            created_at: session.created_at.clone(),
        },
        container_placement_id: crate::config::environment().placement_id.clone(),
        timestamp: now_rfc3339(),
    })
}

pub async fn list_sessions(state: &ExecState) -> ListSessionsResponse {
    ListSessionsResponse {
        success: true,
        data: state.sessions.list().await,
        timestamp: now_rfc3339(),
    }
}

/// Ends a session, its shell and its terminal.
pub async fn delete_session(
    state: &ExecState,
    req: DeleteSessionRequest,
) -> Result<DeleteSessionResponse, ApiError> {
    checked_session_id(&req.session_id, "sessionId").map_err(|_| RequestError::SessionToDelete)?;
    state.sessions.delete(&req.session_id).await?;
    // The session's terminal ends with it.
    state.terminals.end(&req.session_id).await;
    Ok(DeleteSessionResponse {
        success: true,
        session_id: req.session_id,
        timestamp: now_rfc3339(),
    })
}

fn generated_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "session_{}_{:012x}",
        nanos.as_millis(),
        nanos.as_nanos() as u64 & 0xffff_ffff_ffff
    )
}

/// The session a command names (checked), or the default session.
pub fn session_of(id: Option<&str>) -> Result<String, ApiError> {
    match id {
        Some(id) => {
            checked_session_id(id, "sessionId")?;
            Ok(id.to_string())
        }
        None => Ok(DEFAULT_SESSION.to_string()),
    }
}

/// UTF-8 output as is; anything else as its lossy text plus the exact bytes in base64.
fn text_and_exact(bytes: Vec<u8>) -> (String, Option<String>) {
    match String::from_utf8(bytes) {
        Ok(text) => (text, None),
        Err(err) => {
            let exact = BASE64.encode_to_string(err.as_bytes());
            (
                String::from_utf8_lossy(err.as_bytes()).into_owned(),
                Some(exact),
            )
        }
    }
}
