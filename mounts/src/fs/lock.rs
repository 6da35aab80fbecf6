//! Locks of a mount's state.

use std::sync::{Mutex, MutexGuard};

/// The guard of `mutex`, poisoned or not: a panicking request must not wedge every later
/// request of the mount.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
