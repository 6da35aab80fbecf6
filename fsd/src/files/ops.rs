//! The domain's typed operations: a request in, a response or an [`ApiError`] out, no HTTP.
//! The routes and both `/rpc` lines are codecs over these; the byte-stream forms take and
//! give streams of chunks, which each transport frames its own way.

use base64_simd::STANDARD as BASE64;
use bytes::Bytes;
use fsd_api::Operation;
use fsd_api::files::{
    Encoding, ExistsResponse, ListFilesRequest, ListFilesResponse, MkdirRequest, MkdirResponse,
    MoveRequest, PathRequest, PathResponse, RawWriteResponse, ReadRequest, ReadResponse,
    RenameRequest, RenameResponse, WriteRequest, WriteResponse, mode_digits,
};
use futures_util::Stream;

use super::FileService;
use super::error::FileError;
use super::listing::ListOptions;
use super::permissions::{ModeSpec, parsed_mode};
use super::transfer::ReadChunks;
use crate::error::{ApiError, OperationExt};
use crate::time::now_rfc3339;

type Reply<T> = Result<T, ApiError>;

pub async fn read(files: &FileService, req: ReadRequest) -> Reply<ReadResponse> {
    let file = files
        .read(req.session_id.as_deref(), &req.path, req.encoding)
        .await
        .op(Operation::FileRead)?;
    Ok(ReadResponse {
        success: true,
        path: req.path,
        content: file.content,
        timestamp: now_rfc3339(),
        is_binary: file.encoding == Encoding::Base64,
        encoding: file.encoding,
        mime_type: file.mime_type,
        size: file.size,
    })
}

/// A write whose content is already in memory: base64 decoded in place, then written.
pub async fn write(files: &FileService, req: WriteRequest) -> Reply<WriteResponse> {
    let mode = parsed_mode(req.mode.as_deref()).op(Operation::FileWrite)?;
    let bytes = decoded(req.content.into_bytes(), req.encoding)?;
    write_bytes(files, req.path, req.session_id.as_deref(), bytes, mode).await
}

/// A write's content as bytes: base64 decoded in place when its encoding says so.
pub fn decoded(mut content: Vec<u8>, encoding: Option<Encoding>) -> Reply<Bytes> {
    if encoding == Some(Encoding::Base64) {
        let len = decode_base64_in_place(&mut content).op(Operation::FileWrite)?;
        content.truncate(len);
    }
    Ok(Bytes::from(content))
}

/// Writes `bytes` (decoded) to `path`, with `mode` when given.
pub async fn write_bytes(
    files: &FileService,
    path: String,
    session_id: Option<&str>,
    bytes: Bytes,
    mode: Option<ModeSpec>,
) -> Reply<WriteResponse> {
    let (bytes_written, mode) = files
        .write(session_id, &path, bytes, mode)
        .await
        .op(Operation::FileWrite)?;
    Ok(WriteResponse {
        success: true,
        path,
        bytes_written,
        mode: mode.map(mode_digits),
        timestamp: now_rfc3339(),
    })
}

/// The file at `path` (in `session_id`'s directory when relative) as a stream of its
/// bytes, uncapped: a raw download, or a read without encoding.
pub async fn read_chunks(
    files: &FileService,
    path: &str,
    session_id: Option<&str>,
) -> Reply<ReadChunks> {
    let path = files.paths().in_session(session_id, "path", path).await;
    files.read_chunks(&path).await.op(Operation::FileRead)
}

/// Replaces the file at `path` (in `session_id`'s directory when relative) with what
/// `chunks` carries, atomically, uncapped: a raw upload, or a write fed by a pipe. A
/// source that fails leaves the old file.
pub async fn write_chunks<S, E>(
    files: &FileService,
    path: String,
    session_id: Option<&str>,
    chunks: S,
    mode: Option<ModeSpec>,
) -> Reply<RawWriteResponse>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let path = files.paths().in_session(session_id, "path", &path).await;
    let (bytes_written, mode) = files
        .write_stream(&path, chunks, mode)
        .await
        .op(Operation::FileWrite)?;
    Ok(RawWriteResponse {
        success: true,
        path,
        bytes_written,
        mode: mode.map(mode_digits),
        timestamp: now_rfc3339(),
    })
}

pub async fn delete(files: &FileService, req: PathRequest) -> Reply<PathResponse> {
    files
        .delete(req.session_id.as_deref(), &req.path)
        .await
        .op(Operation::FileDelete)?;
    Ok(PathResponse {
        success: true,
        path: req.path,
        timestamp: now_rfc3339(),
    })
}

pub async fn rename(files: &FileService, req: RenameRequest) -> Reply<RenameResponse> {
    files
        .rename(
            req.session_id.as_deref(),
            ("oldPath", &req.old_path),
            ("newPath", &req.new_path),
        )
        .await
        .op(Operation::FileRename)?;
    Ok(RenameResponse {
        success: true,
        path: req.old_path,
        new_path: req.new_path,
        timestamp: now_rfc3339(),
    })
}

pub async fn move_file(files: &FileService, req: MoveRequest) -> Reply<RenameResponse> {
    files
        .rename(
            req.session_id.as_deref(),
            ("sourcePath", &req.source_path),
            ("destinationPath", &req.destination_path),
        )
        .await
        .op(Operation::FileMove)?;
    Ok(RenameResponse {
        success: true,
        path: req.source_path,
        new_path: req.destination_path,
        timestamp: now_rfc3339(),
    })
}

pub async fn mkdir(files: &FileService, req: MkdirRequest) -> Reply<MkdirResponse> {
    let recursive = req.recursive.unwrap_or(false);
    let mode = parsed_mode(req.mode.as_deref()).op(Operation::DirectoryCreate)?;
    let mode = files
        .mkdir(req.session_id.as_deref(), &req.path, recursive, mode)
        .await
        .op(Operation::DirectoryCreate)?;
    Ok(MkdirResponse {
        success: true,
        path: req.path,
        recursive,
        mode: mode.map(mode_digits),
        timestamp: now_rfc3339(),
    })
}

pub async fn list(files: &FileService, req: ListFilesRequest) -> Reply<ListFilesResponse> {
    let options = req.options.unwrap_or_default();
    let options = ListOptions {
        recursive: options.recursive.unwrap_or(false),
        include_hidden: options.include_hidden.unwrap_or(false),
    };
    let files = files
        .list(req.session_id.as_deref(), &req.path, options)
        .await
        .op(Operation::DirectoryList)?;
    Ok(ListFilesResponse {
        success: true,
        path: req.path,
        count: files.len(),
        files,
        timestamp: now_rfc3339(),
    })
}

pub async fn exists(files: &FileService, req: PathRequest) -> Reply<ExistsResponse> {
    let exists = files
        .exists(req.session_id.as_deref(), &req.path)
        .await
        .op(Operation::FileStat)?;
    Ok(ExistsResponse {
        success: true,
        path: req.path,
        exists,
        timestamp: now_rfc3339(),
    })
}

/// Decodes standard padded base64 in place and returns the decoded length; whitespace
/// (line-wrapped base64) is ignored. Content is checked before it is overwritten, so only
/// content with whitespace or garbage pays for a second pass.
pub fn decode_base64_in_place(data: &mut [u8]) -> Result<usize, FileError> {
    let len = if BASE64.check(data).is_ok() {
        data.len()
    } else {
        let mut kept = 0;
        for index in 0..data.len() {
            if !data[index].is_ascii_whitespace() {
                data[kept] = data[index];
                kept += 1;
            }
        }
        BASE64
            .check(&data[..kept])
            .map_err(|_| FileError::InvalidBase64)?;
        kept
    };
    BASE64
        .decode_inplace(&mut data[..len])
        .map(|decoded| decoded.len())
        .map_err(|_| FileError::InvalidBase64)
}
