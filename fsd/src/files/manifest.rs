//! The manifest of a directory (`POST /api/files/manifest`): every entry below it with its
//! kind, mode, size, mtime, a file's SHA-256 and a link's target, for a two-way sync to
//! compare both sides without moving content; or only the entries at chosen paths and
//! below them, for a sync that reads again only what a change list named. The walk is
//! relative to each directory's
//! descriptor and follows no symlink, so it stays inside the directory it was given (and
//! inside the roots under `--confine`, where that directory was opened beneath them).
//! Hashes are kept by device, inode, size and mtime, so a later manifest reads only what
//! changed; a file whose mtime is within two seconds of the walk is not kept (a write in
//! the same clock tick keeps size and mtime).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use fsd_api::files::{FileType, ManifestEntry};
use ignore::gitignore::Gitignore;
use nix::dir::Dir;
use nix::fcntl::{AtFlags, OFlag, ResolveFlag, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstatat};
use sha2::{Digest, Sha256};

/// Hashes kept across manifests at most (about 100 bytes each).
const MAX_KEPT: usize = 200_000;
/// How recent an mtime must not be for its hash to be kept.
const RACY_NS: i128 = 2_000_000_000;

/// A file's hash by (device, inode), with the size and mtime (ns) it was taken at.
type Kept = HashMap<(u64, u64), (u64, i128, String)>;

/// Hashes kept across manifests.
#[derive(Default)]
pub struct HashCache {
    kept: Mutex<Kept>,
}

/// A walk's entries, and what it could not carry.
pub struct Manifest {
    pub entries: Vec<ManifestEntry>,
    pub skipped: Vec<String>,
}

/// Walks the directory `root` (opened), leaving out what `exclude` matches.
pub fn walk(root: OwnedFd, exclude: &Gitignore, cache: &HashCache) -> std::io::Result<Manifest> {
    let mut walk = Walk::new(exclude, cache);
    walk.below(vec![(root, String::new())])?;
    Ok(walk.finish())
}

/// The entries at `paths` (plain relative paths below `root`) and below those that are
/// directories: what a sync reads again where a change list says something changed. A
/// path that is not there, or lies under something that is not a directory (a link is
/// never followed), has no entry.
pub fn walk_paths(
    root: OwnedFd,
    paths: &[String],
    exclude: &Gitignore,
    cache: &HashCache,
) -> std::io::Result<Manifest> {
    // A path under another one asked for is read with it.
    let tops = fsd_api::files::topmost(paths);
    let mut walk = Walk::new(exclude, cache);
    for path in tops {
        // Not there, or under a link or a file: nothing.
        let Ok((parent, name)) = open_parent(&root, path) else {
            continue;
        };
        let parent = Dir::from_fd(parent).map_err(std::io::Error::from)?;
        if let Some(below) = walk.entry(&parent, name, path.to_string()) {
            walk.below(vec![below])?;
        }
    }
    Ok(walk.finish())
}

/// The directory holding `path` (a plain relative path, see `apply::invalid_step`) below
/// `root`, opened through no symlink, and the last name.
pub fn open_parent<'p>(root: &OwnedFd, path: &'p str) -> nix::Result<(OwnedFd, &'p OsStr)> {
    let (dirs, name) = match path.rsplit_once('/') {
        Some((dirs, name)) => (Some(dirs), name),
        None => (None, path),
    };
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    // One `openat2` where the kernel refuses the links itself (an upload opens a parent
    // for each of its files), else a walk that refuses a link at any name.
    let dir = fsd_search::resolved(
        root,
        Path::new(dirs.unwrap_or("")),
        flags,
        ResolveFlag::RESOLVE_NO_SYMLINKS,
    )?;
    Ok((dir, OsStr::from_bytes(name.as_bytes())))
}

/// One walk's entries as they are found.
struct Walk<'a> {
    exclude: &'a Gitignore,
    cache: &'a HashCache,
    now_ns: i128,
    out: Manifest,
}

impl<'a> Walk<'a> {
    fn new(exclude: &'a Gitignore, cache: &'a HashCache) -> Self {
        Self {
            exclude,
            cache,
            now_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos() as i128),
            out: Manifest {
                entries: Vec::new(),
                skipped: Vec::new(),
            },
        }
    }

    /// What the opened directories `pending` hold (each with its relative path), all the
    /// way down.
    fn below(&mut self, mut pending: Vec<(OwnedFd, String)>) -> std::io::Result<()> {
        while let Some((dir_fd, prefix)) = pending.pop() {
            let mut dir = Dir::from_fd(dir_fd).map_err(std::io::Error::from)?;
            let mut names: Vec<Vec<u8>> = dir
                .iter()
                .flatten()
                .map(|entry| entry.file_name().to_bytes().to_vec())
                .filter(|name| name != b"." && name != b"..")
                .collect();
            names.sort();
            let mut below = Vec::new();
            for name in names {
                let name_os = OsStr::from_bytes(&name);
                let Some(text) = name_os.to_str() else {
                    self.out
                        .skipped
                        .push(format!("{prefix}/{}", name_os.to_string_lossy()));
                    continue;
                };
                let relative = if prefix.is_empty() {
                    text.to_string()
                } else {
                    format!("{prefix}/{text}")
                };
                below.extend(self.entry(&dir, name_os, relative));
            }
            // Depth first, in name order: parents come before what they hold.
            pending.extend(below.into_iter().rev());
        }
        Ok(())
    }

    /// Records the entry `name` of `dir` (at `relative`); a directory is answered opened,
    /// to be walked.
    fn entry(&mut self, dir: &Dir, name: &OsStr, relative: String) -> Option<(OwnedFd, String)> {
        // Another write's temp file (an atomic write in flight): not an entry.
        if name
            .to_str()
            .is_some_and(|text| fsd_api::scratch::parse(text).is_some())
        {
            return None;
        }
        // Gone since the listing: not there.
        let stat = fstatat(dir.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
        let format = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
        let file_type = if format == SFlag::S_IFDIR {
            FileType::Directory
        } else if format == SFlag::S_IFREG {
            FileType::File
        } else if format == SFlag::S_IFLNK {
            FileType::Symlink
        } else {
            FileType::Other
        };
        if self
            .exclude
            .matched_path_or_any_parents(&relative, file_type == FileType::Directory)
            .is_ignore()
        {
            return None;
        }
        let mut entry = ManifestEntry {
            path: relative.clone(),
            file_type,
            mode: stat.st_mode & 0o7777,
            size: stat.st_size as u64,
            modified_ms: stat.st_mtime * 1000 + stat.st_mtime_nsec / 1_000_000,
            sha256: None,
            target: None,
        };
        let mut below = None;
        match file_type {
            FileType::Directory => {
                let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW;
                if let Ok(fd) = openat(dir.as_fd(), name, flags, Mode::empty()) {
                    below = Some((fd, relative));
                }
            }
            FileType::Symlink => {
                let target = readlinkat(dir.as_fd(), name).ok()?;
                entry.target = Some(target.to_string_lossy().into_owned());
            }
            FileType::File => {
                entry.sha256 = Some(file_hash_at(dir, name, &stat, self.now_ns, self.cache)?);
            }
            FileType::Other => {}
        }
        self.out.entries.push(entry);
        below
    }

    fn finish(mut self) -> Manifest {
        self.out.entries.sort_by(|a, b| a.path.cmp(&b.path));
        self.out
    }
}

/// The SHA-256 of the regular file `name` in `dir` (kept or read); `None` when it is gone
/// or no longer a regular file.
pub fn file_hash(dir: &Dir, name: &OsStr, stat: &FileStat, cache: &HashCache) -> Option<String> {
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as i128);
    file_hash_at(dir, name, stat, now_ns, cache)
}

/// [`file_hash`] at the time `now_ns`.
fn file_hash_at(
    dir: &Dir,
    name: &OsStr,
    stat: &FileStat,
    now_ns: i128,
    cache: &HashCache,
) -> Option<String> {
    let key = (stat.st_dev, stat.st_ino);
    let mtime_ns = stat.st_mtime as i128 * 1_000_000_000 + stat.st_mtime_nsec as i128;
    let size = stat.st_size as u64;
    if let Some((kept_size, kept_mtime, hash)) = cache.lock().get(&key)
        && (*kept_size, *kept_mtime) == (size, mtime_ns)
    {
        return Some(hash.clone());
    }
    // Non-blocking: a FIFO that took the name since the stat must not hang the walk.
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK;
    let fd = openat(dir.as_fd(), name, flags, Mode::empty()).ok()?;
    let opened = nix::sys::stat::fstat(&fd).ok()?;
    if SFlag::from_bits_truncate(opened.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return None;
    }
    let mut hasher = Sha256::new();
    std::io::copy(&mut std::fs::File::from(fd), &mut hasher).ok()?;
    let hash = crate::random::hex(&hasher.finalize());
    let opened_mtime = opened.st_mtime as i128 * 1_000_000_000 + opened.st_mtime_nsec as i128;
    if now_ns - opened_mtime >= RACY_NS {
        let mut kept = cache.lock();
        if kept.len() >= MAX_KEPT {
            kept.clear();
        }
        kept.insert(key, (opened.st_size as u64, opened_mtime, hash.clone()));
    }
    Some(hash)
}

impl HashCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
