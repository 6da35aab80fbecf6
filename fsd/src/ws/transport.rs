//! `/ws` and `/api/ws`: the route API over one WebSocket. Each `request` message becomes an
//! HTTP request through the same router as plain HTTP (auth, session headers, validation,
//! errors, logging), and its answer goes back as a `response`; a streaming route's SSE
//! events go back one `stream` message each, as the route produces them, then the
//! `response`. Requests on a socket run concurrently; `cancel` stops one of its streams,
//! and closing the socket stops all of them.
//!
//! Limits: [`MAX_IN_FLIGHT`] requests at once per socket (further frames are not read
//! until one finishes); each request writes its messages to the socket itself, waiting
//! while the client is not reading (so at most one message per request is held), and a
//! client that takes nothing for `--ws-stall-secs` (30 s) is disconnected.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ws::{Message, WebSocket};
use axum::http::{HeaderName, HeaderValue, Method, Uri, header};
use axum::response::Response;
use fsd_api::ws::{ClientMessage, Request as WsRequest, ServerMessage, codes};
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use http_body_util::BodyExt;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::wire::sse_parse::SseParser;

/// Requests one socket runs at once.
pub const MAX_IN_FLIGHT: usize = 256;

/// One WebSocket connection of the transport.
pub struct Connection {
    /// The HTTP API every request goes through.
    api: Router,
    /// The upgrade's own token header, for requests that carry none (auth enabled only).
    inherited_auth: Option<(HeaderName, HeaderValue)>,
    /// How long a full outbox may go without the client taking anything.
    send_stall: Duration,
}

impl Connection {
    pub fn new(
        api: Router,
        inherited_auth: Option<(HeaderName, HeaderValue)>,
        send_stall: Duration,
    ) -> Self {
        Self {
            api,
            inherited_auth,
            send_stall,
        }
    }

    /// Serves the socket until the client closes it, it fails, or the client stops reading.
    pub async fn run(self, socket: WebSocket) {
        let (sink, mut frames) = socket.split();
        let closed = CancellationToken::new();
        let outbox = Outbox {
            sink: Arc::new(tokio::sync::Mutex::new(sink)),
            closed: closed.clone(),
            stall: self.send_stall,
        };
        let streams: Streams = Arc::default();
        let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let mut tasks = tokio::task::JoinSet::new();
        let shared = Arc::new(self);
        // Tells a request's own entry from a later one that reused its id.
        let mut serial = 0u64;
        loop {
            let frame = tokio::select! {
                () = closed.cancelled() => break,
                frame = frames.next() => frame,
                Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            };
            let text = match frame {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => break,
                Some(Ok(Message::Text(text))) => text.as_str().to_owned(),
                // A binary frame is read as UTF-8 text, as the reference does.
                Some(Ok(Message::Binary(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            };
            let message = match parse(&text) {
                Ok(message) => message,
                Err(error) => {
                    outbox.send(error).await;
                    continue;
                }
            };
            match message {
                ClientMessage::Cancel { id } => {
                    if let Some((_, cancel)) = lock(&streams).remove(&id) {
                        cancel.cancel();
                    }
                }
                ClientMessage::Request(request) => {
                    let Ok(permit) = in_flight.clone().acquire_owned().await else {
                        break;
                    };
                    let cancel = CancellationToken::new();
                    serial += 1;
                    let mine = serial;
                    if lock(&streams)
                        .insert(request.id.clone(), (mine, cancel.clone()))
                        .is_some()
                    {
                        tracing::debug!(id = %request.id, "a request id reused while in flight");
                    }
                    let (shared, outbox, streams) =
                        (shared.clone(), outbox.clone(), streams.clone());
                    tasks.spawn(async move {
                        let id = request.id.clone();
                        shared.serve(request, &outbox, &cancel).await;
                        let mut streams = lock(&streams);
                        if streams.get(&id).is_some_and(|(serial, _)| *serial == mine) {
                            streams.remove(&id);
                        }
                        drop(permit);
                    });
                }
            }
        }
        // Whatever this connection still runs stops with it, and only that.
        for (_, (_, cancel)) in lock(&streams).drain() {
            cancel.cancel();
        }
        tasks.abort_all();
        closed.cancel();
        // The close frame, if the client still reads; a stalled one is just dropped.
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            outbox.sink.lock().await.close().await
        })
        .await;
    }

    /// Makes one request and sends what it answers.
    async fn serve(&self, request: WsRequest, outbox: &Outbox, cancel: &CancellationToken) {
        let id = request.id.clone();
        let http = match self.http_request(request) {
            Ok(http) => http,
            Err(message) => {
                outbox
                    .send(adapter_error(
                        Some(id),
                        codes::INVALID_REQUEST,
                        message,
                        400,
                    ))
                    .await;
                return;
            }
        };
        let Ok(response) = self.api.clone().oneshot(http).await;
        let status = response.status().as_u16();
        if is_event_stream(&response) {
            self.pump(id, status, response, outbox, cancel).await;
            return;
        }
        let message = match response.into_body().collect().await {
            Ok(collected) => finished(
                id,
                status,
                serde_json::from_slice(&collected.to_bytes()).ok(),
            ),
            Err(error) => stream_failed(id, format!("reading the answer failed: {error}")),
        };
        outbox.send(message).await;
    }

    /// Carries a streaming answer: one `stream` message per SSE event, as the route
    /// produces it, then the `response`. A cancel drops the body, which stops the route.
    async fn pump(
        &self,
        id: String,
        status: u16,
        response: Response,
        outbox: &Outbox,
        cancel: &CancellationToken,
    ) {
        let mut body = response.into_body();
        let mut parser = SseParser::default();
        loop {
            let frame = tokio::select! {
                () = cancel.cancelled() => return,
                frame = body.frame() => frame,
            };
            match frame {
                None => break,
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    for event in parser.push(&data) {
                        let message = ServerMessage::Stream {
                            id: id.clone(),
                            event: event.event,
                            data: event.data,
                        };
                        if !outbox.send(message).await {
                            return;
                        }
                    }
                }
                Some(Err(error)) => {
                    outbox.send(stream_failed(id, error.to_string())).await;
                    return;
                }
            }
        }
        outbox.send(finished(id, status, None)).await;
    }

    /// The HTTP request a message describes, or what is wrong with it (the field named).
    fn http_request(&self, request: WsRequest) -> Result<axum::http::Request<Body>, String> {
        let method = match request.method.to_ascii_uppercase().as_str() {
            "GET" => Method::GET,
            "POST" => Method::POST,
            "PUT" => Method::PUT,
            "DELETE" => Method::DELETE,
            other => {
                return Err(format!(
                    "method: {other:?} is not one of GET, POST, PUT, DELETE"
                ));
            }
        };
        if !request.path.starts_with('/') {
            return Err("path: must start with /".into());
        }
        let uri: Uri = request
            .path
            .parse()
            .map_err(|_| format!("path: {:?} is not a path and query", request.path))?;
        let mut builder = axum::http::Request::builder()
            .method(method.clone())
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json");
        let mut carries_auth = false;
        for (name, value) in request.headers.iter().flatten() {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("headers: {name:?} is not a header name"))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| format!("headers.{name}: not a valid header value"))?;
            carries_auth |= name == header::AUTHORIZATION || name == "x-fsd-token";
            if let Some(headers) = builder.headers_mut() {
                headers.insert(name, value);
            }
        }
        if !carries_auth && let Some((name, value)) = &self.inherited_auth {
            builder = builder.header(name, value);
        }
        let body = match (&method, &request.body) {
            (&Method::POST | &Method::PUT, Some(body)) => {
                Body::from(serde_json::to_vec(body).map_err(|e| format!("body: {e}"))?)
            }
            _ => Body::empty(),
        };
        builder
            .body(body)
            .map_err(|error| format!("request: {error}"))
    }
}

/// The requests a connection runs, by id: a serial number and what cancels the request's
/// stream.
type Streams = Arc<Mutex<HashMap<String, (u64, CancellationToken)>>>;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A frame read as a message, or the adapter error that answers it.
fn parse(text: &str) -> Result<ClientMessage, ServerMessage> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|_| adapter_error(None, codes::PARSE_ERROR, "Invalid JSON message".into(), 400))?;
    serde_json::from_value(value).map_err(|error| {
        let message = format!("Message must be a valid WSRequest: {error}");
        adapter_error(None, codes::INVALID_REQUEST, message, 400)
    })
}

/// The `response` that ends a request.
fn finished(id: String, status: u16, body: Option<serde_json::Value>) -> ServerMessage {
    ServerMessage::Response {
        id,
        status,
        body,
        done: true,
    }
}

/// An answer that broke off while it was carried.
fn stream_failed(id: String, message: String) -> ServerMessage {
    adapter_error(Some(id), codes::STREAM_ERROR, message, 500)
}

fn adapter_error(id: Option<String>, code: &str, message: String, status: u16) -> ServerMessage {
    ServerMessage::Error {
        id,
        code: code.into(),
        message,
        status,
        context: None,
    }
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.contains("text/event-stream"))
}

/// Where a connection's requests write their messages: the socket, one writer at a time.
#[derive(Clone)]
struct Outbox {
    sink: Arc<tokio::sync::Mutex<SplitSink<WebSocket, Message>>>,
    closed: CancellationToken,
    stall: Duration,
}

impl Outbox {
    /// Writes `message` to the socket; false when the connection is gone (or has just
    /// been dropped because its client took nothing for the stall limit).
    async fn send(&self, message: ServerMessage) -> bool {
        let text = match serde_json::to_string(&message) {
            Ok(text) => text,
            Err(error) => {
                tracing::warn!(%error, "a WebSocket message could not be written");
                return true;
            }
        };
        // Waiting for the socket behind other requests is not a stall; a write that takes
        // nothing for the limit is.
        let mut sink = tokio::select! {
            () = self.closed.cancelled() => return false,
            sink = self.sink.lock() => sink,
        };
        let write = sink.send(Message::Text(text.into()));
        let written = tokio::select! {
            () = self.closed.cancelled() => return false,
            written = tokio::time::timeout(self.stall, write) => written,
        };
        match written {
            Ok(Ok(())) => true,
            Ok(Err(_)) => {
                self.closed.cancel();
                false
            }
            Err(_) => {
                tracing::warn!("a WebSocket client stopped reading; disconnecting it");
                self.closed.cancel();
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_that_are_not_requests_get_the_reference_codes() {
        let code = |text: &str| match parse(text) {
            Err(ServerMessage::Error { code, id, .. }) => {
                assert_eq!(id, None);
                code
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(code("not json"), codes::PARSE_ERROR);
        assert_eq!(code(r#"{"type":"hello"}"#), codes::INVALID_REQUEST);
        assert_eq!(
            code(r#"{"type":"request","id":"a"}"#),
            codes::INVALID_REQUEST
        );
        assert!(parse(r#"{"type":"cancel","id":"a"}"#).is_ok());
    }

    #[test]
    fn requests_become_http_requests_or_name_what_is_wrong() {
        let connection = Connection::new(Router::new(), None, Duration::from_secs(1));
        let request = |method: &str, path: &str| WsRequest {
            id: "a".into(),
            method: method.into(),
            path: path.into(),
            body: Some(serde_json::json!({"path": "x"})),
            headers: None,
        };
        let made = connection
            .http_request(request("post", "/api/read?x=1"))
            .unwrap();
        assert_eq!(made.method(), Method::POST);
        assert_eq!(made.uri(), "/api/read?x=1");
        let error = connection
            .http_request(request("PATCH", "/api/read"))
            .unwrap_err();
        assert!(error.starts_with("method:"), "{error}");
        let error = connection
            .http_request(request("GET", "api/read"))
            .unwrap_err();
        assert!(error.starts_with("path:"), "{error}");
    }
}
