//! SSE responses framed as the reference frames them: `data: <json>\n\n`, no `event:` lines.

use std::convert::Infallible;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};
use serde::Serialize;

/// Turns a stream of events into an SSE response; the body ends when the stream ends.
pub fn sse_response<T, S>(events: S) -> Response
where
    T: Serialize + Send + 'static,
    S: Stream<Item = T> + Send + 'static,
{
    let frames = events.map(|event| {
        let json = serde_json::to_string(&event)
            .unwrap_or_else(|err| format!(r#"{{"type":"error","error":"{err}"}}"#));
        Ok::<_, Infallible>(Event::default().data(json))
    });
    Sse::new(frames).into_response()
}

/// One event as an SSE frame's bytes (`data: <json>\n\n`, after an `event:` line when
/// `kind` is given), for the transports that carry a route's SSE body inside their own
/// frames (capnweb pipes).
pub fn sse_frame<T: Serialize + ?Sized>(kind: Option<&str>, event: &T) -> bytes::Bytes {
    let json = serde_json::to_string(event).unwrap_or_default();
    bytes::Bytes::from(match kind {
        Some(kind) => format!("event: {kind}\ndata: {json}\n\n"),
        None => format!("data: {json}\n\n"),
    })
}
