//! `GET /api/ping`, `GET /api/version` and the native `GET /api/capabilities`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PingResponse {
    pub success: bool,
    pub status: String,
    /// Also `"healthy"`: the reference's HTTP client reads `message`, which it never sends.
    pub message: String,
    pub timestamp: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionResponse {
    pub success: bool,
    /// The Sandbox SDK version whose container fsd stands in for ([`COMPATIBLE_SDK_VERSION`],
    /// or the image's `SANDBOX_VERSION`): what the SDK compares with its own.
    pub version: String,
    /// fsd's own: fsd's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsd_version: Option<String>,
    pub timestamp: String,
}

/// The `@cloudflare/sandbox` release whose container API fsd serves and is tested against
/// (the official clients in `tests/clients`). `/api/version` answers it, so the SDK's
/// version check sees no mismatch.
pub const COMPATIBLE_SDK_VERSION: &str = "0.12.7";

/// What this host lets the daemon do, detected at start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// The daemon runs as uid 0.
    pub root: bool,
    /// CAP_SYS_ADMIN is in the effective set, so mount(2) may succeed.
    pub can_mount: bool,
    /// The kernel lists `overlay` in /proc/filesystems.
    pub overlayfs: bool,
    /// The kernel lists `squashfs` in /proc/filesystems.
    pub squashfs: bool,
    /// `/dev/loop-control` exists, so loop devices can be attached.
    pub loop_devices: bool,
    /// `/dev/fuse` exists and the kernel lists `fuse`.
    pub fuse: bool,
    /// New PID namespaces can be created (CAP_SYS_ADMIN or unprivileged user namespaces).
    pub pid_namespaces: bool,
    pub inotify: InotifyLimits,
    /// Paths outside the workspace and extra roots are refused.
    pub confined: bool,
    /// When confined, how opens are kept beneath the roots: `openat2` (the kernel resolves
    /// each path beneath a root's descriptor) or `walk` (a kernel without it: one
    /// component at a time, any link refused). File reads and writes, searches and replaces
    /// open files this way.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub confined_by: String,
    /// How user commands are kept from the daemon: `pid-namespace` (their own PID namespace
    /// and /proc, so the daemon cannot be signalled or traced) or `none`.
    pub command_isolation: String,
    /// How backups are restored: `kernel` (squashfs on a loop device + overlayfs), `fuse`
    /// (squashfuse + fuse-overlayfs) or `none`.
    #[serde(default)]
    pub restore_driver: String,
    /// The workspace root the daemon serves.
    pub workspace: String,
    /// Names this run of the daemon (new at every start): a front end that exposed a port
    /// in one run can tell when the sandbox has restarted since (its preview URLs are
    /// stale then).
    #[serde(default)]
    pub runtime_id: String,
}

/// `/proc/sys/fs/inotify/*`; `None` where unreadable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InotifyLimits {
    pub max_user_watches: Option<u64>,
    pub max_user_instances: Option<u64>,
    pub max_queued_events: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilitiesResponse {
    pub success: bool,
    pub capabilities: Capabilities,
    pub timestamp: String,
}
