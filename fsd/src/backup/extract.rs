//! Paths of a stored snapshot written back into a live directory: the snapshot's index says
//! what was there and which archive of the chain holds each entry; the archives are read in
//! place (ranged GETs), only the tables and the blocks of what is asked. Files are written
//! as any API write (temp file, fsync, rename) and get the snapshot's mode; a symlink at a
//! restored path is replaced, never followed.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use fsd_api::backup::ExtractBackupResponse;
use fsd_api::scratch::{ScratchKind, scratch_path};
use fsd_backup::BackupError;
use fsd_backup::index::{Index, IndexEntry, Kind};
use fsd_backup::stored::{ChainReader, ChainSource};
use fsd_search::{Refused, Within};

use crate::files::atomic::Destination;

/// What to bring back, and from where.
pub struct ExtractSpec {
    pub dir: PathBuf,
    pub index: Index,
    /// By depth in the chain.
    pub archives: HashMap<u8, ChainSource>,
    /// Relative to `dir`, checked (normal components only).
    pub paths: Vec<PathBuf>,
    /// `--confine`: every directory made, file written, link placed and mode set is done
    /// relative to a descriptor opened beneath the roots.
    pub within: Option<Arc<Within>>,
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
    // Owners are given back where the daemon may give them (as `tar` does as root).
    let owners = nix::unistd::geteuid().is_root();
    // A directory's time changes with what is written into it: given last, deepest first.
    let mut directories: Vec<&IndexEntry> = Vec::new();
    for entry in wanted {
        if !is_plain(&entry.path) {
            return Err(BackupError::Index(format!(
                "{} is not a plain relative path",
                entry.path.display()
            )));
        }
        let target = spec.dir.join(&entry.path);
        let within = spec.within.as_deref();
        if let Some(parent) = target.parent() {
            make_dirs(parent, within)?;
        }
        match entry.kind {
            Kind::Dir => {
                make_dirs(&target, within)?;
                set_owner_and_mode(&target, entry, owners, within)?;
                directories.push(entry);
                answer.directories += 1;
            }
            Kind::File => {
                replace_if_not_a_file(&target, within)?;
                answer.bytes += write_file(&target, within, |out| chain.copy_file(entry, out))?;
                set_owner_and_mode(&target, entry, owners, within)?;
                set_time(&target, entry, within)?;
                answer.files += 1;
            }
            Kind::Symlink => {
                let link = chain.symlink_target(entry)?;
                replace_if_not_a_file(&target, within)?;
                place_link(&link, &target, within)?;
                if owners {
                    set_owner(&target, entry, within)?;
                }
                set_time(&target, entry, within)?;
                answer.symlinks += 1;
            }
            Kind::Special => {}
        }
    }
    directories.sort_by_key(|entry| std::cmp::Reverse(entry.path.components().count()));
    for entry in directories {
        set_time(&spec.dir.join(&entry.path), entry, spec.within.as_deref())?;
    }
    (answer.requests, answer.fetched_bytes) = chain.fetched();
    Ok(answer)
}

/// Writes a restored file as any API write (temp file, fsync, rename), its bytes streamed
/// by `fill`; returns how many bytes.
fn write_file(
    target: &Path,
    within: Option<&Within>,
    fill: impl FnOnce(&mut Destination) -> Result<u64, BackupError>,
) -> Result<u64, BackupError> {
    let mut destination =
        Destination::open(target, None, within).map_err(|e| write_failed(target, e))?;
    let written = fill(&mut destination)?;
    destination
        .commit()
        .map_err(|e| BackupError::io(target, e))?;
    Ok(written)
}

/// Gives `path` the snapshot's owner (with `owners`) and then its mode: in that order,
/// since a change of owner clears setuid and setgid bits.
fn set_owner_and_mode(
    path: &Path,
    entry: &IndexEntry,
    owners: bool,
    within: Option<&Within>,
) -> Result<(), BackupError> {
    if owners {
        set_owner(path, entry, within)?;
    }
    set_mode(path, entry.mode, within)
}

/// Runs `act` on the entry at `path` itself (a link not followed): its parent's descriptor
/// opened beneath the roots when confined, else the path.
fn at_entry(
    path: &Path,
    within: Option<&Within>,
    act: impl FnOnce(Option<&std::os::fd::OwnedFd>, &Path) -> nix::Result<()>,
) -> Result<(), BackupError> {
    match within {
        None => act(None, path).map_err(|errno| BackupError::io(path, errno.into())),
        Some(within) => {
            let (dir, name) = within
                .parent_of(path)
                .map_err(|refused| refused_at(path, refused))?;
            act(Some(&dir), Path::new(&name)).map_err(|errno| BackupError::io(path, errno.into()))
        }
    }
}

/// Gives the entry at `path` (a link itself, not what it points to) the snapshot's owner.
fn set_owner(path: &Path, entry: &IndexEntry, within: Option<&Within>) -> Result<(), BackupError> {
    at_entry(path, within, |dir, name| {
        nix::unistd::fchownat(
            dir.map_or(nix::fcntl::AT_FDCWD, |dir| dir.as_fd()),
            name,
            Some(nix::unistd::Uid::from_raw(entry.uid)),
            Some(nix::unistd::Gid::from_raw(entry.gid)),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
    })
}

/// Gives the entry at `path` (a link itself) the snapshot's modification time, to the
/// nanosecond the index kept, so the tree compares with the snapshot as it was.
fn set_time(path: &Path, entry: &IndexEntry, within: Option<&Within>) -> Result<(), BackupError> {
    use nix::sys::time::TimeSpec;
    let mtime = TimeSpec::new(
        entry.mtime_ns.div_euclid(1_000_000_000),
        entry.mtime_ns.rem_euclid(1_000_000_000),
    );
    at_entry(path, within, |dir, name| {
        nix::sys::stat::utimensat(
            dir.map_or(nix::fcntl::AT_FDCWD, |dir| dir.as_fd()),
            name,
            &TimeSpec::UTIME_OMIT,
            &mtime,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        )
    })
}

/// `mkdir -p`; confined, each directory made relative to its parent's descriptor. A file
/// standing where a directory goes (`EEXIST` from the last one) is a file where the path's
/// directories go: `ENOTDIR`, as the kernel says it for one further up.
fn make_dirs(dir: &Path, within: Option<&Within>) -> Result<(), BackupError> {
    let made = match within {
        None => std::fs::create_dir_all(dir).map_err(|e| BackupError::io(dir, e)),
        Some(within) => within
            .create_dir_all(dir)
            .map(drop)
            .map_err(|refused| refused_at(dir, refused)),
    };
    made.map_err(|error| match error {
        BackupError::Io { path, source } if source.kind() == std::io::ErrorKind::AlreadyExists => {
            BackupError::io(&path, std::io::Error::from_raw_os_error(nix::libc::ENOTDIR))
        }
        other => other,
    })
}

/// Places a link to `link` at `target` (a scratch name renamed over it); confined, both
/// relative to the parent's descriptor.
fn place_link(link: &Path, target: &Path, within: Option<&Within>) -> Result<(), BackupError> {
    let scratch = scratch_path(target, ScratchKind::Replace);
    let Some(within) = within else {
        return std::os::unix::fs::symlink(link, &scratch)
            .and_then(|()| std::fs::rename(&scratch, target))
            .map_err(|e| {
                let _ = std::fs::remove_file(&scratch);
                BackupError::io(target, e)
            });
    };
    let (dir, name) = within
        .parent_of(target)
        .map_err(|refused| refused_at(target, refused))?;
    let scratch_name = scratch
        .file_name()
        .unwrap_or(name.as_os_str())
        .to_os_string();
    nix::unistd::symlinkat(link, &dir, scratch_name.as_os_str())
        .and_then(|()| nix::fcntl::renameat(&dir, scratch_name.as_os_str(), &dir, name.as_os_str()))
        .map_err(|errno| {
            let _ = nix::unistd::unlinkat(
                &dir,
                scratch_name.as_os_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
            BackupError::io(target, errno.into())
        })
}

fn refused_at(path: &Path, refused: Refused) -> BackupError {
    BackupError::io(path, refused.into())
}

/// Whether `path` is relative and made of names only (no `..`, no root).
pub fn is_plain(path: &Path) -> bool {
    !path.as_os_str().is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// A symlink (or anything but a regular file) at a path a file or symlink is restored to is
/// removed first, so the restore replaces it instead of writing through it. A directory is
/// refused: restoring a file over a tree is not what a path restore should do silently.
fn replace_if_not_a_file(target: &Path, within: Option<&Within>) -> Result<(), BackupError> {
    let meta = match within {
        None => std::fs::symlink_metadata(target),
        Some(within) => within.symlink_metadata(target).map_err(Into::into),
    };
    match meta {
        Ok(meta) if meta.is_dir() => Err(BackupError::io(
            target,
            std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "a directory is there now; remove it to restore the file",
            ),
        )),
        Ok(meta) if !meta.is_file() => match within {
            None => std::fs::remove_file(target).map_err(|e| BackupError::io(target, e)),
            Some(within) => {
                let (dir, name) = within
                    .parent_of(target)
                    .map_err(|refused| refused_at(target, refused))?;
                nix::unistd::unlinkat(
                    &dir,
                    name.as_os_str(),
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                )
                .map_err(|errno| BackupError::io(target, errno.into()))
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(BackupError::io(target, e))
        }
        _ => Ok(()),
    }
}

/// Gives `path` its mode; confined, through a descriptor opened beneath the roots.
fn set_mode(path: &Path, mode: u32, within: Option<&Within>) -> Result<(), BackupError> {
    let permissions = std::fs::Permissions::from_mode(mode);
    match within {
        None => std::fs::set_permissions(path, permissions),
        Some(within) => within
            .open(path)
            .map_err(std::io::Error::from)
            .and_then(|file| file.set_permissions(permissions)),
    }
    .map_err(|e| BackupError::io(path, e))
}

fn write_failed(target: &Path, error: crate::files::atomic::AtomicWriteError) -> BackupError {
    BackupError::io(
        target,
        std::io::Error::other(format!("cannot write the file: {error:?}")),
    )
}
