//! `/api/backup/*`: parse, validate (INVALID_BACKUP_CONFIG naming the field), call the
//! service, answer.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::FromRef;
use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use fsd_api::Operation;
use fsd_api::backup::{
    BackupEvent, CreateBackupRequest, CreateBackupResponse, DownloadBackupRequest,
    RestoreBackupRequest, RestoreBackupResponse, RestoreMountsResponse, UnmountBackupRequest,
    UploadBackupRequest, UploadPartsRequest, UploadPartsResponse,
};
use fsd_backup::{Phase, Progress};
use tokio::sync::mpsc;

use super::BackupState;
use super::fork;
use super::history;
use super::operations;
use super::request::{backup_dir, parse_backup_request};
use super::service::MIN_PART_SIZE;
use super::validate::invalid;
use super::wire_error::Restoring;
use crate::error::{ApiError, OperationExt};
use crate::wire::sse::sse_response;

/// The domain's routes.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    BackupState: FromRef<S>,
{
    Router::new()
        .route("/api/backup/create", post(create))
        .route("/api/backup/restore", post(restore))
        .route("/api/backup/upload-parts", post(upload_parts))
        .route("/api/backup/upload", post(upload))
        .route("/api/backup/download", post(download))
        .route("/api/backup/mounts", get(mounts))
        .route("/api/backup/unmount", post(unmount))
        .route("/api/backup/index", post(history::tree_index))
        .route("/api/backup/extract", post(history::extract))
        .route("/api/fork", post(fork::fork).get(fork::branches))
        .route("/api/fork/discard", post(fork::discard))
        .route("/api/fork/merge", post(fork::merge))
}

/// Progress events go out at most this often per phase (and always at 0 and at the end).
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

pub async fn create(
    State(state): State<BackupState>,
    body: Bytes,
) -> Result<Json<CreateBackupResponse>, ApiError> {
    let req: CreateBackupRequest = parse_backup_request(&body, Operation::BackupCreate)?;
    Ok(Json(operations::create_archive(&state, &req).await?))
}

pub async fn restore(
    State(state): State<BackupState>,
    body: Bytes,
) -> Result<Json<RestoreBackupResponse>, ApiError> {
    let req: RestoreBackupRequest = parse_backup_request(&body, Operation::BackupRestore)?;
    Ok(Json(operations::restore_archive(&state, &req).await?))
}

pub async fn upload_parts(
    State(state): State<BackupState>,
    body: Bytes,
) -> Result<Json<UploadPartsResponse>, ApiError> {
    let req: UploadPartsRequest = parse_backup_request(&body, Operation::BackupCreate)?;
    Ok(Json(operations::upload_parts(&state, &req).await?))
}

/// `POST /api/backup/upload`: create, then upload, with progress events.
pub async fn upload(State(state): State<BackupState>, body: Bytes) -> Result<Response, ApiError> {
    let op = Operation::BackupCreate;
    let req: UploadBackupRequest = parse_backup_request(&body, op)?;
    let mut spec = operations::create_spec(&state, &req.create)?;
    let target = req.upload;
    let part_urls = target.part_urls.clone().unwrap_or_default();
    match (&target.url, part_urls.is_empty()) {
        (Some(url), true) => state.service.check_url("upload.url", url).op(op)?,
        (None, false) => {
            for (i, url) in part_urls.iter().enumerate() {
                state
                    .service
                    .check_url(&format!("upload.partUrls[{i}]"), url)
                    .op(op)?;
            }
        }
        _ => {
            return Err(invalid("upload", "give exactly one of url and partUrls")).op(op);
        }
    }
    if let Some(url) = &target.index_url {
        state.service.check_url("upload.indexUrl", url).op(op)?;
    }
    let min_part = target.min_part_size.unwrap_or(MIN_PART_SIZE).max(1);
    if !spec.layer {
        spec = operations::with_token(&state, spec).await;
    }
    let archive_path = spec.archive.clone();
    let creating = state.service.begin_create(&archive_path);
    let frozen = super::fork::freeze_to_send(&state, &mut spec).await?;
    let (progress, sender, events) = progress_channel();
    let service = state.service.clone();
    tokio::spawn(async move {
        let result = async {
            let mut archive = service.create(spec, progress.clone()).await?;
            let path = PathBuf::from(&archive.archive_path);
            // The checksum is read while the upload runs: it costs no wall time.
            let (uploaded, sha256) = tokio::join!(
                service.upload(
                    &path,
                    target.url.clone(),
                    part_urls,
                    min_part,
                    progress.clone()
                ),
                service.checksum(&path)
            );
            let uploaded = uploaded?;
            archive.sha256 = Some(sha256?);
            if let (Some(url), Some(index)) = (&target.index_url, &archive.index_path) {
                service.upload_index(Path::new(index), url).await?;
            }
            // Sent: a snapshot built on it elsewhere can come back as a branch.
            if let Some(frozen) = frozen {
                frozen.record(&service, path.clone()).await?;
            }
            Ok::<_, fsd_backup::BackupError>(BackupEvent::Complete {
                archive: Some(Box::new(archive)),
                etag: uploaded.etag,
                parts: uploaded.parts,
                part_size: uploaded.part_size,
                dir: None,
                cached: 0,
                processes_left_behind: Vec::new(),
            })
        }
        .await;
        if result.is_err() {
            // Nothing in the store refers to this archive: it is not kept as a cached copy.
            service.discard(&archive_path);
        }
        finish(&sender, result, op);
        drop(creating);
    });
    Ok(sse_response(events))
}

/// `POST /api/backup/download`: fetch what is missing, then restore, with progress events.
pub async fn download(State(state): State<BackupState>, body: Bytes) -> Result<Response, ApiError> {
    let op = Operation::BackupRestore;
    let req: DownloadBackupRequest = parse_backup_request(&body, op)?;
    let dir = backup_dir(&state, &req.dir, op)?;
    if req.archives.is_empty() {
        return Err(invalid("archives", "must not be empty")).op(op);
    }
    let sources = state.service.sources("archives", &req.archives).op(op)?;
    let (progress, sender, events) = progress_channel();
    let service = state.service.clone();
    let following = state.following().await;
    tokio::spawn(async move {
        let result = service
            .download(dir, sources, progress.clone(), following)
            .await
            .map(|((restore, left_behind), cached)| BackupEvent::Complete {
                archive: None,
                etag: None,
                parts: Vec::new(),
                part_size: None,
                dir: Some(restore.dir.display().to_string()),
                cached,
                processes_left_behind: left_behind,
            });
        finish(&sender, result, op);
    });
    Ok(sse_response(events))
}

pub async fn mounts(State(state): State<BackupState>) -> Json<RestoreMountsResponse> {
    Json(RestoreMountsResponse {
        success: true,
        mounts: state.service.mounts(),
    })
}

pub async fn unmount(
    State(state): State<BackupState>,
    body: Bytes,
) -> Result<Json<RestoreBackupResponse>, ApiError> {
    let op = Operation::BackupRestore;
    let req: UnmountBackupRequest = parse_backup_request(&body, op)?;
    // A restore made on this path is released by its descriptor, wherever its directory
    // moved (a link may stand at the name now); any other path is checked as every route
    // checks it (403 when it leads outside a confined workspace).
    let named = super::request::restored_dir(&state, &req.dir, op)?;
    let dir = match state.service.is_restored(&named) {
        true => named,
        false => backup_dir(&state, &req.dir, op)?,
    };
    let (restore, left_behind) = state
        .service
        .release_naming(dir, state.following().await)
        .await
        .map_err(Restoring)
        .op(op)?;
    Ok(Json(operations::restored(&restore, left_behind)))
}

/// A progress handle whose reports become throttled `progress` events, a sender for the
/// final event, and the event stream (which ends after the final event).
fn progress_channel() -> (
    Progress,
    mpsc::UnboundedSender<BackupEvent>,
    impl futures_util::Stream<Item = BackupEvent>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let last: Mutex<(Option<Phase>, Instant)> = Mutex::new((None, Instant::now()));
    let progress_tx = tx.clone();
    let sink = Arc::new(move |phase: Phase, done: u64, total: u64| {
        let Ok(mut last) = last.lock() else { return };
        let due = last.0 != Some(phase)
            || done == 0
            || done >= total
            || last.1.elapsed() >= PROGRESS_EVERY;
        if due {
            *last = (Some(phase), Instant::now());
            let _ = progress_tx.send(BackupEvent::Progress {
                phase: phase.as_str().to_string(),
                bytes_done: done,
                bytes_total: total,
            });
        }
    });
    let events = futures_util::stream::unfold((rx, false), |(mut rx, ended)| async move {
        if ended {
            return None;
        }
        let event = rx.recv().await?;
        let last = !matches!(event, BackupEvent::Progress { .. });
        Some((event, (rx, last)))
    });
    (Progress::new(Phase::Archive, 0, sink), tx, events)
}

/// Sends the final event: `complete`, or `error` with the wire code of the failure.
fn finish(
    tx: &mpsc::UnboundedSender<BackupEvent>,
    result: Result<BackupEvent, fsd_backup::BackupError>,
    op: Operation,
) {
    let event = match result {
        Ok(event) => event,
        Err(error) => {
            let error = match op {
                Operation::BackupRestore => ApiError::from(Restoring(error)),
                _ => ApiError::from(error),
            }
            .with_operation(op);
            BackupEvent::Error {
                code: error.code.to_string(),
                message: error.message,
                http_status: error.http_status,
            }
        }
    };
    let _ = tx.send(event);
}
