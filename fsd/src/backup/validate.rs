//! The reference's path rules for backups (reference-api.md §6.1), and the request fields.

use std::path::{Path, PathBuf};

use fsd_api::backup::{ALLOWED_DIR_PREFIXES, ARCHIVE_ROOT};
use fsd_api::{MAX_PATH_BYTES, Operation};

use crate::error::ApiError;

/// A request field that breaks the backup rules (its wire code is decided in `crate::error`).
#[derive(Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct BackupConfigError {
    pub field: String,
    pub message: String,
}

/// `field` breaks the rules, in the answer of `operation`.
pub fn invalid(field: &str, message: impl Into<String>, operation: Operation) -> ApiError {
    let error = BackupConfigError {
        field: field.to_string(),
        message: message.into(),
    };
    ApiError::from(error).with_operation(operation)
}

/// Absolute, no NUL, no `..` anywhere (as a substring, as the reference checks), ≤ 4096.
fn checked_path(field: &str, value: &str, operation: Operation) -> Result<PathBuf, ApiError> {
    if value.is_empty() {
        return Err(invalid(field, "is required", operation));
    }
    if value.len() > MAX_PATH_BYTES {
        return Err(invalid(
            field,
            format!("is longer than {MAX_PATH_BYTES} bytes"),
            operation,
        ));
    }
    if value.contains('\0') {
        return Err(invalid(field, "contains a NUL byte", operation));
    }
    if !value.starts_with('/') {
        return Err(invalid(field, "must be an absolute path", operation));
    }
    if value.contains("..") {
        return Err(invalid(field, "must not contain '..'", operation));
    }
    Ok(PathBuf::from(value))
}

/// A directory to back up or restore onto: under an allowed prefix or the workspace.
pub fn dir(value: &str, workspace: &Path, operation: Operation) -> Result<PathBuf, ApiError> {
    let path = checked_path("dir", value, operation)?;
    let allowed = ALLOWED_DIR_PREFIXES
        .iter()
        .any(|prefix| path.starts_with(prefix))
        || path.starts_with(workspace);
    if !allowed {
        return Err(invalid(
            "dir",
            format!(
                "must be under one of {} or the workspace",
                ALLOWED_DIR_PREFIXES.join(", ")
            ),
            operation,
        ));
    }
    Ok(path)
}

/// An archive path: a file directly or deeper under /var/backups/.
pub fn archive(field: &str, value: &str, operation: Operation) -> Result<PathBuf, ApiError> {
    let path = checked_path(field, value, operation)?;
    if !value.starts_with(ARCHIVE_ROOT) || value.len() == ARCHIVE_ROOT.len() {
        return Err(invalid(
            field,
            format!("must be a file under {ARCHIVE_ROOT}"),
            operation,
        ));
    }
    Ok(path)
}

/// Part and download URLs: https, or http to a loopback host (the embedded store).
pub fn url(field: &str, value: &str, operation: Operation) -> Result<(), ApiError> {
    let Ok(url) = reqwest::Url::parse(value) else {
        return Err(invalid(field, "is not a URL", operation));
    };
    let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"))
        || url.host_str().is_some_and(|h| h.starts_with("127."));
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(invalid(
            field,
            "must be an https URL (http only to a loopback host)",
            operation,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_paths_follow_the_reference() {
        let op = Operation::BackupCreate;
        assert!(archive("archivePath", "/var/backups/a.sqsh", op).is_ok());
        assert!(archive("archivePath", "/var/backups/", op).is_err());
        assert!(archive("archivePath", "/tmp/a.sqsh", op).is_err());
        assert!(archive("archivePath", "/var/backups/a..b.sqsh", op).is_err());
        assert!(archive("archivePath", "var/backups/a.sqsh", op).is_err());
    }

    #[test]
    fn dirs_must_be_under_allowed_prefixes() {
        let op = Operation::BackupRestore;
        let ws = Path::new("/srv/ws");
        assert!(dir("/workspace/app", ws, op).is_ok());
        assert!(dir("/srv/ws/sub", ws, op).is_ok());
        assert!(dir("/etc", ws, op).is_err());
        assert!(dir("/workspacex", ws, op).is_err());
        assert!(dir("/tmp/a\0b", ws, op).is_err());
    }

    #[test]
    fn urls_are_https_or_loopback() {
        let op = Operation::BackupCreate;
        assert!(url("u", "https://x.r2.cloudflarestorage.com/b/k", op).is_ok());
        assert!(url("u", "http://127.0.0.1:9000/b/k", op).is_ok());
        assert!(url("u", "http://example.com/b/k", op).is_err());
        assert!(url("u", "ftp://127.0.0.1/x", op).is_err());
    }
}
