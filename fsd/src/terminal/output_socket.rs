//! `GET /ws/terminal` (the SDK next line's, docs/api.md, RPC: `terminals`): a WebSocket on one
//! terminal of `table`, by id. Output goes out as a `chunk` text frame (cursor and length)
//! followed by one binary frame of those bytes, from the terminal's log (from after the
//! asked cursor, or everything kept), live until the terminal ends with `exit` and close
//! 1000; input comes in as binary frames, and text frames carry `resize`, `interrupt` and
//! `terminate`. Any number of sockets per terminal; closing one only ends its reading.

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use bytes::Bytes;
use fsd_process::seqlog::{Entry, Kind, Until, follow};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::frames::{Control, close, text};
use super::table::{Terminal, TerminalTable};

const CLOSE_NORMAL: u16 = 1000;
const CLOSE_POLICY: u16 = 1008;
const CLOSE_ERROR: u16 = 1011;

/// What the query asked for once the socket is open.
pub struct Opening {
    pub terminal_id: String,
    pub cursor: Option<String>,
    pub size: Option<(u16, u16)>,
}

/// Serves one socket until the terminal ends or the client leaves.
pub async fn serve(mut socket: WebSocket, table: Arc<TerminalTable>, opening: Opening) {
    let Some(terminal) = table.get(&opening.terminal_id) else {
        let _ = socket
            .send(text(
                json!({"type": "error", "message": "Terminal not found"}),
            ))
            .await;
        close(&mut socket, CLOSE_POLICY, "Terminal not found").await;
        return;
    };
    if let Some((cols, rows)) = opening.size {
        let _ = table.resize(&opening.terminal_id, cols, rows);
    }
    let log = Arc::clone(terminal.log());
    let after = match opening
        .cursor
        .as_deref()
        .map(|cursor| log.parse_cursor(cursor))
    {
        None => 0,
        Some(Ok(seq)) => seq,
        Some(Err(error)) => {
            let message = error.to_string();
            let _ = socket
                .send(text(json!({"type": "error", "message": message})))
                .await;
            close(&mut socket, CLOSE_POLICY, &message).await;
            return;
        }
    };
    let until = if terminal.running() {
        Until::Terminal
    } else {
        Until::Seq(log.end())
    };
    let mut events = std::pin::pin!(follow(Arc::clone(&log), after + 1, until));
    let mut ready = json!({"type": "ready"});
    if let Some(cursor) = &opening.cursor {
        ready["cursor"] = json!(cursor);
    }
    if socket.send(text(ready)).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            frame = socket.recv() => match frame {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(Message::Binary(bytes))) => {
                    let _ = table.write(&opening.terminal_id, bytes).await;
                }
                Some(Ok(Message::Text(control))) => {
                    if let Some(reply) = control_message(&table, &terminal, &opening.terminal_id, control.as_str()).await
                        && socket.send(reply).await.is_err()
                    {
                        return;
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            },
            entry = events.next() => {
                let Some(entry) = entry else {
                    close(&mut socket, CLOSE_NORMAL, "Terminal output complete").await;
                    return;
                };
                match entry {
                    Entry::Truncated => {
                        if socket.send(text(json!({"type": "truncated"}))).await.is_err() {
                            return;
                        }
                    }
                    Entry::Record(record) if record.kind == Kind::Terminal => {
                        let end: Value = serde_json::from_slice(&record.data).unwrap_or_default();
                        let cursor = log.cursor(record.seq);
                        let ok = end["state"] == "exited";
                        let message = if ok {
                            json!({"type": "exit", "cursor": cursor, "exit": end["exit"]})
                        } else {
                            json!({"type": "error", "cursor": cursor, "code": end["error"]["code"], "message": end["error"]["message"]})
                        };
                        let _ = socket.send(text(message)).await;
                        if ok {
                            close(&mut socket, CLOSE_NORMAL, "Terminal exited").await;
                        } else {
                            close(&mut socket, CLOSE_ERROR, "Terminal error").await;
                        }
                        return;
                    }
                    Entry::Record(record) => {
                        let header = json!({
                            "type": "chunk",
                            "cursor": log.cursor(record.seq),
                            "byteLength": record.data.len(),
                        });
                        if socket.send(text(header)).await.is_err()
                            || socket.send(Message::Binary(Bytes::from(record.data))).await.is_err()
                        {
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// A control message from the client: the reply to send, if any.
async fn control_message(
    table: &TerminalTable,
    terminal: &Terminal,
    id: &str,
    control: &str,
) -> Option<Message> {
    let invalid = || {
        Some(text(
            json!({"type": "error", "message": "Invalid control message"}),
        ))
    };
    let Ok(control) = serde_json::from_str::<Control>(control) else {
        return invalid();
    };
    let done = match control.kind.as_str() {
        "resize" => {
            let size = control
                .cols
                .zip(control.rows)
                .and_then(|(cols, rows)| {
                    Some((u16::try_from(cols).ok()?, u16::try_from(rows).ok()?))
                })
                .filter(|(cols, rows)| *cols > 0 && *rows > 0);
            let Some((cols, rows)) = size else {
                return invalid();
            };
            table.resize(id, cols, rows)
        }
        "interrupt" => table.interrupt(id),
        "terminate" => table.terminate(id).await,
        _ => return invalid(),
    };
    match done {
        Ok(()) => None,
        Err(error) if terminal.running() => {
            Some(text(json!({"type": "error", "message": error.to_string()})))
        }
        Err(_) => None,
    }
}
