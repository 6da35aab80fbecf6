//! Resource figures: `GET /api/metrics` (fsd's own). The same figures, with the daemon's
//! request counts and latencies, are served in Prometheus's text format on `GET /metrics`.

use serde::{Deserialize, Serialize};

/// Where a figure comes from: the sandbox's cgroup (v1 or v2), or the whole host when no
/// cgroup says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Cgroup,
    Host,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricsResponse {
    pub success: bool,
    /// Seconds since the daemon started.
    pub uptime_seconds: f64,
    pub cpu: CpuMetrics,
    pub memory: MemoryMetrics,
    /// The filesystems under the workspace and the state directory.
    pub disks: Vec<DiskMetrics>,
    pub connections: ConnectionMetrics,
    pub processes: ProcessMetrics,
    /// What a write answered as done survives, and the flushes to the disk made for it
    /// (a daemon before this field flushed every write: `fsync`).
    #[serde(default)]
    pub durability: DurabilityMetrics,
    pub timestamp: String,
}

/// What a write the daemon answered as done survives (`fsd serve --durability`). Either
/// way a write is atomic: a temp file renamed over the target, so a reader, and the tree
/// after the daemon's death, holds the old file or the new one, never a torn one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// A power loss or a kernel crash too: each file is flushed to the disk (`fsync`)
    /// before its rename and its directory after; a batch's files by one flush of the
    /// file system (`syncfs`) before the answer.
    #[default]
    Fsync,
    /// The daemon's death, not the machine's: nothing waits for the disk, which writes
    /// back on its own (Linux: within 30 s). For a disk that does not outlive the machine,
    /// as a container's does not.
    Atomic,
}

impl Durability {
    pub fn name(self) -> &'static str {
        match self {
            Durability::Fsync => "fsync",
            Durability::Atomic => "atomic",
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "fsync" => Ok(Durability::Fsync),
            "atomic" => Ok(Durability::Atomic),
            _ => Err(format!("unknown durability {name:?} (fsync or atomic)")),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DurabilityMetrics {
    pub mode: Durability,
    /// Flushes to the disk made for writes since the daemon started: an `fsync` of a file
    /// or a directory, a `syncfs` of a batch. None under `atomic`.
    pub flushes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuMetrics {
    /// CPU time used, in seconds: since the cgroup began (the sandbox's start), or the
    /// host's since boot.
    pub usage_seconds: f64,
    /// Use over the last interval, in percent of one core (200 is two cores busy).
    pub percent: f64,
    /// The interval `percent` covers, in seconds (about 1; 0 in the first second, before
    /// there are two samples).
    pub interval_seconds: f64,
    /// Cores the daemon may run on.
    pub cores: u32,
    /// Cores' worth of time the cgroup's quota allows, when it sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_cores: Option<f64>,
    pub source: Source,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryMetrics {
    /// Memory in use, page cache that can be dropped left out (as `docker stats` counts).
    pub used_bytes: u64,
    /// The cgroup's limit, when one is set (the lowest of the cgroup and its parents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
    /// The host's memory.
    pub host_total_bytes: u64,
    pub source: Source,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiskMetrics {
    /// `workspace` or `state`.
    pub name: String,
    pub path: String,
    pub total_bytes: u64,
    pub used_bytes: u64,
    /// Free to unprivileged writers (root may use a little more).
    pub free_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionMetrics {
    /// HTTP connections open now (a WebSocket counts as one).
    pub open: u64,
    /// Connections accepted since the start.
    pub accepted: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessMetrics {
    /// Processes running below the daemon (commands, their shells and supervisors).
    pub total: u64,
    /// Background processes running.
    pub background: u64,
    /// Sessions (each one shell).
    pub sessions: u64,
}
