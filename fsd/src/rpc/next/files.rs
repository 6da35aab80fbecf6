//! The next line's `files` (docs/api.md, RPC: `files`): 0.12's methods without `sessionId`,
//! on the file service, its streamed reads and writes included. Relative paths are taken
//! from the workspace, as the next line's runtime takes them from `/workspace`.

use std::sync::Arc;

use base64_simd::STANDARD as BASE64;
use fsd_api::Operation;
use fsd_api::files::{
    Encoding, ListFilesOptions, ListFilesRequest, MkdirRequest, MoveRequest, PathRequest,
    ReadRequest, RenameRequest,
};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::args::{Answer, api_error, flag, options, string, take_string, value};
use crate::capnweb::protocol::{self as capnweb, Arg};
use crate::capnweb::session::Session;
use crate::error::OperationExt;
use crate::rpc::api::{invalid, pipe_chunks};
use crate::state::AppState;
use crate::time::now_rfc3339;

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
            let read = crate::files::ops::read_chunks(&state.files, &path, None)
                .await
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
    let request = ReadRequest {
        path,
        encoding,
        session_id: None,
    };
    let mut read = crate::files::ops::read(&state.files, request)
        .await
        .map_err(|error| api_error(&error))?;
    // The content moves into the answer rather than being copied with the rest.
    let content = std::mem::take(&mut read.content);
    let mut answer = value(read);
    if let Some(fields) = answer.as_object_mut() {
        fields.insert("content".into(), Value::String(content));
    }
    Ok(answer)
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
    session
        .open_sse_pipe(crate::files::read_events(opened))
        .await
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
    let written =
        crate::files::ops::write_bytes(&state.files, path, None, bytes::Bytes::from(bytes), None)
            .await;
    Ok(value(written.map_err(|error| api_error(&error))?))
}

/// `writeFileStream(path, stream)`: the caller's pipe written to a temp file and renamed
/// over the target once it closes; one that aborts leaves the old file.
async fn write_stream(state: &AppState, session: &Arc<Session>, args: &[Arg]) -> Answer {
    let path = string(args, 0, "path")?;
    let chunks = pipe_chunks(session, args.get(1))?;
    let written = crate::files::ops::write_chunks(&state.files, path, None, chunks, None).await;
    Ok(value(written.map_err(|error| api_error(&error))?))
}

/// `renameFile(oldPath, newPath)` and `moveFile(sourcePath, destinationPath)`, with `mv`'s
/// rules; a rename also answers `oldPath`.
async fn rename(state: &AppState, moving: bool, args: &[Arg]) -> Answer {
    let (from_field, to_field) = if moving {
        ("sourcePath", "destinationPath")
    } else {
        ("oldPath", "newPath")
    };
    let from = string(args, 0, from_field)?;
    let to = string(args, 1, to_field)?;
    let renamed = if moving {
        let request = MoveRequest {
            source_path: from.clone(),
            destination_path: to,
            session_id: None,
        };
        crate::files::ops::move_file(&state.files, request).await
    } else {
        let request = RenameRequest {
            old_path: from.clone(),
            new_path: to,
            session_id: None,
        };
        crate::files::ops::rename(&state.files, request).await
    };
    let answer = value(renamed.map_err(|error| api_error(&error))?);
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

/// One `files` method: each takes its path first, then its options; each is its route's
/// typed operation.
async fn files(state: &AppState, method: FilesMethod, args: &[Arg]) -> Answer {
    use crate::files::ops;
    let path = string(args, 0, "path")?;
    let answer = match method {
        FilesMethod::Exists => {
            let request = PathRequest {
                path,
                session_id: None,
            };
            ops::exists(&state.files, request).await.map(value)
        }
        FilesMethod::Mkdir => {
            let request = MkdirRequest {
                path,
                recursive: Some(flag(args, 1, "recursive")),
                session_id: None,
                mode: None,
            };
            ops::mkdir(&state.files, request).await.map(value)
        }
        FilesMethod::DeleteFile => {
            let request = PathRequest {
                path,
                session_id: None,
            };
            ops::delete(&state.files, request).await.map(value)
        }
        FilesMethod::ListFiles => {
            let request = ListFilesRequest {
                path,
                options: Some(ListFilesOptions {
                    recursive: Some(flag(args, 1, "recursive")),
                    include_hidden: Some(flag(args, 1, "includeHidden")),
                }),
                session_id: None,
            };
            ops::list(&state.files, request).await.map(value)
        }
    };
    answer.map_err(|error| api_error(&error))
}
