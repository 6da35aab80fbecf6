//! A JSON body extractor whose errors name the offending field.
//!
//! axum's `Json` answers 400/415/422 with plain text; callers of fsd get the error envelope
//! instead: `VALIDATION_FAILED` with `validationErrors[0].field` set to the field's path
//! (`options.recursive`), or `body` when the body is not JSON at all.

use axum::extract::{FromRequest, Request};
use axum::response::{IntoResponse, Response};
use fsd_api::{ErrorCode, Operation};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Largest JSON body accepted. A 32 MiB file base64-encoded is about 43 MiB.
pub const MAX_JSON_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Why a JSON body was refused.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("request body exceeds {MAX_JSON_BODY_BYTES} bytes")]
    TooLarge,
    #[error("cannot read the request body: {0}")]
    Unreadable(String),
    /// serde would read `[..]` into a struct by position; the API takes objects only.
    #[error("the request body must be a JSON object")]
    NotObject,
    #[error("invalid JSON: {0}")]
    Syntax(String),
    /// A field is missing or has the wrong type; `field` is its path (`options.recursive`).
    #[error("{message}")]
    Field { field: String, message: String },
}

pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = BodyError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req).await?;
        parse(&bytes).map(JsonBody)
    }
}

/// The whole body of a JSON request, up to [`MAX_JSON_BODY_BYTES`], for handlers that parse
/// it themselves (borrowing from it).
pub async fn read_body(req: Request) -> Result<axum::body::Bytes, BodyError> {
    axum::body::to_bytes(req.into_body(), MAX_JSON_BODY_BYTES)
        .await
        .map_err(body_read_error)
}

/// Why a body could not be read.
pub fn body_read_error(err: axum::Error) -> BodyError {
    let detail = err.to_string();
    if err.into_inner().is::<http_body_util::LengthLimitError>() {
        BodyError::TooLarge
    } else {
        BodyError::Unreadable(detail)
    }
}

/// Parses a JSON body into `T` (which may borrow from it), naming the field on failure.
pub fn parse<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, BodyError> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(BodyError::NotObject);
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(field_error)?;
    deserializer
        .end()
        .map_err(|err| BodyError::Syntax(err.to_string()))?;
    Ok(value)
}

/// [`parse`] of a body already decoded (an RPC call's arguments), with the same errors.
pub fn parse_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, BodyError> {
    if !value.is_object() {
        return Err(BodyError::NotObject);
    }
    serde_path_to_error::deserialize(value).map_err(field_error)
}

/// A field missing or of the wrong type, named by its path.
fn field_error(err: serde_path_to_error::Error<serde_json::Error>) -> BodyError {
    let inner = err.inner();
    if inner.is_syntax() || inner.is_eof() {
        return BodyError::Syntax(inner.to_string());
    }
    let path = err.path().to_string();
    let message = inner.to_string();
    let field = match missing_field(&message) {
        Some(name) if path == "." => name.to_string(),
        Some(name) => format!("{path}.{name}"),
        None if path == "." => "body".to_string(),
        None => path,
    };
    BodyError::Field {
        field,
        message: strip_position(&message),
    }
}

/// `missing field `path`` → `path`.
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// serde_json appends ` at line L column C`; the field name says more.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(index) => message[..index].to_string(),
        None => message.to_string(),
    }
}

/// Parses a JSON body for a domain whose type errors carry its own code instead of
/// VALIDATION_FAILED, as the reference answers them.
pub fn parse_as<T: serde::de::DeserializeOwned>(
    body: &[u8],
    code: ErrorCode,
    operation: Operation,
) -> Result<T, ApiError> {
    parse(body).map_err(|error| recoded(error, code, operation))
}

/// [`parse_as`] of a body already decoded (an RPC call's arguments), with the same errors.
pub fn parse_value_as<T: DeserializeOwned>(
    value: serde_json::Value,
    code: ErrorCode,
    operation: Operation,
) -> Result<T, ApiError> {
    parse_value(value).map_err(|error| recoded(error, code, operation))
}

/// A body's refusal under the domain's own code for a bad field.
fn recoded(error: BodyError, code: ErrorCode, operation: Operation) -> ApiError {
    let mut error = ApiError::from(error);
    if error.code == ErrorCode::ValidationFailed {
        error.http_status = code.http_status();
        error.code = code;
    }
    error.with_operation(operation)
}

/// Bodies that are not JSON are `body` errors; a bad field is named by its path.
impl From<BodyError> for ApiError {
    fn from(err: BodyError) -> Self {
        let message = err.to_string();
        match err {
            BodyError::TooLarge => Self::new(ErrorCode::FileTooLarge, message)
                .with_suggestion("Use PUT /api/files/raw to upload large files without base64"),
            BodyError::Unreadable(_) => Self::validation("body", message, "INVALID_BODY"),
            BodyError::NotObject | BodyError::Syntax(_) => {
                Self::validation("body", message, "INVALID_JSON")
            }
            BodyError::Field { field, message } => {
                Self::validation(&field, message, "INVALID_FIELD")
            }
        }
    }
}

impl IntoResponse for BodyError {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;
    use fsd_api::ErrorCode;
    use fsd_api::files::{ListFilesRequest, ReadRequest};

    fn parse<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, ApiError> {
        super::parse(bytes).map_err(ApiError::from)
    }

    fn field_of(err: &ApiError) -> String {
        err.context["validationErrors"][0]["field"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn names_a_missing_field() {
        let err = parse::<ReadRequest>(b"{}").err().unwrap();
        assert_eq!(err.code, ErrorCode::ValidationFailed);
        assert_eq!(field_of(&err), "path");
    }

    #[test]
    fn names_a_wrongly_typed_nested_field() {
        let err = parse::<ListFilesRequest>(br#"{"path":"a","options":{"recursive":"yes"}}"#)
            .err()
            .unwrap();
        assert_eq!(field_of(&err), "options.recursive");
        assert!(!err.message.contains("line"), "{}", err.message);
    }

    #[test]
    fn malformed_json_is_a_body_error() {
        for body in [
            &b"{"[..],
            b"not json",
            b"",
            br#"{"path":"a"} trailing"#,
            br#"["a"]"#,
        ] {
            let err = parse::<ReadRequest>(body).err().unwrap();
            assert_eq!(field_of(&err), "body", "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn a_bad_enum_value_names_its_field() {
        let err = parse::<ReadRequest>(br#"{"path":"a","encoding":"latin1"}"#)
            .err()
            .unwrap();
        assert_eq!(field_of(&err), "encoding");
    }
}
