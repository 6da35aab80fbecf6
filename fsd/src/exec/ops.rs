//! The domain's typed operations: a request in, a result or an [`ApiError`] out, no HTTP.
//! The routes and the 0.12 `/rpc` are codecs over these.

use std::time::Duration;

use base64_simd::STANDARD as BASE64;
use fsd_api::exec::{BackgroundStarted, ExecResult, ExecuteRequest};
use serde::Serialize;

use super::request::{CommandRequest, DEFAULT_SESSION, checked_session_id};
use crate::error::ApiError;
use crate::state::AppState;
use crate::wire::time::now_rfc3339;

/// What `execute` answers: a command started in the background, or one run to its end.
#[derive(Serialize)]
#[serde(untagged)]
pub enum Executed {
    Started(BackgroundStarted),
    Finished(ExecResult),
}

/// Runs `req` in `session_id` to its end (its output whole), or starts it in the
/// background with `background: true`.
pub async fn execute(
    state: &AppState,
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
