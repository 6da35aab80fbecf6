//! The allocator's policy: keep freed buffers while requests come, give them back when quiet.
//!
//! glibc hands a freed buffer of more than 128 KiB straight back to the system (mmap'd
//! chunks, and the tops of per-thread arenas), so every large request (a 1 MiB write, a big
//! read) paid for fresh pages again: page faults and `madvise` were a fifth of the CPU of a
//! 1 MiB JSON write. Freed buffers up to [`KEEP_BYTES`] now stay in the heap for the next
//! request, and the heap is trimmed once no request has come for [`QUIET`], so an idle
//! daemon's RSS stays what it was.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Freed buffers up to this size are kept for reuse (glibc's largest mmap threshold).
pub const KEEP_BYTES: i32 = 32 * 1024 * 1024;
/// With no request or connection for this long, kept memory goes back to the system.
pub const QUIET: Duration = Duration::from_secs(2);

/// Sets the allocator to keep freed buffers; once, at startup, before threads allocate.
pub fn keep_freed_buffers() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes glibc's thresholds; called before other threads start.
    unsafe {
        nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, KEEP_BYTES);
        nix::libc::mallopt(nix::libc::M_TRIM_THRESHOLD, KEEP_BYTES);
    }
}

/// Returns freed heap pages to the system.
pub fn release_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

/// Requests and connections seen, so that a quiet daemon can be told from a busy one.
#[derive(Default)]
pub struct Activity(AtomicU64);

impl Activity {
    pub fn note(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn seen(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Trims the heap each time activity has stopped for [`QUIET`].
pub fn release_when_quiet(activity: Arc<Activity>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(QUIET);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut quiet = QuietAfterActivity::new(activity.seen());
        loop {
            tick.tick().await;
            if quiet.tick(activity.seen()) {
                tokio::task::spawn_blocking(release_free_memory);
            }
        }
    });
}

/// Tells, tick by tick, when activity has just stopped: once per stretch of activity.
struct QuietAfterActivity {
    last: u64,
    active: bool,
}

impl QuietAfterActivity {
    fn new(seen: u64) -> Self {
        Self {
            last: seen,
            active: false,
        }
    }

    /// True on the first tick without activity after ticks with some.
    fn tick(&mut self, seen: u64) -> bool {
        if seen != self.last {
            self.last = seen;
            self.active = true;
            false
        } else {
            std::mem::take(&mut self.active)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::QuietAfterActivity;

    #[test]
    fn trims_once_after_each_stretch_of_activity() {
        let mut quiet = QuietAfterActivity::new(0);
        let ticks: Vec<bool> = [0, 0, 3, 9, 9, 9, 10, 10]
            .into_iter()
            .map(|seen| quiet.tick(seen))
            .collect();
        assert_eq!(
            ticks,
            [false, false, false, false, true, false, false, true]
        );
    }
}
