//! Code-context errors on the wire: the envelope for context routes, and the reference's
//! own body for `POST /api/execute/code`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use fsd_api::ErrorCode;
use serde_json::json;

use super::error::InterpreterError;
use crate::error::ApiError;

impl From<InterpreterError> for ApiError {
    fn from(err: InterpreterError) -> Self {
        let message = err.to_string();
        match err {
            InterpreterError::Spawn { kind, reason } if kind.name() == "python" => Self::new(
                ErrorCode::PythonNotAvailable,
                format!("Python interpreter not available: {reason}"),
            )
            .with_context(json!({ "originalError": reason })),
            InterpreterError::Spawn { reason, .. } => Self::new(
                ErrorCode::InternalError,
                format!("Failed to create code context: {reason}"),
            ),
            InterpreterError::Init(_) | InterpreterError::Protocol(_) => Self::new(
                ErrorCode::InternalError,
                format!("Failed to create code context: {message}"),
            ),
            InterpreterError::Outside(path) => ApiError::outside_roots(message, path),
            InterpreterError::NotFound(id) => Self::new(ErrorCode::ContextNotFound, message)
                .with_context(json!({ "contextId": id })),
            InterpreterError::Dead(id) => Self::new(ErrorCode::InternalError, message)
                .with_context(json!({ "contextId": id })),
            InterpreterError::WrongLanguage { ref id, .. } => Self::new(
                ErrorCode::CodeExecutionError,
                format!("Failed to execute code in context '{id}': {message}"),
            )
            .with_context(json!({ "contextId": id, "evalue": message })),
            InterpreterError::Invalid { field, .. } => {
                Self::validation(field, message, "INVALID_VALUE")
            }
        }
    }
}

/// A code call that could not start, as its error: a missing context is said as the
/// reference says it (`Context ID not found`).
pub fn code_execution_error(err: InterpreterError) -> ApiError {
    let not_found = match &err {
        InterpreterError::NotFound(id) => Some(format!("Context {id} not found")),
        _ => None,
    };
    let mut api = ApiError::from(err);
    if let Some(message) = not_found {
        api.message = message;
    }
    api
}

/// A failure of `POST /api/execute/code`, which answers in the reference's own body,
/// `{error, code, details}`, not the envelope (its clients read those fields).
pub struct CodeExecutionFailure(pub ApiError);

impl IntoResponse for CodeExecutionFailure {
    fn into_response(self) -> Response {
        let api = self.0;
        api.log();
        let status =
            StatusCode::from_u16(api.http_status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = fsd_api::interpreter::CodeErrorBody {
            error: api.message,
            code: api.code,
            details: api.context,
        };
        (status, axum::Json(body)).into_response()
    }
}
