//! One WebSocket connection to a terminal: the replay, then `ready`, then keystrokes in
//! (binary frames) and output out (binary frames, untouched), `resize` control messages,
//! and `exit` when the shell ends.

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use fsd_process::seqlog::{Entry, Kind, Until, follow};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::frames::{Control, close, text};
use super::table::{Terminal, TerminalTable};

/// Close codes: normal (the shell exited) and internal error (as the reference).
const CLOSE_NORMAL: u16 = 1000;
const CLOSE_ERROR: u16 = 1011;

/// Sends an error message, then closes with 1011 and the message as reason (a terminal
/// that could not start).
pub async fn refuse(mut socket: WebSocket, message: String) {
    let text = json!({"type": "error", "message": message}).to_string();
    let _ = socket.send(Message::Text(text.into())).await;
    close(&mut socket, CLOSE_ERROR, &message).await;
}

/// Serves one connection until the client leaves, the shell exits, or the client falls
/// further behind the output than the terminal keeps (it reconnects and gets the replay).
pub async fn serve(mut socket: WebSocket, table: Arc<TerminalTable>, terminal: Arc<Terminal>) {
    let id = terminal.snapshot().id;
    let log = Arc::clone(terminal.log());
    // What the terminal keeps, as one frame (older output dropped is not missed here).
    let kept = log.end();
    let mut replay = Vec::new();
    let mut entries = std::pin::pin!(follow(Arc::clone(&log), 1, Until::Seq(kept)));
    while let Some(entry) = entries.next().await {
        if let Entry::Record(record) = entry
            && record.kind != Kind::Terminal
        {
            replay.extend_from_slice(&record.data);
        }
    }
    if !replay.is_empty() && socket.send(Message::Binary(replay.into())).await.is_err() {
        return;
    }
    if socket.send(text(json!({"type": "ready"}))).await.is_err() {
        return;
    }
    let mut output = std::pin::pin!(follow(Arc::clone(&log), kept + 1, Until::Terminal));
    loop {
        tokio::select! {
            frame = socket.recv() => match frame {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                // Refused once the shell is gone; its exit is on its way.
                Some(Ok(Message::Binary(bytes))) => drop(table.write(&id, bytes).await),
                Some(Ok(Message::Text(control))) => {
                    if let Some(reply) = control_message(&table, &id, control.as_str())
                        && socket.send(reply).await.is_err()
                    {
                        return;
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            },
            entry = output.next() => match entry {
                None => {
                    close(&mut socket, CLOSE_NORMAL, "shell exited").await;
                    return;
                }
                Some(Entry::Truncated) => {
                    close(&mut socket, CLOSE_ERROR, "Send failed: the client fell behind").await;
                    return;
                }
                Some(Entry::Record(record)) if record.kind == Kind::Terminal => {
                    let end: Value = serde_json::from_slice(&record.data).unwrap_or_default();
                    let mut message = json!({"type": "exit", "code": end["exit"]["code"]});
                    if let Some(signal) = end["exit"]["signal"]
                        .as_i64()
                        .and_then(|number| i32::try_from(number).ok())
                        .and_then(signal_name)
                    {
                        message["signal"] = json!(signal);
                    }
                    let _ = socket.send(text(message)).await;
                    close(&mut socket, CLOSE_NORMAL, "shell exited").await;
                    return;
                }
                Some(Entry::Record(record)) => {
                    if socket.send(Message::Binary(record.data.into())).await.is_err() {
                        return;
                    }
                }
            },
        }
    }
}

/// A control message from the client; returns the reply to send, if any.
fn control_message(table: &TerminalTable, id: &str, control: &str) -> Option<Message> {
    let error = |message: &str| Some(text(json!({"type": "error", "message": message})));
    let Ok(control) = serde_json::from_str::<Control>(control) else {
        return error("Invalid control message");
    };
    if control.kind != "resize" {
        tracing::debug!(kind = %control.kind, "unknown terminal control message");
        return None;
    }
    let (Some(cols), Some(rows)) = (control.cols, control.rows) else {
        return error("Invalid control message");
    };
    let (Ok(cols), Ok(rows)) = (u16::try_from(cols), u16::try_from(rows)) else {
        return error("Invalid dimensions: cols and rows must be positive");
    };
    if cols == 0 || rows == 0 {
        return error("Invalid dimensions: cols and rows must be positive");
    }
    match table.resize(id, cols, rows) {
        Ok(()) => None,
        Err(_) => error("Invalid control message"),
    }
}

/// The name of signal `number` (`SIGKILL`), as the reference's exit message carries it.
fn signal_name(number: i32) -> Option<&'static str> {
    nix::sys::signal::Signal::try_from(number)
        .ok()
        .map(|signal| signal.as_str())
}
