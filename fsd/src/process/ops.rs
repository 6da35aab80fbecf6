//! The domain's typed operations: a request in, a response or an [`ApiError`] out, no HTTP.
//! The routes and the 0.12 `/rpc` are codecs over these (a process's live stream is the
//! transports' own).

use fsd_api::process::{
    GetProcessResponse, KillAllResponse, KillProcessResponse, ListProcessesResponse, ProcessEvent,
    ProcessLogsResponse, ProcessStatus, StartProcessRequest, StartProcessResponse,
};
use fsd_process::background::OUTPUT_CAP_BYTES;
use fsd_process::{Live, ProcessError, Since, Stream as Output};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

use super::ProcessState;
use crate::error::ApiError;
use crate::exec::CommandRequest;
use crate::time::now_rfc3339;

pub async fn start(
    state: &ProcessState,
    req: StartProcessRequest,
) -> Result<StartProcessResponse, ApiError> {
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
    Ok(StartProcessResponse {
        success: true,
        process_id: info.id,
        pid: info.pid,
        command: info.command,
        timestamp: info.start_time,
    })
}

/// The processes, those with `status` only when given (`""`: all).
pub fn list(state: &ProcessState, status: Option<&str>) -> Result<ListProcessesResponse, ApiError> {
    let status = match status {
        None | Some("") => None,
        Some(value) => Some(
            serde_json::from_value::<ProcessStatus>(serde_json::Value::String(value.to_string()))
                .map_err(|_| ProcessError::InvalidStatus)?,
        ),
    };
    Ok(ListProcessesResponse {
        success: true,
        processes: state.processes.list(status),
        timestamp: now_rfc3339(),
    })
}

pub fn get(state: &ProcessState, id: &str) -> Result<GetProcessResponse, ApiError> {
    let process = state.processes.get(id)?.described();
    Ok(GetProcessResponse {
        success: true,
        process,
        timestamp: now_rfc3339(),
    })
}

pub async fn kill(state: &ProcessState, id: String) -> Result<KillProcessResponse, ApiError> {
    state.processes.kill(&id).await?;
    Ok(KillProcessResponse {
        success: true,
        process_id: id,
        timestamp: now_rfc3339(),
    })
}

pub async fn kill_all(state: &ProcessState) -> KillAllResponse {
    KillAllResponse {
        success: true,
        cleaned_count: state.processes.kill_all().await,
        timestamp: now_rfc3339(),
    }
}

/// What process `id` printed from `since`, and the offsets to read on from.
pub async fn logs(
    state: &ProcessState,
    id: String,
    since: Since,
) -> Result<ProcessLogsResponse, ApiError> {
    let logs = state.processes.get(&id)?.logs_now(since).await;
    Ok(ProcessLogsResponse {
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
    })
}

/// A process's `process_info` event, then what it prints from `since` on as it prints it
/// (each output event with the offset to reconnect from), then its `exit`.
pub fn log_events(
    state: &ProcessState,
    id: &str,
    since: Since,
) -> Result<(ProcessEvent, BoxStream<'static, ProcessEvent>), ApiError> {
    let process = state.processes.get(id)?;
    let (info, events) = process.events(since);
    let info_event = ProcessEvent::ProcessInfo {
        process_id: info.id.clone(),
        command: info.command.clone(),
        status: info.status,
        timestamp: now_rfc3339(),
    };
    let process_id = info.id;
    let live = events.map(move |event| match event {
        Live::Output(stream, data, end) => output_event(stream, data, end, &process_id),
        Live::Exit(code) => exit_event(&process_id, code, process.info().status),
    });
    // Boxed: the stream's type names the borrow it was made from, which it outlives.
    Ok((info_event, live.boxed()))
}
fn output_event(stream: Output, data: String, end: u64, process_id: &str) -> ProcessEvent {
    let (process_id, timestamp, offset) = (process_id.to_string(), now_rfc3339(), Some(end));
    match stream {
        Output::Stdout => ProcessEvent::Stdout {
            data,
            process_id,
            offset,
            timestamp,
        },
        Output::Stderr => ProcessEvent::Stderr {
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
