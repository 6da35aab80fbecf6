//! Background-process errors on the wire.

use fsd_api::ErrorCode;
use serde_json::json;

use crate::error::ApiError;
use fsd_process::{ProcessError, StdinError};

impl From<ProcessError> for ApiError {
    fn from(err: ProcessError) -> Self {
        let message = err.to_string();
        match err {
            ProcessError::NotFound { id } => Self::new(ErrorCode::ProcessNotFound, message)
                .with_context(json!({ "processId": id })),
            ProcessError::AlreadyFinished { id, session_id } => {
                Self::new(ErrorCode::CommandNotFound, message)
                    .with_context(json!({ "processId": id, "sessionId": session_id }))
            }
            ProcessError::InvalidId { reason } => {
                Self::validation("processId", reason, "INVALID_PROCESS_ID")
            }
            ProcessError::DuplicateId { id } => {
                Self::new(ErrorCode::ResourceBusy, message).with_context(json!({ "processId": id }))
            }
            ProcessError::InvalidStatus => Self::validation("status", message, "INVALID_STATUS"),
            ProcessError::Stdin { id, source } => {
                let context = json!({ "processId": id, "written": source.written() });
                let code = match source {
                    StdinError::NotPiped => ErrorCode::StdinNotPiped,
                    StdinError::Closed => ErrorCode::StdinClosed,
                    StdinError::Exited { .. } => ErrorCode::ProcessExited,
                    StdinError::Full { limit, .. } => {
                        return Self::new(ErrorCode::StdinFull, message).with_context(json!({
                            "processId": id, "written": source.written(), "pipeBytes": limit,
                        }));
                    }
                    StdinError::Io { .. } => ErrorCode::ProcessError,
                };
                Self::new(code, message).with_context(context)
            }
            ProcessError::Exec(err) => err.into(),
            ProcessError::Log(_) => Self::new(ErrorCode::InternalError, message),
        }
    }
}
