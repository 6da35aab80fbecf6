//! How a backup reads the tree it archives: by path, or, under `--confine`, beneath the
//! roots by descriptor.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fsd_search::Within;

/// How the tree being archived is read: by path, or (`--confine`) beneath the roots: each
/// name looked up relative to its parent opened by the kernel beneath them, so a directory
/// swapped for a link out while the walk runs has nothing outside read or recorded (the
/// archive fails with [`BackupError::Outside`](crate::BackupError::Outside)).
#[derive(Debug, Clone, Default)]
pub struct Reader(Option<Arc<Within>>);

impl Reader {
    pub fn confined(within: Arc<Within>) -> Self {
        Self(Some(within))
    }

    pub(crate) fn lstat(&self, path: &Path) -> std::io::Result<fs::Metadata> {
        match &self.0 {
            Some(within) => Ok(within.symlink_metadata(path)?),
            None => fs::symlink_metadata(path),
        }
    }

    /// The directory to archive, its links followed.
    pub(crate) fn metadata(&self, dir: &Path) -> std::io::Result<fs::Metadata> {
        match &self.0 {
            Some(within) => Ok(within.metadata(dir)?),
            None => fs::metadata(dir),
        }
    }

    pub(crate) fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
        match &self.0 {
            Some(within) => Ok(within.read_link(path)?),
            None => fs::read_link(path),
        }
    }

    pub(crate) fn open(&self, path: &Path) -> std::io::Result<File> {
        match &self.0 {
            Some(within) => Ok(within.open(path)?),
            None => File::open(path),
        }
    }

    pub(crate) fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        match &self.0 {
            Some(_) => {
                let mut bytes = Vec::new();
                self.open(path)?.read_to_end(&mut bytes)?;
                Ok(bytes)
            }
            None => fs::read(path),
        }
    }
}
