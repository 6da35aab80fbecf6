//! Progress reports for long operations: bytes done out of a total, per phase.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The step an operation is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Archive,
    Upload,
    Download,
    Verify,
    Mount,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Archive => "archive",
            Phase::Upload => "upload",
            Phase::Download => "download",
            Phase::Verify => "verify",
            Phase::Mount => "mount",
        }
    }
}

type Sink = dyn Fn(Phase, u64, u64) + Send + Sync;

/// A cheap handle that reports `(phase, done, total)` to a sink; `Progress::none()` drops
/// reports.
#[derive(Clone, Default)]
pub struct Progress {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    phase: Phase,
    total: AtomicU64,
    sink: Arc<Sink>,
}

impl Progress {
    pub fn none() -> Progress {
        Progress { inner: None }
    }

    pub fn new(phase: Phase, total: u64, sink: Arc<Sink>) -> Progress {
        Progress {
            inner: Some(Arc::new(Inner {
                phase,
                total: AtomicU64::new(total),
                sink,
            })),
        }
    }

    /// The same sink for another phase.
    pub fn phase(&self, phase: Phase, total: u64) -> Progress {
        match &self.inner {
            Some(inner) => Progress::new(phase, total, Arc::clone(&inner.sink)),
            None => Progress::none(),
        }
    }

    pub fn set_total(&self, total: u64) {
        if let Some(inner) = &self.inner {
            inner.total.store(total, Ordering::Relaxed);
            (inner.sink)(inner.phase, 0, total);
        }
    }

    pub fn report(&self, done: u64) {
        if let Some(inner) = &self.inner {
            (inner.sink)(inner.phase, done, inner.total.load(Ordering::Relaxed));
        }
    }
}
