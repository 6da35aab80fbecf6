//! A live SSE response read a frame at a time, as a client that follows it does.

use std::time::Duration;

use bytes::BytesMut;
use futures_util::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::Daemon;

pub struct Sse {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: BytesMut,
}

impl Sse {
    /// POSTs `body` to `route` and checks the stream is answered (200).
    pub async fn open(daemon: &Daemon, route: &str, body: Value) -> Self {
        let response = daemon
            .request(Method::POST, route)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        Self {
            body: response.bytes_stream().boxed(),
            buffer: BytesMut::new(),
        }
    }

    /// The next frame's data; `None` at the end of the stream, or when none comes within
    /// `wait`.
    pub async fn next(&mut self, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let frame = self.buffer.split_to(end + 2);
                let text = std::str::from_utf8(&frame).unwrap().trim();
                return Some(serde_json::from_str(text.strip_prefix("data: ").unwrap()).unwrap());
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Ok(Some(Ok(chunk))) => self.buffer.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    }

    /// Frames until the stream ends or none come for `quiet`.
    pub async fn drain(&mut self, quiet: Duration) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(event) = self.next(quiet).await {
            out.push(event);
        }
        out
    }
}
