//! capnweb over a unix stream socket, each message a 4-byte big-endian length and UTF-8
//! JSON (docs/api.md, RPC: `extensions`): the daemon's side of an extension's sidecar. The
//! daemon is the client: the sidecar's main object is its import 0, and the daemon exports
//! no main object of its own there, only the objects it passes along (callbacks).

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use tokio::net::UnixStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::protocol::{self as capnweb, Message};
use super::session::{Dispatch, Session};

/// The largest message either side may send.
const MAX_MESSAGE: usize = 16 << 20;

/// Runs a capnweb session over `stream` and returns it; it ends when the peer closes the
/// socket or breaks the protocol, or when [`Session::close`] is called and the last
/// message is out.
pub fn connect(stream: UnixStream) -> Arc<Session> {
    let codec = LengthDelimitedCodec::builder()
        .big_endian()
        .length_field_length(4)
        .max_frame_length(MAX_MESSAGE)
        .new_codec();
    let (mut sink, mut frames) = Framed::new(stream, codec).split();
    let refuse: Dispatch = Arc::new(|_, _, _| {
        Box::pin(async {
            Err(capnweb::js_error(
                "Error",
                "This connection has no main object.",
            ))
        })
    });
    let (session, mut queued) = Session::new(refuse);
    let writer = tokio::spawn(async move {
        while let Some(message) = queued.recv().await {
            let abort = matches!(message, Message::Abort(_));
            let text = message.to_text();
            let frame = bytes::Bytes::from(text.into_bytes());
            if sink.send(frame).await.is_err() || abort {
                return;
            }
        }
    });
    let reading = Arc::clone(&session);
    tokio::spawn(async move {
        while let Some(Ok(frame)) = frames.next().await {
            let parsed = std::str::from_utf8(&frame)
                .map_err(|error| error.to_string())
                .and_then(|text| Message::parse(text).map_err(|error| error.to_string()));
            let received = match parsed {
                Ok(message) => reading.receive(message).await,
                Err(reason) => Err(reason),
            };
            if let Err(reason) = received {
                tracing::debug!(%reason, "extension link: protocol error");
                reading.abort(&reason).await;
                break;
            }
        }
        reading.close();
        writer.abort();
    });
    session
}
