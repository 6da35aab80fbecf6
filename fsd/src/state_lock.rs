//! One daemon per state directory. A second `fsd serve` on a directory in use would take
//! the first's work from under it: its start ends the bucket mounts the directory's record
//! names (an earlier run's, it believes), and recovers its processes, terminals and watches.
//! So a start takes a lock on `daemon.lock` in the directory first, and is refused while a
//! living daemon holds it. A holder already killed whose exit waits on its own bucket mount
//! (see `MountService::release_stale`) is let go of and waited for instead.
//!
//! The lock is a POSIX record lock: the kernel names its holder's pid, and a fork of the
//! daemon (the spawner, a supervisor) never holds it.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file in the state directory a running daemon holds locked.
const LOCK_FILE: &str = "daemon.lock";

/// Held for as long as the daemon runs; the kernel lets go of it when the process ends.
pub struct StateLock {
    _file: std::fs::File,
}

#[derive(Debug, thiserror::Error)]
pub enum StateLockError {
    #[error("cannot lock {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the state directory {dir} is in use by another fsd (pid {pid}{state}): --state-dir takes another"
    )]
    InUse {
        dir: PathBuf,
        pid: i32,
        /// What else is known of the holder: a stopped one (Ctrl-Z) looks gone to whoever
        /// stopped it, and keeps the directory until it goes on or is killed.
        state: String,
    },
}

/// What a try at the lock found.
enum Attempt {
    Taken(StateLock),
    HeldBy(i32),
}

impl StateLock {
    /// Takes the lock on `dir` (made with the settings, mode 0700). A holder that is dying
    /// has `unstick` run (what lets its exit finish), then up to `patience` to let go; a
    /// living one refuses.
    pub async fn take(
        dir: &Path,
        patience: Duration,
        unstick: impl FnOnce(),
    ) -> Result<Self, StateLockError> {
        let path = dir.join(LOCK_FILE);
        let failed = |source| StateLockError::Io {
            path: path.clone(),
            source,
        };
        let attempt = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .and_then(try_lock)
                .map_err(failed)
        };
        let holder = match attempt()? {
            Attempt::Taken(lock) => return Ok(lock),
            Attempt::HeldBy(pid) => pid,
        };
        let in_use = |pid| StateLockError::InUse {
            dir: dir.to_path_buf(),
            pid,
            state: if stopped(pid) {
                format!(", stopped: `kill -CONT {pid}` lets it go on, `kill -KILL {pid}` ends it")
            } else {
                String::new()
            },
        };
        if !dying(holder) {
            // Unless it ended a moment ago.
            return match attempt()? {
                Attempt::Taken(lock) => Ok(lock),
                Attempt::HeldBy(pid) => Err(in_use(pid)),
            };
        }
        tracing::warn!(
            pid = holder,
            "an earlier daemon on this state directory is still exiting; letting go of what holds it"
        );
        unstick();
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            match attempt()? {
                Attempt::Taken(lock) => return Ok(lock),
                Attempt::HeldBy(pid) if tokio::time::Instant::now() >= deadline => {
                    return Err(in_use(pid));
                }
                Attempt::HeldBy(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
}

/// Locks `file` whole for writing without waiting; the holder's pid if another process has it.
fn try_lock(file: std::fs::File) -> std::io::Result<Attempt> {
    use nix::fcntl::{FcntlArg, fcntl};
    let mut wanted = nix::libc::flock {
        l_type: nix::libc::F_WRLCK as i16,
        l_whence: nix::libc::SEEK_SET as i16,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    match fcntl(file.as_fd(), FcntlArg::F_SETLK(&wanted)) {
        Ok(_) => return Ok(Attempt::Taken(StateLock { _file: file })),
        Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES) => {}
        Err(errno) => return Err(errno.into()),
    }
    fcntl(file.as_fd(), FcntlArg::F_GETLK(&mut wanted))?;
    if i32::from(wanted.l_type) == nix::libc::F_UNLCK {
        // Let go of between the two calls: try again.
        return try_lock(file);
    }
    Ok(Attempt::HeldBy(wanted.l_pid))
}

/// Whether process `pid` is on its way out: killed (SIGKILL pending) or already a zombie.
pub fn dying(pid: i32) -> bool {
    status_of(pid).is_some_and(|status| dying_by_status(&status))
}

/// Whether process `pid` is stopped (by a signal, or a tracer).
fn stopped(pid: i32) -> bool {
    status_of(pid).is_some_and(|status| stopped_by_status(&status))
}

/// `/proc/<pid>/status`, for a process visible from here (a holder in another PID
/// namespace is named 0, and nothing is known of it).
fn status_of(pid: i32) -> Option<String> {
    (pid > 0)
        .then(|| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .flatten()
}

/// [`stopped`] read from a `/proc/<pid>/status` text.
fn stopped_by_status(status: &str) -> bool {
    status
        .lines()
        .any(|line| matches!(state_letter(line), Some('T' | 't')))
}

/// The state's letter of a `/proc/<pid>/status` line, if it is the `State:` line.
fn state_letter(line: &str) -> Option<char> {
    match line.split_once(':') {
        Some(("State", state)) => state.trim().chars().next(),
        _ => None,
    }
}

/// [`dying`] read from a `/proc/<pid>/status` text.
fn dying_by_status(status: &str) -> bool {
    const SIGKILL_BIT: u64 = 1 << (nix::libc::SIGKILL - 1);
    status.lines().any(|line| {
        if let Some(letter) = state_letter(line) {
            return matches!(letter, 'Z' | 'X');
        }
        match line.split_once(':') {
            Some(("SigPnd" | "ShdPnd", mask)) => {
                u64::from_str_radix(mask.trim(), 16).is_ok_and(|mask| mask & SIGKILL_BIT != 0)
            }
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_killed_or_a_zombie_is_dying_a_sleeping_one_is_not() {
        let living = "State:\tS (sleeping)\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n";
        assert!(!dying_by_status(living));
        let killed =
            "State:\tD (disk sleep)\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000100\n";
        assert!(dying_by_status(killed));
        let zombie = "State:\tZ (zombie)\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n";
        assert!(dying_by_status(zombie));
        // SIGTERM pending (bit 15) is not a death.
        let asked = "State:\tS (sleeping)\nSigPnd:\t0000000000004000\nShdPnd:\t0000000000000000\n";
        assert!(!dying_by_status(asked));
    }

    #[test]
    fn a_process_stopped_by_a_signal_or_a_tracer_is_stopped_a_sleeping_one_is_not() {
        assert!(stopped_by_status("Name:\tfsd\nState:\tT (stopped)\n"));
        assert!(stopped_by_status("Name:\tfsd\nState:\tt (tracing stop)\n"));
        assert!(!stopped_by_status("Name:\tfsd\nState:\tS (sleeping)\n"));
        // A name is not a state.
        assert!(!stopped_by_status("Name:\tT\nState:\tR (running)\n"));
    }
}
