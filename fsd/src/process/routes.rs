//! Route handlers for `/api/process/*`.

use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing;
use axum::{Json, Router};
use fsd_api::process::{
    GetProcessResponse, KillAllResponse, KillProcessResponse, ListProcessesResponse, ProcessEvent,
    ProcessLogsResponse, ProcessStatus, SignalRequest, SignalResponse, StartProcessRequest,
    StartProcessResponse, StdinRequest, StdinResponse,
};

use futures_util::{StreamExt, stream};
use serde::Deserialize;

use fsd_process::background::OUTPUT_CAP_BYTES;
use fsd_process::{Live, ProcessError, Since, Stream};

use super::next_records;
use crate::error::ApiError;
use crate::exec::{CommandRequest, signal_named};
use crate::state::AppState;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;
use crate::wire::time::now_rfc3339;

/// The domain's routes.
pub fn router() -> Router<AppState> {
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
    State(state): State<AppState>,
    JsonBody(req): JsonBody<StartProcessRequest>,
) -> Result<Json<StartProcessResponse>, ApiError> {
    let session_id = req
        .session_id
        .clone()
        .unwrap_or_else(|| crate::exec::DEFAULT_SESSION.to_string());
    let spec = CommandRequest::for_process(&req)?
        .spec(&state.paths, &session_id)
        .await?;
    let process = state
        .processes
        .start(&session_id, &spec, req.process_id)
        .await?;
    let info = process.info();
    Ok(Json(StartProcessResponse {
        success: true,
        process_id: info.id,
        pid: info.pid,
        command: info.command,
        timestamp: info.start_time,
    }))
}

#[derive(Deserialize)]
pub struct ListQuery {
    status: Option<String>,
}

pub async fn list(
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<ListProcessesResponse>, ApiError> {
    let status = match query.status.as_deref() {
        None | Some("") => None,
        Some(value) => Some(
            serde_json::from_value::<ProcessStatus>(serde_json::Value::String(value.to_string()))
                .map_err(|_| ProcessError::InvalidStatus)?,
        ),
    };
    Ok(Json(ListProcessesResponse {
        success: true,
        processes: state.processes.list(status),
        timestamp: now_rfc3339(),
    }))
}

pub async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<GetProcessResponse>, ApiError> {
    let process = match state.processes.get(&id) {
        Ok(process) => process.described(),
        Err(not_found) => match state.argv_processes.find(&id) {
            Some(process) => next_records::info(&process),
            None => return Err(not_found.into()),
        },
    };
    Ok(Json(GetProcessResponse {
        success: true,
        process,
        timestamp: now_rfc3339(),
    }))
}

pub async fn kill(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<KillProcessResponse>, ApiError> {
    state.processes.kill(&id).await?;
    Ok(Json(KillProcessResponse {
        success: true,
        process_id: id,
        timestamp: now_rfc3339(),
    }))
}

/// `POST /api/process/{id}/signal`: any signal, by name or number, to the process's tree.
pub async fn signal(
    State(state): State<AppState>,
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
    State(state): State<AppState>,
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

pub async fn kill_all(State(state): State<AppState>) -> Json<KillAllResponse> {
    Json(KillAllResponse {
        success: true,
        cleaned_count: state.processes.kill_all().await,
        timestamp: now_rfc3339(),
    })
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
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<SinceQuery>,
) -> Result<Json<ProcessLogsResponse>, ApiError> {
    let since = query.since()?;
    let logs = match state.processes.get(&id) {
        Ok(process) => process.logs_now(since).await,
        // Read from the log on disk, off the runtime's workers.
        Err(not_found) => match state.argv_processes.find(&id) {
            Some(process) => {
                tokio::task::spawn_blocking(move || next_records::logs(&process, since))
                    .await
                    .map_err(|err| {
                        ApiError::new(
                            fsd_api::ErrorCode::InternalError,
                            format!("cannot read the process's log: {err}"),
                        )
                    })?
            }
            None => return Err(not_found.into()),
        },
    };
    Ok(Json(ProcessLogsResponse {
        success: true,
        process_id: id,
        stdout: logs.stdout.text,
        stderr: logs.stderr.text,
        truncated: logs.truncated,
        output_cap_bytes: OUTPUT_CAP_BYTES,
        stdout_offset: logs.stdout.end,
        stderr_offset: logs.stderr.end,
        stdout_skipped: logs.stdout.skipped,
        stderr_skipped: logs.stderr.skipped,
        timestamp: now_rfc3339(),
    }))
}

/// `process_info`, the output kept (from the offsets asked for), live output, then `exit`
/// and the end of the stream. Output events carry the offset to reconnect from.
pub async fn stream(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<SinceQuery>,
) -> Result<Response, ApiError> {
    let since = query.since()?;
    let process = state.processes.get(&id)?;
    let (info, events) = process.events(since);
    let info_event = ProcessEvent::ProcessInfo {
        process_id: info.id.clone(),
        command: info.command.clone(),
        status: info.status,
        timestamp: now_rfc3339(),
    };
    let process_id = info.id;
    let wire = events.map(move |event| match event {
        Live::Output(stream, data, end) => output_event(stream, data, end, &process_id),
        Live::Exit(code) => exit_event(&process_id, code, process.info().status),
    });
    Ok(sse_response(stream::once(async { info_event }).chain(wire)))
}

fn output_event(stream: Stream, data: String, end: u64, process_id: &str) -> ProcessEvent {
    let (process_id, timestamp, offset) = (process_id.to_string(), now_rfc3339(), Some(end));
    match stream {
        Stream::Stdout => ProcessEvent::Stdout {
            data,
            process_id,
            offset,
            timestamp,
        },
        Stream::Stderr => ProcessEvent::Stderr {
            data,
            process_id,
            offset,
            timestamp,
        },
    }
}

fn exit_event(process_id: &str, exit_code: i32, status: ProcessStatus) -> ProcessEvent {
    let status = status.as_str();
    ProcessEvent::Exit {
        process_id: process_id.to_string(),
        exit_code,
        data: format!("Process {status} with exit code {exit_code}"),
        timestamp: now_rfc3339(),
    }
}
