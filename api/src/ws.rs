//! The WebSocket transport (`/ws`, `/api/ws`): the route API multiplexed over one socket.
//! Every frame is one JSON message. A client sends `request`s (a route call) and `cancel`s
//! (of one of its streams); the server answers each request with one `response`, after
//! one `stream` message per SSE event when the route streams, or an `error` when the
//! request could not be made.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest message either side sends, as the reference's server accepts.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// A message from the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ClientMessage {
    Request(Request),
    Cancel { id: String },
}

/// One route call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Chosen by the client; names every message about this request.
    pub id: String,
    /// `GET`, `POST`, `PUT` or `DELETE` (any case).
    pub method: String,
    /// The route's path with its query, starting with `/`.
    pub path: String,
    /// The JSON body (a value, not a string); sent for `POST` and `PUT` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// Request headers (session, auth), as over HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
}

/// A message from the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ServerMessage {
    /// The route's answer: its status and JSON body (omitted when the body is empty or
    /// not JSON). For a stream, the last message, without a body.
    Response {
        id: String,
        status: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<Value>,
        /// Always true.
        done: bool,
    },
    /// One event of a streaming route: its SSE `data` (JSON text, not parsed).
    Stream {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event: Option<String>,
        data: String,
    },
    /// The request could not be made, or the frame was not a request.
    Error {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        code: String,
        message: String,
        status: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<Value>,
    },
}

/// Codes of adapter errors (route errors arrive as `response`s with the route's envelope).
pub mod codes {
    /// The frame is not JSON.
    pub const PARSE_ERROR: &str = "PARSE_ERROR";
    /// JSON that is not a valid request or cancel (the message names the field).
    pub const INVALID_REQUEST: &str = "INVALID_REQUEST";
    /// A streaming route's body failed while it was carried.
    pub const STREAM_ERROR: &str = "STREAM_ERROR";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_and_write_as_the_reference_sends_them() {
        let request: ClientMessage = serde_json::from_str(
            r#"{"type":"request","id":"ws_1_a","method":"POST","path":"/api/execute","body":{"command":"true"},"headers":{"x-session-id":"s"}}"#,
        )
        .unwrap();
        let ClientMessage::Request(request) = request else {
            panic!("not a request")
        };
        assert_eq!(request.path, "/api/execute");
        assert_eq!(request.body, Some(serde_json::json!({"command": "true"})));
        let cancel: ClientMessage = serde_json::from_str(r#"{"type":"cancel","id":"x"}"#).unwrap();
        assert_eq!(cancel, ClientMessage::Cancel { id: "x".into() });
        let done = ServerMessage::Response {
            id: "x".into(),
            status: 200,
            body: None,
            done: true,
        };
        assert_eq!(
            serde_json::to_string(&done).unwrap(),
            r#"{"type":"response","id":"x","status":200,"done":true}"#
        );
        let event = ServerMessage::Stream {
            id: "x".into(),
            event: None,
            data: "{}".into(),
        };
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"type":"stream","id":"x","data":"{}"}"#
        );
    }
}
