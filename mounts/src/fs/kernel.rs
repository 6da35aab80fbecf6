//! What the kernel is told: the errno a failed store call becomes, and the names it may
//! hand us.

use std::ffi::OsStr;

use fsd_s3::ClientError;
use fuser::Errno;

use super::keys;

/// The errno a failed store call becomes. This is the FUSE boundary: what the store said
/// (status, S3 code, message) is logged here, since the errno cannot carry it.
pub(super) fn errno(error: &ClientError) -> Errno {
    if error.status() == Some(404) {
        tracing::debug!(%error, "store call: not found");
    } else {
        tracing::warn!(%error, "store call failed");
    }
    match error.status() {
        Some(404) => Errno::ENOENT,
        Some(403) => Errno::EACCES,
        _ => Errno::EIO,
    }
}

pub(super) fn name_of(name: &OsStr) -> Result<&str, Errno> {
    let name = name.to_str().ok_or(Errno::EINVAL)?;
    if keys::usable_name(name) {
        Ok(name)
    } else {
        Err(Errno::EINVAL)
    }
}
