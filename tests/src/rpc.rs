//! A capnweb peer for `/rpc`, as the Sandbox object drives it: calls on the main object
//! (`["push", …]` then `["pull", id]`), their settlements matched by id (any number in
//! flight on one socket), each released once settled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

type Pending = Arc<Mutex<HashMap<i64, oneshot::Sender<Value>>>>;

pub struct RpcClient {
    /// The next export id of the daemon (its n-th push received is n), and the way out,
    /// together so ids follow send order.
    outgoing: Mutex<(i64, mpsc::UnboundedSender<Message>)>,
    pending: Pending,
    /// The argument of every pipe write the daemon sends (`["stream", …, ["write"], [arg]]`),
    /// each acknowledged as it arrives.
    writes: tokio::sync::Mutex<mpsc::UnboundedReceiver<Value>>,
}

impl RpcClient {
    /// Connects to `url`'s `/rpc` (`http://…`) with `token` (or none) on the upgrade.
    pub async fn connect(url: &str, token: Option<&str>) -> RpcClient {
        let url = format!("{}/rpc", url.replacen("http://", "ws://", 1));
        let mut request = url.into_client_request().expect("an /rpc URL");
        if let Some(token) = token {
            let value = format!("Bearer {token}").parse().expect("header value");
            request.headers_mut().insert("authorization", value);
        }
        // Without Nagle, as a Worker's socket: a call is two frames (`push`, `pull`), and
        // the second would wait for the first's ACK, which a server may delay 40 ms.
        let (socket, _) = tokio_tungstenite::connect_async_with_config(request, None, true)
            .await
            .expect("the /rpc upgrade");
        let (mut sink, mut stream) = socket.split();
        let (outgoing, mut queued) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(message) = queued.recv().await {
                if sink.send(message).await.is_err() {
                    return;
                }
            }
        });
        let pending: Pending = Arc::default();
        let settled = Arc::clone(&pending);
        let releases = outgoing.clone();
        let (written, writes) = mpsc::unbounded_channel::<Value>();
        tokio::spawn(async move {
            // The daemon's pushes and streams take our export ids in order from 1.
            let mut next_export = 1i64;
            while let Some(Ok(Message::Text(text))) = stream.next().await {
                let Ok(message) = serde_json::from_str::<Value>(text.as_str()) else {
                    continue;
                };
                match message[0].as_str() {
                    // A call of the daemon's on us (a callback): its id is taken too.
                    Some("pipe" | "push") => {
                        next_export += 1;
                        continue;
                    }
                    Some("stream") => {
                        let id = next_export;
                        next_export += 1;
                        let ack = json!(["resolve", id, ["undefined"]]).to_string();
                        let _ = releases.send(Message::Text(ack.into()));
                        if message[1][2][0] == "write" {
                            let _ = written.send(message[1][3][0].clone());
                        }
                        continue;
                    }
                    _ => {}
                }
                let (Some(kind), Some(id)) = (message[0].as_str(), message[1].as_i64()) else {
                    continue;
                };
                if kind == "resolve" || kind == "reject" {
                    let waiter = settled.lock().unwrap().remove(&id);
                    if let Some(waiter) = waiter {
                        let release = json!(["release", id, 1]).to_string();
                        let _ = releases.send(Message::Text(release.into()));
                        let _ = waiter.send(message);
                    }
                }
            }
        });
        RpcClient {
            outgoing: Mutex::new((1, outgoing)),
            pending,
            writes: tokio::sync::Mutex::new(writes),
        }
    }

    /// Ends the socket (a close frame; the server's answer ends the reader).
    pub fn close(self) {
        let outgoing = self.outgoing.lock().unwrap();
        let _ = outgoing.1.send(Message::Close(None));
    }

    /// The next pipe write the daemon sent (an event object of a subscription's stream).
    pub async fn next_write(&self) -> Option<Value> {
        self.writes.lock().await.recv().await
    }

    /// Drops `count` references to the daemon's export `id` (a subscription).
    pub fn release(&self, id: i64, count: u64) {
        let outgoing = self.outgoing.lock().unwrap();
        let release = json!(["release", id, count]).to_string();
        let _ = outgoing.1.send(Message::Text(release.into()));
    }

    /// Calls `method(args)` on the daemon's export `target` and returns what settled it.
    pub async fn call_on(&self, target: i64, method: &str, args: Value) -> Value {
        self.push(pipeline(json!(target), json!([method]), args))
            .await
    }

    /// Calls `domain.method(args)` and returns the message that settled it
    /// (`["resolve", id, result]` or `["reject", id, error]`).
    pub async fn call(&self, domain: &str, method: &str, args: Value) -> Value {
        self.push(pipeline(json!(0), json!([domain, method]), args))
            .await
    }

    /// Calls `domain.method` with its arguments already written (a JSON array's text): a
    /// bench's large argument serialized once, not on every call, so that what a row measures
    /// is the server and not this client's JSON writer.
    pub async fn call_written(&self, domain: &str, method: &str, args: &str) -> Value {
        let path = json!([domain, method]);
        self.push_written(format!(r#"["pipeline",0,{path},{args}]"#))
            .await
    }

    async fn push(&self, call: Value) -> Value {
        // Written once, as the SDK's `JSON.stringify` writes it: an argument of 1 MiB is not
        // copied on its way (`json!` copies what it is given).
        self.push_written(call.to_string()).await
    }

    async fn push_written(&self, call: String) -> Value {
        let (tx, rx) = oneshot::channel();
        {
            let mut outgoing = self.outgoing.lock().unwrap();
            let id = outgoing.0;
            outgoing.0 += 1;
            self.pending.lock().unwrap().insert(id, tx);
            let push = format!(r#"["push",{call}]"#);
            let pull = json!(["pull", id]).to_string();
            let _ = outgoing.1.send(Message::Text(push.into()));
            let _ = outgoing.1.send(Message::Text(pull.into()));
        }
        rx.await.expect("the call settled before the socket closed")
    }
}

/// `["pipeline", target, path, args]`, `args` moved in.
fn pipeline(target: Value, path: Value, args: Value) -> Value {
    Value::Array(vec![json!("pipeline"), target, path, args])
}

/// Asserts a call's answer resolved.
pub fn settled(answer: &Value) {
    assert_eq!(answer[0], "resolve", "{answer}");
}

/// The SDK's next line over an [`RpcClient`]: a socket after its handshake, and processes
/// run as the next object runs them.
impl RpcClient {
    /// A socket of the SDK's next line to the daemon at `url`, activated.
    pub async fn next_activated(url: &str, token: Option<&str>) -> RpcClient {
        let next = RpcClient::connect(url, token).await;
        let metadata = next.call("utils", "getRuntimeMetadata", json!([])).await;
        let incarnation = metadata[2]["runtimeIncarnationID"].clone();
        settled(
            &next
                .call("utils", "activateControlSession", json!([incarnation]))
                .await,
        );
        next
    }

    /// `processes.start(argv)` and a stream of its logs, live: the subscription's export id.
    pub async fn start_and_follow(&self, argv: Value) -> i64 {
        let started = self.call("processes", "start", json!([argv, {}])).await;
        settled(&started);
        let id = started[2]["id"].clone();
        let logs = self
            .call("processes", "openLogs", json!([id, {"follow": true}]))
            .await;
        let export = logs[2][1].as_i64().expect("a subscription");
        settled(&self.call_on(export, "stream", json!([])).await);
        export
    }

    /// `processes.start(argv)`, then its logs followed to the terminal event, as the next
    /// object's `exec(…).exitCode` reads it; returns the events before it.
    pub async fn run_to_exit(&self, argv: Value) -> Vec<Value> {
        let export = self.start_and_follow(argv).await;
        let mut events = Vec::new();
        while let Some(event) = self.next_write().await {
            if event["type"] == "terminal" {
                break;
            }
            events.push(event);
        }
        self.release(export, 1);
        events
    }
}
