//! The backup domain's operations as typed calls: what `/api/backup/*`, 0.12's `/rpc` and the
//! next line's `backup` domain run. Beside the routes' create, restore and part upload, the
//! next line's steps the reference's object used to run as shell commands (§4.7): one PUT
//! of an archive, a restore's preparation, a ranged parallel download, an archive written
//! out as a plain tree, and an archive's removal.

use std::path::PathBuf;
use std::time::Duration;

use fsd_api::backup::{
    CreateBackupRequest, CreateBackupResponse, ProcessLeftBehind, RestoreBackupRequest,
    RestoreBackupResponse, UploadPartsRequest, UploadPartsResponse,
};
use fsd_api::{ErrorCode, Operation};
use fsd_backup::incremental::Changed;
use fsd_backup::restore::Restore;
use fsd_backup::transfer::{PartSpec, RangedPart};
use fsd_backup::{ArchiveOptions, Codec, Progress};
use serde_json::json;

use super::BackupState;
use super::request::backup_dir;
use super::service::{CreateSpec, MAX_DEPTH};
use super::validate::{self, invalid};
use super::wire_error::Restoring;
use crate::error::{ApiError, OperationExt};

pub fn create_spec(state: &BackupState, req: &CreateBackupRequest) -> Result<CreateSpec, ApiError> {
    let op = Operation::BackupCreate;
    let dir = backup_dir(state, &req.dir, op)?;
    let archive = validate::archive("archivePath", &req.archive_path).op(op)?;
    let mut options = ArchiveOptions {
        excludes: req.excludes.clone().unwrap_or_default(),
        gitignore: req.gitignore.unwrap_or(false),
        reader: super::request::tree_reader(state),
        ..ArchiveOptions::default()
    };
    if let Some(compression) = &req.compression {
        if let Some(format) = &compression.format {
            options.codec = Codec::parse(format)
                .ok_or_else(|| invalid("compression.format", "must be one of gzip, lz4, zstd"))
                .op(op)?;
        }
        if let Some(threads) = compression.threads {
            if threads == 0 {
                return Err(invalid("compression.threads", "must be at least 1")).op(op);
            }
            options.threads = threads as usize;
        }
    }
    let layer = req.layer.unwrap_or(false);
    let fork = req.fork.unwrap_or(false);
    if fork && layer {
        return Err(invalid(
            "fork",
            "cannot be combined with layer: a fork point is archived whole",
        ))
        .op(op);
    }
    if fork && req.base.is_some() {
        return Err(invalid(
            "fork",
            "cannot be combined with base: a fork point is archived whole",
        ))
        .op(op);
    }
    if let Some(base) = &req.base {
        if layer {
            return Err(invalid("base", "cannot be combined with layer")).op(op);
        }
        state
            .service
            .check_url("base.indexUrl", &base.index_url)
            .op(op)?;
        if base.depth >= MAX_DEPTH {
            return Err(invalid(
                "base.depth",
                format!("must be below {MAX_DEPTH}: take a full snapshot"),
            ))
            .op(op);
        }
    }
    Ok(CreateSpec {
        dir,
        archive,
        options,
        layer,
        base: req.base.clone(),
        token: None,
        changed: None,
        fork,
    })
}

/// Records the directory's change token with the snapshot, and for an incremental one what
/// changed since its parent's token (not for gitignore snapshots: a changed `.gitignore`
/// changes what is left out anywhere, so those compare the whole tree).
pub async fn with_token(state: &BackupState, mut spec: CreateSpec) -> CreateSpec {
    let since = spec.base.as_ref().and_then(|base| base.token.clone());
    let (token, changed) =
        crate::watch::token_and_changes(&state.watches, &spec.dir, since.as_deref()).await;
    spec.token = token;
    if spec.base.is_some() && !spec.options.gitignore {
        spec.changed = changed.map(|changed| {
            changed
                .into_iter()
                .map(|(path, from)| Changed { path, from })
                .collect()
        });
    }
    spec
}

/// The answer to a restore or a release: the directory, how it is (or was) mounted, and the
/// processes left in what it hid (or took away).
pub fn restored(restore: &Restore, left_behind: Vec<ProcessLeftBehind>) -> RestoreBackupResponse {
    RestoreBackupResponse {
        success: true,
        dir: restore.dir.display().to_string(),
        driver: Some(restore.driver.as_str().to_string()),
        processes_left_behind: left_behind,
    }
}

/// A request the next line's object shaped wrongly: `INVALID_BACKUP_CONFIG` naming `field`.
pub fn invalid_request(field: &str, reason: &str) -> ApiError {
    ApiError::from(invalid(field, reason))
}

/// A backup request read from a call's decoded body, refused as its route refuses one.
pub fn request<T: serde::de::DeserializeOwned>(
    body: serde_json::Value,
    operation: Operation,
) -> Result<T, ApiError> {
    crate::wire::json::parse_value_as(body, fsd_api::ErrorCode::InvalidBackupConfig, operation)
}

/// Archives a directory (0.12's `createArchive`, and the next line's).
pub async fn create_archive(
    state: &BackupState,
    req: &CreateBackupRequest,
) -> Result<CreateBackupResponse, ApiError> {
    let op = Operation::BackupCreate;
    let mut spec = create_spec(state, req)?;
    if spec.base.is_some() {
        spec = with_token(state, spec).await;
    }
    let _creating = state.service.begin_create(&spec.archive);
    let frozen = super::fork::freeze_to_send(state, &mut spec).await?;
    let archive = spec.archive.clone();
    let made = state.service.create(spec, Progress::none()).await.op(op)?;
    if let Some(frozen) = frozen {
        frozen.record(&state.service, archive).await.op(op)?;
    }
    Ok(made)
}

/// Restores an archive (and its parents) onto a directory, copy-on-write.
pub async fn restore_archive(
    state: &BackupState,
    req: &RestoreBackupRequest,
) -> Result<RestoreBackupResponse, ApiError> {
    let op = Operation::BackupRestore;
    let dir = backup_dir(state, &req.dir, op)?;
    let mut archives = vec![validate::archive("archivePath", &req.archive_path).op(op)?];
    for (i, parent) in req.parent_archive_paths.iter().flatten().enumerate() {
        archives.push(validate::archive(&format!("parentArchivePaths[{i}]"), parent).op(op)?);
    }
    let (restore, left_behind) = state
        .service
        .restore(dir, archives, state.following().await)
        .await
        .map_err(Restoring)
        .op(op)?;
    Ok(restored(&restore, left_behind))
}

/// PUTs an archive's parts to their presigned URLs.
pub async fn upload_parts(
    state: &BackupState,
    req: &UploadPartsRequest,
) -> Result<UploadPartsResponse, ApiError> {
    let op = Operation::BackupCreate;
    let archive = validate::archive("archivePath", &req.archive_path).op(op)?;
    if req.parts.is_empty() {
        return Err(invalid("parts", "must not be empty")).op(op);
    }
    let mut parts = Vec::with_capacity(req.parts.len());
    for (i, part) in req.parts.iter().enumerate() {
        if part.part_number < 1 {
            return Err(invalid(
                &format!("parts[{i}].partNumber"),
                "must be at least 1",
            ))
            .op(op);
        }
        if part.size < 1 {
            return Err(invalid(&format!("parts[{i}].size"), "must be at least 1")).op(op);
        }
        state
            .service
            .check_url(&format!("parts[{i}].url"), &part.url)
            .op(op)?;
        parts.push(PartSpec {
            part_number: part.part_number,
            url: part.url.clone(),
            offset: part.offset,
            size: part.size,
        });
    }
    let parts = state
        .service
        .upload_parts(&archive, parts, Progress::none())
        .await
        .op(op)?;
    Ok(UploadPartsResponse {
        success: true,
        parts,
    })
}

/// One PUT of the whole archive to `url`, within `timeout`.
pub async fn upload_archive(
    state: &BackupState,
    archive_path: &str,
    url: &str,
    timeout: Duration,
) -> Result<(), ApiError> {
    let op = Operation::BackupCreate;
    let archive = validate::archive("archivePath", archive_path).op(op)?;
    state.service.check_url("url", url).op(op)?;
    let failed = |reason: String| {
        ApiError::new(
            ErrorCode::BackupCreateFailed,
            format!("Backup upload failed: {reason}"),
        )
        .with_context(json!({ "archivePath": archive_path }))
        .with_operation(op)
    };
    let upload = state.service.upload(
        &archive,
        Some(url.to_string()),
        Vec::new(),
        1,
        Progress::none(),
    );
    match tokio::time::timeout(timeout, upload).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(failed(error.to_string())),
        Err(_) => Err(failed(format!(
            "timed out after {} ms",
            timeout.as_millis()
        ))),
    }
}

/// Readies `dir` for a restore of `backup_id` from `archive_path`: a restore on it is
/// released (its writes discarded, as a new restore would), the archives' directory made;
/// answers the size of the archive already there (0 when none), so the caller downloads
/// only what it does not have.
pub async fn prepare_restore(
    state: &BackupState,
    dir: &str,
    backup_id: &str,
    archive_path: &str,
) -> Result<u64, ApiError> {
    let op = Operation::BackupRestore;
    let dir = backup_dir(state, dir, op)?;
    let archive = validate::archive("archivePath", archive_path).op(op)?;
    let valid_id = backup_id.len() <= 128
        && backup_id
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && backup_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !valid_id {
        return Err(invalid(
            "backupId",
            "must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$",
        ))
        .op(op);
    }
    if state.service.is_restored(&dir) {
        state
            .service
            .release(dir.clone())
            .await
            .map_err(Restoring)
            .op(op)?;
    }
    if let Some(parent) = archive.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(|error| {
            ApiError::new(ErrorCode::BackupRestoreFailed, error.to_string()).with_operation(op)
        })?;
    }
    Ok(tokio::fs::metadata(&archive)
        .await
        .map(|meta| meta.len())
        .unwrap_or(0))
}

/// One part of a ranged download as the next line's object sends it.
pub struct DownloadPart {
    pub url: String,
    pub offset: u64,
    /// `bytes=S-E`; absent only for a single part at offset 0.
    pub range: Option<String>,
}

/// Downloads `expected` bytes into `archive_path` from parts that cover it exactly and in
/// order, all at once, within `timeout`.
pub async fn download_archive(
    state: &BackupState,
    archive_path: &str,
    expected: u64,
    parts: Vec<DownloadPart>,
    timeout: Duration,
) -> Result<(), ApiError> {
    let op = Operation::BackupRestore;
    let archive = validate::archive("archivePath", archive_path).op(op)?;
    let ranges = download_ranges(&parts, expected).op(op)?;
    for (i, part) in parts.iter().enumerate() {
        state
            .service
            .check_url(&format!("parts[{i}].url"), &part.url)
            .op(op)?;
    }
    let failed = |reason: String| {
        ApiError::new(
            ErrorCode::BackupRestoreFailed,
            format!("Backup download failed: {reason}"),
        )
        .with_context(json!({ "archivePath": archive_path }))
        .with_operation(op)
    };
    let download = state.service.download_parts(ranges, &archive, expected);
    match tokio::time::timeout(timeout, download).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(failed(error.to_string())),
        Err(_) => Err(failed(format!(
            "timed out after {} ms",
            timeout.as_millis()
        ))),
    }
}

/// The parts' byte ranges, checked as the reference checks them: one part without a range
/// at offset 0, or every part with `bytes=S-E` where S is its offset, contiguous from 0,
/// covering exactly `expected` bytes.
fn download_ranges(
    parts: &[DownloadPart],
    expected: u64,
) -> Result<Vec<RangedPart>, validate::BackupConfigError> {
    if parts.is_empty() {
        return Err(invalid("parts", "must not be empty"));
    }
    if let [single] = parts
        && single.range.is_none()
    {
        if single.offset != 0 {
            return Err(invalid(
                "parts[0].offset",
                "must be 0 for a part without a range",
            ));
        }
        return Ok(vec![RangedPart {
            url: single.url.clone(),
            start: 0,
            end: expected,
        }]);
    }
    let mut next = 0;
    let mut ranges = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        let field = format!("parts[{i}].range");
        let range = part
            .range
            .as_deref()
            .and_then(|range| range.strip_prefix("bytes="))
            .and_then(|range| range.split_once('-'))
            .and_then(|(start, end)| Some((start.parse::<u64>().ok()?, end.parse::<u64>().ok()?)));
        let Some((start, end)) = range else {
            return Err(invalid(&field, "must be bytes=START-END"));
        };
        if start != part.offset || start != next || end < start || end >= expected {
            return Err(invalid(
                &field,
                format!("must start at its offset, {next}, and end before {expected}"),
            ));
        }
        next = end + 1;
        ranges.push(RangedPart {
            url: part.url.clone(),
            start,
            end: end + 1,
        });
    }
    if next != expected {
        return Err(invalid(
            "parts",
            format!("cover {next} of {expected} bytes"),
        ));
    }
    Ok(ranges)
}

/// Writes the archive out under `dir` as a plain tree (no mount).
pub async fn extract_archive(
    state: &BackupState,
    dir: &str,
    archive_path: &str,
) -> Result<(), ApiError> {
    let op = Operation::BackupRestore;
    let dir = backup_dir(state, dir, op)?;
    let archive = validate::archive("archivePath", archive_path).op(op)?;
    if !archive.is_file() {
        return Err(fsd_backup::BackupError::ArchiveMissing(archive)).op(op);
    }
    tokio::task::spawn_blocking(move || fsd_backup::unpack::unpack(&archive, &dir))
        .await
        .map_err(|error| ApiError::new(ErrorCode::BackupRestoreFailed, error.to_string()))?
        .map_err(Restoring)
        .op(op)?;
    Ok(())
}

/// Removes an archive and what fsd keeps beside it (its index and checksum).
pub fn cleanup_archive(state: &BackupState, archive_path: &str) -> Result<(), ApiError> {
    let archive: PathBuf =
        validate::archive("archivePath", archive_path).op(Operation::BackupCreate)?;
    state.service.discard(&archive);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(offset: u64, range: Option<&str>) -> DownloadPart {
        DownloadPart {
            url: "https://example.com/a".into(),
            offset,
            range: range.map(str::to_string),
        }
    }

    #[test]
    fn download_parts_cover_the_archive_exactly() {
        let single = download_ranges(&[part(0, None)], 10).unwrap();
        assert_eq!((single[0].start, single[0].end), (0, 10));
        let two = download_ranges(
            &[part(0, Some("bytes=0-3")), part(4, Some("bytes=4-9"))],
            10,
        )
        .unwrap();
        assert_eq!((two[1].start, two[1].end), (4, 10));
        for bad in [
            vec![part(1, None)],
            vec![part(0, Some("bytes=0-3")), part(5, Some("bytes=5-9"))],
            vec![part(0, Some("bytes=0-3")), part(4, Some("bytes=4-8"))],
            vec![part(0, Some("bytes=0-3")), part(4, Some("bytes=4-10"))],
            vec![part(0, Some("0-9"))],
            vec![],
        ] {
            assert!(download_ranges(&bad, 10).is_err());
        }
    }
}
