//! The WebSocket transport for the typed client: every JSON and streaming route call over
//! one socket (`/ws`), as a Durable Object uses it to save subrequests. Raw file transfers
//! (`download`, `upload`) stay on HTTP: the socket carries JSON only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use fsd_api::ws::{ClientMessage, Request, ServerMessage};
use futures_util::{SinkExt, Stream, StreamExt};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::SdkError;

/// What arrives for a streaming request.
pub(crate) enum Incoming {
    /// One SSE event's data.
    Data(String),
    /// The route's final status and body (an error envelope when the route refused).
    Done { status: u16, body: Option<Value> },
}

enum Pending {
    Call(oneshot::Sender<Result<(u16, Option<Value>), SdkError>>),
    Stream(mpsc::UnboundedSender<Result<Incoming, SdkError>>),
}

type PendingTable = Arc<Mutex<HashMap<String, Pending>>>;

/// One socket and the requests waiting on it.
pub(crate) struct Socket {
    outgoing: mpsc::UnboundedSender<Message>,
    pending: PendingTable,
    next_id: AtomicU64,
}

impl Socket {
    /// Connects to `base` (`http://…`) at `/ws`, with `token` on the upgrade.
    pub async fn connect(base: &str, token: Option<&str>) -> Result<Socket, SdkError> {
        let Some(rest) = base.strip_prefix("http://") else {
            return Err(SdkError::InvalidUrl {
                url: base.to_string(),
                reason: "the WebSocket transport needs an http:// daemon (TLS is not built in)"
                    .into(),
            });
        };
        let socket = open(&format!("ws://{rest}/ws"), token)
            .await
            .map_err(socket_error)?;
        let (mut sink, mut frames) = socket.split();
        let (outgoing, mut queued) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(message) = queued.recv().await {
                if sink.send(message).await.is_err() {
                    return;
                }
            }
            let _ = sink.close().await;
        });
        let pending: PendingTable = Arc::default();
        let table = pending.clone();
        tokio::spawn(async move {
            while let Some(Ok(frame)) = frames.next().await {
                let Message::Text(text) = frame else { continue };
                if let Ok(message) = serde_json::from_str::<ServerMessage>(text.as_str()) {
                    deliver(&table, message);
                }
            }
            // The socket is gone: everything still waiting fails.
            let waiting: Vec<Pending> = lock(&table).drain().map(|(_, p)| p).collect();
            for pending in waiting {
                let closed = SdkError::WebSocket("the socket closed".into());
                match pending {
                    Pending::Call(reply) => {
                        let _ = reply.send(Err(closed));
                    }
                    Pending::Stream(events) => {
                        let _ = events.send(Err(closed));
                    }
                }
            }
        });
        Ok(Socket {
            outgoing,
            pending,
            next_id: AtomicU64::new(1),
        })
    }

    /// One route call; its status and JSON body.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Option<Value>), SdkError> {
        let (reply, answer) = oneshot::channel();
        self.send(method, path, body, Pending::Call(reply))?;
        answer
            .await
            .map_err(|_| SdkError::WebSocket("the socket closed".into()))?
    }

    /// A streaming route call: each event's data, then the final status (and body).
    /// Dropping the stream cancels the request.
    pub fn stream(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<impl Stream<Item = Result<Incoming, SdkError>> + Send + Unpin + use<>, SdkError>
    {
        let (events, received) = mpsc::unbounded_channel();
        let id = self.send(method, path, body, Pending::Stream(events))?;
        Ok(Cancelling {
            received,
            cancel: Some((id, self.outgoing.clone(), self.pending.clone())),
        })
    }

    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        pending: Pending,
    ) -> Result<String, SdkError> {
        let id = format!("sdk_{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let message = ClientMessage::Request(Request {
            id: id.clone(),
            method: method.to_string(),
            path: path.to_string(),
            body,
            headers: None,
        });
        let text = serde_json::to_string(&message)
            .map_err(|error| SdkError::WebSocket(error.to_string()))?;
        lock(&self.pending).insert(id.clone(), pending);
        self.outgoing
            .send(Message::Text(text.into()))
            .map_err(|_| SdkError::WebSocket("the socket closed".into()))?;
        Ok(id)
    }
}

/// Hands a server message to the request waiting for it.
fn deliver(table: &PendingTable, message: ServerMessage) {
    match message {
        ServerMessage::Stream { id, data, .. } => {
            if let Some(Pending::Stream(events)) = lock(table).get(&id) {
                let _ = events.send(Ok(Incoming::Data(data)));
            }
        }
        ServerMessage::Response {
            id, status, body, ..
        } => match lock(table).remove(&id) {
            Some(Pending::Call(reply)) => {
                let _ = reply.send(Ok((status, body)));
            }
            Some(Pending::Stream(events)) => {
                let _ = events.send(Ok(Incoming::Done { status, body }));
            }
            None => {}
        },
        ServerMessage::Error {
            id: Some(id),
            code,
            message,
            ..
        } => {
            let error = SdkError::WebSocket(format!("{code}: {message}"));
            match lock(table).remove(&id) {
                Some(Pending::Call(reply)) => {
                    let _ = reply.send(Err(error));
                }
                Some(Pending::Stream(events)) => {
                    let _ = events.send(Err(error));
                }
                None => {}
            }
        }
        ServerMessage::Error { id: None, .. } => {}
    }
}

/// A stream's messages; sends `cancel` when dropped before its end.
struct Cancelling {
    received: mpsc::UnboundedReceiver<Result<Incoming, SdkError>>,
    cancel: Option<(String, mpsc::UnboundedSender<Message>, PendingTable)>,
}

impl Stream for Cancelling {
    type Item = Result<Incoming, SdkError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let polled = self.received.poll_recv(context);
        if let std::task::Poll::Ready(None | Some(Ok(Incoming::Done { .. })) | Some(Err(_))) =
            &polled
        {
            // Ended: nothing to cancel.
            self.cancel = None;
        }
        polled
    }
}

impl Drop for Cancelling {
    fn drop(&mut self) {
        if let Some((id, outgoing, table)) = self.cancel.take() {
            lock(&table).remove(&id);
            let cancel = serde_json::to_string(&ClientMessage::Cancel { id }).unwrap_or_default();
            let _ = outgoing.send(Message::Text(cancel.into()));
        }
    }
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket")
            .field("waiting", &lock(&self.pending).len())
            .finish()
    }
}

/// A WebSocket connected to `url`, with `token` on the upgrade.
pub(crate) async fn open(
    url: &str,
    token: Option<&str>,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    tokio_tungstenite::tungstenite::Error,
> {
    let mut request = url.into_client_request()?;
    if let Some(token) = token {
        let value = format!("Bearer {token}")
            .parse::<tokio_tungstenite::tungstenite::http::HeaderValue>()
            .map_err(|error| tokio_tungstenite::tungstenite::Error::HttpFormat(error.into()))?;
        request.headers_mut().insert("authorization", value);
    }
    Ok(tokio_tungstenite::connect_async(request).await?.0)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn socket_error(error: tokio_tungstenite::tungstenite::Error) -> SdkError {
    SdkError::WebSocket(error.to_string())
}
