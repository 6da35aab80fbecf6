//! What a caller can get wrong in a tunnel request; `wire_error` maps it.

#[derive(Debug, thiserror::Error)]
pub enum TunnelRequestError {
    #[error("must be quick or named")]
    Mode,
    #[error("must be between 1 and 65535")]
    Port,
    #[error("is required for a named tunnel")]
    TokenMissing,
    #[error("is only for a named tunnel")]
    TokenUnexpected,
    /// An id (`tunnelId` or `runId`, named by the field) that is empty, too long or holds
    /// characters other than letters, digits, `-`, `_` and `.`.
    #[error("must be 1-128 letters, digits, '-', '_' or '.'")]
    Id { field: &'static str },
    /// A duration in milliseconds (`readyTimeoutMs` or `stopGraceMs`) out of its range.
    #[error("must be a whole number of milliseconds from 1 to {max}")]
    Milliseconds { field: &'static str, max: u64 },
}
