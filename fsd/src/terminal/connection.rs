//! One WebSocket connection to a terminal: the replay, then `ready`, then keystrokes in
//! (binary frames) and output out (binary frames, untouched), `resize` control messages,
//! and `exit` when the shell ends.

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use super::frames::{Control, close, text};
use super::pty::Size;
use super::service::{Exit, Terminal};

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
/// too far behind the output (it reconnects and gets the replay).
pub async fn serve(mut socket: WebSocket, terminal: Arc<Terminal>) {
    let (replay, mut output) = terminal.join();
    if !replay.is_empty() && socket.send(Message::Binary(replay.into())).await.is_err() {
        return;
    }
    if socket.send(text(json!({"type": "ready"}))).await.is_err() {
        return;
    }
    let mut exit = terminal.exit();
    loop {
        tokio::select! {
            frame = socket.recv() => match frame {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(Message::Binary(bytes))) => {
                    if !terminal.write(bytes).await {
                        // The shell is gone; its exit is on its way.
                        continue;
                    }
                }
                Some(Ok(Message::Text(control))) => {
                    if let Some(reply) = control_message(&terminal, control.as_str())
                        && socket.send(reply).await.is_err()
                    {
                        return;
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            },
            chunk = output.recv() => match chunk {
                Ok(chunk) => {
                    if socket.send(Message::Binary(chunk)).await.is_err() {
                        return;
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    close(&mut socket, CLOSE_ERROR, "Send failed: the client fell behind").await;
                    return;
                }
                Err(RecvError::Closed) => {}
            },
            // Copied out at once: the watch's guard must not live across an await.
            ended = async { exit.wait_for(Option::is_some).await.map(|guard| *guard) } => {
                let Ok(ended) = ended else { return };
                // What the shell printed last comes before its exit.
                while let Ok(chunk) = output.try_recv() {
                    let _ = socket.send(Message::Binary(chunk)).await;
                }
                if let Some(Exit { code, signal }) = ended {
                    let mut message = json!({"type": "exit", "code": code});
                    if let Some(signal) = signal.and_then(signal_name) {
                        message["signal"] = json!(signal);
                    }
                    let _ = socket.send(text(message)).await;
                }
                close(&mut socket, CLOSE_NORMAL, "shell exited").await;
                return;
            }
        }
    }
}

/// A control message from the client; returns the reply to send, if any.
fn control_message(terminal: &Terminal, control: &str) -> Option<Message> {
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
    match terminal.resize(Size { cols, rows }) {
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
