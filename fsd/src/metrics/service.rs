//! The sandbox's figures: CPU sampled each second (so "the last interval" is always about
//! a second, however rarely anyone asks), memory, disks, connections and requests. No HTTP.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fsd_api::metrics::{ConnectionMetrics, CpuMetrics, DiskMetrics, MemoryMetrics, Source};

use super::cgroup::{Cgroup, host};
use super::requests::RequestStats;
use crate::wire::accept::ConnectionCounts;

/// How often CPU use is sampled.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// CPU time used at an instant.
#[derive(Debug, Clone, Copy)]
struct CpuSample {
    at: Instant,
    seconds: f64,
}

pub struct MetricsService {
    started: Instant,
    /// The two latest samples: their difference is the last interval's use.
    samples: Mutex<(Option<CpuSample>, Option<CpuSample>)>,
    disks: Vec<(&'static str, PathBuf)>,
    pub connections: Arc<ConnectionCounts>,
    pub requests: Arc<RequestStats>,
}

/// What the service reads from the machine at once (the process figures are the process
/// world's, added by the caller).
pub struct Reading {
    pub uptime_seconds: f64,
    pub cpu: CpuMetrics,
    pub memory: MemoryMetrics,
    pub disks: Vec<DiskMetrics>,
    pub connections: ConnectionMetrics,
}

impl MetricsService {
    /// Finds the daemon's cgroup; `workspace` and `state_dir` are the disks reported.
    pub fn new(workspace: PathBuf, state_dir: PathBuf) -> Arc<Self> {
        tracing::debug!(cgroup = ?Cgroup::of_self(), "resource figures from");
        let service = Arc::new(Self {
            started: Instant::now(),
            samples: Mutex::new((None, None)),
            disks: vec![("workspace", workspace), ("state", state_dir)],
            connections: Arc::default(),
            requests: Arc::default(),
        });
        service.sample();
        service
    }

    /// Samples CPU use every second for as long as the service lives.
    pub fn start_sampling(self: &Arc<Self>) {
        let service = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(SAMPLE_EVERY);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let Some(service) = service.upgrade() else {
                    return;
                };
                service.sample();
            }
        });
    }

    /// CPU time used so far, and where the figure comes from.
    fn cpu_seconds(cgroup: Option<&Cgroup>) -> (f64, Source) {
        if let Some(seconds) = cgroup.and_then(Cgroup::cpu_seconds) {
            return (seconds, Source::Cgroup);
        }
        let ticks = fsd_process::proctree::clock_ticks();
        (host::cpu_seconds(ticks).unwrap_or(0.0), Source::Host)
    }

    fn sample(&self) {
        let sample = CpuSample {
            at: Instant::now(),
            seconds: Self::cpu_seconds(Cgroup::of_self().as_ref()).0,
        };
        let mut samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        *samples = (samples.1, Some(sample));
    }

    /// The figures now. Blocking (it reads `/proc`, `/sys` and statvfs). The cgroup is
    /// looked up each time: a daemon may be moved into another (a service manager does).
    pub fn snapshot(&self) -> Reading {
        let cgroup = Cgroup::of_self();
        Reading {
            uptime_seconds: self.started.elapsed().as_secs_f64(),
            cpu: self.cpu(cgroup.as_ref()),
            memory: Self::memory(cgroup.as_ref()),
            disks: self.disks(),
            connections: ConnectionMetrics {
                open: self.connections.open.load(Ordering::Relaxed) as u64,
                accepted: self.connections.accepted.load(Ordering::Relaxed),
            },
        }
    }

    fn cpu(&self, cgroup: Option<&Cgroup>) -> CpuMetrics {
        let (usage_seconds, source) = Self::cpu_seconds(cgroup);
        let (percent, interval_seconds) =
            match *self.samples.lock().unwrap_or_else(|p| p.into_inner()) {
                (Some(before), Some(after)) => {
                    let interval = after.at.duration_since(before.at).as_secs_f64();
                    let used = (after.seconds - before.seconds).max(0.0);
                    (used / interval.max(1e-9) * 100.0, interval)
                }
                _ => (0.0, 0.0),
            };
        CpuMetrics {
            usage_seconds,
            percent,
            interval_seconds,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            limit_cores: cgroup.and_then(Cgroup::cpu_limit_cores),
            source,
        }
    }

    fn memory(cgroup: Option<&Cgroup>) -> MemoryMetrics {
        let (host_total_bytes, host_used) = host::memory().unwrap_or((0, 0));
        let cgroup_used = cgroup.and_then(Cgroup::memory_used);
        let (used_bytes, source) = match cgroup_used {
            Some(used) => (used, Source::Cgroup),
            None => (host_used, Source::Host),
        };
        MemoryMetrics {
            used_bytes,
            limit_bytes: cgroup
                .and_then(Cgroup::memory_limit)
                .filter(|&limit| limit < host_total_bytes || host_total_bytes == 0),
            host_total_bytes,
            source,
        }
    }

    fn disks(&self) -> Vec<DiskMetrics> {
        self.disks
            .iter()
            .filter_map(|(name, path)| {
                let stat = nix::sys::statvfs::statvfs(path).ok()?;
                let unit = stat.fragment_size() as u64;
                let total = stat.blocks() as u64 * unit;
                Some(DiskMetrics {
                    name: name.to_string(),
                    path: path.display().to_string(),
                    total_bytes: total,
                    used_bytes: total.saturating_sub(stat.blocks_free() as u64 * unit),
                    free_bytes: stat.blocks_available() as u64 * unit,
                })
            })
            .collect()
    }
}
