//! The mount table, read for the watch engines. A mount made or taken away at, below or
//! above a watched directory changes what its paths show without one inotify event (inotify
//! watches inodes, and a mount only covers them), so a restore's overlay, a release, a
//! bucket mount or a `mount` by a command would leave a watch reading a tree nobody sees.
//! The kernel says when the table changed (`POLLPRI` on `/proc/self/mountinfo`, as
//! `findmnt --poll` and systemd use it); each engine reads it again then and has its
//! reconciler read what the mount changed ([`crate::reconcile::Reconciler::remounted`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// The daemon's mount table as last read, for one watched tree: every mount's id, device
/// and mount point, and the object at each mount point that bears on the tree. Ids and
/// anonymous devices are given again once free, so a mount replaced by another between two
/// reads (a restore made again over the same directory) can read the same: the object at
/// the point (its device and inode) tells them apart, and the engines also take an unmount
/// the kernel tells (`IN_UNMOUNT`) as a change.
pub(crate) struct MountTable {
    file: File,
    /// The watched tree's root.
    root: PathBuf,
    mounts: BTreeSet<(u64, String, PathBuf)>,
    /// The device and inode at each mount point at, below or above the root.
    tops: BTreeMap<PathBuf, Option<(u64, u64)>>,
}

impl MountTable {
    /// Opens and reads the table for the tree at `root`; what changes from now on is told
    /// by [`MountTable::changed`].
    pub fn open(root: &Path) -> std::io::Result<Self> {
        let file = File::open("/proc/self/mountinfo")?;
        let mut table = Self {
            file,
            root: root.to_path_buf(),
            mounts: BTreeSet::new(),
            tops: BTreeMap::new(),
        };
        table.mounts = table.read()?;
        table.tops = table.tops_now();
        Ok(table)
    }

    /// What to poll for `POLLPRI` (the kernel's word that the table changed).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Whether the table changed since it was last polled (polls without waiting; a poll
    /// that says so is the kernel's one notice of that change).
    pub fn polled_changed(&self) -> bool {
        let mut fds = [PollFd::new(self.fd(), PollFlags::POLLPRI)];
        matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0) && is_change(&fds[0])
    }

    /// Reads the table again: the paths of the tree whose view changed since the last read
    /// (see [`affecting`]): where a mount appeared or went, or another object is at a
    /// mount point although the table reads the same.
    pub fn changed(&mut self) -> Vec<PathBuf> {
        let now = match self.read() {
            Ok(now) => now,
            Err(err) => {
                tracing::warn!(error = %err, "cannot read the mount table");
                return Vec::new();
            }
        };
        let mut points: BTreeSet<PathBuf> = self
            .mounts
            .symmetric_difference(&now)
            .map(|(_, _, point)| point.clone())
            .collect();
        self.mounts = now;
        let tops = self.tops_now();
        for (point, top) in &tops {
            if self.tops.get(point) != Some(top) {
                points.insert(point.clone());
            }
        }
        self.tops = tops;
        let points: Vec<PathBuf> = points.into_iter().collect();
        affecting(&self.root, &points)
    }

    /// Forgets the mounts read at `point`: one found there at the next read is a change.
    pub fn forget(&mut self, point: &Path) {
        self.mounts.retain(|(_, _, at)| at != point);
        self.tops.remove(point);
    }

    /// The object at each mount point that bears on the tree.
    fn tops_now(&self) -> BTreeMap<PathBuf, Option<(u64, u64)>> {
        let points: Vec<PathBuf> = self.mounts.iter().map(|(_, _, at)| at.clone()).collect();
        points
            .into_iter()
            .filter(|point| !affecting(&self.root, std::slice::from_ref(point)).is_empty())
            .map(|point| {
                let top = top_of(&point);
                (point, top)
            })
            .collect()
    }

    fn read(&mut self) -> std::io::Result<BTreeSet<(u64, String, PathBuf)>> {
        self.file.seek(SeekFrom::Start(0))?;
        let mut text = Vec::new();
        self.file.read_to_end(&mut text)?;
        Ok(parse(&text))
    }
}

/// Which mount a path shows: the kernel's unique mount id (never given again, Linux 6.8 and
/// later), else the device and inode of its top (a restore's overlay has a new one; a
/// tmpfs's or a bucket's top has the same inode number each time).
fn top_of(path: &Path) -> Option<(u64, u64)> {
    use nix::libc;
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: zeroed is a valid `statx` (plain integers).
    let mut found: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a buffer of the type the call fills.
    let done = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            path.as_ptr(),
            // No round trip to a FUSE server for attributes: the mount is what is asked.
            libc::AT_SYMLINK_NOFOLLOW | libc::AT_STATX_DONT_SYNC,
            libc::STATX_INO | libc::STATX_MNT_ID_UNIQUE,
            &mut found,
        )
    };
    if done != 0 {
        return None;
    }
    if found.stx_mask & libc::STATX_MNT_ID_UNIQUE != 0 {
        return Some((u64::MAX, found.stx_mnt_id));
    }
    let dev = libc::makedev(found.stx_dev_major, found.stx_dev_minor);
    Some((dev, found.stx_ino))
}

/// The overlays a workspace fork mounts (source `fsd-fork`) whose layers all lie on one
/// filesystem, each overlay's device to that filesystem's. Such an overlay shows that
/// filesystem's objects under their own inode numbers (overlayfs keeps them when its
/// layers share a filesystem), so a fork mounting one on a watched directory leaves the
/// same tree there: the reconciler matches its objects to the recorded ones by inode.
pub(crate) fn fork_views() -> HashMap<u64, u64> {
    let text = std::fs::read("/proc/self/mountinfo").unwrap_or_default();
    fsd_api::mountinfo::parse(&text)
        .into_iter()
        .filter(|line| line.fstype == "overlay" && line.source == fsd_api::mountinfo::FORK_SOURCE)
        .filter_map(|line| {
            let overlay = device(&line.device)?;
            let mut layers = Vec::new();
            for option in split_escaped(&line.options, ',') {
                if let Some(lowers) = option.strip_prefix("lowerdir=") {
                    layers.extend(split_escaped(lowers, ':'));
                } else if let Some(upper) = option.strip_prefix("upperdir=") {
                    layers.push(upper.to_string());
                }
            }
            let mut devices = layers.iter().map(|layer| {
                let layer = unescaped(layer);
                std::fs::metadata(&layer).ok().map(|meta| {
                    use std::os::unix::fs::MetadataExt;
                    meta.dev()
                })
            });
            let first = devices.next()??;
            devices
                .all(|dev| dev == Some(first))
                .then_some((overlay, first))
        })
        .collect()
}

/// A `major:minor` device as `st_dev` has it.
fn device(text: &str) -> Option<u64> {
    let (major, minor) = text.split_once(':')?;
    Some(nix::libc::makedev(major.parse().ok()?, minor.parse().ok()?))
}

/// `text` split at each `separator` no backslash escapes (the escapes are kept).
fn split_escaped(text: &str, separator: char) -> Vec<String> {
    let (mut parts, mut current, mut escaped) = (Vec::new(), String::new(), false);
    for c in text.chars() {
        if c == separator && !escaped {
            parts.push(std::mem::take(&mut current));
            continue;
        }
        escaped = !escaped && c == '\\';
        current.push(c);
    }
    parts.push(current);
    parts
}

/// An overlay option's path with its backslash escapes taken out.
fn unescaped(text: &str) -> PathBuf {
    let mut out = String::new();
    let mut escaped = false;
    for c in text.chars() {
        if c == '\\' && !escaped {
            escaped = true;
            continue;
        }
        escaped = false;
        out.push(c);
    }
    PathBuf::from(out)
}

/// Whether a poll's answer for the table's descriptor says it changed.
pub(crate) fn is_change(fd: &PollFd) -> bool {
    fd.revents()
        .is_some_and(|r| r.intersects(PollFlags::POLLPRI | PollFlags::POLLERR))
}

/// Every mount's id, device and mount point in the table's text.
fn parse(text: &[u8]) -> BTreeSet<(u64, String, PathBuf)> {
    fsd_api::mountinfo::parse(text)
        .into_iter()
        .map(|line| (line.id, line.device, line.target))
        .collect()
}

/// The paths of a tree at `root` whose view `points` changed: a mount point at or below the
/// root, or the root itself for one above it (the whole tree is another's then).
pub(crate) fn affecting(root: &Path, points: &[PathBuf]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = Vec::new();
    for point in points {
        if point.starts_with(root) {
            paths.push(point.clone());
        } else if root.starts_with(point) {
            paths.push(root.to_path_buf());
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overlays_options_split_where_nothing_escapes_the_separator() {
        assert_eq!(
            split_escaped("rw,lowerdir=/a\\:b:/c,upperdir=/u\\,v", ','),
            ["rw", "lowerdir=/a\\:b:/c", "upperdir=/u\\,v"]
        );
        assert_eq!(split_escaped("/a\\:b:/c", ':'), ["/a\\:b", "/c"]);
        assert_eq!(unescaped("/a\\:b"), PathBuf::from("/a:b"));
        assert_eq!(device("0:40"), Some(nix::libc::makedev(0, 40)));
    }

    #[test]
    fn a_tree_is_changed_by_mounts_at_below_and_above_it() {
        let root = Path::new("/w/app");
        let points = [
            PathBuf::from("/w/app/data"),
            PathBuf::from("/w/application"),
            PathBuf::from("/w"),
            PathBuf::from("/other"),
            PathBuf::from("/w/app"),
        ];
        assert_eq!(
            affecting(root, &points),
            [PathBuf::from("/w/app"), PathBuf::from("/w/app/data")]
        );
    }

    #[test]
    fn a_mount_made_and_taken_away_is_told_each_time() {
        if !nix::unistd::Uid::effective().is_root() {
            eprintln!("skipped: mounting a tmpfs needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let point = root.join("m");
        std::fs::create_dir(&point).unwrap();
        // (Other mounts in the namespace, the simulation's among them, also make the table
        // change: only this tree's points are looked at.)
        let mut table = MountTable::open(&root).unwrap();
        let mount = || {
            let status = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "none"])
                .arg(&point)
                .status()
                .unwrap();
            assert!(status.success());
        };
        let umount = || {
            let status = std::process::Command::new("umount")
                .arg(&point)
                .status()
                .unwrap();
            assert!(status.success());
        };
        mount();
        assert!(table.polled_changed(), "the kernel says the table changed");
        assert_eq!(table.changed(), std::slice::from_ref(&point));
        assert_eq!(table.changed(), Vec::<PathBuf>::new(), "told once");
        // Taken away and made again before the table is read: the id and the device may
        // be given again, the object at the point is another.
        umount();
        mount();
        assert_eq!(table.changed(), std::slice::from_ref(&point));
        umount();
        assert!(table.polled_changed());
        assert_eq!(table.changed(), std::slice::from_ref(&point));
    }
}
