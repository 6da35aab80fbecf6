//! A foreground command's output files: read back once the command is done, and kept for
//! the session's next command when nothing else can still write to them.
//!
//! Making and removing a file costs 25 µs on ext4, and a command has two. A file is kept
//! for the next command when it is still empty (so it needs no truncating, which would cost
//! more: see `script::foreground`) and the command left nothing behind that holds it open
//! for writing, which the kernel says cheaply: a read lease is granted only on a file no
//! one has open for writing. A process the command left running with its output
//! (`sleep 60 &`) keeps the file; the session then moves to a fresh one.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::OnceLock;

use crate::error::ExecError;

/// Up to this many bytes, a command's files (its script, its output) are written and read
/// on the request's own thread: a hop to the blocking pool and back costs two thread
/// wake-ups, more than the page-cache copy itself.
pub const INLINE_BYTES: u64 = 256 * 1024;

/// An opened output file and its size.
pub struct Output {
    file: File,
    size: u64,
}

impl Output {
    /// The output file at `path`; `None` when there is none.
    pub fn open(path: &Path) -> Option<Self> {
        let file = File::open(path).ok()?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Some(Self { file, size })
    }

    fn small(&self) -> bool {
        self.size <= INLINE_BYTES
    }

    /// Whether the file is empty and no process has it open for writing, so the next
    /// command may write it. Any failure says no.
    pub fn reusable(&self) -> bool {
        self.size == 0 && no_writer(&self.file)
    }

    /// Up to `cap` bytes; `true` when the file held more.
    pub fn read(self, cap: u64) -> (Vec<u8>, bool) {
        let mut bytes = Vec::with_capacity(usize::try_from(self.size.min(cap)).unwrap_or(0));
        let _ = self.file.take(cap).read_to_end(&mut bytes);
        (bytes, self.size > cap)
    }
}

/// What two output files hold, each up to `cap` bytes with whether it held more; read on
/// the blocking pool only when one of them is large.
pub async fn read_both(
    stdout: Option<Output>,
    stderr: Option<Output>,
    cap: u64,
) -> Result<((Vec<u8>, bool), (Vec<u8>, bool)), ExecError> {
    let read = move |output: Option<Output>| output.map_or((Vec::new(), false), |o| o.read(cap));
    if stdout.as_ref().is_none_or(Output::small) && stderr.as_ref().is_none_or(Output::small) {
        return Ok((read(stdout), read(stderr)));
    }
    tokio::task::spawn_blocking(move || (read(stdout), read(stderr)))
        .await
        .map_err(|err| ExecError::Io(std::io::Error::other(err)))
}

/// Up to `cap` bytes of the file at `path`; `true` when it held more.
pub fn read_capped(path: &Path, cap: u64) -> (Vec<u8>, bool) {
    Output::open(path).map_or((Vec::new(), false), |o| o.read(cap))
}

/// Takes a read lease on `file` and lets it go at once. The kernel grants it only when no
/// open file description of the inode is open for writing.
fn no_writer(file: &File) -> bool {
    if !lease_breaks_caught() {
        return false;
    }
    let fd = file.as_raw_fd();
    // SAFETY: F_SETLEASE on a file descriptor this function borrows; no memory is passed.
    let taken = unsafe { nix::libc::fcntl(fd, nix::libc::F_SETLEASE, nix::libc::F_RDLCK) == 0 };
    if taken {
        // SAFETY: as above; releases the lease just taken.
        unsafe { nix::libc::fcntl(fd, nix::libc::F_SETLEASE, nix::libc::F_UNLCK) };
    }
    taken
}

/// A lease holder is told of a conflicting open with SIGIO, whose default action ends the
/// process. The lease is held for microseconds, but a sandbox process opening the file in
/// them must not end the daemon, so SIGIO gets a handler (tokio's, which children do not
/// inherit across exec) that drops it. Without the handler, no lease is taken.
fn lease_breaks_caught() -> bool {
    static CAUGHT: OnceLock<bool> = OnceLock::new();
    *CAUGHT.get_or_init(|| {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::io()) {
            Ok(mut breaks) => {
                tokio::spawn(async move { while breaks.recv().await.is_some() {} });
                true
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot catch SIGIO; output files are not reused");
                false
            }
        }
    })
}
