//! fsd as PID 1. The first process of a container must reap every orphan in it and pass on
//! the signals the runtime sends (`podman stop`'s SIGTERM). A process that also runs an
//! async runtime cannot reap children it does not own without stealing the exits its own
//! waits expect, so, as tini does, fsd forks before anything else starts: the first process
//! only forwards signals and reaps, and its child is the daemon. The container's exit code
//! is the daemon's (128 + N when a signal N ended it).
//!
//! A daemon killed while one of its own threads waits on its own bucket mount never
//! finishes exiting: the kernel waits for an answer only that process could give. Outside
//! a container the next `fsd serve` on the state directory ends those mounts' connections;
//! in one there is no next start until this process exits, so it does the same itself.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork, getpid};

use fsd_process::supervisor::POLITE_SIGNALS;

/// How often the first process looks at whether its daemon is stuck on its way out.
const DYING_LOOK: Duration = Duration::from_millis(500);

/// When this process is PID 1, forks: the parent forwards and reaps until the daemon
/// (serving `state_dir`) exits and returns the exit code to end with; the child returns
/// `None` and goes on to serve. Anywhere else, `None` at once. Must run before any thread
/// is started.
pub fn split_if_first(state_dir: &Path) -> Option<i32> {
    if getpid().as_raw() != 1 {
        return None;
    }
    // What the first process passes on to the daemon, and the exits it reaps.
    let mut waited = SigSet::empty();
    for signal in POLITE_SIGNALS {
        waited.add(signal);
    }
    waited.add(Signal::SIGWINCH);
    waited.add(Signal::SIGCHLD);
    // Blocked before the fork, so nothing sent in between is lost; the child unblocks.
    let previous = waited.thread_swap_mask(SigmaskHow::SIG_BLOCK).ok()?;
    // SAFETY: no thread has been started yet (main calls this first), so the child holds no
    // lock another thread could have held.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => {
            let _ = previous.thread_set_mask();
            None
        }
        Ok(ForkResult::Parent { child }) => Some(forward_and_reap(child, &waited, state_dir)),
        Err(error) => {
            say!("fsd: cannot fork the init process ({error}); serving as PID 1");
            let _ = previous.thread_set_mask();
            None
        }
    }
}

/// Forwards signals to `daemon` and reaps every child that ends until `daemon` does. A
/// daemon seen dying at two looks in a row (a killed process otherwise ends within
/// milliseconds) is stuck on its own mounts: their connections are ended once.
fn forward_and_reap(daemon: Pid, waited: &SigSet, state_dir: &Path) -> i32 {
    let mut dying_looks = 0;
    loop {
        let Some(signal) = wait_for(waited, DYING_LOOK) else {
            if !crate::state_lock::dying(daemon.as_raw()) {
                dying_looks = 0;
                continue;
            }
            dying_looks += 1;
            if dying_looks == 2 {
                match crate::mounts::MountService::release_stale(state_dir) {
                    0 => {
                        say!("fsd: the daemon was killed and has not ended; it had no bucket mount")
                    }
                    ended => say!(
                        "fsd: the daemon was killed while waiting on its own bucket mounts; ended {ended}"
                    ),
                }
            }
            continue;
        };
        if signal != Signal::SIGCHLD {
            let _ = kill(daemon, signal);
            continue;
        }
        // One SIGCHLD may stand for many exits.
        loop {
            match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == daemon => return code,
                Ok(WaitStatus::Signaled(pid, signal, _)) if pid == daemon => {
                    return 128 + signal as i32;
                }
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
}

/// The next of `waited`'s signals, or `None` once `timeout` has passed without one.
fn wait_for(waited: &SigSet, timeout: Duration) -> Option<Signal> {
    let timeout = nix::libc::timespec {
        tv_sec: timeout.as_secs() as nix::libc::time_t,
        tv_nsec: timeout.subsec_nanos().into(),
    };
    // SAFETY: both pointers are to values that live across the call; no siginfo is asked for.
    let number =
        unsafe { nix::libc::sigtimedwait(waited.as_ref(), std::ptr::null_mut(), &timeout) };
    Signal::try_from(number).ok()
}
