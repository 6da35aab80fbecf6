//! What a caller can get wrong in a port-watch request.

/// What a caller can get wrong in a port-watch request; `wire_error` maps it.
#[derive(Debug, thiserror::Error)]
pub enum PortWatchRequestError {
    #[error("must be between 1 and 65535")]
    Port,
    #[error("must start with / and contain no spaces or control characters")]
    Path,
    #[error("must not be above statusMax")]
    StatusRange,
}
