//! What the Worker and its object share on the wire between them: the headers the Worker
//! sets (never taken from a caller), the caller's credentials that go no further than the
//! Worker, requests rebuilt for the next hop, and JSON errors in the reference's shape.

use worker::{Headers, Request, RequestInit, Response, Result};

/// The sandbox id the Worker resolved for the object.
pub const SANDBOX_ID_HEADER: &str = "x-fsd-sandbox-id";
/// `<port>:<token>` of a preview request.
pub const PREVIEW_HEADER: &str = "x-fsd-preview";
/// What a caller authenticates to the Worker with (the `FSD_TOKEN` secret): dropped before
/// anything reaches the object, so never forwarded into the container.
pub const CALLER_CREDENTIALS: [&str; 2] = ["authorization", "x-fsd-token"];
/// The headers only the Worker sets for its object.
const WORKER_HEADERS: [&str; 2] = [SANDBOX_ID_HEADER, PREVIEW_HEADER];

/// `request` (method, headers, body) sent to `url` instead, without the headers named in
/// `drop` or set by the Worker, and with `set` added. The body is passed on as a stream, or
/// as `body` when the caller read it already.
pub fn rebuild(
    request: &Request,
    url: &str,
    drop: &[&str],
    set: &[(&str, &str)],
) -> Result<Request> {
    rebuild_with(request, None, url, drop, set)
}

/// [`rebuild`] with the body given as bytes (`Some`) instead of the request's stream.
pub fn rebuild_with(
    request: &Request,
    body: Option<&[u8]>,
    url: &str,
    drop: &[&str],
    set: &[(&str, &str)],
) -> Result<Request> {
    let headers = Headers::new();
    for (name, value) in request.headers().entries() {
        let name = name.to_ascii_lowercase();
        if !drop.contains(&name.as_str()) && !WORKER_HEADERS.contains(&name.as_str()) {
            headers.append(&name, &value)?;
        }
    }
    for (name, value) in set {
        headers.set(name, value)?;
    }
    let mut init = RequestInit::new();
    init.with_method(request.method()).with_headers(headers);
    match body {
        Some(bytes) => {
            init.with_body(Some(worker::js_sys::Uint8Array::from(bytes).into()));
        }
        None => {
            if let Some(stream) = request.inner().body() {
                init.with_body(Some(stream.into()));
            }
        }
    }
    Request::new_with_init(url, &init)
}

/// A JSON error in the reference's shape.
pub fn error(status: u16, code: &str, message: &str) -> Result<Response> {
    let body = serde_json::json!({"code": code, "message": message});
    Ok(Response::from_json(&body)?.with_status(status))
}
