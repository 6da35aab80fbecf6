//! A WebSocket client for the transport (`/ws`) and terminal (`/ws/pty`) routes, on
//! tokio-tungstenite: what a Durable Object or a browser sends, frame by frame.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::Daemon;

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// One connection.
pub struct WsClient {
    pub socket: Socket,
}

impl WsClient {
    /// Connects to `route` of the daemon, with its token on the upgrade (if it has one).
    pub async fn connect(daemon: &Daemon, route: &str) -> Self {
        Self::connect_with(daemon, route, daemon.token.as_deref())
            .await
            .expect("WebSocket upgrade")
    }

    /// Connects with `token` (or none) on the upgrade.
    pub async fn connect_with(
        daemon: &Daemon,
        route: &str,
        token: Option<&str>,
    ) -> Result<Self, tungstenite::Error> {
        Self::connect_url(&daemon.url(route), token).await
    }

    /// Connects to `url` (`http://…`, here or behind a Worker) with `token` (or none) on
    /// the upgrade.
    pub async fn connect_url(url: &str, token: Option<&str>) -> Result<Self, tungstenite::Error> {
        let url = url.replacen("http://", "ws://", 1);
        let mut request = url.into_client_request()?;
        if let Some(token) = token {
            let value = format!("Bearer {token}").parse().expect("header value");
            request.headers_mut().insert("authorization", value);
        }
        let (socket, _) = tokio_tungstenite::connect_async(request).await?;
        Ok(Self { socket })
    }

    pub async fn send_text(&mut self, text: &str) {
        self.try_send_text(text).await.expect("send");
    }

    /// Sends, or says why not (the server may have closed the socket on purpose).
    pub async fn try_send_text(
        &mut self,
        text: &str,
    ) -> Result<(), tokio_tungstenite::tungstenite::Error> {
        self.socket.send(Message::Text(text.into())).await
    }

    pub async fn send_json(&mut self, value: &Value) {
        self.send_text(&value.to_string()).await;
    }

    /// Sends a `request` message.
    pub async fn request(&mut self, id: &str, method: &str, path: &str, body: Option<Value>) {
        let mut message = json!({"type": "request", "id": id, "method": method, "path": path});
        if let Some(body) = body {
            message["body"] = body;
        }
        self.send_json(&message).await;
    }

    /// The next text message as JSON; `None` after `wait` without one or once the socket
    /// has closed. Binary frames are skipped.
    pub async fn next(&mut self, wait: Duration) -> Option<Value> {
        loop {
            let frame = tokio::time::timeout(wait, self.socket.next())
                .await
                .ok()??;
            match frame.ok()? {
                Message::Text(text) => {
                    return Some(serde_json::from_str(text.as_str()).expect("a JSON message"));
                }
                Message::Close(_) => return None,
                _ => {}
            }
        }
    }

    /// Sends a request and collects what comes back for it: the `stream` messages' data
    /// (parsed) and the final `response` or `error`. Messages for other ids are kept in
    /// `others`.
    pub async fn call(
        &mut self,
        id: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
        self.request(id, method, path, body).await;
        self.answer(id).await
    }

    /// Collects the messages of request `id` until its `response` or `error`.
    pub async fn answer(&mut self, id: &str) -> Answer {
        let mut answer = Answer::default();
        while let Some(message) = self.next(Duration::from_secs(30)).await {
            if message["id"] != id {
                answer.others.push(message);
                continue;
            }
            match message["type"].as_str() {
                Some("stream") => {
                    let data = message["data"].as_str().expect("stream data");
                    answer
                        .events
                        .push(serde_json::from_str(data).unwrap_or(Value::String(data.into())));
                }
                _ => {
                    answer.last = message;
                    return answer;
                }
            }
        }
        panic!("no answer for {id}");
    }
}

/// What came back for one request.
#[derive(Debug, Default)]
pub struct Answer {
    /// Each `stream` message's data, parsed.
    pub events: Vec<Value>,
    /// The `response` (or `error`) that ended it.
    pub last: Value,
    /// Messages for other requests that arrived meanwhile.
    pub others: Vec<Value>,
}
