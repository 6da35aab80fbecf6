//! Paths of a stored snapshot written back into a live directory: the snapshot's index says
//! what was there and which archive of the chain holds each entry; the archives are read in
//! place (ranged GETs), only the tables and the blocks of what is asked. Files are written
//! as any API write (temp file, fsync, rename) and get the snapshot's mode; a symlink at a
//! restored path is replaced, never followed.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use fsd_api::backup::ExtractBackupResponse;
use fsd_api::scratch::{ScratchKind, scratch_path};
use fsd_backup::BackupError;
use fsd_backup::index::{Index, IndexEntry, Kind};
use fsd_backup::stored::{ChainReader, ChainSource};

use crate::files::atomic::Destination;

/// What to bring back, and from where.
pub struct ExtractSpec {
    pub dir: PathBuf,
    pub index: Index,
    /// By depth in the chain.
    pub archives: HashMap<u8, ChainSource>,
    /// Relative to `dir`, checked (normal components only).
    pub paths: Vec<PathBuf>,
}

/// Writes `spec.paths` from the snapshot into `spec.dir`. Blocking (ranged GETs run on
/// `runtime`).
pub fn extract(
    spec: ExtractSpec,
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
) -> Result<ExtractBackupResponse, BackupError> {
    let mut wanted: Vec<&IndexEntry> = Vec::new();
    for path in &spec.paths {
        let before = wanted.len();
        wanted.extend(
            spec.index
                .entries
                .iter()
                .filter(|entry| entry.path.starts_with(path)),
        );
        if wanted.len() == before {
            return Err(BackupError::NotInSnapshot(path.clone()));
        }
    }
    let mut chain = ChainReader::new(spec.archives, client, runtime);
    let mut answer = ExtractBackupResponse {
        success: true,
        ..ExtractBackupResponse::default()
    };
    for entry in wanted {
        if !is_plain(&entry.path) {
            return Err(BackupError::Index(format!(
                "{} is not a plain relative path",
                entry.path.display()
            )));
        }
        let target = spec.dir.join(&entry.path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| BackupError::io(parent, e))?;
        }
        match entry.kind {
            Kind::Dir => {
                std::fs::create_dir_all(&target).map_err(|e| BackupError::io(&target, e))?;
                set_mode(&target, entry.mode)?;
                answer.directories += 1;
            }
            Kind::File => {
                replace_if_not_a_file(&target)?;
                answer.bytes += write_file(&target, entry.mode, |out| chain.copy_file(entry, out))?;
                answer.files += 1;
            }
            Kind::Symlink => {
                let link = chain.symlink_target(entry)?;
                replace_if_not_a_file(&target)?;
                let scratch = scratch_path(&target, ScratchKind::Replace);
                std::os::unix::fs::symlink(&link, &scratch)
                    .and_then(|()| std::fs::rename(&scratch, &target))
                    .map_err(|e| {
                        let _ = std::fs::remove_file(&scratch);
                        BackupError::io(&target, e)
                    })?;
                answer.symlinks += 1;
            }
            Kind::Special => {}
        }
    }
    (answer.requests, answer.fetched_bytes) = chain.fetched();
    Ok(answer)
}

/// Writes a restored file as any API write (temp file, fsync, rename), its bytes streamed
/// by `fill`, then gives it the snapshot's mode; returns how many bytes.
fn write_file(
    target: &Path,
    mode: u32,
    fill: impl FnOnce(&mut Destination) -> Result<u64, BackupError>,
) -> Result<u64, BackupError> {
    let mut destination =
        Destination::open(target, None, None).map_err(|e| write_failed(target, e))?;
    let written = fill(&mut destination)?;
    destination
        .commit()
        .map_err(|e| BackupError::io(target, e))?;
    set_mode(target, mode)?;
    Ok(written)
}

/// Whether `path` is relative and made of names only (no `..`, no root).
pub fn is_plain(path: &Path) -> bool {
    !path.as_os_str().is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// A symlink (or anything but a regular file) at a path a file or symlink is restored to is
/// removed first, so the restore replaces it instead of writing through it. A directory is
/// refused: restoring a file over a tree is not what a path restore should do silently.
fn replace_if_not_a_file(target: &Path) -> Result<(), BackupError> {
    match std::fs::symlink_metadata(target) {
        Ok(meta) if meta.is_dir() => Err(BackupError::io(
            target,
            std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "a directory is there now; remove it to restore the file",
            ),
        )),
        Ok(meta) if !meta.is_file() => {
            std::fs::remove_file(target).map_err(|e| BackupError::io(target, e))
        }
        _ => Ok(()),
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<(), BackupError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| BackupError::io(path, e))
}

fn write_failed(target: &Path, error: crate::files::atomic::AtomicWriteError) -> BackupError {
    BackupError::io(
        target,
        std::io::Error::other(format!("cannot write the file: {error:?}")),
    )
}
