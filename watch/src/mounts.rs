//! The mount table, read for the watch engines. A mount made or taken away at, below or
//! above a watched directory changes what its paths show without one inotify event (inotify
//! watches inodes, and a mount only covers them), so a restore's overlay, a release, a
//! bucket mount or a `mount` by a command would leave a watch reading a tree nobody sees.
//! The kernel says when the table changed (`POLLPRI` on `/proc/self/mountinfo`, as
//! `findmnt --poll` and systemd use it); each engine reads it again then and has its
//! reconciler read what the mount changed ([`crate::reconcile::Reconciler::remounted`]).

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// The daemon's mount table as last read: every mount's id, device and mount point. Ids
/// and anonymous devices are given again once free, so a mount replaced by another between
/// two reads can look the same: the engines also take an unmount the kernel tells (its
/// `IN_UNMOUNT`) as a change at the mount's top directory.
pub(crate) struct MountTable {
    file: File,
    mounts: BTreeSet<(u64, String, PathBuf)>,
}

impl MountTable {
    /// Opens and reads the table; what changes from now on is told by [`MountTable::changed`].
    pub fn open() -> std::io::Result<Self> {
        let file = File::open("/proc/self/mountinfo")?;
        let mut table = Self {
            file,
            mounts: BTreeSet::new(),
        };
        table.mounts = table.read()?;
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

    /// Reads the table again: the mount points where a mount appeared or went since the
    /// last read (a mount replaced by another at the same point counts: its id differs).
    pub fn changed(&mut self) -> Vec<PathBuf> {
        let now = match self.read() {
            Ok(now) => now,
            Err(err) => {
                tracing::warn!(error = %err, "cannot read the mount table");
                return Vec::new();
            }
        };
        let points: BTreeSet<PathBuf> = self
            .mounts
            .symmetric_difference(&now)
            .map(|(_, _, point)| point.clone())
            .collect();
        self.mounts = now;
        points.into_iter().collect()
    }

    /// Forgets the mounts read at `point`: one found there at the next read is a change.
    pub fn forget(&mut self, point: &Path) {
        self.mounts.retain(|(_, _, at)| at != point);
    }

    fn read(&mut self) -> std::io::Result<BTreeSet<(u64, String, PathBuf)>> {
        self.file.seek(SeekFrom::Start(0))?;
        let mut text = Vec::new();
        self.file.read_to_end(&mut text)?;
        Ok(parse(&text))
    }
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
        let point = std::fs::canonicalize(dir.path()).unwrap();
        let mut table = MountTable::open().unwrap();
        assert!(!table.polled_changed());
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "none"])
            .arg(&point)
            .status()
            .unwrap();
        assert!(status.success());
        assert!(table.polled_changed(), "the kernel says the table changed");
        assert_eq!(table.changed(), std::slice::from_ref(&point));
        assert!(!table.polled_changed(), "told once");
        let status = std::process::Command::new("umount")
            .arg(&point)
            .status()
            .unwrap();
        assert!(status.success());
        assert!(table.polled_changed());
        assert_eq!(table.changed(), [point]);
    }
}
