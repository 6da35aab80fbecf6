//! Reading a directory for the reconciler: opened by path, checked to be the object the
//! tree recorded (so a listing is never taken of another directory that moved into its
//! place), then its names read and `lstat`ed relative to its descriptor.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::dir::Dir;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};

use super::tree::{Kind, Stat};

/// An open directory.
pub(super) struct Listing {
    dir: Dir,
}

// The casts are no-ops on Linux and needed where `stat`'s fields have other widths (macOS).
#[allow(clippy::unnecessary_cast)]
fn to_stat(raw: &FileStat) -> Stat {
    let format = SFlag::from_bits_truncate(raw.st_mode as _) & SFlag::S_IFMT;
    let kind = if format == SFlag::S_IFDIR {
        Kind::Dir
    } else if format == SFlag::S_IFREG {
        Kind::File
    } else if format == SFlag::S_IFLNK {
        Kind::Symlink
    } else {
        Kind::Other
    };
    Stat {
        dev: raw.st_dev as u64,
        ino: raw.st_ino as u64,
        kind,
        size: raw.st_size as u64,
        mtime: (raw.st_mtime as i64, raw.st_mtime_nsec as i64),
        mode: (raw.st_mode as u32) & 0o7777,
    }
}

/// `lstat` of a path.
pub(super) fn lstat(path: &Path) -> std::io::Result<Stat> {
    let raw = nix::sys::stat::lstat(path).map_err(std::io::Error::from)?;
    Ok(to_stat(&raw))
}

/// Opens the directory at `path` if it is the object `expected` describes.
pub(super) fn open_dir(path: &Path, expected: &Stat) -> std::io::Result<Listing> {
    let dir = Dir::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(std::io::Error::from)?;
    let raw = nix::sys::stat::fstat(&dir).map_err(std::io::Error::from)?;
    if !to_stat(&raw).same_object(expected) {
        return Err(std::io::Error::other("another directory is at the path"));
    }
    Ok(Listing { dir })
}

impl Listing {
    /// Every name in the directory with the inode `readdir` gives it (a hint: some
    /// filesystems give another number than `lstat`).
    pub fn names(&mut self) -> Vec<(OsString, u64)> {
        let mut names = Vec::new();
        for entry in self.dir.iter().flatten() {
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            #[allow(clippy::unnecessary_cast)]
            names.push((name.to_os_string(), entry.ino() as u64));
        }
        names
    }

    /// `lstat` of a name in the directory.
    pub fn stat(&self, name: &OsStr) -> std::io::Result<Stat> {
        let raw = nix::sys::stat::fstatat(&self.dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_err(std::io::Error::from)?;
        Ok(to_stat(&raw))
    }
}
