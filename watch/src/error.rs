//! What can go wrong starting a watch.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("path does not exist: {0}")]
    NotFound(PathBuf),
    #[error("not a directory: {0}")]
    NotDirectory(PathBuf),
    #[error(
        "inotify watch limit reached while watching {path} (raise fs.inotify.max_user_watches)"
    )]
    LimitReached { path: PathBuf },
    #[error("inotify: {0}")]
    Io(#[from] std::io::Error),
}
