//! A move across filesystems (a rename that the kernel refuses with `EXDEV`): a copy, then
//! the source removed. Confined, every step is relative to a descriptor opened beneath the
//! roots, links are copied as links and never followed, so a directory swapped for a link
//! out while the copy runs leads nowhere.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use fsd_search::{Refused, Within};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{Mode, SFlag, fchmod, fstatat, mkdirat, mknodat};
use nix::unistd::{UnlinkatFlags, symlinkat, unlinkat};

use super::listing::{kind_of, names_at};

/// Copies `source` to `destination` (a tree, links as links), then removes `source`.
pub fn move_across(
    source: &Path,
    destination: &Path,
    within: Option<&Within>,
) -> Result<(), Refused> {
    let Some(within) = within else {
        copy_by_path(source, destination)?;
        return remove_by_path(source).map_err(Refused::Io);
    };
    let (from_dir, from) = within.parent_of(source)?;
    let (to_dir, to) = within.parent_of(destination)?;
    copy_at(from_dir.as_fd(), &from, to_dir.as_fd(), &to)?;
    Ok(remove_at(from_dir.as_fd(), &from)?)
}

/// Copies `name` in `from` to `to_name` in `to`, never following a link.
fn copy_at(
    from: BorrowedFd<'_>,
    name: &OsStr,
    to: BorrowedFd<'_>,
    to_name: &OsStr,
) -> nix::Result<()> {
    let stat = fstatat(from, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
    let mode = Mode::from_bits_truncate(stat.st_mode & 0o7777);
    let directory = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match kind_of(&stat) {
        SFlag::S_IFDIR => {
            match mkdirat(to, to_name, Mode::from_bits_truncate(0o700)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(errno) => return Err(errno),
            }
            let inner_from = openat(from, name, directory, Mode::empty())?;
            let inner_to = openat(to, to_name, directory, Mode::empty())?;
            for child in names_at(&inner_from)? {
                copy_at(inner_from.as_fd(), &child, inner_to.as_fd(), &child)?;
            }
            fchmod(&inner_to, mode)
        }
        SFlag::S_IFLNK => symlinkat(readlinkat(from, name)?.as_os_str(), to, to_name),
        SFlag::S_IFREG => {
            let read = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            let write = OFlag::O_WRONLY
                | OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC;
            let mut input = File::from(openat(from, name, read, Mode::empty())?);
            let output: OwnedFd = openat(to, to_name, write, mode)?;
            let mut output = File::from(output);
            io::copy(&mut input, &mut output).map_err(|err| io_errno(&err))?;
            fchmod(&output, mode)
        }
        // FIFOs, devices and sockets are made anew, never opened.
        kind => mknodat(to, to_name, kind, mode, stat.st_rdev),
    }
}

/// Removes `name` in `dir` and, if a directory, everything below it, never following a link.
fn remove_at(dir: BorrowedFd<'_>, name: &OsStr) -> nix::Result<()> {
    let stat = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
    if kind_of(&stat) != SFlag::S_IFDIR {
        return unlinkat(dir, name, UnlinkatFlags::NoRemoveDir);
    }
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let inner = openat(dir, name, flags, Mode::empty())?;
    for child in names_at(&inner)? {
        remove_at(inner.as_fd(), &child)?;
    }
    unlinkat(dir, name, UnlinkatFlags::RemoveDir)
}

fn io_errno(err: &io::Error) -> Errno {
    err.raw_os_error().map_or(Errno::EIO, Errno::from_raw)
}

/// The unconfined copy, by path; links copied as links.
fn copy_by_path(source: &Path, destination: &Path) -> io::Result<()> {
    for entry in walkdir::WalkDir::new(source).follow_links(false) {
        let entry = entry.map_err(io::Error::other)?;
        let relative = entry
            .path()
            .strip_prefix(source)
            .map_err(io::Error::other)?;
        let target = if relative.as_os_str().is_empty() {
            destination.to_path_buf()
        } else {
            destination.join(relative)
        };
        let kind = entry.file_type();
        if kind.is_dir() {
            fs::create_dir_all(&target)?;
            fs::set_permissions(
                &target,
                entry.metadata().map_err(io::Error::other)?.permissions(),
            )?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(entry.path())?, &target)?;
        } else {
            fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn remove_by_path(path: &Path) -> io::Result<()> {
    if fs::symlink_metadata(path)?.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    }
}
