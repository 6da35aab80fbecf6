//! What a write the daemon answered as done survives: the daemon's death only (`atomic`),
//! or a power loss too (`fsync`); see [`Durability`]. One policy for the daemon's life,
//! set once at start before any write (`fsd serve --durability`); every wait for the disk
//! goes through [`sync`] or [`sync_filesystem`], which wait only under `fsync` and count
//! what they flushed.

use std::os::fd::AsFd;
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

/// Flushes a written file (or a directory, for the names in it) to the disk under
/// `fsync`; nothing under `atomic`.
pub fn sync(file: &std::fs::File) -> std::io::Result<()> {
    if !flushing() {
        return Ok(());
    }
    FLUSHES.fetch_add(1, Ordering::Relaxed);
    file.sync_all()
}

/// Flushes the whole file system holding `fd` (a batch's files at once) under `fsync`;
/// nothing under `atomic`.
pub fn sync_filesystem(fd: impl AsFd) -> nix::Result<()> {
    if !flushing() {
        return Ok(());
    }
    FLUSHES.fetch_add(1, Ordering::Relaxed);
    nix::unistd::syncfs(fd)
}

/// Flushes made for writes since the start.
pub fn flushes() -> u64 {
    FLUSHES.load(Ordering::Relaxed)
}
