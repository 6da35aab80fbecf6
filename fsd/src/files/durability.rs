//! What a write the daemon answered as done survives: the daemon's death only (`atomic`),
//! or a power loss too (`fsync`); see [`Durability`]. One policy for the daemon's life,
//! set once at start before any write (`fsd serve --durability`), read by every place
//! that would wait for the disk: a file write's fsyncs and a batch's `syncfs`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub use fsd_api::metrics::Durability;

/// Whether writes wait for the disk ([`Durability::Fsync`], the default).
static FLUSHING: AtomicBool = AtomicBool::new(true);
/// Flushes made for writes since the start, for the figures.
static FLUSHES: AtomicU64 = AtomicU64::new(0);

/// Sets the policy; called once, at start.
pub fn set(durability: Durability) {
    FLUSHING.store(durability == Durability::Fsync, Ordering::Relaxed);
}

pub fn mode() -> Durability {
    if flushing() {
        Durability::Fsync
    } else {
        Durability::Atomic
    }
}

/// Whether a write waits for the disk before it is answered.
pub fn flushing() -> bool {
    FLUSHING.load(Ordering::Relaxed)
}

/// Counts a flush made for a write.
pub fn flushed() {
    FLUSHES.fetch_add(1, Ordering::Relaxed);
}

/// Flushes made for writes since the start.
pub fn flushes() -> u64 {
    FLUSHES.load(Ordering::Relaxed)
}
