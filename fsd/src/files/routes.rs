//! The JSON file routes of the reference API, plus `POST /api/stat`.

use std::borrow::Cow;
use std::sync::Arc;

use axum::extract::{FromRef, Request, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use fsd_api::Operation;
use fsd_api::files::{
    ApplyRequest, ApplyResponse, ChmodRequest, ChownRequest, Encoding, ExistsResponse,
    ListFilesRequest, ListFilesResponse, ManifestRequest, ManifestResponse, MkdirRequest,
    MkdirResponse, MoveRequest, PathRequest, PathResponse, PermissionsResponse, ReadRequest,
    ReadResponse, RenameRequest, RenameResponse, StatRequest, StatResponse, WriteResponse,
};

use super::FileService;
use super::apply::MAX_PART_BYTES;
use super::error::FileError;
use super::json_write::{self, WriteBody};
use super::ops;
use super::permissions::{self, ModeSpec, parsed_mode};
use super::raw;
use super::stream;
use crate::error::{ApiError, OperationExt};
use crate::paths::Follow;
use crate::time::now_rfc3339;
use crate::wire::json::{JsonBody, parse};
use crate::wire::sse::sse_response;
use fsd_search::Within;

/// The domain's routes.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<FileService>: FromRef<S>,
{
    Router::new()
        .route("/api/read", post(read))
        .route("/api/read/stream", post(read_stream))
        .route("/api/write", post(write))
        .route("/api/delete", post(delete))
        .route("/api/rename", post(rename))
        .route("/api/move", post(move_file))
        .route("/api/mkdir", post(mkdir))
        .route("/api/list-files", post(list_files))
        .route("/api/exists", post(exists))
        .route("/api/stat", post(stat))
        .route("/api/files/manifest", post(manifest))
        .route("/api/files/apply", post(apply))
        .route("/api/files/raw", get(raw::download).put(raw::upload))
        .route("/api/files/archive", post(super::archive::archive))
        .route("/api/chmod", post(chmod))
        .route("/api/chown", post(chown))
}

type Reply<T> = Result<Json<T>, ApiError>;

pub async fn read(
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<ReadRequest>,
) -> Reply<ReadResponse> {
    Ok(Json(ops::read(&files, req).await?))
}

pub async fn read_stream(
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<PathRequest>,
) -> Result<Response, ApiError> {
    let opened = files
        .open_for_stream(req.session_id.as_deref(), &req.path)
        .await
        .op(Operation::FileRead)?;
    Ok(sse_response(stream::events(opened)))
}

/// Where a write's content is: a range of the request body, or a copy (it had escapes).
enum Content {
    InBody(std::ops::Range<usize>),
    Copied(Vec<u8>),
}

/// Writes without copying the content: base64 is decoded in place inside the request body,
/// and the file is written from a slice of it (a 1 MiB write allocates only its body).
/// Large base64 content is written while it arrives instead (see `json_write`).
pub async fn write(
    State(files): State<Arc<FileService>>,
    request: Request,
) -> Reply<WriteResponse> {
    let mut body = match json_write::receive(&files, request).await? {
        json_write::Received::Written(response) => return Ok(Json(response)),
        json_write::Received::Body(body) => body,
    };
    let (path, session_id, encoding, content, mode) = {
        let req: WriteBody<'_> = parse(&body)?;
        let mode = parsed_mode(req.mode.as_deref()).op(Operation::FileWrite)?;
        let content = match req.content {
            // serde_json borrows only from its input; the bounds check keeps that an
            // assumption that cannot go wrong silently.
            Cow::Borrowed(text) => {
                match (text.as_ptr() as usize).checked_sub(body.as_ptr() as usize) {
                    Some(start) if start + text.len() <= body.len() => {
                        Content::InBody(start..start + text.len())
                    }
                    _ => Content::Copied(text.as_bytes().to_vec()),
                }
            }
            Cow::Owned(text) => Content::Copied(text.into_bytes()),
        };
        (req.path, req.session_id, req.encoding, content, mode)
    };
    let base64 = encoding == Some(Encoding::Base64);
    let bytes = match content {
        Content::InBody(range) => {
            let len = if base64 {
                ops::decode_base64_in_place(&mut body[range.clone()]).op(Operation::FileWrite)?
            } else {
                range.len()
            };
            Bytes::from(body).slice(range.start..range.start + len)
        }
        Content::Copied(text) => ops::decoded(text, encoding)?,
    };
    Ok(Json(
        ops::write_bytes(&files, path, session_id.as_deref(), bytes, mode).await?,
    ))
}

pub async fn delete(
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<PathRequest>,
) -> Reply<PathResponse> {
    Ok(Json(ops::delete(&files, req).await?))
}

pub async fn rename(
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<RenameRequest>,
) -> Reply<RenameResponse> {
    Ok(Json(ops::rename(&files, req).await?))
}

pub async fn move_file(
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<MoveRequest>,
) -> Reply<RenameResponse> {
    Ok(Json(ops::move_file(&files, req).await?))
}

pub async fn mkdir(
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<MkdirRequest>,
) -> Reply<MkdirResponse> {
    Ok(Json(ops::mkdir(&files, req).await?))
}

pub async fn list_files(
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<ListFilesRequest>,
) -> Reply<ListFilesResponse> {
    Ok(Json(ops::list(&files, req).await?))
}

pub async fn exists(
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<PathRequest>,
) -> Reply<ExistsResponse> {
    Ok(Json(ops::exists(&files, req).await?))
}

pub async fn stat(
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<StatRequest>,
) -> Reply<StatResponse> {
    let follow = req.follow_symlinks.unwrap_or(false);
    let stat = files
        .stat(req.session_id.as_deref(), &req.path, follow)
        .await
        .op(Operation::FileStat)?;
    Ok(Json(StatResponse {
        success: true,
        path: req.path,
        stat,
        timestamp: now_rfc3339(),
    }))
}

/// `POST /api/files/manifest`: every entry below a directory with its hash or target.
pub async fn manifest(
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<ManifestRequest>,
) -> Reply<ManifestResponse> {
    let manifest = files
        .manifest(
            req.session_id.as_deref(),
            &req.path,
            &req.exclude,
            req.paths,
        )
        .await
        .op(Operation::DirectoryList)?;
    Ok(Json(ManifestResponse {
        success: true,
        path: req.path,
        entries: manifest.entries,
        skipped: manifest.skipped,
        timestamp: now_rfc3339(),
    }))
}

/// `POST /api/files/apply`: a 4-byte big-endian length, the [`ApplyRequest`] as JSON of
/// that length, then the files' content in the order of their steps; more parts may follow
/// (see [`fsd_api::files::ApplyPart`]).
pub async fn apply(
    State(files): State<Arc<FileService>>,
    request: Request,
) -> Reply<ApplyResponse> {
    use futures_util::TryStreamExt;
    use tokio::io::AsyncReadExt;
    let op = Operation::FileWrite;
    let body = request
        .into_body()
        .into_data_stream()
        .map_err(std::io::Error::other);
    let mut reader = tokio_util::io::StreamReader::new(body);
    let cut = |what: &str, err: std::io::Error| {
        ApiError::validation("body", format!("{what}: {err}"), "INCOMPLETE_BODY").with_operation(op)
    };
    let length = reader
        .read_u32()
        .await
        .map_err(|err| cut("the body's 4-byte length of its JSON part", err))?;
    if length > MAX_PART_BYTES {
        return Err(ApiError::validation(
            "body",
            format!("a JSON part of {length} bytes is over the limit of {MAX_PART_BYTES}"),
            "TOO_LARGE",
        )
        .with_operation(op));
    }
    let mut header = vec![0; length as usize];
    reader
        .read_exact(&mut header)
        .await
        .map_err(|err| cut("the body's JSON part", err))?;
    let request: ApplyRequest =
        parse(&header).map_err(|err| ApiError::from(err).with_operation(op))?;
    let outcomes = files
        .apply(
            request.session_id.as_deref(),
            &request.path,
            request.steps,
            tokio_util::io::SyncIoBridge::new(reader),
        )
        .await
        .op(op)?;
    Ok(Json(ApplyResponse {
        success: true,
        path: request.path,
        outcomes,
        timestamp: now_rfc3339(),
    }))
}

/// Resolves the path a permissions request names, runs `change` on it off the async
/// threads, and answers the path's resulting mode and owner.
async fn change_permissions(
    files: &FileService,
    session: Option<&str>,
    raw: String,
    change: impl FnOnce(&std::path::Path, Option<&Within>) -> Result<u64, FileError> + Send + 'static,
) -> Reply<PermissionsResponse> {
    let op = Operation::FileWrite;
    let path = files
        .paths()
        .resolve(session, "path", &raw, Follow::Final)
        .await
        .op(op)?;
    let beneath = files.paths().policy().beneath().cloned();
    let (mode, uid, gid, changed) = super::service::blocking(move || {
        let changed = change(&path, beneath.as_deref())?;
        let (mode, uid, gid) = permissions::described(&path, beneath.as_deref())?;
        Ok((mode, uid, gid, changed))
    })
    .await
    .op(op)?;
    Ok(Json(PermissionsResponse {
        success: true,
        path: raw,
        mode,
        uid,
        gid,
        changed,
        timestamp: now_rfc3339(),
    }))
}

pub async fn chmod(
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<ChmodRequest>,
) -> Reply<PermissionsResponse> {
    let spec = ModeSpec::parse(&req.mode)
        .map_err(FileError::from)
        .op(Operation::FileWrite)?;
    let recursive = req.recursive.unwrap_or(false);
    change_permissions(
        &files,
        req.session_id.as_deref(),
        req.path,
        move |path, beneath| permissions::chmod(path, &spec, recursive, beneath),
    )
    .await
}

pub async fn chown(
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<ChownRequest>,
) -> Reply<PermissionsResponse> {
    let (uid, gid) = permissions::owner_ids(req.owner.as_deref(), req.group.as_deref())
        .op(Operation::FileWrite)?;
    let recursive = req.recursive.unwrap_or(false);
    change_permissions(
        &files,
        req.session_id.as_deref(),
        req.path,
        move |path, beneath| permissions::chown(path, uid, gid, recursive, beneath),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(text: &str) -> Result<Vec<u8>, FileError> {
        let mut data = text.as_bytes().to_vec();
        let len = ops::decode_base64_in_place(&mut data)?;
        data.truncate(len);
        Ok(data)
    }

    #[test]
    fn base64_decodes_in_place_strictly_and_ignores_whitespace() {
        assert_eq!(decoded("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(decoded("").unwrap(), b"");
        assert_eq!(decoded("aGVs\nbG8=\r\n").unwrap(), b"hello");
        assert_eq!(decoded(" aG Vs bG 8= ").unwrap(), b"hello");
        for bad in ["aGVsbG8", "aGVsbG8=!", "a", "****", "aGVs bG8"] {
            assert!(
                matches!(decoded(bad), Err(FileError::InvalidBase64)),
                "{bad}"
            );
        }
    }
}
