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
    #[error("watch: {0}")]
    Io(#[from] std::io::Error),
    /// The directory the watch recorded is not the one its caller opened at the path (a
    /// link swapped in while it started): see [`crate::Watcher::root_object`].
    #[error("the directory at {0} changed while the watch started (it led outside)")]
    Elsewhere(PathBuf),
    #[error("the {0} watch engine is not available on this system")]
    Unsupported(String),
    #[error("notify: {0}")]
    Notify(#[from] notify::Error),
}
