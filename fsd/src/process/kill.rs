//! Ending a background process's whole tree: everything below its supervisor, which holds
//! whatever the process started, including what left its process group or session.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::exec::proctree;

/// SIGTERM to SIGKILL, as in the reference.
pub const KILL_GRACE: Duration = Duration::from_secs(5);
/// How long SIGKILL is repeated for before giving up (a tree that forks faster than it
/// can be killed; never seen).
const KILL_LIMIT: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(20);

/// Sends SIGTERM to everything below `supervisor` (leaves first), waits up to the grace
/// period for all of it to end, then SIGKILLs whatever is left until nothing is. Returns
/// whether SIGKILL was needed.
pub async fn end_tree(supervisor: u32) -> bool {
    let living = || {
        proctree::descendants(supervisor)
            .into_iter()
            .filter(|&pid| proctree::alive(pid))
            .collect::<Vec<u32>>()
    };
    if supervisor <= 1 {
        return false;
    }
    proctree::signal_trees(&proctree::children(supervisor), Signal::SIGTERM);
    let deadline = tokio::time::Instant::now() + KILL_GRACE;
    while tokio::time::Instant::now() < deadline {
        if living().is_empty() {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
    let deadline = tokio::time::Instant::now() + KILL_LIMIT;
    loop {
        let left = living();
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            if !left.is_empty() {
                tracing::warn!(supervisor, left = left.len(), "processes survived SIGKILL");
            }
            return true;
        }
        proctree::signal_all(&left, Signal::SIGKILL);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
