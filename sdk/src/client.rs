//! The connection to one daemon: base URL, token, and the request helpers every domain uses.

use reqwest::{Method, RequestBuilder, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;

use crate::SdkError;

/// How long a pooled connection may sit idle before the client drops it: below the
/// daemon's idle limit (10 s by default, `--header-timeout-secs`), so a request is never
/// sent on a connection the daemon is closing. A caller that blocks its runtime would not
/// see the daemon's close before the pool handed the connection out again, and the
/// request would fail (`IncompleteMessage`).
pub const POOL_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A client for one fsd daemon. Cheap to clone; clones share the connection pool.
#[derive(Debug, Clone)]
pub struct Sandbox {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    /// The WebSocket transport, when the client was connected with it.
    socket: Option<Arc<crate::ws::Socket>>,
}

impl Sandbox {
    /// A client for the daemon at `base_url` (such as `http://127.0.0.1:3000`). No request is
    /// made until the first call.
    pub fn connect(base_url: &str, token: Option<&str>) -> Result<Self, SdkError> {
        let url = reqwest::Url::parse(base_url).map_err(|err| SdkError::InvalidUrl {
            url: base_url.to_string(),
            reason: err.to_string(),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(SdkError::InvalidUrl {
                url: base_url.to_string(),
                reason: "the scheme must be http or https".into(),
            });
        }
        let mut builder = reqwest::Client::builder().pool_idle_timeout(POOL_IDLE_TIMEOUT);
        // A daemon over plain HTTP (loopback, a tunnel's end) needs no TLS roots: loading
        // the platform's costs each short-lived fsctl about 15 ms.
        if url.scheme() == "http" {
            builder = builder.tls_certs_only([]);
        }
        let http = builder.build().map_err(|err| SdkError::InvalidUrl {
            url: base_url.to_string(),
            reason: err.to_string(),
        })?;
        Ok(Self {
            http,
            base: base_url.trim_end_matches('/').to_string(),
            token: token.map(str::to_string),
            socket: None,
        })
    }

    /// A client whose JSON and streaming calls all go over one WebSocket (`/ws`), as the
    /// reference's `websocket` transport does; raw file transfers still use HTTP.
    pub async fn connect_websocket(base_url: &str, token: Option<&str>) -> Result<Self, SdkError> {
        let mut sandbox = Self::connect(base_url, token)?;
        let socket = crate::ws::Socket::connect(&sandbox.base, token).await?;
        sandbox.socket = Some(Arc::new(socket));
        Ok(sandbox)
    }

    /// Whether calls go over the WebSocket transport.
    pub fn uses_websocket(&self) -> bool {
        self.socket.is_some()
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub(crate) fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Whether calls go over the WebSocket transport.
    pub(crate) fn uses_socket(&self) -> bool {
        self.socket.is_some()
    }

    pub(crate) fn request(&self, method: Method, route: &str) -> RequestBuilder {
        let builder = self.http.request(method, format!("{}{route}", self.base));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// POSTs `body` as JSON and decodes a JSON answer.
    pub(crate) async fn post_json<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        route: &str,
        body: &B,
    ) -> Result<T, SdkError> {
        if let Some(socket) = &self.socket {
            let body = to_json(body)?;
            return decode_value(socket.call("POST", route, Some(body)).await?);
        }
        let response = self.request(Method::POST, route).json(body).send().await?;
        decode(response).await
    }

    pub(crate) async fn get_json<T: DeserializeOwned>(&self, route: &str) -> Result<T, SdkError> {
        if let Some(socket) = &self.socket {
            return decode_value(socket.call("GET", route, None).await?);
        }
        let response = self.request(Method::GET, route).send().await?;
        decode(response).await
    }

    pub(crate) async fn delete_json<T: DeserializeOwned>(
        &self,
        route: &str,
    ) -> Result<T, SdkError> {
        if let Some(socket) = &self.socket {
            return decode_value(socket.call("DELETE", route, None).await?);
        }
        let response = self.request(Method::DELETE, route).send().await?;
        decode(response).await
    }

    /// A streaming route's events, typed: SSE over HTTP, `stream` messages over the socket.
    pub(crate) async fn event_stream<T: DeserializeOwned + Send + 'static>(
        &self,
        method: Method,
        route: &str,
        body: Option<serde_json::Value>,
    ) -> Result<
        std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<T, SdkError>> + Send>>,
        SdkError,
    > {
        use futures_util::StreamExt;
        if let Some(socket) = &self.socket {
            let mut incoming = socket.stream(method.as_str(), route, body)?;
            // A route that refuses answers with a plain response before any event.
            let first = incoming.next().await;
            let rest = incoming;
            let first = match first {
                Some(Ok(crate::ws::Incoming::Done { status, body })) if status >= 400 => {
                    return Err(api_error(status, body));
                }
                other => other,
            };
            let events = futures_util::stream::iter(first)
                .chain(rest)
                .filter_map(|item| {
                    std::future::ready(match item {
                        Ok(crate::ws::Incoming::Data(data)) => Some(
                            serde_json::from_str::<T>(&data).map_err(|err| SdkError::Decode {
                                status: 200,
                                message: format!("bad stream event {data:?}: {err}"),
                            }),
                        ),
                        Ok(crate::ws::Incoming::Done { .. }) => None,
                        Err(error) => Some(Err(error)),
                    })
                });
            return Ok(Box::pin(events));
        }
        let mut request = self.request(method, route);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await?;
        Ok(Box::pin(crate::sse::events(check(response).await?)))
    }
}

/// Decodes a status and JSON body that came over the socket, as [`decode`] does.
fn decode_value<T: DeserializeOwned>(
    (status, body): (u16, Option<serde_json::Value>),
) -> Result<T, SdkError> {
    if !(200..300).contains(&status) {
        return Err(api_error(status, body));
    }
    let body = body.unwrap_or(serde_json::Value::Null);
    serde_json::from_value(body.clone()).map_err(|err| SdkError::Decode {
        status,
        message: format!("{err}: {body}"),
    })
}

/// A failure's error envelope (or what came instead of one).
fn api_error(status: u16, body: Option<serde_json::Value>) -> SdkError {
    let body = body.unwrap_or(serde_json::Value::Null);
    failure(status, &body.to_string())
}

/// A failure's body: the error envelope, or the `{error, code, details}` body of
/// `/api/execute/code` (given the envelope's shape), or what came instead.
fn failure(status: u16, body: &str) -> SdkError {
    if let Ok(envelope) = serde_json::from_str(body) {
        return SdkError::Api {
            status,
            body: Box::new(envelope),
        };
    }
    if let Ok(code) = serde_json::from_str::<fsd_api::interpreter::CodeErrorBody>(body) {
        let mut error = SdkError::coded(code.code, code.error, code.details);
        if let SdkError::Api { status: coded, .. } = &mut error {
            *coded = status;
        }
        return error;
    }
    SdkError::Decode {
        status,
        message: body.chars().take(512).collect(),
    }
}

/// A request body as a JSON value.
pub(crate) fn to_json<B: Serialize + ?Sized>(body: &B) -> Result<serde_json::Value, SdkError> {
    serde_json::to_value(body).map_err(encode_error)
}

fn encode_error(error: serde_json::Error) -> SdkError {
    SdkError::WebSocket(format!("the request body is not JSON: {error}"))
}

/// Decodes a success body, or turns the error envelope into [`SdkError::Api`].
pub(crate) async fn decode<T: DeserializeOwned>(response: Response) -> Result<T, SdkError> {
    let response = check(response).await?;
    let status = response.status().as_u16();
    let bytes = response.bytes().await?;
    serde_json::from_slice(&bytes).map_err(|err| SdkError::Decode {
        status,
        message: format!(
            "{err}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(512)])
        ),
    })
}

/// Passes a success response through; reads a failure's error envelope.
pub(crate) async fn check(response: Response) -> Result<Response, SdkError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let bytes = response.bytes().await?;
    Err(failure(status.as_u16(), &String::from_utf8_lossy(&bytes)))
}
