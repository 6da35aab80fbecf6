//! Native raw transfers: `GET /api/files/raw?path=` and `PUT /api/files/raw?path=`.
//!
//! No base64, no size cap, memory flat: downloads stream from disk with Range support (a
//! device or procfs file, whose size stat cannot tell, is sent chunked as reads give it);
//! uploads stream through a bounded channel to a writer thread that fills a temp file, fsyncs
//! and renames it over the target.

use std::os::fd::AsRawFd;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Uri, header};
use axum::response::{IntoResponse, Response};
use fsd_api::Operation;
use serde::Deserialize;
use tower::ServiceExt;
use tower_http::services::ServeFile;

use super::FileService;
use super::error::FileError;
use super::permissions::parsed_mode;
use super::service::Download;
use super::special::Patient;
use super::transfer::read_in_chunks;
use crate::error::{ApiError, OperationExt};
use crate::paths::PathError;

/// Chunk size for reading a file being downloaded.
const DOWNLOAD_CHUNK_BYTES: usize = 1024 * 1024;
/// Largest read for a file whose size is unknown (a device, a procfs file).
const UNSIZED_CHUNK_BYTES: usize = 64 * 1024;

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
    State(files): State<Arc<FileService>>,
    request: Request,
) -> Result<Response, ApiError> {
    let raw = path_param(request.uri())?;
    let download = files
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
fn stream_unsized(path: &std::path::Path, reader: Patient) -> Response {
    let mime = mime_guess::from_path(path).first_or_octet_stream();
    let body = Body::from_stream(read_in_chunks(reader, UNSIZED_CHUNK_BYTES));
    ([(header::CONTENT_TYPE, mime.to_string())], body).into_response()
}

pub async fn upload(
    State(files): State<Arc<FileService>>,
    request: Request,
) -> Result<Response, ApiError> {
    let raw = path_param(request.uri())?;
    let mode = parsed_mode(query(request.uri())?.mode.as_deref()).op(Operation::FileWrite)?;
    let body = request.into_body().into_data_stream();
    let written = super::ops::write_chunks(&files, raw, None, body, mode).await?;
    Ok(axum::Json(written).into_response())
}
