//! Which paths lie on a mount whose lookups wait on a server: a bucket (FUSE) or a network
//! filesystem. A lookup there can wait as long as the server does (a bucket's directory is
//! locked while a rename in it copies an object in the store), so a request's thread must
//! not make one where it serves other requests: [`off_worker`] moves it off.
//!
//! The table is `/proc/self/mountinfo`, read again by a thread of its own each time the
//! kernel says it changed (`POLLPRI`), and at once by whoever mounts ([`refresh`]), so a
//! check costs no system call; with no such mount (the usual case) one atomic load.

use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, RwLock};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// The mount points as last read, longest first, each with whether its lookups wait on a
/// server; and whether any does.
struct Table {
    /// One read at a time, so an older read never lands after a newer one.
    reading: Mutex<()>,
    points: RwLock<Vec<(PathBuf, bool)>>,
    any_remote: AtomicBool,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        // Opened before the first read, so a change made in between is told.
        let followed = File::open("/proc/self/mountinfo");
        let first = Table {
            reading: Mutex::new(()),
            points: RwLock::new(Vec::new()),
            any_remote: AtomicBool::new(false),
        };
        first.read();
        let watcher = followed.and_then(|file| {
            std::thread::Builder::new()
                .name("fsd-mount-table".into())
                .spawn(move || watch(&file, table()))
        });
        if let Err(error) = watcher {
            tracing::warn!(%error, "cannot follow the mount table; it is read once");
        }
        first
    })
}

impl Table {
    fn read(&self) {
        let _one = self
            .reading
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let points = by_depth(fsd_backup::mount::mount_table());
        let any_remote = points.iter().any(|(_, remote)| *remote);
        *self
            .points
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = points;
        self.any_remote.store(any_remote, Ordering::Release);
    }
}

/// Each mount point with whether its lookups wait on a server, longest first; of mounts
/// at the same point the one made last (the one seen) first.
fn by_depth(lines: Vec<fsd_backup::mount::MountEntry>) -> Vec<(PathBuf, bool)> {
    let mut points: Vec<(PathBuf, bool)> = lines
        .into_iter()
        .rev()
        .map(|line| {
            let remote = waits_on_a_server(&line.fstype);
            (line.target, remote)
        })
        .collect();
    points.sort_by_key(|(point, _)| std::cmp::Reverse(point.as_os_str().len()));
    points
}

/// Reads the table again each time the kernel says `file` changed.
fn watch(file: &File, table: &Table) {
    loop {
        let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLPRI)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => table.read(),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
    }
}

/// Filesystems whose lookups a process or a network serves: FUSE (a bucket, sshfs) and the
/// network filesystems.
fn waits_on_a_server(fstype: &str) -> bool {
    fstype.starts_with("fuse")
        || matches!(
            fstype,
            "nfs" | "nfs4" | "cifs" | "smb3" | "9p" | "ceph" | "virtiofs" | "afs" | "glusterfs"
        )
}

/// Reads the table now: a mount just made or taken away counts from the next check on.
pub fn refresh() {
    table().read();
}

/// Whether `path` (absolute; `..` taken lexically) lies on a mount whose lookups wait on a
/// server.
pub fn on_remote_mount(path: &Path) -> bool {
    let table = table();
    if !table.any_remote.load(Ordering::Acquire) {
        return false;
    }
    let mut lexical = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    let points = table
        .points
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    remote_in(&points, &lexical)
}

/// Whether the mount `path` lies on (the deepest point that prefixes it) waits on a server.
fn remote_in(points: &[(PathBuf, bool)], path: &Path) -> bool {
    points
        .iter()
        .find(|(point, _)| path.starts_with(point))
        .is_some_and(|(_, remote)| *remote)
}

/// Runs `lookup` of `path`: on a mount whose lookups wait on a server and on a worker of
/// the daemon's runtime, with the worker's other tasks handed to another thread first
/// (`block_in_place`), so a server that does not answer holds up this request only.
pub fn off_worker<T>(path: &Path, lookup: impl FnOnce() -> T) -> T {
    let on_worker = || {
        tokio::runtime::Handle::try_current().is_ok_and(|runtime| {
            runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        })
    };
    if on_remote_mount(path) && on_worker() {
        tokio::task::block_in_place(lookup)
    } else {
        lookup()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuse_and_network_filesystems_wait_on_a_server() {
        for fstype in [
            "fuse.fsd-bucket",
            "fuse.sshfs",
            "fuseblk",
            "nfs4",
            "cifs",
            "9p",
        ] {
            assert!(waits_on_a_server(fstype), "{fstype}");
        }
        for fstype in [
            "ext4", "xfs", "tmpfs", "overlay", "proc", "squashfs", "btrfs",
        ] {
            assert!(!waits_on_a_server(fstype), "{fstype}");
        }
    }

    #[test]
    fn the_deepest_mount_and_of_mounts_at_one_point_the_last_decides() {
        let entry = |target: &str, fstype: &str| fsd_backup::mount::MountEntry {
            target: target.into(),
            fstype: fstype.into(),
            source: "none".into(),
        };
        let points = by_depth(vec![
            entry("/", "ext4"),
            entry("/mnt/b", "tmpfs"),
            entry("/mnt/b", "fuse.fsd-bucket"),
            entry("/mnt/b/local", "tmpfs"),
        ]);
        let remote = |path: &str| remote_in(&points, Path::new(path));
        assert!(remote("/mnt/b/x"));
        assert!(remote("/mnt/b"));
        assert!(!remote("/mnt/b/local/x"));
        assert!(!remote("/mnt/bx"));
        assert!(!remote("/etc"));
    }

    #[test]
    fn a_local_path_is_not_on_a_remote_mount() {
        assert!(!on_remote_mount(Path::new("/")));
        assert!(!on_remote_mount(&std::env::temp_dir().join("x/../y")));
        // Outside a runtime the lookup runs where it is.
        assert_eq!(off_worker(Path::new("/"), || 7), 7);
    }
}
