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
    /// The WebSocket transport failed (the socket closed, or the daemon refused a frame).
    #[error("websocket: {0}")]
    WebSocket(String),
    /// A terminal could not be opened or its connection failed.
    #[error("terminal: {0}")]
    Terminal(String),
    /// The object store refused or failed a request (trusted side).
    #[error("object store: {0}")]
    Storage(String),
}

impl SdkError {
    /// A caller's mistake found on the trusted side (`VALIDATION_FAILED`).
    pub fn invalid(message: impl Into<String>) -> SdkError {
        SdkError::coded(
            ErrorCode::ValidationFailed,
            message,
            serde_json::Value::Null,
        )
    }

    /// An error decided on the trusted side, with the code the daemon would use.
    pub fn coded(
        code: ErrorCode,
        message: impl Into<String>,
        context: serde_json::Value,
    ) -> SdkError {
        let status = code.http_status();
        SdkError::Api {
            status,
            body: Box::new(ErrorBody {
                code,
                message: message.into(),
                context,
                operation: None,
                http_status: status,
                timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                suggestion: None,
            }),
        }
    }

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
