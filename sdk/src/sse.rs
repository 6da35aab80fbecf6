//! A minimal SSE reader: `data:` lines joined per event, blank line ends an event, other
//! fields ignored. Enough for fsd's own streams, which use nothing else.

use bytes::{Buf, BytesMut};
use futures_util::{Stream, StreamExt, stream};
use serde::de::DeserializeOwned;

use crate::SdkError;

/// Decodes a response body of SSE frames into typed events.
pub fn events<T: DeserializeOwned + Send + 'static>(
    response: reqwest::Response,
) -> impl Stream<Item = Result<T, SdkError>> + Send + Unpin + 'static {
    let state = (response.bytes_stream().boxed(), BytesMut::new(), false);
    Box::pin(stream::unfold(
        state,
        |(mut body, mut buffer, mut done)| async move {
            loop {
                if let Some(event) = take_event(&mut buffer) {
                    let parsed =
                        serde_json::from_str::<T>(&event).map_err(|err| SdkError::Decode {
                            status: 200,
                            message: format!("bad SSE event {event:?}: {err}"),
                        });
                    return Some((parsed, (body, buffer, done)));
                }
                if done {
                    return None;
                }
                match body.next().await {
                    Some(Ok(chunk)) => buffer.extend_from_slice(&chunk),
                    Some(Err(err)) => {
                        return Some((Err(SdkError::Transport(err)), (body, buffer, true)));
                    }
                    None => {
                        done = true;
                        // A final event without its blank line still counts.
                        if !buffer.is_empty() {
                            buffer.extend_from_slice(b"\n\n");
                        }
                    }
                }
            }
        },
    ))
}

/// Removes one complete event from `buffer` and returns its data, skipping data-less frames.
/// Works on bytes, so a character split across network chunks is never cut.
fn take_event(buffer: &mut BytesMut) -> Option<String> {
    loop {
        let (end, separator) = find(buffer, b"\n\n")
            .map(|i| (i, 2))
            .or_else(|| find(buffer, b"\r\n\r\n").map(|i| (i, 4)))?;
        let frame = String::from_utf8_lossy(&buffer[..end]).into_owned();
        buffer.advance(end + separator);
        let data: Vec<&str> = frame
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|value| value.strip_prefix(' ').unwrap_or(value))
            .collect();
        if !data.is_empty() {
            return Some(data.join("\n"));
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_frames_and_joins_data_lines() {
        let mut buffer = BytesMut::from(
            &b"data: {\"a\":1}\n\n: comment\n\ndata:x\ndata: y\n\ndata: partial"[..],
        );
        assert_eq!(take_event(&mut buffer).as_deref(), Some("{\"a\":1}"));
        assert_eq!(take_event(&mut buffer).as_deref(), Some("x\ny"));
        assert_eq!(take_event(&mut buffer), None);
        assert_eq!(&buffer[..], b"data: partial");
        let mut split = BytesMut::from("data: \"é\"\n\n".as_bytes());
        split.extend_from_slice(&"data: \"€".as_bytes()[..8]);
        assert_eq!(take_event(&mut split).as_deref(), Some("\"é\""));
    }
}
