//! Writes that never tear and never replace what is not a regular file.
//!
//! A regular file (or a path that does not exist yet) is replaced atomically: a temp file
//! beside the target (under a scratch name, see `fsd_api::scratch`), fsynced, renamed over
//! the target, the directory fsynced (the fsyncs only under `--durability fsync`, see
//! [`super::durability`]). Readers see the old file or the new one, never a torn
//! one; concurrent writers each win whole; the previous file's mode and owner are kept.
//! Every step after the target is found works on one open directory, so a directory swapped
//! in the meantime cannot redirect the rename.
//!
//! A character device or FIFO (say `.bash_history -> /dev/null`) is written into, as a
//! shell's `>` does; a socket or block device is refused. Neither is ever replaced.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fsd_api::scratch::{ScratchKind, scratch_path};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};

use super::durability;
use super::permissions::ModeSpec;
use super::scratch_log::ScratchLog;
use super::special::{self, Patient, Special};
use fsd_search::{Refused, Within};

/// Mode of files that did not exist before.
const NEW_FILE_MODE: u32 = 0o644;

/// Why a write could not start; which step, so the caller can name it.
#[derive(Debug)]
pub enum AtomicWriteError {
    /// The target is a directory.
    IsDirectory,
    /// A parent component exists and is not a directory.
    ParentNotDirectory,
    /// The target is a socket or block device, which a file write never touches.
    Special(Special),
    /// The target is a FIFO that no process has open for reading.
    NoReader,
    /// Confined, and the target or its directory is outside the roots (a link swapped in
    /// since the policy looked, say).
    Outside,
    Io(io::Error),
}

impl From<io::Error> for AtomicWriteError {
    fn from(err: io::Error) -> Self {
        Self::Io(err)
    }
}

impl From<Errno> for AtomicWriteError {
    fn from(errno: Errno) -> Self {
        Self::Io(errno.into())
    }
}

/// Where a write goes: a temp file that replaces a regular file, or a device or FIFO
/// written into.
pub enum Destination {
    Replace(AtomicFile),
    Into(Patient),
}

impl Destination {
    /// Follows symlinks at `target` (even dangling ones) and opens what the write goes to.
    /// A temp file's directory is recorded in `log` first, if one is given. Confined
    /// (`beneath`), every open is beneath the roots, by the kernel.
    pub fn open(
        target: &Path,
        log: Option<&ScratchLog>,
        beneath: Option<&Within>,
    ) -> Result<Self, AtomicWriteError> {
        let (target, special) = followed(target)?;
        match special {
            Some(kind) if kind.writable_into() => {
                let opened = match beneath {
                    None => special::open_for_write_into(&target),
                    Some(within) => match within.open_with(
                        &target,
                        OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
                    ) {
                        Ok(file) => Ok(file),
                        Err(Refused::Outside) => return Err(AtomicWriteError::Outside),
                        Err(Refused::Io(err)) => Err(err),
                    },
                };
                let file = opened.map_err(|err| {
                    if kind == Special::Fifo && err.raw_os_error() == Some(Errno::ENXIO as i32) {
                        AtomicWriteError::NoReader
                    } else {
                        AtomicWriteError::Io(err)
                    }
                })?;
                Ok(Self::Into(Patient::bounded(file)))
            }
            Some(kind) => Err(AtomicWriteError::Special(kind)),
            None => AtomicFile::create(&target, log, beneath).map(Self::Replace),
        }
    }

    /// Opens the temp file of an atomic replacement of `target`, or answers `None` when the
    /// target is a device, FIFO or socket. Those are never opened here: a write that may yet
    /// be abandoned must not touch them (closing a FIFO's writer ends its reader's input).
    pub fn open_replacement(
        target: &Path,
        log: Option<&ScratchLog>,
        beneath: Option<&Within>,
    ) -> Result<Option<Self>, AtomicWriteError> {
        let (target, special) = followed(target)?;
        match special {
            Some(_) => Ok(None),
            None => AtomicFile::create(&target, log, beneath).map(|file| Some(Self::Replace(file))),
        }
    }

    /// Says that `len` bytes are to be written, before the first: a replacement that
    /// nothing waits for takes its blocks now (see [`AtomicFile::reserve`]).
    pub fn reserve(&mut self, len: u64) {
        if let Self::Replace(file) = self {
            file.reserve(len);
        }
    }

    pub fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Self::Replace(file) => file.write_all(bytes),
            Self::Into(patient) => patient.write_all(bytes),
        }
    }

    /// Makes what was written durable now, ahead of [`Destination::commit`] (which then has
    /// only the rename left), so that a caller can overlap it with other work.
    pub fn sync(&mut self) -> io::Result<()> {
        match self {
            Self::Replace(file) => file.sync(),
            Self::Into(_) => Ok(()),
        }
    }

    /// Commits with `mode` applied first to the mode the replacement would have had (the
    /// previous file's or a new file's), so the file appears with it; answers the mode set.
    /// A device or FIFO written into keeps its mode: `None`.
    pub fn commit_with_mode(self, mode: Option<ModeSpec>) -> io::Result<Option<u32>> {
        let set = match (&self, mode) {
            (Self::Replace(file), Some(spec)) => {
                let current = file.file.metadata()?.permissions().mode() & 0o7777;
                let wanted = spec.apply(current, false);
                file.file
                    .set_permissions(fs::Permissions::from_mode(wanted))?;
                Some(wanted)
            }
            _ => None,
        };
        self.commit()?;
        Ok(set)
    }

    /// Makes the write visible: the rename for a replacement; nothing more for a device.
    pub fn commit(self) -> io::Result<()> {
        match self {
            Self::Replace(file) => file.commit(),
            Self::Into(_) => Ok(()),
        }
    }
}

/// For writers that stream into a destination (a decoder, a copy).
impl Write for Destination {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An open temp file that becomes its target on [`AtomicFile::commit`] and vanishes if
/// dropped.
pub struct AtomicFile {
    dir: File,
    name: OsString,
    temp: OsString,
    file: File,
    /// Bytes written so far, and how many of them have been handed to writeback.
    written: u64,
    writeback_from: u64,
    /// Everything written is durable (see [`AtomicFile::sync`]).
    synced: bool,
    committed: bool,
    /// The target existed: the rename replaces a file.
    replacing: bool,
}

/// Written bytes are handed to the disk in steps of this size while a write goes on, so that
/// the fsync before the rename waits only for the last step.
const WRITEBACK_STEP: u64 = 256 * 1024;

/// What is at a name in a directory, for a write.
enum Existing {
    Nothing,
    Regular { mode: u32, uid: u32, gid: u32 },
    Directory,
    Symlink,
    Special(Special),
}

fn existing(dir: &File, name: &OsStr) -> Result<Existing, AtomicWriteError> {
    let stat = match fstatat(dir.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::ENOENT) => return Ok(Existing::Nothing),
        Err(errno) => return Err(errno.into()),
    };
    Ok(Existing::of(&stat))
}

impl Existing {
    fn of(stat: &nix::sys::stat::FileStat) -> Self {
        let kind = SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits());
        if kind == SFlag::S_IFDIR {
            Existing::Directory
        } else if kind == SFlag::S_IFLNK {
            Existing::Symlink
        } else if let Some(special) = Special::of_mode(stat.st_mode) {
            Existing::Special(special)
        } else {
            Existing::Regular {
                mode: stat.st_mode & 0o7777,
                uid: stat.st_uid,
                gid: stat.st_gid,
            }
        }
    }
}

/// What is at `name` in `dir`, and a descriptor that holds it (`O_PATH`, which reads and
/// writes nothing) when it is there.
fn held(dir: &File, name: &OsStr) -> Result<(Existing, Option<OwnedFd>), AtomicWriteError> {
    let fd = match openat(
        dir.as_fd(),
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok((Existing::Nothing, None)),
        Err(errno) => return Err(errno.into()),
    };
    let stat = nix::sys::stat::fstat(&fd)?;
    Ok((Existing::of(&stat), Some(fd)))
}

/// Lets go of a file that a rename has just replaced, on a thread of its own. The last
/// reference to an unlinked inode frees it and its blocks, and when that reference is the
/// directory entry, the rename does it before it returns: 50 µs of a 1 KiB replacement's
/// 120 on this project's ext4 (`rename` with the old file held open: 5 µs). Held here, the
/// replaced file is freed while the caller already has its answer. A thread that cannot
/// start leaves it to the caller, as before. (Held a moment, it keeps its mount busy a
/// moment: a bucket's unmount tries a busy mount again.)
fn release_later(replaced: OwnedFd) {
    const RELEASE_GATHER: std::time::Duration = std::time::Duration::from_millis(2);
    use std::sync::mpsc::{Sender, channel};
    static RELEASER: OnceLock<Option<Sender<OwnedFd>>> = OnceLock::new();
    let releaser = RELEASER.get_or_init(|| {
        let (sender, receiver) = channel::<OwnedFd>();
        std::thread::Builder::new()
            .name("fsd-release".into())
            .spawn(move || {
                // Woken once for a run of writes, not once per write: a moment's wait
                // gathers the files replaced meanwhile (each wake costs the writers a core
                // on a small machine).
                while let Ok(first) = receiver.recv() {
                    std::thread::sleep(RELEASE_GATHER);
                    drop(first);
                    receiver.try_iter().for_each(drop);
                }
            })
            .ok()
            .map(|_| sender)
    });
    if let Some(releaser) = releaser {
        // Refused (the thread gone), the descriptor comes back and is dropped here.
        let _ = releaser.send(replaced);
    }
}

impl AtomicFile {
    /// Creates missing parent directories and the temp file for `target`, a path whose last
    /// component is not a symlink (see [`Destination::open`]).
    fn create(
        target: &Path,
        log: Option<&ScratchLog>,
        beneath: Option<&Within>,
    ) -> Result<Self, AtomicWriteError> {
        let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
            return Err(AtomicWriteError::IsDirectory);
        };
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        let blocked = |err: io::Error| {
            let blocked = matches!(
                err.kind(),
                io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory
            );
            if blocked {
                AtomicWriteError::ParentNotDirectory
            } else {
                AtomicWriteError::Io(err)
            }
        };
        // Confined, the directories are made and opened beneath the roots, each relative
        // to its parent's descriptor; the temp file and the rename are relative to `dir`.
        let dir = match beneath {
            // Most writes go to a directory that is there: opened first, made only if not.
            None => match open_dir(parent) {
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    fs::create_dir_all(parent).map_err(blocked)?;
                    open_dir(parent)?
                }
                opened => opened.map_err(blocked)?,
            },
            Some(within) => within
                .create_dir_all(parent)
                .map_err(|refused| match refused {
                    Refused::Outside => AtomicWriteError::Outside,
                    Refused::Io(err) => blocked(err),
                })?,
        };
        let previous = match existing(&dir, name)? {
            Existing::Nothing => None,
            Existing::Regular { mode, uid, gid } => Some((mode, uid, gid)),
            Existing::Directory => return Err(AtomicWriteError::IsDirectory),
            // Replaced by a link since the caller followed it: someone is racing the write.
            Existing::Symlink => return Err(Errno::EBUSY.into()),
            Existing::Special(kind) => return Err(AtomicWriteError::Special(kind)),
        };
        // The scratch name says whether the target existed, so a watch reports the rename
        // as the target's create or modify (see fsd_api::scratch).
        let kind = match previous {
            Some(_) => ScratchKind::Replace,
            None => ScratchKind::New,
        };
        let temp = scratch_path(Path::new(name), kind).into_os_string();
        if let Some(log) = log {
            log.record(parent);
        }
        let mode = previous.map_or(NEW_FILE_MODE, |(mode, _, _)| mode);
        // Made with its mode when the umask leaves it whole (a `chmod` less), else private
        // until the mode is set.
        let made_with_mode = fsd_api::scratch::made_with_mode(mode);
        let fd: OwnedFd = openat(
            dir.as_fd(),
            temp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(if made_with_mode { mode } else { 0o600 }),
        )?;
        let atomic = Self {
            dir,
            name: name.to_os_string(),
            temp,
            file: File::from(fd),
            written: 0,
            writeback_from: 0,
            synced: false,
            committed: false,
            replacing: previous.is_some(),
        };
        // The owner before the mode: a change of owner takes the set-user-ID and
        // set-group-ID bits away, even root's.
        if let Some((_, uid, gid)) = previous
            && nix::unistd::geteuid().is_root()
        {
            std::os::unix::fs::fchown(&atomic.file, Some(uid), Some(gid))?;
        }
        if !made_with_mode {
            atomic
                .file
                .set_permissions(fs::Permissions::from_mode(mode))?;
        }
        Ok(atomic)
    }

    /// Allocates the file's `len` bytes before they are written, when it is to replace a
    /// file and nothing waits for the disk. ext4 (without `noauto_da_alloc`) otherwise
    /// starts writing out a file renamed over another at the rename, and the rename waits
    /// for that start: 0.79 ms of a 1 MiB replacement on this project's machine, 0.2 ms
    /// with the blocks taken first (0.11 and 0.075 ms for 1 KiB). That flush is a guard
    /// against a power loss, which `--durability atomic` does not promise; under `fsync`
    /// the data is on the disk before the rename anyway. A filesystem that cannot
    /// allocate ahead is written as before.
    fn reserve(&mut self, len: u64) {
        if !self.replacing || self.written > 0 || len == 0 || durability::flushing() {
            return;
        }
        let Ok(len) = i64::try_from(len) else { return };
        let _ = nix::fcntl::fallocate(
            self.file.as_fd(),
            nix::fcntl::FallocateFlags::empty(),
            0,
            len,
        );
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)?;
        self.synced = false;
        self.written += bytes.len() as u64;
        if self.written - self.writeback_from >= WRITEBACK_STEP && durability::flushing() {
            start_writeback(&self.file, self.writeback_from, self.written);
            self.writeback_from = self.written;
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        if !self.synced {
            durability::sync(&self.file)?;
            self.synced = true;
        }
        Ok(())
    }

    /// Flushes to disk and renames over the target, unless the target has become something
    /// other than a regular file meanwhile: a device or FIFO is never replaced.
    pub fn commit(mut self) -> io::Result<()> {
        self.sync()?;
        let replaced = match held(&self.dir, &self.name) {
            Ok((Existing::Special(kind), _)) => {
                return Err(io::Error::other(format!(
                    "the target became {} during the write; it was left alone",
                    kind.described()
                )));
            }
            Ok((Existing::Directory, _)) => return Err(Errno::EISDIR.into()),
            Ok((_, replaced)) => replaced,
            Err(_) => None,
        };
        renameat(
            self.dir.as_fd(),
            self.temp.as_os_str(),
            self.dir.as_fd(),
            self.name.as_os_str(),
        )?;
        self.committed = true;
        if let Some(replaced) = replaced {
            release_later(replaced);
        }
        // Persist the rename itself; failure here loses nothing already visible.
        let _ = durability::sync(&self.dir);
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = unlinkat(
                self.dir.as_fd(),
                self.temp.as_os_str(),
                UnlinkatFlags::NoRemoveDir,
            );
        }
    }
}

/// Starts (does not wait for) writeback of the bytes `from..to` of `file`. Only a head
/// start for the fsync that follows, so a failure here changes nothing.
fn start_writeback(file: &File, from: u64, to: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (i64::try_from(from), i64::try_from(to - from)) else {
            return;
        };
        // SAFETY: sync_file_range reads no memory of ours; the descriptor is open and owned
        // by `file` for the duration of the call.
        unsafe {
            nix::libc::sync_file_range(
                file.as_raw_fd(),
                offset,
                len,
                nix::libc::SYNC_FILE_RANGE_WRITE,
            );
        }
    }
}

fn open_dir(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_DIRECTORY | OFlag::O_CLOEXEC).bits())
        .open(path)
}

/// Writes `bytes` to `target`: an atomic replacement, or into a device or FIFO.
pub fn write_bytes(
    target: &Path,
    bytes: &[u8],
    log: Option<&ScratchLog>,
) -> Result<(), AtomicWriteError> {
    let mut destination = Destination::open(target, log, None)?;
    destination.reserve(bytes.len() as u64);
    destination.write_all(bytes)?;
    destination.commit()?;
    Ok(())
}

/// The path a write to `target` goes to (symlinks followed), and what special file is there.
fn followed(target: &Path) -> io::Result<(PathBuf, Option<Special>)> {
    let (target, found) = through_symlink(target)?;
    Ok((target, found.and_then(|meta| Special::of(meta.file_type()))))
}

/// Follows a chain of symlinks at `path` (even dangling ones) to the path to write, with
/// what is there (`None`: nothing).
fn through_symlink(path: &Path) -> io::Result<(PathBuf, Option<fs::Metadata>)> {
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
            Ok(meta) => return Ok((current, Some(meta))),
            Err(_) => return Ok((current, None)),
        }
    }
    Err(io::Error::from_raw_os_error(Errno::ELOOP as i32))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileTypeExt;

    use super::*;

    #[test]
    fn replaces_content_and_keeps_mode() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("script.sh");
        fs::write(&target, "old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).unwrap();
        write_bytes(&target, b"new", None).unwrap();
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
        // The set-user-ID and set-group-ID bits are kept too (an owner set after them took
        // them away), and a mode the umask would cut.
        for mode in [0o4755, 0o2750, 0o6711, 0o777, 0o600, 0o640] {
            fs::set_permissions(&target, fs::Permissions::from_mode(mode)).unwrap();
            write_bytes(&target, b"again", None).unwrap();
            let kept = fs::metadata(&target).unwrap().permissions().mode() & 0o7777;
            assert_eq!(kept, mode, "{mode:o} became {kept:o}");
        }
    }

    #[test]
    fn replaced_files_are_let_go_of_after_the_rename() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("often.txt");
        let mut reader = None;
        for round in 0..100u32 {
            write_bytes(&target, round.to_string().as_bytes(), None).unwrap();
            if round == 50 {
                reader = Some(File::open(&target).unwrap());
            }
        }
        assert_eq!(fs::read(&target).unwrap(), b"99");
        // A reader of a replaced version still reads that version.
        let mut held = String::new();
        std::io::Read::read_to_string(&mut reader.take().unwrap(), &mut held).unwrap();
        assert_eq!(held, "50");
        // No descriptor of this process keeps a replaced version once the releaser is done.
        let replaced = format!("{} (deleted)", target.display());
        let started = std::time::Instant::now();
        let holding = || {
            fs::read_dir("/proc/self/fd")
                .unwrap()
                .flatten()
                .filter(|fd| {
                    fs::read_link(fd.path()).is_ok_and(|to| to.as_os_str() == replaced.as_str())
                })
                .count()
        };
        while holding() > 0 {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "replaced versions still held: {}",
                holding()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn a_write_synced_early_and_written_on_is_committed_whole() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("big.bin");
        let piece: Vec<u8> = (0..100_000u32).map(|index| (index % 251) as u8).collect();
        let mut destination = Destination::open(&target, None, None).unwrap();
        // Past several writeback steps, synced, then written on after the sync.
        for _ in 0..6 {
            destination.write_all(&piece).unwrap();
        }
        destination.sync().unwrap();
        destination.write_all(b"tail").unwrap();
        destination.commit().unwrap();
        let mut expected = piece.repeat(6);
        expected.extend_from_slice(b"tail");
        assert_eq!(fs::read(&target).unwrap(), expected);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn creates_parents_and_refuses_directories() {
        let dir = tempfile::tempdir().unwrap();
        write_bytes(&dir.path().join("a/b/c.txt"), b"x", None).unwrap();
        assert_eq!(fs::read(dir.path().join("a/b/c.txt")).unwrap(), b"x");
        assert!(matches!(
            write_bytes(&dir.path().join("a"), b"x", None),
            Err(AtomicWriteError::IsDirectory)
        ));
        assert!(matches!(
            write_bytes(&dir.path().join("a/b/c.txt/d"), b"x", None),
            Err(AtomicWriteError::ParentNotDirectory)
        ));
    }

    #[test]
    fn writes_through_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("real"), "old").unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("link")).unwrap();
        write_bytes(&dir.path().join("link"), b"new", None).unwrap();
        assert!(
            fs::symlink_metadata(dir.path().join("link"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(dir.path().join("real")).unwrap(), b"new");
    }

    #[test]
    fn a_fifo_is_written_into_and_a_socket_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        assert!(matches!(
            write_bytes(&fifo, b"x", None),
            Err(AtomicWriteError::NoReader)
        ));
        let mut reader = super::special::open_for_read(&fifo).unwrap();
        std::os::unix::fs::symlink("fifo", dir.path().join("link")).unwrap();
        write_bytes(&dir.path().join("link"), b"through the link", None).unwrap();
        let mut got = String::new();
        std::io::Read::read_to_string(&mut reader, &mut got).ok();
        assert_eq!(got, "through the link");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        let socket = dir.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        assert!(matches!(
            write_bytes(&socket, b"x", None),
            Err(AtomicWriteError::Special(Special::Socket))
        ));
        assert!(
            fs::symlink_metadata(&socket)
                .unwrap()
                .file_type()
                .is_socket()
        );
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            3,
            "temp file left behind"
        );
    }

    #[test]
    fn an_abandoned_write_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = Destination::open(&dir.path().join("x"), None, None).unwrap();
        file.write_all(b"partial").unwrap();
        drop(file);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
