//! Command errors on the wire: the request's fields, and what became of the session.

use fsd_api::ErrorCode;
use serde_json::json;

use fsd_process::{ExecError, StdinError, StreamedStdinError};

use super::error::RequestError;
use crate::error::ApiError;

impl From<RequestError> for ApiError {
    fn from(err: RequestError) -> Self {
        let message = err.to_string();
        match err {
            RequestError::EmptyCommand | RequestError::NulInCommand => {
                let reason = message.trim_start_matches("command: ").to_string();
                Self::validation("command", reason, "INVALID_COMMAND")
            }
            // The reference's code for this case (its clients map it to InvalidCommandError).
            RequestError::EmptyProcessCommand => Self::new(ErrorCode::InvalidCommand, message)
                .with_context(json!({"validationErrors": [{
                    "field": "command", "message": "must not be empty", "code": "INVALID_COMMAND"
                }]})),
            RequestError::EnvName(_) | RequestError::EnvNul(_) => {
                Self::validation("env", message, "INVALID_ENV")
            }
            RequestError::Stdin { field, reason } => {
                Self::validation(field, reason, "INVALID_STDIN")
            }
            RequestError::CommandId => {
                let reason = message.trim_start_matches("commandId: ").to_string();
                Self::validation("commandId", reason, "INVALID_COMMAND_ID")
            }
            RequestError::Signal { reason } => {
                Self::validation("signal", reason, "INVALID_SIGNAL")
            }
            RequestError::Cwd => Self::validation("cwd", message, "INVALID_PATH"),
            RequestError::SessionId { field } => {
                Self::validation(field, message, "INVALID_SESSION")
            }
            RequestError::SessionToDelete => {
                Self::validation("sessionId", message, "INVALID_SESSION")
            }
            RequestError::CwdNotFound { cwd } => Self::validation("cwd", message, "CWD_NOT_FOUND")
                .with_context(json!({
                    "validationErrors": [{"field": "cwd", "message": format!("Directory not found: {cwd}"), "code": "CWD_NOT_FOUND"}],
                    "cwd": cwd,
                })),
            RequestError::Path(err) => err.into(),
        }
    }
}

impl From<ExecError> for ApiError {
    fn from(err: ExecError) -> Self {
        let message = err.to_string();
        match err {
            ExecError::SessionExists { id } => Self::new(ErrorCode::SessionAlreadyExists, message)
                .with_context(json!({ "sessionId": id, "containerPlacementId": crate::config::environment().placement_id })),
            ExecError::SessionNotFound { id } => {
                Self::new(ErrorCode::SessionNotFound, message).with_context(json!({ "sessionId": id }))
            }
            ExecError::ShellExited { id, code } => Self::new(ErrorCode::SessionTerminated, message)
                .with_context(json!({ "sessionId": id, "exitCode": code }))
                .with_suggestion("The next command on this session id starts a fresh shell"),
            ExecError::SessionDestroyed { id } => {
                Self::new(ErrorCode::SessionDestroyed, message).with_context(json!({ "sessionId": id }))
            }
            ExecError::Timeout { timeout_ms, stdout, stderr, session_kept } => {
                Self::new(ErrorCode::CommandExecutionError, message).with_context(json!({
                    "timeoutMs": timeout_ms,
                    "timedOut": true,
                    "sessionKept": session_kept,
                    "stdout": stdout,
                    "stderr": stderr,
                }))
            }
            ExecError::Outside { cwd } => ApiError::outside_roots(message, cwd),
            ExecError::Abandoned | ExecError::Spawn(_) | ExecError::Io(_) => Self::new(ErrorCode::CommandExecutionError, message),
        }
    }
}

/// A write to a streamed command's stdin that failed: its session's error, or the write's
/// with the codes `/api/process/{id}/stdin` answers (a command that is not running is
/// `PROCESS_EXITED`), each with the session and command named and what went in.
pub fn streamed_stdin(err: StreamedStdinError, session_id: &str, command_id: &str) -> ApiError {
    let source = match err {
        StreamedStdinError::Session(err) => return err.into(),
        StreamedStdinError::Stdin(source) => source,
    };
    let message = match source {
        StdinError::NotPiped => format!(
            "command {command_id} reads no pipe: stream it with stdinPipe to write to its stdin"
        ),
        StdinError::Exited { .. } => format!(
            "command {command_id} of session {session_id} is not running ({} bytes were written)",
            source.written()
        ),
        _ => source.to_string(),
    };
    let mut context = json!({
        "sessionId": session_id, "commandId": command_id, "written": source.written(),
    });
    let code = match source {
        StdinError::NotPiped => ErrorCode::StdinNotPiped,
        StdinError::Closed => ErrorCode::StdinClosed,
        StdinError::Exited { .. } => ErrorCode::ProcessExited,
        StdinError::Full { limit, .. } => {
            context["pipeBytes"] = json!(limit);
            ErrorCode::StdinFull
        }
        StdinError::Io { .. } => ErrorCode::CommandExecutionError,
    };
    ApiError::new(code, message).with_context(context)
}
