//! The JSON file routes of the reference API, plus `POST /api/stat`.

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use fsd_api::Operation;
use fsd_api::files::{
    Encoding, ExistsResponse, ListFilesRequest, ListFilesResponse, MkdirRequest, MkdirResponse,
    MoveRequest, PathRequest, PathResponse, ReadRequest, ReadResponse, RenameRequest,
    RenameResponse, StatRequest, StatResponse, WriteRequest, WriteResponse,
};

use super::FileError;
use super::listing::ListOptions;
use super::stream;
use crate::error::{ApiError, OperationExt};
use crate::state::AppState;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;
use crate::wire::time::now_rfc3339;

type Reply<T> = Result<Json<T>, ApiError>;

pub async fn read(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<ReadRequest>,
) -> Reply<ReadResponse> {
    let file = state
        .files
        .read(
            &in_session(&state, req.session_id.as_deref(), "path", &req.path).await,
            req.encoding,
        )
        .await
        .op(Operation::FileRead)?;
    Ok(Json(ReadResponse {
        success: true,
        path: req.path,
        content: file.content,
        timestamp: now_rfc3339(),
        is_binary: file.encoding == Encoding::Base64,
        encoding: file.encoding,
        mime_type: file.mime_type,
        size: file.size,
    }))
}

pub async fn read_stream(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<PathRequest>,
) -> Result<Response, ApiError> {
    let opened = state
        .files
        .open_for_stream(&in_session(&state, req.session_id.as_deref(), "path", &req.path).await)
        .await
        .op(Operation::FileRead)?;
    Ok(sse_response(stream::events(opened)))
}

pub async fn write(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<WriteRequest>,
) -> Reply<WriteResponse> {
    let bytes = match req.encoding {
        Some(Encoding::Base64) => decode_base64(&req.content).op(Operation::FileWrite)?,
        Some(Encoding::Utf8) | None => req.content.into_bytes(),
    };
    let bytes_written = state
        .files
        .write(
            &in_session(&state, req.session_id.as_deref(), "path", &req.path).await,
            bytes,
        )
        .await
        .op(Operation::FileWrite)?;
    Ok(Json(WriteResponse {
        success: true,
        path: req.path,
        bytes_written,
        timestamp: now_rfc3339(),
    }))
}

/// Standard base64 with padding; whitespace (line-wrapped base64) is ignored. The content is
/// decoded as it is first: only content that fails (whitespace in it, or garbage) pays for
/// a whitespace-free copy and a second try.
fn decode_base64(content: &str) -> Result<Vec<u8>, FileError> {
    if let Ok(bytes) = BASE64.decode(content) {
        return Ok(bytes);
    }
    let compact: Vec<u8> = content
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    BASE64.decode(compact).map_err(|_| FileError::InvalidBase64)
}

pub async fn delete(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<PathRequest>,
) -> Reply<PathResponse> {
    state
        .files
        .delete(&in_session(&state, req.session_id.as_deref(), "path", &req.path).await)
        .await
        .op(Operation::FileDelete)?;
    Ok(Json(PathResponse {
        success: true,
        path: req.path,
        timestamp: now_rfc3339(),
    }))
}

pub async fn rename(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<RenameRequest>,
) -> Reply<RenameResponse> {
    state
        .files
        .rename(
            (
                "oldPath",
                &in_session(&state, req.session_id.as_deref(), "oldPath", &req.old_path).await,
            ),
            (
                "newPath",
                &in_session(&state, req.session_id.as_deref(), "newPath", &req.new_path).await,
            ),
        )
        .await
        .op(Operation::FileRename)?;
    Ok(Json(RenameResponse {
        success: true,
        path: req.old_path,
        new_path: req.new_path,
        timestamp: now_rfc3339(),
    }))
}

pub async fn move_file(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<MoveRequest>,
) -> Reply<RenameResponse> {
    state
        .files
        .rename(
            (
                "sourcePath",
                &in_session(
                    &state,
                    req.session_id.as_deref(),
                    "sourcePath",
                    &req.source_path,
                )
                .await,
            ),
            (
                "destinationPath",
                &in_session(
                    &state,
                    req.session_id.as_deref(),
                    "destinationPath",
                    &req.destination_path,
                )
                .await,
            ),
        )
        .await
        .op(Operation::FileMove)?;
    Ok(Json(RenameResponse {
        success: true,
        path: req.source_path,
        new_path: req.destination_path,
        timestamp: now_rfc3339(),
    }))
}

pub async fn mkdir(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<MkdirRequest>,
) -> Reply<MkdirResponse> {
    let recursive = req.recursive.unwrap_or(false);
    state
        .files
        .mkdir(
            &in_session(&state, req.session_id.as_deref(), "path", &req.path).await,
            recursive,
        )
        .await
        .op(Operation::DirectoryCreate)?;
    Ok(Json(MkdirResponse {
        success: true,
        path: req.path,
        recursive,
        timestamp: now_rfc3339(),
    }))
}

pub async fn list_files(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<ListFilesRequest>,
) -> Reply<ListFilesResponse> {
    let options = req.options.unwrap_or_default();
    let options = ListOptions {
        recursive: options.recursive.unwrap_or(false),
        include_hidden: options.include_hidden.unwrap_or(false),
    };
    let files = state
        .files
        .list(
            &in_session(&state, req.session_id.as_deref(), "path", &req.path).await,
            options,
        )
        .await
        .op(Operation::DirectoryList)?;
    Ok(Json(ListFilesResponse {
        success: true,
        path: req.path,
        count: files.len(),
        files,
        timestamp: now_rfc3339(),
    }))
}

pub async fn exists(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<PathRequest>,
) -> Reply<ExistsResponse> {
    let exists = state
        .files
        .exists(&in_session(&state, req.session_id.as_deref(), "path", &req.path).await)
        .await
        .op(Operation::FileStat)?;
    Ok(Json(ExistsResponse {
        success: true,
        path: req.path,
        exists,
        timestamp: now_rfc3339(),
    }))
}

pub async fn stat(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<StatRequest>,
) -> Reply<StatResponse> {
    let follow = req.follow_symlinks.unwrap_or(false);
    let stat = state
        .files
        .stat(
            &in_session(&state, req.session_id.as_deref(), "path", &req.path).await,
            follow,
        )
        .await
        .op(Operation::FileStat)?;
    Ok(Json(StatResponse {
        success: true,
        path: req.path,
        stat,
        timestamp: now_rfc3339(),
    }))
}

/// A relative path in a request that names a live session resolves against that session's
/// current directory (as the reference does); otherwise against the workspace. Invalid paths
/// are passed through unchanged so the service rejects them naming the field.
async fn in_session(
    state: &AppState,
    session_id: Option<&str>,
    field: &'static str,
    raw: &str,
) -> String {
    let relative =
        !std::path::Path::new(raw).is_absolute() && super::paths::validate(field, raw).is_ok();
    match session_id {
        Some(id) if relative && id != fsd_api::DISABLE_SESSION_TOKEN => {
            match state.sessions.cwd_of(id).await {
                Some(cwd) => cwd.join(raw).display().to_string(),
                None => raw.to_string(),
            }
        }
        _ => raw.to_string(),
    }
}
