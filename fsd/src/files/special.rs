//! Files that are not regular files, and I/O on any file that cannot wait forever.
//!
//! A FIFO, a device or a procfs file can hold a read or a write for as long as some other
//! process likes, and a blocked call holds one of the daemon's blocking threads. So the file
//! API opens everything non-blocking; a read or write that would block waits in `poll(2)`,
//! either for a bounded time without progress ([`STALL_TIMEOUT`]), for a bounded time in
//! all (a request that answers a whole file: a device that trickles a byte now and then
//! makes progress forever), or for as long as the caller still wants the data (a stream
//! whose client is connected).

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::statfs::{DEBUGFS_MAGIC, PROC_SUPER_MAGIC, SYSFS_MAGIC, fstatfs};

/// How long a device or FIFO may take or give no data before a bounded request fails.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How often an unbounded wait asks whether the caller still wants the data.
const CALLER_CHECK: Duration = Duration::from_millis(250);

/// A file type other than regular file, directory and symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

impl Special {
    pub fn of(file_type: fs::FileType) -> Option<Self> {
        if file_type.is_fifo() {
            Some(Self::Fifo)
        } else if file_type.is_socket() {
            Some(Self::Socket)
        } else if file_type.is_char_device() {
            Some(Self::CharDevice)
        } else if file_type.is_block_device() {
            Some(Self::BlockDevice)
        } else {
            None
        }
    }

    /// The kind a raw `st_mode` names, if special.
    pub fn of_mode(mode: u32) -> Option<Self> {
        use nix::sys::stat::SFlag;
        let kind = SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits());
        if kind == SFlag::S_IFIFO {
            Some(Self::Fifo)
        } else if kind == SFlag::S_IFSOCK {
            Some(Self::Socket)
        } else if kind == SFlag::S_IFCHR {
            Some(Self::CharDevice)
        } else if kind == SFlag::S_IFBLK {
            Some(Self::BlockDevice)
        } else {
            None
        }
    }

    /// For messages: "a FIFO".
    pub fn described(self) -> &'static str {
        match self {
            Self::Fifo => "a FIFO",
            Self::Socket => "a socket",
            Self::CharDevice => "a character device",
            Self::BlockDevice => "a block device",
        }
    }

    /// For `context.fileType`.
    pub fn wire_name(self) -> &'static str {
        match self {
            Self::Fifo => "fifo",
            Self::Socket => "socket",
            Self::CharDevice => "character-device",
            Self::BlockDevice => "block-device",
        }
    }

    /// Whether a write goes into the file, as a shell's `>` would: character devices
    /// (`/dev/null`) and FIFOs. Sockets cannot be opened; a block device is a disk, which a
    /// file write through a workspace symlink must never overwrite.
    pub fn writable_into(self) -> bool {
        matches!(self, Self::CharDevice | Self::Fifo)
    }
}

/// The error inside an `io::Error` when a device or FIFO moved no data for the stall
/// timeout, or a whole read did not end within its total time.
#[derive(Debug, thiserror::Error)]
pub enum Stalled {
    #[error("no data moved for {} s", .0.as_secs())]
    Idle(Duration),
    #[error(
        "the file gave no end within {} s (it keeps giving data slowly, or never ends); \
         read it as a stream (POST /api/read/stream, GET /api/files/raw)",
        .0.as_secs()
    )]
    Total(Duration),
}

/// The error inside an `io::Error` when a waiting read stopped because its caller left.
#[derive(Debug, thiserror::Error)]
#[error("the caller stopped reading")]
pub struct CallerGone;

/// How long a read or write that would block may wait.
#[derive(Clone)]
pub enum Patience {
    /// Fail with [`Stalled::Idle`] after this long without progress.
    Bounded(Duration),
    /// As `Bounded`, and fail with [`Stalled::Total`] once the whole read has taken
    /// `total` (it ends at `until`).
    Whole {
        idle: Duration,
        total: Duration,
        until: Instant,
    },
    /// Wait while the function says the caller still wants the data.
    WhileWanted(Arc<dyn Fn() -> bool + Send + Sync>),
}

/// A non-blocking file whose reads and writes wait with [`Patience`].
pub struct Patient {
    file: File,
    patience: Patience,
}

impl Patient {
    pub fn new(file: File, patience: Patience) -> Self {
        Self { file, patience }
    }

    /// Waits at most [`STALL_TIMEOUT`] without progress: for writes into a device and
    /// downloads, which move data for as long as it comes.
    pub fn bounded(file: File) -> Self {
        Self::new(file, Patience::Bounded(STALL_TIMEOUT))
    }

    /// Waits at most [`STALL_TIMEOUT`] without progress and [`STALL_TIMEOUT`] in all: for
    /// requests that answer a whole file.
    pub fn whole(file: File) -> Self {
        Self::new(
            file,
            Patience::Whole {
                idle: STALL_TIMEOUT,
                total: STALL_TIMEOUT,
                until: Instant::now() + STALL_TIMEOUT,
            },
        )
    }

    fn wait(&self, events: PollFlags) -> io::Result<()> {
        let stalled = |why| Err(stalled(why));
        match &self.patience {
            Patience::Bounded(limit) => {
                if poll_once(&self.file, events, *limit)? {
                    Ok(())
                } else {
                    stalled(Stalled::Idle(*limit))
                }
            }
            Patience::Whole { idle, total, until } => {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return stalled(Stalled::Total(*total));
                }
                if poll_once(&self.file, events, left.min(*idle))? {
                    Ok(())
                } else if left <= *idle {
                    stalled(Stalled::Total(*total))
                } else {
                    stalled(Stalled::Idle(*idle))
                }
            }
            Patience::WhileWanted(wanted) => loop {
                if poll_once(&self.file, events, CALLER_CHECK)? {
                    return Ok(());
                }
                if !wanted() {
                    return Err(io::Error::other(CallerGone));
                }
            },
        }
    }
}

/// Reads what a non-blocking file has at once: `Ok(0)` both at the end and when nothing is
/// ready yet. For sniffing the first bytes of a file that may never give any.
pub fn read_ready(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(0),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// A bounded wait that ran out, as an I/O error.
fn stalled(why: Stalled) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, why)
}

/// Whether `file` became ready for `events` within `timeout`.
fn poll_once(file: &File, events: PollFlags, timeout: Duration) -> io::Result<bool> {
    let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
    let mut fds = [PollFd::new(file.as_fd(), events)];
    loop {
        match poll(&mut fds, timeout) {
            Ok(0) => return Ok(false),
            Ok(_) => return Ok(true),
            Err(nix::errno::Errno::EINTR) => {}
            Err(errno) => return Err(errno.into()),
        }
    }
}

impl Read for Patient {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // A file that always has a little ready never waits: its time is checked here too.
        if let Patience::Whole { total, until, .. } = &self.patience
            && Instant::now() >= *until
        {
            return Err(stalled(Stalled::Total(*total)));
        }
        loop {
            match self.file.read(buf) {
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    self.wait(PollFlags::POLLIN)?
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }
}

impl Write for Patient {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.file.write(buf) {
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    self.wait(PollFlags::POLLOUT)?
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Opens `path` for reading without blocking in `open` (a FIFO with no writer) or in a
/// terminal's controlling-tty rules.
pub fn open_for_read(path: &Path) -> io::Result<File> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits())
        .open(path)
}

/// Opens a character device or FIFO to write into it, without creating or truncating
/// anything; a FIFO with no reader fails at once with ENXIO instead of blocking.
pub fn open_for_write_into(path: &Path) -> io::Result<File> {
    fs::OpenOptions::new()
        .write(true)
        .custom_flags((OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits())
        .open(path)
}

/// Whether the size `stat` reports for an open file says nothing about what a read gives:
/// devices, and files of procfs, sysfs and debugfs (size 0 or a fixed 4096). Those are read
/// until the end, however long that is.
pub fn size_unknown(file: &File, meta: &fs::Metadata) -> bool {
    if !meta.is_file() {
        return true;
    }
    if meta.len() == 0 {
        return true;
    }
    fstatfs(file.as_fd()).is_ok_and(|fs| {
        let kind = fs.filesystem_type();
        kind == PROC_SUPER_MAGIC || kind == SYSFS_MAGIC || kind == DEBUGFS_MAGIC
    })
}

/// Whether an I/O error is a [`Stalled`] from this module.
pub fn is_stalled(err: &io::Error) -> bool {
    err.get_ref().is_some_and(|inner| inner.is::<Stalled>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fifo(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("fifo");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        path
    }

    #[test]
    fn a_fifo_without_reader_refuses_a_write_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let err = open_for_write_into(&fifo(dir.path())).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(nix::errno::Errno::ENXIO as i32));
    }

    #[test]
    fn a_silent_fifo_stalls_a_bounded_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = fifo(dir.path());
        let reader = open_for_read(&path).unwrap();
        // A writer that never writes: the read would otherwise wait forever.
        let _writer = open_for_write_into(&path).unwrap();
        let mut patient = Patient::new(reader, Patience::Bounded(Duration::from_millis(50)));
        let err = patient.read(&mut [0; 16]).unwrap_err();
        assert!(is_stalled(&err), "{err}");
    }

    #[test]
    fn an_unwanted_read_stops() {
        let dir = tempfile::tempdir().unwrap();
        let path = fifo(dir.path());
        let reader = open_for_read(&path).unwrap();
        let _writer = open_for_write_into(&path).unwrap();
        let mut patient = Patient::new(reader, Patience::WhileWanted(Arc::new(|| false)));
        let err = patient.read(&mut [0; 16]).unwrap_err();
        assert!(err.get_ref().is_some_and(|e| e.is::<CallerGone>()), "{err}");
    }

    #[test]
    fn a_full_fifo_stalls_a_bounded_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = fifo(dir.path());
        let _reader = open_for_read(&path).unwrap();
        let writer = open_for_write_into(&path).unwrap();
        let mut patient = Patient::new(writer, Patience::Bounded(Duration::from_millis(50)));
        // Nobody reads: the pipe fills, then the write stalls instead of blocking.
        let err = patient.write_all(&vec![7; 4 << 20]).unwrap_err();
        assert!(is_stalled(&err), "{err}");
    }

    #[test]
    fn procfs_sizes_are_unknown() {
        let file = File::open("/proc/self/status").unwrap();
        let meta = file.metadata().unwrap();
        assert!(size_unknown(&file, &meta));
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f"), "abc").unwrap();
        let file = File::open(dir.path().join("f")).unwrap();
        assert!(!size_unknown(&file, &file.metadata().unwrap()));
    }
}
