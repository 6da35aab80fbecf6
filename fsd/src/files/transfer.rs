//! Streamed transfers as typed calls on the file service, for every transport: a write
//! fed by any stream of chunks (the raw upload's body, a capnweb pipe), atomically replacing
//! its target, and a read as a stream of chunks with the size and type a client is told.

use std::io::Read;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;

use super::error::FileError;
use super::permissions::ModeSpec;
use super::service::{Download, FileService, blocking};
use crate::channel::receiver_stream;

/// Chunks buffered between the source and the writer thread.
const UPLOAD_QUEUE_CHUNKS: usize = 64;
/// Bytes gathered before one write(2).
const UPLOAD_WRITE_BYTES: usize = 1024 * 1024;
/// Bytes still read and discarded after the write failed, so a sender still sending gets
/// the error rather than a reset connection.
const DRAIN_AFTER_FAILURE_BYTES: usize = 16 * 1024 * 1024;
/// Largest read of a streamed read.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// A file read as chunks.
pub struct ReadChunks {
    pub chunks: std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>> + Send>>,
    /// `None` for a device or procfs file, whose size stat cannot tell.
    pub size: Option<u64>,
    /// From the name, as the reference's `Bun.file().type`.
    pub mime_type: String,
}

impl FileService {
    /// Replaces the file at `raw` with what `chunks` carries, atomically: a temp file filled
    /// by a writer thread through a bounded channel, committed with `mode` once the source
    /// ends, dropped (the old file kept) if the source fails. Answers the bytes written and
    /// the mode set.
    pub async fn write_stream<S, E>(
        &self,
        raw: &str,
        mut chunks: S,
        mode: Option<ModeSpec>,
    ) -> Result<(u64, Option<u32>), FileError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let mut destination = self.open_destination(raw).await?;
        let raw = raw.to_string();
        let (sender, mut receiver) = mpsc::channel::<Bytes>(UPLOAD_QUEUE_CHUNKS);
        let target = raw.clone();
        let writer = blocking(move || {
            let io_error = |err| FileError::Io {
                op: "write",
                path: target.clone(),
                source: err,
            };
            let mut pending: Vec<u8> = Vec::with_capacity(UPLOAD_WRITE_BYTES);
            let mut written = 0u64;
            while let Some(chunk) = receiver.blocking_recv() {
                written += chunk.len() as u64;
                if pending.is_empty() && chunk.len() >= UPLOAD_WRITE_BYTES {
                    std::io::Write::write_all(&mut destination, &chunk).map_err(io_error)?;
                    continue;
                }
                pending.extend_from_slice(&chunk);
                if pending.len() >= UPLOAD_WRITE_BYTES {
                    std::io::Write::write_all(&mut destination, &pending).map_err(io_error)?;
                    pending.clear();
                }
            }
            std::io::Write::write_all(&mut destination, &pending).map_err(io_error)?;
            Ok((destination, written))
        });
        let mut source_error = None;
        while let Some(chunk) = chunks.next().await {
            match chunk {
                Ok(chunk) => {
                    if sender.send(chunk).await.is_err() {
                        // The writer failed; its error is reported below.
                        drain(&mut chunks, DRAIN_AFTER_FAILURE_BYTES).await;
                        break;
                    }
                }
                Err(err) => {
                    source_error = Some(err.to_string());
                    break;
                }
            }
        }
        drop(sender);
        let (destination, written) = writer.await?;
        if let Some(reason) = source_error {
            // Cut off: the temp file is dropped, the old file stays.
            return Err(FileError::IncompleteBody { written, reason });
        }
        let committed = raw.clone();
        let mode = blocking(move || {
            destination
                .commit_with_mode(mode)
                .map_err(|source| FileError::Io {
                    op: "commit",
                    path: committed,
                    source,
                })
        })
        .await?;
        Ok((written, mode))
    }

    /// The file at `raw` as a stream of chunks read off the runtime's workers.
    pub async fn read_chunks(&self, raw: &str) -> Result<ReadChunks, FileError> {
        let download = self.open_for_download(raw).await?;
        let mime_type = mime_guess::from_path(raw)
            .first_or_octet_stream()
            .to_string();
        Ok(match download {
            Download::Sized { file, .. } => ReadChunks {
                size: file.metadata().ok().map(|meta| meta.len()),
                chunks: Box::pin(read_in_chunks(file, READ_CHUNK_BYTES)),
                mime_type,
            },
            Download::Stream(reader) => ReadChunks {
                size: None,
                chunks: Box::pin(read_in_chunks(reader, READ_CHUNK_BYTES)),
                mime_type,
            },
        })
    }
}

/// What `reader` gives, read on a blocking thread in chunks of at most `chunk` bytes; a
/// failed read ends the stream with its error.
pub fn read_in_chunks(
    mut reader: impl Read + Send + 'static,
    chunk: usize,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::task::spawn_blocking(move || {
        let mut buf = vec![0; chunk];
        loop {
            let item = match reader.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => Ok(Bytes::copy_from_slice(&buf[..n])),
                Err(err) => Err(err),
            };
            let failed = item.is_err();
            if sender.blocking_send(item).is_err() || failed {
                return;
            }
        }
    });
    receiver_stream(receiver)
}

/// Reads and discards up to `limit` more bytes of `chunks`.
async fn drain<S, E>(chunks: &mut S, limit: usize)
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    let mut drained = 0;
    while drained < limit {
        match chunks.next().await {
            Some(Ok(chunk)) => drained += chunk.len(),
            _ => return,
        }
    }
}
