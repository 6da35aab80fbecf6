//! Calls from the object to fsd in its container (port 3000).

use worker::{Fetcher, Method, RequestInit, Response, Result};

/// `method path` with a JSON body, to fsd.
pub async fn call(
    daemon: &Fetcher,
    method: Method,
    path: &str,
    body: &serde_json::Value,
) -> Result<Response> {
    let mut init = RequestInit::new();
    init.with_method(method)
        .with_body(Some(serde_json::to_string(body)?.into()));
    daemon
        .fetch(format!("http://container{path}"), Some(init))
        .await
}
