//! fsd in the object's container (port 3000), and the token the object talks to it with.
//!
//! The object starts every container run with a token of its own in fsd's `FSD_TOKEN`
//! (random, kept in the object's storage for that run), so fsd's auth is on and only the
//! object can drive it from outside. It is not the Worker's `FSD_TOKEN` secret, which never
//! leaves the Worker: a sandbox that reads its own daemon's token gains only its own daemon.

use worker::{Fetcher, Method, Request, RequestInit, Response, Result};

use crate::wire;

/// Storage key of the current run's daemon token.
pub const TOKEN_KEY: &str = "daemonToken";
/// The header fsd reads a token from besides `Authorization` (which stays free for the
/// session id a caller may send as a bearer).
const TOKEN_HEADER: &str = "x-fsd-token";

/// fsd on port 3000 of a running container.
pub struct Daemon {
    pub port: Fetcher,
    pub token: Option<String>,
}

impl Daemon {
    /// `method path`, with a JSON body if given, to fsd.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Response> {
        let headers = worker::Headers::new();
        headers.set("content-type", "application/json")?;
        if let Some(token) = &self.token {
            headers.set(TOKEN_HEADER, token)?;
        }
        let mut init = RequestInit::new();
        init.with_method(method).with_headers(headers);
        if let Some(body) = body {
            init.with_body(Some(serde_json::to_string(body)?.into()));
        }
        self.port
            .fetch(format!("http://container{path}"), Some(init))
            .await
    }

    /// A caller's request (already without the caller's credentials), to fsd at the same
    /// path and query, with the run's token; its body as `body` when it was read already.
    pub async fn send(&self, request: &Request, body: Option<&[u8]>) -> Result<Response> {
        let url = request.url()?;
        let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
        let target = format!("http://container{}{query}", url.path());
        let set: Vec<(&str, &str)> = self
            .token
            .as_deref()
            .map(|token| (TOKEN_HEADER, token))
            .into_iter()
            .collect();
        let forwarded =
            wire::rebuild_with(request, body, &target, &wire::CALLER_CREDENTIALS, &set)?;
        self.port.fetch_request(forwarded).await
    }
}
