//! What can go wrong running commands and background processes.

/// Why a command did not run to its end, or a session could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("Session '{id}' already exists")]
    SessionExists { id: String },
    #[error("Session '{id}' not found")]
    SessionNotFound { id: String },
    #[error("Session '{id}' shell exited (exit code: {code})")]
    ShellExited { id: String, code: i32 },
    #[error("Session '{id}' was deleted while the command ran")]
    SessionDestroyed { id: String },
    #[error(
        "Command timeout after {timeout_ms}ms; the command was killed{}",
        if *.session_kept { " and the session kept" } else { ", and so was the session, which ignored every signal" }
    )]
    Timeout {
        timeout_ms: u64,
        stdout: String,
        stderr: String,
        session_kept: bool,
    },
    /// A `cwd` whose real location is outside the roots of a confined daemon (a link
    /// swapped in since the request was checked).
    #[error("cwd is outside the allowed roots: {cwd}")]
    Outside { cwd: String },
    /// A streamed command whose listener went away; it was stopped.
    #[error("the command's listener went away, so the command was stopped")]
    Abandoned,
    #[error("cannot start the session shell: {0}")]
    Spawn(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Why a background process could not be started, found or killed.
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
    /// A write to a process's stdin that could not be done whole.
    #[error("Process '{id}': {source}")]
    Stdin { id: String, source: StdinError },
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// Its output log could not be made (the state directory's disk).
    #[error(transparent)]
    Log(#[from] crate::seqlog::LogError),
}

/// Why a write to a process's stdin stopped; `written` says how much of it went in.
#[derive(Debug, thiserror::Error)]
pub enum StdinError {
    #[error("stdin is not a pipe: start the process with stdin \"pipe\" to write to it")]
    NotPiped,
    #[error("stdin was closed")]
    Closed,
    #[error("the process has exited ({written} bytes were written)")]
    Exited { written: usize },
    #[error(
        "stdin is full: the process has not read for the wait ({written} bytes were written; \
         its pipe holds {limit} bytes)"
    )]
    Full { written: usize, limit: usize },
    #[error("cannot write stdin ({written} bytes were written): {source}")]
    Io {
        written: usize,
        source: std::io::Error,
    },
}

/// Why a write to a streamed command's stdin failed: its session, or the write.
#[derive(Debug, thiserror::Error)]
pub enum StreamedStdinError {
    #[error(transparent)]
    Session(#[from] ExecError),
    #[error(transparent)]
    Stdin(#[from] StdinError),
}

impl StdinError {
    /// How much of the write went in before it stopped.
    pub fn written(&self) -> usize {
        match self {
            Self::NotPiped | Self::Closed => 0,
            Self::Exited { written } | Self::Full { written, .. } | Self::Io { written, .. } => {
                *written
            }
        }
    }
}
