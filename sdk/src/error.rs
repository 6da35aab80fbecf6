//! What a call can fail with.

use fsd_api::{ErrorBody, ErrorCode};

#[derive(Debug, thiserror::Error)]
pub enum SdkError {
    /// The daemon answered with its error envelope.
    #[error("{} ({}): {}", .body.code, .status, .body.message)]
    Api { status: u16, body: Box<ErrorBody> },
    /// The daemon answered something that is not the expected JSON.
    #[error("unexpected response (HTTP {status}): {message}")]
    Decode { status: u16, message: String },
    /// The request did not complete (connection refused, reset, timed out).
    #[error("request failed: {0}")]
    Transport(#[from] reqwest::Error),
    #[error("invalid base URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl SdkError {
    /// The wire code, for errors the daemon reported.
    pub fn code(&self) -> Option<&ErrorCode> {
        match self {
            Self::Api { body, .. } => Some(&body.code),
            _ => None,
        }
    }

    /// The HTTP status, where there was a response.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } | Self::Decode { status, .. } => Some(*status),
            Self::Transport(err) => err.status().map(|s| s.as_u16()),
            _ => None,
        }
    }
}
