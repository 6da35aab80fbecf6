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
}
