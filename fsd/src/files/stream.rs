//! `/api/read/stream`: a file as SSE events (`metadata`, `chunk`*, `complete` or `error`).
//!
//! Each chunk covers 65,535 raw bytes; a file whose size stat cannot tell (a device, a
//! procfs file) is streamed like `cat` reads it, a chunk per read, until it ends or the
//! client goes away. Binary chunks are base64 on their own; text chunks are
//! decoded as UTF-8 with a character split across two reads carried into the next chunk.

use std::io::Read;
use std::sync::Arc;

use base64_simd::STANDARD as BASE64;
use fsd_api::READ_STREAM_CHUNK_BYTES;
use fsd_api::files::{Encoding, FileStreamEvent};
use futures_util::{Stream, StreamExt, stream};
use tokio::sync::mpsc;

use super::service::{OpenedFile, read_full};
use super::special::{Patience, Patient};
use crate::channel::receiver_stream;
use fsd_process::text::Utf8Chunker;

/// Events for an opened file. Reading happens on a blocking thread, a few chunks ahead.
pub fn events(opened: OpenedFile) -> impl Stream<Item = FileStreamEvent> + Send + 'static {
    let metadata = FileStreamEvent::Metadata {
        mime_type: opened.mime_type,
        size: opened.size,
        is_binary: opened.binary,
        encoding: if opened.binary {
            Encoding::Base64
        } else {
            Encoding::Utf8
        },
    };
    let (sender, receiver) = mpsc::channel(4);
    let (file, binary, size_known) = (opened.file, opened.binary, opened.size_known);
    let mut head = opened.head;
    // A device or procfs file is read like `cat` does, for as long as the client listens.
    let listening = sender.clone();
    let mut file = Patient::new(
        file,
        Patience::WhileWanted(Arc::new(move || !listening.is_closed())),
    );
    tokio::task::spawn_blocking(move || {
        let mut buf = vec![0; READ_STREAM_CHUNK_BYTES];
        let mut text = Utf8Chunker::default();
        let mut bytes_read = 0u64;
        loop {
            // The sniffed head starts the first chunk. A file of known size fills whole
            // chunks; one of unknown size sends what each read gives.
            let start = head.len().min(buf.len());
            buf[..start].copy_from_slice(&head[..start]);
            head.clear();
            let read = if size_known {
                read_full(&mut file, &mut buf[start..])
            } else if start > 0 {
                Ok(0)
            } else {
                file.read(&mut buf)
            };
            let event = match read.map(|n| n + start) {
                Err(err) => FileStreamEvent::Error {
                    error: format!("read failed after {bytes_read} bytes: {err}"),
                },
                Ok(0) => {
                    let data = text.finish();
                    if !data.is_empty()
                        && sender
                            .blocking_send(FileStreamEvent::Chunk { data })
                            .is_err()
                    {
                        return;
                    }
                    FileStreamEvent::Complete { bytes_read }
                }
                Ok(n) => {
                    bytes_read += n as u64;
                    let data = if binary {
                        BASE64.encode_to_string(&buf[..n])
                    } else {
                        text.push(&buf[..n])
                    };
                    FileStreamEvent::Chunk { data }
                }
            };
            let last = !matches!(event, FileStreamEvent::Chunk { .. });
            // A closed receiver means the client went away: stop reading.
            if sender.blocking_send(event).is_err() || last {
                return;
            }
        }
    });
    stream::once(async { metadata }).chain(receiver_stream(receiver))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn text_split_inside_a_character_streams_intact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.txt");
        // A 3-byte character straddles the first chunk boundary.
        let text = format!("{}€tail", "a".repeat(READ_STREAM_CHUNK_BYTES - 1));
        std::fs::write(&path, &text).unwrap();
        let mut file = std::fs::File::open(&path).unwrap();
        let mut head = vec![0; 10];
        std::io::Read::read_exact(&mut file, &mut head).unwrap();
        let opened = OpenedFile {
            file,
            head,
            mime_type: "text/plain".into(),
            size: text.len() as u64,
            size_known: true,
            binary: false,
        };
        let events: Vec<_> = events(opened).collect().await;
        let mut joined = String::new();
        for event in &events[1..events.len() - 1] {
            match event {
                FileStreamEvent::Chunk { data } => joined.push_str(data),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(joined, text);
        assert_eq!(
            events.last(),
            Some(&FileStreamEvent::Complete {
                bytes_read: text.len() as u64
            })
        );
    }
}
