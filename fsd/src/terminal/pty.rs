//! A pseudo-terminal: opening one and its window size.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::pty::Winsize;

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
