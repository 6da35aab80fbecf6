//! What the Worker and its object share on the wire between them: the headers the Worker
//! sets (never taken from a caller), and JSON errors in the reference's shape.

use worker::{Response, Result};

/// The sandbox id the Worker resolved for the object.
pub const SANDBOX_ID_HEADER: &str = "x-fsd-sandbox-id";
/// `<port>:<token>` of a preview request.
pub const PREVIEW_HEADER: &str = "x-fsd-preview";

/// A JSON error in the reference's shape.
pub fn error(status: u16, code: &str, message: &str) -> Result<Response> {
    let body = serde_json::json!({"code": code, "message": message});
    Ok(Response::from_json(&body)?.with_status(status))
}
