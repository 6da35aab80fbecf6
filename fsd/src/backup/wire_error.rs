//! Backup errors on the wire.

use fsd_api::ErrorCode;
use serde_json::json;

use fsd_backup::BackupError;

use super::validate::BackupConfigError;
use crate::error::ApiError;

/// Backup errors: caller mistakes are 4xx (a missing source directory is
/// INVALID_BACKUP_CONFIG, a missing archive BACKUP_NOT_FOUND, where the reference answers
/// 500); what fails on the machine is BACKUP_CREATE_FAILED or BACKUP_RESTORE_FAILED.
impl From<BackupError> for ApiError {
    fn from(err: BackupError) -> Self {
        wire_error(err, ErrorCode::BackupCreateFailed)
    }
}

/// A failure while restoring: what fails on the machine is BACKUP_RESTORE_FAILED.
pub struct Restoring(pub BackupError);

impl From<Restoring> for ApiError {
    fn from(Restoring(err): Restoring) -> Self {
        wire_error(err, ErrorCode::BackupRestoreFailed)
    }
}

/// A failure of a fork or a discard on the wire (`backup::fork`): caller mistakes by their
/// own codes, what fails on the machine FORK_FAILED.
pub struct Forking(pub BackupError);

impl From<Forking> for ApiError {
    fn from(Forking(err): Forking) -> Self {
        let message = err.to_string();
        match &err {
            BackupError::BranchExists(path) => {
                ApiError::new(ErrorCode::FileExists, message).with_context(json!({ "path": path }))
            }
            BackupError::BranchName(_) => {
                ApiError::invalid_field(ErrorCode::ValidationFailed, "names", message)
            }
            BackupError::NoBranch(path) => ApiError::new(ErrorCode::BranchNotFound, message)
                .with_context(json!({ "path": path })),
            BackupError::NotForked(path) => ApiError::new(ErrorCode::BranchNotFound, message)
                .with_context(json!({ "field": "into", "path": path })),
            BackupError::NotSentFrom(_) => {
                ApiError::invalid_field(ErrorCode::ValidationFailed, "from", message)
                    .with_suggestion(
                        "Send the directory with a fork-point snapshot (backup create --fork), \
                         restore that snapshot elsewhere and snapshot the work there on it",
                    )
            }
            BackupError::Unrelated { .. } => {
                ApiError::invalid_field(ErrorCode::ValidationFailed, "into", message)
            }
            BackupError::Busy { path, pid, how } => ApiError::new(ErrorCode::ResourceBusy, message)
                .with_context(json!({ "path": path, "pid": pid, "holds": how }))
                .with_suggestion(
                    "Stop the process or move it out of the branch, then discard it again",
                ),
            BackupError::NotADirectory(path) => ApiError::new(ErrorCode::NotDirectory, message)
                .with_context(json!({ "field": "dir", "path": path })),
            BackupError::MountedIn {
                path,
                mount,
                fstype,
                ..
            } => ApiError::new(ErrorCode::ResourceBusy, message)
                .with_context(json!({ "path": path, "mount": mount, "fstype": fstype })),
            // What backups and restores map as well (outside the roots, a directory where a
            // file goes) as they do; the rest failed on the machine.
            _ => wire_error(err, ErrorCode::ForkFailed),
        }
    }
}

/// `err` as the wire has it, `failed` standing for what failed on the machine.
fn wire_error(err: BackupError, failed: ErrorCode) -> ApiError {
    let message = err.to_string();
    match &err {
        BackupError::Outside(path) => ApiError::outside_roots(message, path.display().to_string()),
        BackupError::NotADirectory(path) => ApiError::new(ErrorCode::InvalidBackupConfig, message)
            .with_context(json!({ "field": "dir", "path": path })),
        BackupError::InvalidExclude { pattern, .. } => {
            ApiError::new(ErrorCode::InvalidBackupConfig, message)
                .with_context(json!({ "field": "excludes", "pattern": pattern }))
        }
        BackupError::ArchiveMissing(path) => ApiError::new(ErrorCode::BackupNotFound, message)
            .with_context(json!({ "archivePath": path })),
        BackupError::NotMounted(path) => ApiError::new(ErrorCode::BackupNotFound, message)
            .with_context(json!({ "dir": path }))
            .with_suggestion("Layers are taken of a directory restored with /api/backup/restore"),
        BackupError::Index(_) => ApiError::new(ErrorCode::InvalidBackupConfig, message)
            .with_context(json!({ "field": "indexUrl" })),
        BackupError::NotInSnapshot(path) => ApiError::new(ErrorCode::FileNotFound, message)
            .with_context(json!({ "field": "paths", "path": path })),
        // What the live tree holds in the way of a path restore: a directory where a file
        // goes, a file where the path's directories go. The caller's to clear, not a
        // failure of the machine.
        BackupError::Io { path, source } if source.kind() == std::io::ErrorKind::IsADirectory => {
            ApiError::new(ErrorCode::IsDirectory, message).with_context(json!({ "path": path }))
        }
        BackupError::Io { path, source } if source.kind() == std::io::ErrorKind::NotADirectory => {
            ApiError::new(ErrorCode::NotDirectory, message).with_context(json!({ "path": path }))
        }
        BackupError::TransferStatus { status, .. } => {
            ApiError::new(failed, message).with_context(json!({ "upstreamStatus": status }))
        }
        _ => ApiError::new(failed, message),
    }
}

impl From<BackupConfigError> for ApiError {
    fn from(err: BackupConfigError) -> Self {
        Self::invalid_field(ErrorCode::InvalidBackupConfig, &err.field, err.message)
    }
}
