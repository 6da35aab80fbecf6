//! What can go wrong with background processes.

use crate::exec::ExecError;

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("Process not found: {id}")]
    NotFound { id: String },
    #[error("Command '{id}' not found or already completed in session '{session_id}'")]
    AlreadyFinished { id: String, session_id: String },
    #[error("processId: {reason}")]
    InvalidId { reason: String },
    #[error("Process '{id}' is already running")]
    DuplicateId { id: String },
    /// A `status` filter that names no process status.
    #[error("must be one of starting, running, completed, failed, killed, error")]
    InvalidStatus,
    #[error(transparent)]
    Exec(#[from] ExecError),
}
