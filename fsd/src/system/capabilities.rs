//! What this host lets the daemon do, read once at start from /proc and /dev.
//!
//! Detection reads the kernel's own reports; it does not try a mount. Later modules (exec,
//! backups, mounts) consult these flags to pick kernel or FUSE paths.

use std::path::Path;

use fsd_api::system::{Capabilities, InotifyLimits};

/// CAP_SYS_ADMIN's bit in the capability sets.
const CAP_SYS_ADMIN: u32 = 21;

/// `command_isolation` is left empty: the process world says it once its init is up (see
/// `exec::World`), and the route fills it in.
pub fn detect(workspace: &Path, confined: bool) -> Capabilities {
    let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    let has_fs = |name: &str| {
        filesystems
            .lines()
            .any(|line| line.split_whitespace().last() == Some(name))
    };
    let can_mount = effective_caps().is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0);
    Capabilities {
        root: nix::unistd::geteuid().is_root(),
        can_mount,
        overlayfs: has_fs("overlay"),
        squashfs: has_fs("squashfs"),
        loop_devices: Path::new("/dev/loop-control").exists(),
        fuse: Path::new("/dev/fuse").exists() && has_fs("fuse"),
        pid_namespaces: can_mount || unprivileged_user_namespaces(),
        inotify: InotifyLimits {
            max_user_watches: read_number("/proc/sys/fs/inotify/max_user_watches"),
            max_user_instances: read_number("/proc/sys/fs/inotify/max_user_instances"),
            max_queued_events: read_number("/proc/sys/fs/inotify/max_queued_events"),
        },
        confined,
        confined_by: match (confined, fsd_search::kernel_confines()) {
            (false, _) => String::new(),
            (true, true) => "openat2".into(),
            (true, false) => "walk".into(),
        },
        command_isolation: String::new(),
        restore_driver: String::new(),
        workspace: workspace.display().to_string(),
        runtime_id: runtime_id(),
    }
}

/// `CapEff` from /proc/self/status.
fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_cap_eff(&status)
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

fn unprivileged_user_namespaces() -> bool {
    let allowed_by_debian =
        read_number("/proc/sys/kernel/unprivileged_userns_clone").is_none_or(|v| v != 0);
    let max = read_number("/proc/sys/user/max_user_namespaces").unwrap_or(0);
    allowed_by_debian && max > 0
}

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// A new id for this run of the daemon: 16 random hex digits.
fn runtime_id() -> String {
    crate::random::hex(&crate::random::bytes::<8>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cap_eff() {
        let status = "Name:\tfsd\nCapEff:\t000001ffffffffff\nCapBnd:\t0\n";
        assert_eq!(parse_cap_eff(status), Some(0x1ff_ffff_ffff));
        assert_eq!(parse_cap_eff("Name: x\n"), None);
    }

    #[test]
    fn reads_this_host() {
        let caps = detect(Path::new("/tmp"), false);
        assert!(caps.inotify.max_user_watches.is_some());
        assert_eq!(caps.workspace, "/tmp");
    }
}
