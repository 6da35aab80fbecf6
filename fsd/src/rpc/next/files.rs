//! The next line's `files` (docs/api.md, RPC: `files`): 0.12's methods without `sessionId`,
//! on the file service, its streamed reads and writes included. Relative paths are taken
//! from the workspace, as the next line's runtime takes them from `/workspace`.

use std::sync::Arc;

use base64_simd::STANDARD as BASE64;
use fsd_api::Operation;
use fsd_api::files::{
    Encoding, ExistsResponse, ListFilesResponse, MkdirResponse, PathResponse, ReadResponse,
    RenameResponse, WriteResponse,
};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::args::{Answer, api_error, flag, options, string, take_string, value};
use crate::error::{ApiError, OperationExt};
use crate::files::ListOptions;
use crate::rpc::api::invalid;
use crate::rpc::capnweb::{self, Arg};
use crate::rpc::session::Session;
use crate::state::AppState;
use crate::wire::sse::sse_frame;
use crate::wire::time::now_rfc3339;

/// Serves `files.method`; `None` when it is not one of the next line's.
pub async fn call(
    state: &AppState,
    session: &Arc<Session>,
    method: &str,
    mut args: Vec<Arg>,
) -> Option<Answer> {
    let args = &mut args[..];
    Some(match method {
        "readFile" => read(state, session, args).await,
        "readFileStream" => read_stream(state, session, args).await,
        "writeFile" => write(state, args).await,
        "writeFileStream" => write_stream(state, session, args).await,
        "renameFile" | "moveFile" => rename(state, method == "moveFile", args).await,
        other => files(state, FilesMethod::named(other)?, args).await,
    })
}

/// `readFile(path, {encoding})`: the content encoded (utf-8 or base64, picked from the
/// content when not asked), or with `encoding: "none"` a stream of its bytes, uncapped.
async fn read(state: &AppState, session: &Arc<Session>, args: &[Arg]) -> Answer {
    let path = string(args, 0, "path")?;
    let options = options(args, 1).unwrap_or_default();
    let encoding = match options.get("encoding").and_then(Value::as_str) {
        None => None,
        Some("none") => {
            let read = state
                .files
                .read_chunks(&path)
                .await
                .op(Operation::FileRead)
                .map_err(|error| api_error(&error))?;
            let chunks = read.chunks.map(|chunk| chunk.map_err(|e| e.to_string()));
            let pipe = session.open_outgoing_pipe(chunks).await?;
            return Ok(json!({
                "success": true,
                "content": capnweb::readable(pipe),
                "path": path,
                "size": read.size.map_or_else(capnweb::undefined, Value::from),
                "mimeType": read.mime_type,
                "timestamp": now_rfc3339(),
            }));
        }
        Some("base64") => Some(Encoding::Base64),
        Some("utf-8" | "utf8") => Some(Encoding::Utf8),
        Some(_) => return Err(invalid("encoding", "must be utf-8, base64 or none")),
    };
    let file = state
        .files
        .read(None, &path, encoding)
        .await
        .op(Operation::FileRead)
        .map_err(|error| api_error(&error))?;
    Ok(value(ReadResponse {
        success: true,
        path,
        content: file.content,
        timestamp: now_rfc3339(),
        is_binary: file.encoding == Encoding::Base64,
        encoding: file.encoding,
        mime_type: file.mime_type,
        size: file.size,
    }))
}

/// `readFileStream(path)`: 0.12's SSE stream of the file (`metadata`, `chunk`s, `complete`).
async fn read_stream(state: &AppState, session: &Arc<Session>, args: &[Arg]) -> Answer {
    let path = string(args, 0, "path")?;
    let opened = state
        .files
        .open_for_stream(None, &path)
        .await
        .op(Operation::FileRead)
        .map_err(|error| api_error(&error))?;
    let frames = crate::files::read_events(opened).map(|event| Ok(sse_frame(None, &event)));
    Ok(capnweb::readable(session.open_outgoing_pipe(frames).await?))
}

/// `writeFile(path, content, {encoding})`: atomic, base64 decoded when asked.
async fn write(state: &AppState, args: &mut [Arg]) -> Answer {
    let path = string(args, 0, "path")?;
    let content = take_string(args, 1, "content")?;
    let options = options(args, 2).unwrap_or_default();
    let bytes = match options.get("encoding").and_then(Value::as_str) {
        Some("base64") => BASE64
            .decode_to_vec(content.trim())
            .map_err(|_| invalid("content", "is not valid base64"))?,
        _ => content.into_bytes(),
    };
    let written = state
        .files
        .write(None, &path, bytes::Bytes::from(bytes), None)
        .await
        .op(Operation::FileWrite)
        .map_err(|error| api_error(&error))?;
    Ok(value(WriteResponse {
        success: true,
        path,
        bytes_written: written.0,
        mode: None,
        timestamp: now_rfc3339(),
    }))
}

/// `writeFileStream(path, stream)`: the caller's pipe written to a temp file and renamed
/// over the target once it closes; one that aborts leaves the old file.
async fn write_stream(state: &AppState, session: &Arc<Session>, args: &[Arg]) -> Answer {
    let path = string(args, 0, "path")?;
    let Some(Arg::Readable(pipe)) = args.get(1) else {
        return Err(invalid("stream", "must be a ReadableStream"));
    };
    let Some(readable) = session.take_readable(*pipe) else {
        return Err(invalid(
            "stream",
            "names no pipe of this session, or one already read",
        ));
    };
    let chunks = Box::pin(futures_util::stream::unfold(
        readable,
        |mut readable| async move { readable.recv().await.map(|chunk| (chunk, readable)) },
    ));
    let (written, _) = state
        .files
        .write_stream(&path, chunks, None)
        .await
        .op(Operation::FileWrite)
        .map_err(|error| api_error(&error))?;
    Ok(value(json!({
        "success": true,
        "path": path,
        "bytesWritten": written,
        "timestamp": now_rfc3339(),
    })))
}

/// `renameFile(oldPath, newPath)` and `moveFile(sourcePath, destinationPath)`, with `mv`'s
/// rules; a rename also answers `oldPath`.
async fn rename(state: &AppState, moving: bool, args: &[Arg]) -> Answer {
    let (from_field, to_field, operation) = if moving {
        ("sourcePath", "destinationPath", Operation::FileMove)
    } else {
        ("oldPath", "newPath", Operation::FileRename)
    };
    let from = string(args, 0, from_field)?;
    let to = string(args, 1, to_field)?;
    state
        .files
        .rename(None, (from_field, &from), (to_field, &to))
        .await
        .op(operation)
        .map_err(|error: ApiError| api_error(&error))?;
    let answer = value(RenameResponse {
        success: true,
        path: from.clone(),
        new_path: to,
        timestamp: now_rfc3339(),
    });
    Ok(match answer {
        Value::Object(mut fields) if !moving => {
            fields.insert("oldPath".into(), json!(from));
            Value::Object(fields)
        }
        other => other,
    })
}

/// The other `files` methods.
#[derive(Debug, Clone, Copy)]
enum FilesMethod {
    Exists,
    Mkdir,
    DeleteFile,
    ListFiles,
}

impl FilesMethod {
    fn named(method: &str) -> Option<Self> {
        Some(match method {
            "exists" => Self::Exists,
            "mkdir" => Self::Mkdir,
            "deleteFile" => Self::DeleteFile,
            "listFiles" => Self::ListFiles,
            _ => return None,
        })
    }
}

/// One `files` method: each takes its path first, then its options.
async fn files(state: &AppState, method: FilesMethod, args: &[Arg]) -> Answer {
    let files = &state.files;
    let path = string(args, 0, "path")?;
    let answer = match method {
        FilesMethod::Exists => {
            files
                .exists(None, &path)
                .await
                .op(Operation::FileStat)
                .map(|exists| {
                    value(ExistsResponse {
                        success: true,
                        path,
                        exists,
                        timestamp: now_rfc3339(),
                    })
                })
        }
        FilesMethod::Mkdir => {
            let recursive = flag(args, 1, "recursive");
            files
                .mkdir(None, &path, recursive, None)
                .await
                .op(Operation::DirectoryCreate)
                .map(|_| {
                    value(MkdirResponse {
                        success: true,
                        path,
                        recursive,
                        mode: None,
                        timestamp: now_rfc3339(),
                    })
                })
        }
        FilesMethod::DeleteFile => files
            .delete(None, &path)
            .await
            .op(Operation::FileDelete)
            .map(|()| {
                value(PathResponse {
                    success: true,
                    path,
                    timestamp: now_rfc3339(),
                })
            }),
        FilesMethod::ListFiles => {
            let options = ListOptions {
                recursive: flag(args, 1, "recursive"),
                include_hidden: flag(args, 1, "includeHidden"),
            };
            files
                .list(None, &path, options)
                .await
                .op(Operation::DirectoryList)
                .map(|files| {
                    value(ListFilesResponse {
                        success: true,
                        path,
                        count: files.len(),
                        files,
                        timestamp: now_rfc3339(),
                    })
                })
        }
    };
    answer.map_err(|error| api_error(&error))
}
