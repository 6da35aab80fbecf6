//! What a command reads on stdin: nothing, content given with the request, or a pipe the
//! daemon keeps open for writes while a background process runs.
//!
//! The pipe is a FIFO in the session's directory, opened read-write by the daemon before
//! the command starts (so neither side's open blocks), and grown to [`PIPE_BYTES`]. The
//! kernel's pipe is the only buffer: a write waits for room, up to its deadline, and then
//! says how much went in, so a process that never reads holds the daemon to
//! [`PIPE_BYTES`] and no more.

use std::path::Path;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;

use crate::error::StdinError;

/// The capacity of a process's stdin pipe: what the daemon holds for a process that does
/// not read.
pub const PIPE_BYTES: usize = 1024 * 1024;

/// What a command reads on stdin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Stdin {
    /// `/dev/null`.
    #[default]
    Null,
    /// These bytes, then end of file.
    Content(Vec<u8>),
    /// A pipe the daemon writes on request (background commands and streamed foreground
    /// ones; a foreground command answered whole reads `/dev/null`).
    Pipe,
}

/// Writes a command's stdin content to `path` (a fresh file, readable only by root).
pub async fn write_content(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .await?;
    file.write_all(bytes).await?;
    file.flush().await
}

/// A command's stdin FIFO as the daemon holds it: the end it writes, and a reading end it
/// never reads, which keeps the pipe (and what was written into it) while the command has
/// not opened it yet. Without it, a caller that writes and closes before the command opens
/// its stdin (a fast one, a loaded machine) would take the pipe and its bytes away, and the
/// command's open would wait for a writer for ever.
pub struct OpenPipe {
    sender: pipe::Sender,
    keeper: std::fs::File,
}

/// Makes the FIFO at `path` and opens its writing end (read-write, so writes never fail for
/// want of a reader) and its keeper. The command's side opens it read-write on a descriptor
/// of its own first (see `script`), so its open does not wait for the daemon's end either.
pub fn open_pipe(path: &Path) -> std::io::Result<OpenPipe> {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))?;
    let sender = pipe::OpenOptions::new()
        .read_write(true)
        .open_sender(path)?;
    let keeper = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    let size = i32::try_from(PIPE_BYTES).unwrap_or(i32::MAX);
    if let Err(err) = nix::fcntl::fcntl(&sender, nix::fcntl::FcntlArg::F_SETPIPE_SZ(size)) {
        tracing::debug!(error = %err, "cannot grow a stdin pipe; it keeps the kernel's size");
    }
    Ok(OpenPipe { sender, keeper })
}

/// What `pipe` holds: [`PIPE_BYTES`], or less where the kernel would not grow it (a daemon
/// without root past `fs.pipe-max-size`).
fn capacity(pipe: &pipe::Sender) -> usize {
    nix::fcntl::fcntl(pipe, nix::fcntl::FcntlArg::F_GETPIPE_SZ)
        .ok()
        .and_then(|size| usize::try_from(size).ok())
        .unwrap_or(PIPE_BYTES)
}

/// A running process's stdin: its pipe until it is closed, and whether it ever had one.
pub struct StdinPipe {
    piped: bool,
    /// What the pipe holds, which the daemon keeps for a process that does not read.
    capacity: usize,
    sender: tokio::sync::Mutex<Option<pipe::Sender>>,
    /// The pipe's keeper (see [`OpenPipe`]), until the process has ended.
    keeper: std::sync::Mutex<Option<std::fs::File>>,
}

/// What one write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub bytes: usize,
    pub closed: bool,
}

impl StdinPipe {
    pub fn new(opened: Option<OpenPipe>) -> Self {
        let (sender, keeper) = match opened {
            Some(OpenPipe { sender, keeper }) => (Some(sender), Some(keeper)),
            None => (None, None),
        };
        Self {
            piped: sender.is_some(),
            capacity: sender.as_ref().map_or(0, capacity),
            sender: tokio::sync::Mutex::new(sender),
            keeper: std::sync::Mutex::new(keeper),
        }
    }

    /// Writes `bytes` whole, in order with other writes, then closes the pipe when `close`
    /// says so. Gives up when the process ends (`ended` resolves) or the pipe (or an
    /// earlier write) has held it up for `wait`, saying how much went in.
    pub async fn write(
        &self,
        bytes: &[u8],
        close: bool,
        wait: Duration,
        ended: impl std::future::Future<Output = ()>,
    ) -> Result<Written, StdinError> {
        if !self.piped {
            return Err(StdinError::NotPiped);
        }
        // A write waiting behind another waits no longer than its own wait either.
        let Ok(mut sender) = tokio::time::timeout(wait, self.sender.lock()).await else {
            return Err(StdinError::Full {
                written: 0,
                limit: self.capacity,
            });
        };
        let Some(pipe) = sender.as_mut() else {
            return Err(StdinError::Closed);
        };
        let mut written = 0;
        tokio::pin!(ended);
        while written < bytes.len() {
            tokio::select! {
                result = tokio::time::timeout(wait, pipe.write(&bytes[written..])) => match result {
                    Ok(Ok(n)) => written += n,
                    Ok(Err(err)) => return Err(StdinError::Io { written, source: err }),
                    Err(_) => return Err(StdinError::Full { written, limit: self.capacity }),
                },
                () = &mut ended => return Err(StdinError::Exited { written }),
            }
        }
        if close {
            *sender = None;
        }
        Ok(Written {
            bytes: written,
            closed: close,
        })
    }

    /// Closes the pipe for good (the process has ended), once no write holds it.
    pub async fn shut(&self) {
        self.sender.lock().await.take();
        self.keeper.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}
