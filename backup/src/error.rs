//! What can go wrong in the backup crate.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("source directory does not exist or is not a directory: {0}")]
    NotADirectory(PathBuf),
    #[error("archive file does not exist: {0}")]
    ArchiveMissing(PathBuf),
    #[error("invalid exclude pattern {pattern:?}: {reason}")]
    InvalidExclude { pattern: String, reason: String },
    #[error("walking the directory failed: {0}")]
    Walk(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing the archive failed: {0}")]
    Archive(String),
    #[error("reading the archive failed: {0}")]
    Corrupt(String),
    #[error("snapshot index: {0}")]
    Index(String),
    #[error("{0} is not in the snapshot")]
    NotInSnapshot(PathBuf),
    #[error("failed to mount {what}: {reason}")]
    Mount { what: &'static str, reason: String },
    #[error("failed to unmount {path}: {reason}")]
    Unmount { path: PathBuf, reason: String },
    #[error("no active restore on {0}")]
    NotMounted(PathBuf),
    #[error("{0}")]
    Layer(String),
    #[error("transfer failed: {0}")]
    Transfer(String),
    #[error("transfer refused: HTTP {status} from {what}: {body}")]
    TransferStatus {
        status: u16,
        what: String,
        body: String,
    },
    #[error("{what} mismatch: expected {expected}, got {actual}")]
    Verify {
        what: &'static str,
        expected: String,
        actual: String,
    },
}

impl BackupError {
    pub fn io(path: &Path, source: std::io::Error) -> BackupError {
        BackupError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn archive(error: backhand::BackhandError) -> BackupError {
        BackupError::Archive(error.to_string())
    }
}
