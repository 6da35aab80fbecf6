//! What a backup request names, checked before anything is done with it: its body parsed
//! with the domain's wire codes, and the directory it names under the reference's rules and
//! the daemon's path policy.

use std::path::PathBuf;

use fsd_api::{ErrorCode, Operation};

use super::BackupState;
use super::validate;
use crate::error::{ApiError, OperationExt};
use crate::paths::{Follow, PathError};

/// `dir` checked against the daemon's path policy, then the reference's rules (with this
/// daemon's workspace allowed too). A path the policy refuses (outside `--confine`'s roots,
/// the daemon's own `/proc`) is 403 `PERMISSION_DENIED` before any other check, as on every
/// other route, so a client that handles confinement by its code sees it here too; what
/// the policy leaves to the reference's rules (empty, NUL, too long, relative) keeps the
/// reference's codes.
pub(super) fn backup_dir(
    state: &BackupState,
    dir: &str,
    op: Operation,
) -> Result<PathBuf, ApiError> {
    checked_dir(state, dir, op, Follow::Final)
}

/// The directory of a restore to release: its last name is not followed. A release finds
/// its restore by the path it was made on and detaches it by descriptor, wherever the
/// directory has moved since, even when a link now stands at that name.
pub(super) fn restored_dir(
    state: &BackupState,
    dir: &str,
    op: Operation,
) -> Result<PathBuf, ApiError> {
    checked_dir(state, dir, op, Follow::Parent)
}

fn checked_dir(
    state: &BackupState,
    dir: &str,
    op: Operation,
    follow: Follow,
) -> Result<PathBuf, ApiError> {
    match state.paths.in_workspace("dir", dir, follow) {
        Err(refused @ (PathError::OutsideRoots { .. } | PathError::DaemonProc { .. })) => {
            return Err(refused.into());
        }
        Err(PathError::Invalid { .. }) | Ok(_) => {}
    }
    let checked = validate::dir(dir, std::path::Path::new(&state.capabilities.workspace)).op(op)?;
    Ok(checked)
}

/// Parses a backup request; type errors are INVALID_BACKUP_CONFIG, as the reference has it.
pub(super) fn parse_backup_request<T: serde::de::DeserializeOwned>(
    body: &[u8],
    operation: Operation,
) -> Result<T, ApiError> {
    crate::wire::json::parse_as(body, ErrorCode::InvalidBackupConfig, operation)
}

/// How a backup reads its tree: confined, beneath the roots by descriptor.
pub(super) fn tree_reader(state: &BackupState) -> fsd_backup::reader::Reader {
    state
        .paths
        .policy()
        .beneath()
        .cloned()
        .map(fsd_backup::reader::Reader::confined)
        .unwrap_or_default()
}
