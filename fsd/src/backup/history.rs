//! `/api/backup/index` and `/api/backup/extract`, for the time machine: the index a snapshot
//! of a directory would record now (what `diff` compares a stored snapshot with), and paths
//! of a stored snapshot written back into a directory.

use std::collections::HashMap;
use std::path::PathBuf;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use fsd_api::Operation;
use fsd_api::backup::{ExtractBackupRequest, ExtractBackupResponse, TreeIndexRequest};
use fsd_backup::ArchiveOptions;

use fsd_backup::stored::ChainSource;

use super::BackupState;
use super::extract::is_plain;
use super::request::{backup_dir, parse_backup_request};
use super::validate::invalid;
use super::wire_error::Restoring;
use crate::error::{ApiError, OperationExt};

pub async fn tree_index(
    State(state): State<BackupState>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let op = Operation::BackupCreate;
    let req: TreeIndexRequest = parse_backup_request(&body, op)?;
    let dir = backup_dir(&state, &req.dir, op)?;
    let options = ArchiveOptions {
        excludes: req.excludes.unwrap_or_default(),
        gitignore: req.gitignore.unwrap_or(false),
        reader: super::request::tree_reader(&state),
        ..ArchiveOptions::default()
    };
    let encoded = state.service.tree_index(dir, options).await.op(op)?;
    Ok((
        [(header::CONTENT_TYPE, "application/octet-stream")],
        Body::from(encoded),
    )
        .into_response())
}

pub async fn extract(
    State(state): State<BackupState>,
    body: Bytes,
) -> Result<Json<ExtractBackupResponse>, ApiError> {
    let op = Operation::BackupRestore;
    let req: ExtractBackupRequest = parse_backup_request(&body, op)?;
    let dir = backup_dir(&state, &req.dir, op)?;
    state.service.check_url("indexUrl", &req.index_url).op(op)?;
    if req.archives.is_empty() {
        return Err(invalid("archives", "must not be empty")).op(op);
    }
    let mut archives = HashMap::new();
    for (i, archive) in req.archives.iter().enumerate() {
        state
            .service
            .check_url(&format!("archives[{i}].url"), &archive.url)
            .op(op)?;
        let source = ChainSource {
            url: archive.url.clone(),
            size: archive.size_bytes,
        };
        if archives.insert(archive.depth, source).is_some() {
            return Err(invalid(
                &format!("archives[{i}].depth"),
                "two archives at one depth",
            ))
            .op(op);
        }
    }
    if req.paths.is_empty() {
        return Err(invalid("paths", "must not be empty")).op(op);
    }
    let mut paths = Vec::with_capacity(req.paths.len());
    for (i, path) in req.paths.iter().enumerate() {
        let path = PathBuf::from(path.trim_start_matches("./").trim_end_matches('/'));
        if !is_plain(&path) {
            return Err(invalid(
                &format!("paths[{i}]"),
                "must be a path relative to dir, without `..` (restore the whole directory to bring everything back)",
            ))
            .op(op);
        }
        paths.push(path);
    }
    let answer = state
        .service
        .extract(
            dir,
            &req.index_url,
            archives,
            paths,
            state.paths.policy().beneath().cloned(),
        )
        .await
        .map_err(Restoring)
        .op(op)?;
    Ok(Json(answer))
}
