//! The wire error: what every route answers when it fails, in the reference's envelope.
//!
//! Handlers return [`ApiError`]. Each domain's services return their own enums, and each
//! domain converts them beside itself (`<domain>/wire_error.rs`, `From<DomainError> for
//! ApiError`), attaching the operation with [`OperationExt::op`].

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use fsd_api::{ErrorBody, ErrorCode, Operation, ValidationIssue};
use serde_json::{Value, json};

use crate::time::now_rfc3339;

/// An error on its way to the caller as the reference's error envelope.
#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub context: Value,
    pub operation: Option<Operation>,
    pub suggestion: Option<String>,
    /// Normally the code's status; the unknown-route 404 is the one exception.
    pub http_status: u16,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            http_status: code.http_status(),
            code,
            message: message.into(),
            context: json!({}),
            operation: None,
            suggestion: None,
        }
    }

    /// A 400 VALIDATION_FAILED naming the field, with the reference's `validationErrors` shape.
    pub fn validation(field: &str, message: impl Into<String>, issue_code: &str) -> Self {
        let message = message.into();
        let issue = ValidationIssue {
            field: field.to_string(),
            message: message.clone(),
            code: issue_code.to_string(),
        };
        Self::new(ErrorCode::ValidationFailed, format!("{field}: {message}"))
            .with_context(json!({ "validationErrors": [issue] }))
    }

    /// A 400 with a domain's own code (INVALID_BACKUP_CONFIG, INVALID_MOUNT_CONFIG) naming
    /// the field, in both `context.field` and the reference's `validationErrors`.
    /// 403 `PERMISSION_DENIED` for a path outside a confined daemon's roots, whichever
    /// domain found it so.
    pub fn outside_roots(message: String, path: String) -> Self {
        Self::new(ErrorCode::PermissionDenied, message)
            .with_context(serde_json::json!({ "path": path }))
            .with_suggestion("The daemon runs with --confine; use a path inside the workspace")
    }

    pub fn invalid_field(code: ErrorCode, field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let issue = ValidationIssue {
            field: field.to_string(),
            message: message.clone(),
            code: code.as_str().to_string(),
        };
        Self::new(code, format!("{field}: {message}"))
            .with_context(json!({ "field": field, "validationErrors": [issue] }))
    }

    pub fn with_context(mut self, context: Value) -> Self {
        self.context = context;
        self
    }

    pub fn with_operation(mut self, operation: Operation) -> Self {
        self.operation = Some(operation);
        self
    }

    pub fn with_suggestion(mut self, suggestion: impl Into<String>) -> Self {
        self.suggestion = Some(suggestion.into());
        self
    }

    /// The reference answers unknown routes 404 with code UNKNOWN_ERROR (otherwise a 500 code).
    pub fn not_found_route() -> Self {
        let mut err = Self::new(
            ErrorCode::UnknownError,
            "The requested endpoint was not found",
        );
        err.http_status = 404;
        err
    }

    /// A WebSocket upgrade whose handshake is malformed (the reference answers 503, which
    /// its clients retry; a malformed handshake does not get better by retrying).
    pub fn bad_upgrade(reason: String) -> Self {
        Self::validation("headers", reason, "INVALID_UPGRADE")
    }

    /// `/ws/pty` without a usable `sessionId` (before the upgrade, as the reference).
    pub fn terminal_query(message: &str) -> Self {
        Self::validation("sessionId", message, "INVALID_QUERY")
    }

    pub fn unauthorized() -> Self {
        Self::new(ErrorCode::Unauthorized, "Missing or invalid API token")
            .with_suggestion("Send `Authorization: Bearer <token>` or `X-Fsd-Token: <token>`")
    }

    /// Logs the error as it is answered, whichever transport answers it: the daemon's
    /// failures as errors, a caller's mistakes at debug.
    pub fn log(&self) {
        if self.http_status >= 500 {
            tracing::error!(code = %self.code, message = %self.message, "request failed");
        } else {
            tracing::debug!(code = %self.code, message = %self.message, "request refused");
        }
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            code: self.code.clone(),
            message: self.message.clone(),
            context: self.context.clone(),
            operation: self.operation,
            http_status: self.http_status,
            timestamp: now_rfc3339(),
            suggestion: self.suggestion.clone(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.http_status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        self.log();
        let mut response = (status, axum::Json(self.body())).into_response();
        if self.code == ErrorCode::Unauthorized {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// Attaches the operation to a service error as it becomes a wire error.
pub trait OperationExt<T> {
    fn op(self, operation: Operation) -> Result<T, ApiError>;
}

impl<T, E: Into<ApiError>> OperationExt<T> for Result<T, E> {
    fn op(self, operation: Operation) -> Result<T, ApiError> {
        self.map_err(|err| err.into().with_operation(operation))
    }
}
