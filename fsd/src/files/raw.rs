//! Native raw transfers: `GET /api/files/raw?path=` and `PUT /api/files/raw?path=`.
//!
//! No base64, no size cap, memory flat: downloads stream from disk with Range support (a
//! device or procfs file, whose size stat cannot tell, is sent chunked as reads give it);
//! uploads stream through a bounded channel to a writer thread that fills a temp file, fsyncs
//! and renames it over the target.

use std::os::fd::AsRawFd;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use fsd_api::Operation;
use fsd_api::files::{RawWriteResponse, mode_digits};
use futures_util::StreamExt;
use serde::Deserialize;
use tokio::sync::mpsc;
use tower::ServiceExt;
use tower_http::services::ServeFile;

use super::error::FileError;
use super::permissions::parsed_mode;
use super::service::{Download, blocking};
use super::special::Patient;
use super::stream::receiver_stream;
use crate::error::{ApiError, OperationExt};
use crate::paths::PathError;
use crate::state::AppState;
use crate::wire::time::now_rfc3339;

/// Chunk size for reading a file being downloaded.
const DOWNLOAD_CHUNK_BYTES: usize = 1024 * 1024;
/// Largest read for a file whose size is unknown (a device, a procfs file).
const UNSIZED_CHUNK_BYTES: usize = 64 * 1024;
/// Body chunks buffered between the socket and the writer thread.
const UPLOAD_QUEUE_CHUNKS: usize = 64;
/// Bytes gathered before one write(2).
const UPLOAD_WRITE_BYTES: usize = 1024 * 1024;
/// Body bytes still read and discarded after the write failed.
const DRAIN_AFTER_FAILURE_BYTES: usize = 16 * 1024 * 1024;

#[derive(Deserialize)]
struct RawQuery {
    path: Option<String>,
    /// An upload's mode (fsd's own), as `POST /api/write` takes it.
    mode: Option<String>,
}

fn query(uri: &Uri) -> Result<RawQuery, ApiError> {
    let query = axum::extract::Query::<RawQuery>::try_from_uri(uri)
        .map_err(|err| FileError::InvalidQuery(err.body_text()))?;
    Ok(query.0)
}

fn path_param(uri: &Uri) -> Result<String, ApiError> {
    Ok(query(uri)?.path.ok_or_else(|| PathError::Invalid {
        field: "path",
        reason: "the `path` query parameter is required".into(),
    })?)
}

pub async fn download(
    State(state): State<AppState>,
    request: Request,
) -> Result<Response, ApiError> {
    let raw = path_param(request.uri())?;
    let download = state
        .files
        .open_for_download(&raw)
        .await
        .op(Operation::FileRead)?;
    match download {
        Download::Sized { file, path } => {
            // Served through the descriptor already checked to be a regular file, so a
            // path swapped for a FIFO meanwhile cannot make the open block.
            let mime = mime_guess::from_path(&path).first_or_octet_stream();
            let by_fd = format!("/proc/self/fd/{}", file.as_raw_fd());
            let response = ServeFile::new_with_mime(by_fd, &mime)
                .with_buf_chunk_size(DOWNLOAD_CHUNK_BYTES)
                .oneshot(request)
                .await
                .unwrap_or_else(|never| match never {});
            drop(file);
            Ok(response.map(Body::new).into_response())
        }
        Download::Stream(reader) => Ok(stream_unsized(std::path::Path::new(&raw), reader)),
    }
}

/// A file whose size stat cannot tell, sent chunked as reads give it. A read that fails or
/// stalls after the headers are sent ends the body early, which the client sees as a cut
/// chunked body, not as a complete file.
fn stream_unsized(path: &std::path::Path, mut reader: Patient) -> Response {
    let mime = mime_guess::from_path(path).first_or_octet_stream();
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::task::spawn_blocking(move || {
        let mut buf = vec![0; UNSIZED_CHUNK_BYTES];
        loop {
            let item = match std::io::Read::read(&mut reader, &mut buf) {
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
    let body = Body::from_stream(receiver_stream(receiver));
    ([(header::CONTENT_TYPE, mime.to_string())], body).into_response()
}

pub async fn upload(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    let raw = path_param(request.uri())?;
    let mode = parsed_mode(query(request.uri())?.mode.as_deref()).op(Operation::FileWrite)?;
    let mut destination = state
        .files
        .open_destination(&raw)
        .await
        .op(Operation::FileWrite)?;
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
                destination.write_all(&chunk).map_err(io_error)?;
                continue;
            }
            pending.extend_from_slice(&chunk);
            if pending.len() >= UPLOAD_WRITE_BYTES {
                destination.write_all(&pending).map_err(io_error)?;
                pending.clear();
            }
        }
        destination.write_all(&pending).map_err(io_error)?;
        Ok((destination, written))
    });
    let mut body = request.into_body().into_data_stream();
    let mut body_error = None;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) => {
                if sender.send(chunk).await.is_err() {
                    // The writer failed; its error is reported below. Read on a little so a
                    // client still sending gets that error rather than a reset connection.
                    drain(&mut body, DRAIN_AFTER_FAILURE_BYTES).await;
                    break;
                }
            }
            Err(err) => {
                body_error = Some(err);
                break;
            }
        }
    }
    drop(sender);
    let (destination, written) = writer.await.op(Operation::FileWrite)?;
    if let Some(err) = body_error {
        // The upload was cut off: the temp file is dropped, the old file stays.
        return Err(ApiError::from(FileError::IncompleteBody {
            written,
            reason: err.to_string(),
        })
        .with_operation(Operation::FileWrite));
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
    .await
    .op(Operation::FileWrite)?;
    Ok(axum::Json(RawWriteResponse {
        success: true,
        path: raw,
        bytes_written: written,
        mode: mode.map(mode_digits),
        timestamp: now_rfc3339(),
    })
    .into_response())
}

/// Reads and discards up to `limit` more body bytes.
async fn drain<S>(body: &mut S, limit: usize)
where
    S: futures_util::Stream<Item = Result<Bytes, axum::Error>> + Unpin,
{
    let mut drained = 0;
    while drained < limit {
        match body.next().await {
            Some(Ok(chunk)) => drained += chunk.len(),
            _ => return,
        }
    }
}
