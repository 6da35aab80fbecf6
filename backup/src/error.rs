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
    /// `--confine`: a path of the tree lies outside the roots (a link swapped in while the
    /// walk ran).
    #[error("{0} is outside the allowed roots")]
    Outside(PathBuf),
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
    /// A fork's branch would be made where something already is.
    #[error("{0} already exists")]
    BranchExists(PathBuf),
    #[error("{0}")]
    BranchName(String),
    #[error("no branch at {0}")]
    NoBranch(PathBuf),
    /// What a branch was to merge into is no fork overlay (a forked directory or a branch).
    #[error("{0} is neither a forked directory nor a branch")]
    NotForked(PathBuf),
    /// A snapshot brought back as a branch of a directory none of whose chain was sent
    /// from that directory as a fork point.
    #[error("none of the snapshots given was sent from {0} as a fork point (backup create --fork)")]
    NotSentFrom(PathBuf),
    /// A merge of two overlays that share no frozen layer, or of one into itself.
    #[error("{branch} cannot be merged into {into}: {reason}")]
    Unrelated {
        branch: PathBuf,
        into: PathBuf,
        reason: &'static str,
    },
    /// A directory to fork or merge has a mount at or beneath it that is not a fork's own
    /// (a restore, a bucket): what it shows is in no fork layer.
    #[error("{path} has a mount ({fstype}) at {mount}; {advice}")]
    MountedIn {
        path: PathBuf,
        mount: PathBuf,
        fstype: String,
        advice: &'static str,
    },
    /// A process holds something under a branch to discard (a fork copies such a
    /// directory instead).
    #[error("{path} is in use by process {pid} ({how})")]
    Busy {
        path: PathBuf,
        pid: u32,
        how: String,
    },
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
    /// `source` at `path`; a confined read refused as outside the roots is [`Outside`]
    /// (at the path the archive's reader named, when it named one).
    ///
    /// [`Outside`]: BackupError::Outside
    pub fn io(path: &Path, source: std::io::Error) -> BackupError {
        if let Some(OutsideAt(at)) = source
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<OutsideAt>())
        {
            return BackupError::Outside(at.clone());
        }
        if fsd_search::is_outside(&source) {
            return BackupError::Outside(path.to_path_buf());
        }
        BackupError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn archive(error: backhand::BackhandError) -> BackupError {
        BackupError::Archive(error.to_string())
    }
}

/// A confined read of the tree refused at this path, carried through the archive writer's
/// `io::Error`s.
#[derive(Debug, thiserror::Error)]
#[error("{} is outside the allowed roots", .0.display())]
pub(crate) struct OutsideAt(pub PathBuf);

impl OutsideAt {
    /// `error`, naming `path` when it is a refusal as outside the roots.
    pub(crate) fn named(path: &Path, error: std::io::Error) -> std::io::Error {
        match BackupError::io(path, error) {
            BackupError::Outside(at) => {
                std::io::Error::new(std::io::ErrorKind::PermissionDenied, OutsideAt(at))
            }
            BackupError::Io { source, .. } => source,
            other => std::io::Error::other(other.to_string()),
        }
    }
}
