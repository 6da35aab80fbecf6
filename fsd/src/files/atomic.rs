//! Atomic file replacement: write a temp file beside the target (under a scratch name, see
//! `fsd_api::scratch`), fsync it, rename it over the target, fsync the directory. Readers see the old file or the new one, never a torn one;
//! concurrent writers each win whole. The previous file's mode and owner are kept.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use fsd_api::scratch::{ScratchKind, scratch_path};

/// Mode of files that did not exist before.
const NEW_FILE_MODE: u32 = 0o644;

/// Why an atomic write failed; which step, so the caller can name it.
#[derive(Debug)]
pub enum AtomicWriteError {
    /// The target is a directory.
    IsDirectory,
    /// A parent component exists and is not a directory.
    ParentNotDirectory,
    Io(io::Error),
}

impl From<io::Error> for AtomicWriteError {
    fn from(err: io::Error) -> Self {
        Self::Io(err)
    }
}

/// An open temp file that becomes `target` on [`AtomicFile::commit`] and vanishes if dropped.
pub struct AtomicFile {
    target: PathBuf,
    temp: PathBuf,
    file: File,
    committed: bool,
}

impl AtomicFile {
    /// Creates missing parent directories and the temp file. A symlink target is written
    /// through: the file it points to is replaced, the link stays.
    pub fn create(target: &Path) -> Result<Self, AtomicWriteError> {
        let target = through_symlink(target)?;
        let parent = target.parent().unwrap_or(Path::new("/"));
        if let Err(err) = fs::create_dir_all(parent) {
            let blocked = matches!(
                err.kind(),
                io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory
            );
            return Err(if blocked {
                AtomicWriteError::ParentNotDirectory
            } else {
                AtomicWriteError::Io(err)
            });
        }
        let previous = match fs::metadata(&target) {
            Ok(meta) if meta.is_dir() => return Err(AtomicWriteError::IsDirectory),
            Ok(meta) => Some(meta),
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(err.into()),
        };
        // The scratch name says whether the target existed, so a watch reports the rename
        // as the target's create or modify (see fsd_api::scratch).
        let kind = match previous {
            Some(_) => ScratchKind::Replace,
            None => ScratchKind::New,
        };
        let temp = scratch_path(&target, kind);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        let atomic = Self {
            target,
            temp,
            file,
            committed: false,
        };
        let mode = previous
            .as_ref()
            .map_or(NEW_FILE_MODE, |meta| meta.permissions().mode() & 0o7777);
        atomic
            .file
            .set_permissions(fs::Permissions::from_mode(mode))?;
        if let Some(meta) = previous
            && nix::unistd::geteuid().is_root()
        {
            std::os::unix::fs::fchown(&atomic.file, Some(meta.uid()), Some(meta.gid()))?;
        }
        Ok(atomic)
    }

    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Flushes to disk and renames over the target.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.flush()?;
        self.file.sync_all()?;
        fs::rename(&self.temp, &self.target)?;
        self.committed = true;
        if let Some(parent) = self.target.parent() {
            // Persist the rename itself; failure here loses nothing already visible.
            if let Ok(dir) = File::open(parent) {
                let _ = dir.sync_all();
            }
        }
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

/// Replaces `target` with `bytes` atomically.
pub fn write_bytes(target: &Path, bytes: &[u8]) -> Result<(), AtomicWriteError> {
    let mut file = AtomicFile::create(target)?;
    file.file().write_all(bytes)?;
    file.commit()?;
    Ok(())
}

/// Follows a chain of symlinks at `path` (even dangling ones) to the path to replace.
fn through_symlink(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = fs::read_link(&current)?;
                current = match current.parent() {
                    Some(parent) => parent.join(link),
                    None => link,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(io::Error::from_raw_os_error(
        nix::errno::Errno::ELOOP as i32,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_keeps_mode() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("script.sh");
        fs::write(&target, "old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).unwrap();
        write_bytes(&target, b"new").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"new");
        assert_eq!(
            fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o755
        );
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "temp file left behind"
        );
    }

    #[test]
    fn creates_parents_and_refuses_directories() {
        let dir = tempfile::tempdir().unwrap();
        write_bytes(&dir.path().join("a/b/c.txt"), b"x").unwrap();
        assert_eq!(fs::read(dir.path().join("a/b/c.txt")).unwrap(), b"x");
        assert!(matches!(
            write_bytes(&dir.path().join("a"), b"x"),
            Err(AtomicWriteError::IsDirectory)
        ));
        assert!(matches!(
            write_bytes(&dir.path().join("a/b/c.txt/d"), b"x"),
            Err(AtomicWriteError::ParentNotDirectory)
        ));
    }

    #[test]
    fn writes_through_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("real"), "old").unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("link")).unwrap();
        write_bytes(&dir.path().join("link"), b"new").unwrap();
        assert!(
            fs::symlink_metadata(dir.path().join("link"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(dir.path().join("real")).unwrap(), b"new");
    }

    #[test]
    fn an_abandoned_write_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = AtomicFile::create(&dir.path().join("x")).unwrap();
        file.file().write_all(b"partial").unwrap();
        drop(file);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
