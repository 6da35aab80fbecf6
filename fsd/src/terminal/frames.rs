//! What both terminal sockets (`/ws/pty` and `/ws/terminal`) exchange besides output: the
//! client's control messages, JSON replies as text frames, and a close with its code and
//! reason.

use axum::extract::ws::{CloseFrame, Message, WebSocket};

/// A control message from the client (`{"type": "resize", "cols", "rows"}` and the like).
#[derive(serde::Deserialize)]
pub(super) struct Control {
    #[serde(rename = "type")]
    pub kind: String,
    pub cols: Option<i64>,
    pub rows: Option<i64>,
}

/// A control message as a text frame.
pub(super) fn text(value: serde_json::Value) -> Message {
    Message::Text(value.to_string().into())
}

/// Closes with `code`; the reason is cut to 120 characters (a close frame's payload holds
/// 123 bytes).
pub(super) async fn close(socket: &mut WebSocket, code: u16, reason: &str) {
    let reason: String = reason.chars().take(120).collect();
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = socket.send(Message::Close(Some(frame))).await;
}
