//! Incremental layers: an archive of only what changed on a restored directory (the
//! overlay's upper layer), stacked over its parent's archive when restored.
//!
//! The overlay marks deletions with whiteouts (0/0 character devices), which the archive
//! keeps as they are: the kernel honours them in lower layers too. It marks replaced and
//! renamed directories with xattrs, which the archive writer cannot store; such a directory
//! is written whole from the merged view instead, with a whiteout for every name a lower
//! layer holds there that the merged view does not.

use std::collections::BTreeSet;
use std::ffi::{CString, OsString};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::archive::{self, ArchiveOptions, ArchiveSummary, Builder, Entry, available_threads};
use crate::progress::Progress;
use crate::reader::Reader;
use crate::restore::Restore;
use crate::{BackupError, select};

/// Writes the changes made on `restore`'s directory since it was restored to `archive`.
pub fn create(
    restore: &Restore,
    archive: &Path,
    options: &ArchiveOptions,
    progress: Progress,
) -> Result<ArchiveSummary, BackupError> {
    let threads = if options.threads == 0 {
        available_threads()
    } else {
        options.threads
    };
    // The layer is read from the restore's upper directory, the daemon's own.
    let mut builder = Builder::new(options.codec, threads, progress, Reader::default())?;
    let merged_root = fs::metadata(&restore.dir).map_err(|e| BackupError::io(&restore.dir, e))?;
    builder.set_root(&merged_root);
    let layer = Layer {
        restore,
        lowers: restore.lowers(),
        excludes: &options.excludes,
    };
    layer.add_upper(&mut builder, Path::new(""))?;
    builder.finish(archive)
}

struct Layer<'a> {
    restore: &'a Restore,
    lowers: Vec<PathBuf>,
    excludes: &'a [String],
}

impl Layer<'_> {
    /// Adds the upper layer's entries under `relative`.
    fn add_upper(&self, builder: &mut Builder, relative: &Path) -> Result<(), BackupError> {
        let upper = self.restore.upper().join(relative);
        for name in sorted_names(&upper)? {
            let child = relative.join(&name);
            if self.excluded(&child) {
                continue;
            }
            let path = upper.join(&name);
            let meta = fs::symlink_metadata(&path).map_err(|e| BackupError::io(&path, e))?;
            if meta.is_dir() && replaces_lower(&path) {
                self.add_merged(builder, &child)?;
            } else if meta.is_dir() {
                builder.push(&child, Entry::Dir, &meta)?;
                self.add_upper(builder, &child)?;
            } else {
                builder.push(
                    &child,
                    archive::entry_for(&path, &meta, &Reader::default())?,
                    &meta,
                )?;
            }
        }
        Ok(())
    }

    /// Adds the directory `relative` whole, from the merged view, hiding what lower layers
    /// hold there and the merged view does not.
    fn add_merged(&self, builder: &mut Builder, relative: &Path) -> Result<(), BackupError> {
        let merged = self.restore.dir.join(relative);
        let meta = fs::symlink_metadata(&merged).map_err(|e| BackupError::io(&merged, e))?;
        builder.push(relative, Entry::Dir, &meta)?;
        let present: BTreeSet<OsString> = sorted_names(&merged)?.into_iter().collect();
        let mut below = BTreeSet::new();
        for lower in &self.lowers {
            if let Ok(names) = sorted_names(&lower.join(relative)) {
                below.extend(names);
            }
        }
        let names: BTreeSet<&OsString> = present.iter().chain(below.iter()).collect();
        for name in names {
            let child = relative.join(name);
            if !present.contains(name) {
                builder.push(&child, Entry::CharDevice { rdev: 0 }, &meta)?;
                continue;
            }
            if self.excluded(&child) {
                continue;
            }
            let path = merged.join(name);
            let child_meta = fs::symlink_metadata(&path).map_err(|e| BackupError::io(&path, e))?;
            if child_meta.is_dir() {
                self.add_merged(builder, &child)?;
            } else {
                builder.push(
                    &child,
                    archive::entry_for(&path, &child_meta, &Reader::default())?,
                    &child_meta,
                )?;
            }
        }
        Ok(())
    }

    fn excluded(&self, relative: &Path) -> bool {
        select::matches_exclude(self.excludes, relative)
    }
}

/// Whether `meta` is an overlay whiteout.
pub fn is_whiteout(meta: &fs::Metadata) -> bool {
    meta.file_type().is_char_device() && meta.rdev() == 0
}

fn sorted_names(dir: &Path) -> Result<Vec<OsString>, BackupError> {
    let mut names: Vec<OsString> = fs::read_dir(dir)
        .map_err(|e| BackupError::io(dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.file_name()))
        .collect();
    names.sort();
    Ok(names)
}

/// Whether the upper layer's directory at `path` is marked as replacing what lower layers
/// hold at its name (opaque) or as a directory renamed from elsewhere (a redirect): what
/// it shows is not only what it holds.
pub(crate) fn replaces_lower(path: &Path) -> bool {
    has_xattr(path, "trusted.overlay.opaque") || has_xattr(path, "trusted.overlay.redirect")
}

fn has_xattr(path: &Path, name: &str) -> bool {
    let (Ok(path), Ok(name)) = (
        CString::new(path.as_os_str().as_bytes()),
        CString::new(name),
    ) else {
        return false;
    };
    // SAFETY: both strings are NUL-terminated; a null buffer of size 0 only asks the size.
    let size = unsafe { libc::lgetxattr(path.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
    size >= 0
}
