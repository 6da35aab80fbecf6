//! Why a command request is refused before anything runs (the caller's mistake, not the
//! command's).

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
    /// Stdin the request gave wrongly; `field` names which.
    #[error("{reason}")]
    Stdin { field: &'static str, reason: String },
    /// A `commandId` that no `start` event gave.
    #[error("commandId: must be the commandId of a start event")]
    CommandId,
    /// A signal that is no signal's name or number.
    #[error("signal: {reason}")]
    Signal { reason: String },
    #[error("Directory not found: {cwd}")]
    CwdNotFound { cwd: String },
    /// A `cwd` the path rules refuse (outside the roots under `--confine`, the daemon's own
    /// `/proc`).
    #[error(transparent)]
    Path(crate::paths::PathError),
}
