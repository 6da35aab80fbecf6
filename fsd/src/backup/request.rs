//! What a backup request names, checked before anything is done with it: its body parsed
//! with the domain's wire codes, and the directory it names under the reference's rules and
//! the daemon's path policy.

use std::path::PathBuf;

use fsd_api::{ErrorCode, Operation};

use super::validate;
use crate::error::{ApiError, OperationExt};
use crate::paths::Follow;
use crate::state::AppState;

/// `dir` checked against the reference's rules, with this daemon's workspace allowed too.
/// Under `--confine` it must also resolve inside the allowed roots, as every path argument
/// (checked after the reference's rules, so their codes stay the reference's, and before
/// anything is done with it).
pub(super) fn backup_dir(state: &AppState, dir: &str, op: Operation) -> Result<PathBuf, ApiError> {
    let checked = validate::dir(dir, std::path::Path::new(&state.capabilities.workspace)).op(op)?;
    state.paths.in_workspace("dir", dir, Follow::Final)?;
    Ok(checked)
}

/// Parses a backup request; type errors are INVALID_BACKUP_CONFIG, as the reference has it.
pub(super) fn parse_backup_request<T: serde::de::DeserializeOwned>(
    body: &[u8],
    operation: Operation,
) -> Result<T, ApiError> {
    crate::wire::json::parse_as(body, ErrorCode::InvalidBackupConfig, operation)
}
