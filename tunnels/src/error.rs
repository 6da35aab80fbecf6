//! Why a tunnel did not start or was refused.

/// Why a tunnel did not start or was refused. Codes are the reference's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TunnelError {
    /// `CLOUDFLARED_NOT_FOUND`.
    #[error(
        "cloudflared binary not found at '{binary}'. Install cloudflared and ensure it is reachable on PATH inside the container."
    )]
    NotFound { binary: String },
    /// `TUNNEL_START_ERROR`.
    #[error("Failed to start tunnel run: {0}")]
    Start(String),
    /// `TUNNEL_RUN_CONFLICT`.
    #[error("{0}")]
    Conflict(String),
}
