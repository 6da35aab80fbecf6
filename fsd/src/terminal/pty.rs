//! A pseudo-terminal: opening one, its window size, and a shell on it in the sandbox's
//! process world (under a supervisor, so whatever the shell starts ends with it).

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::pty::Winsize;

use fsd_process::World;

nix::ioctl_write_ptr_bad!(set_window_size, nix::libc::TIOCSWINSZ, Winsize);

/// A window size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub cols: u16,
    pub rows: u16,
}

impl Size {
    fn winsize(self) -> Winsize {
        Winsize {
            ws_row: self.rows,
            ws_col: self.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        }
    }
}

/// Opens a PTY of `size`: (master, slave), neither inherited by other programs.
pub fn open(size: Size) -> std::io::Result<(OwnedFd, OwnedFd)> {
    let pair = nix::pty::openpty(Some(&size.winsize()), None)?;
    for fd in [&pair.master, &pair.slave] {
        fcntl(fd.as_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    }
    Ok((pair.master, pair.slave))
}

/// Sets the window size the programs on the terminal see (they get SIGWINCH).
pub fn resize(master: &OwnedFd, size: Size) -> std::io::Result<()> {
    // SAFETY: the fd is a PTY master owned by the caller; the pointer is to a live value.
    unsafe { set_window_size(master.as_raw_fd(), &size.winsize()) }?;
    Ok(())
}

/// Starts `shell` (no arguments) on the terminal whose slave end is `slave`, in `cwd`,
/// with `env` as its whole environment, as the terminal's controlling process.
pub fn spawn_shell(
    world: &World,
    slave: &OwnedFd,
    shell: &str,
    cwd: &Path,
    env: &[(String, String)],
) -> std::io::Result<tokio::process::Child> {
    let stdio = || -> std::io::Result<Stdio> { Ok(Stdio::from(slave.try_clone()?)) };
    world
        .terminal_command(cwd, &[OsStr::new(shell)])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(stdio()?)
        .stdout(stdio()?)
        .stderr(stdio()?)
        .kill_on_drop(true)
        .spawn()
}

/// A terminal supervisor's exit status as `(code, signal)`: it mirrors a signal death of
/// its program as 128+N; -1 when the status could not be read.
pub fn exit_of(status: std::io::Result<std::process::ExitStatus>) -> (i32, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(status) => {
            let signal = status.signal();
            let code = status.code().unwrap_or(128 + signal.unwrap_or(0));
            (code, signal.or((code > 128).then_some(code - 128)))
        }
        Err(_) => (-1, None),
    }
}
