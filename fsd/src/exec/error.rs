//! What can go wrong running commands, independent of HTTP.

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("Directory not found: {cwd}")]
    CwdNotFound { cwd: String },
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
    #[error("cannot start the session shell: {0}")]
    Spawn(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The request itself is wrong (the caller's mistake, not the command's).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// A `cwd` the path rules refuse (outside the roots under `--confine`, the daemon's own
    /// `/proc`).
    #[error(transparent)]
    Path(crate::files::FileError),
}

/// Why a command request is refused.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("command: must not be empty")]
    EmptyCommand,
    /// `/api/process/start` says it with its own code, as the reference does.
    #[error("command: must not be empty")]
    EmptyProcessCommand,
    #[error("command: must not contain NUL bytes")]
    NulInCommand,
    #[error("invalid variable name {0:?}: must match ^[A-Za-z_][A-Za-z0-9_]*$")]
    EnvName(String),
    #[error("value of {0} contains a NUL byte")]
    EnvNul(String),
    #[error("must be a non-empty path without NUL")]
    Cwd,
    /// A session id that is blank, too long or holds NUL; `field` names where it came from.
    #[error("must be 1 to 256 bytes, not blank, without NUL")]
    SessionId { field: &'static str },
    #[error("must be a non-empty session id")]
    SessionToDelete,
}
