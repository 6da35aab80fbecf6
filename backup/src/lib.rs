//! Workspace backups: squashfs archives built in-process, transfers through presigned URLs,
//! copy-on-write restores (squashfs lower + overlay upper) and incremental layers.

pub mod archive;
mod codec;
mod cursor;
mod error;
pub mod fork;
pub mod frozen_copy;
pub mod incremental;
pub mod index;
pub mod layer;
pub mod location;
pub mod mount;
mod prefetch;
pub mod progress;
pub mod reader;
pub mod remote;
pub mod restore;
pub mod select;
pub mod stored;
pub mod transfer;
pub mod unpack;

pub use archive::{ArchiveOptions, ArchiveSummary};
pub use codec::Codec;
pub use error::BackupError;
pub use progress::{Phase, Progress};

/// `path` with `suffix` appended to its file name (`a.sqsh` → `a.sqsh.sha256`).
pub fn with_suffix(path: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}
