//! A fork point made by copying: what a fork of a directory that a process is working in
//! (a build, a dev server, a shell) freezes, where binding it beneath an overlay would
//! leave that process writing the frozen tree beneath every branch. The copy is the
//! directory as a snapshot reads it (each entry stat'ed before its content is read, what
//! vanishes during the walk left out), so a file written during the copy is in it old or
//! new; the directory itself is not touched and stays what the process works in. The index
//! of the directory as it was read (its own inodes and times) tells a later merge what the
//! directory changed since, as a snapshot's index tells the next one.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::archive;
use crate::index::{Index, IndexEntry};
use crate::{ArchiveOptions, BackupError};

/// Copies `dir`'s tree into `to` (made here): directories, files, links, FIFOs and devices
/// with their owners, modes and times (sockets are not carried: nothing listens on a copy).
/// Answers the index of `dir` as it was read.
pub fn copy_tree(dir: &Path, to: &Path) -> Result<Index, BackupError> {
    let options = ArchiveOptions::default();
    let root = archive::root_of(dir, &options.reader)?;
    fs::create_dir_all(to).map_err(|e| BackupError::io(to, e))?;
    let mut index = Index::default();
    let mut dirs: Vec<(PathBuf, fs::Metadata)> = vec![(to.to_path_buf(), root)];
    for scanned in archive::scan(dir, Path::new(""), &options)? {
        let scanned = scanned?;
        let target = to.join(&scanned.relative);
        let kind = scanned.meta.file_type();
        if kind.is_socket() {
            continue;
        }
        let made = if kind.is_dir() {
            fs::create_dir(&target)
        } else if kind.is_symlink() {
            fs::read_link(&scanned.path).and_then(|link| std::os::unix::fs::symlink(link, &target))
        } else if kind.is_file() {
            fs::copy(&scanned.path, &target).map(drop)
        } else {
            make_node(&target, &scanned.meta)
        };
        match made {
            Ok(()) => {}
            // Gone since the walk listed it: not in the copy, as not in a snapshot.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(BackupError::io(&scanned.path, error)),
        }
        if kind.is_dir() {
            dirs.push((target, scanned.meta.clone()));
        } else {
            give_metadata(&target, &scanned.meta)?;
        }
        index
            .entries
            .push(IndexEntry::new(&scanned.relative, &scanned.meta, 0));
    }
    // A directory's own times after what it holds was written into it, deepest first.
    for (path, meta) in dirs.iter().rev() {
        give_metadata(path, meta)?;
    }
    Ok(index)
}

/// The paths (relative, `/` between names) where `dir` now differs from `index` (what
/// [`copy_tree`] read of it): made, gone, or no longer the same entry with the same
/// metadata (the inode counted: a file replaced is changed whatever its times). A
/// directory whose entries changed is not itself changed; they are.
pub fn changed_since(index: &Index, dir: &Path) -> Result<BTreeSet<String>, BackupError> {
    let now = crate::incremental::scan_index(dir, &ArchiveOptions::default())?;
    let was = index.by_path();
    let is = now.by_path();
    let relative = |path: &Path| path.to_string_lossy().into_owned();
    let mut changed = BTreeSet::new();
    for entry in &now.entries {
        match was.get(entry.path.as_path()) {
            Some(before) if entry.unchanged_since(before) => {}
            _ => {
                changed.insert(relative(&entry.path));
            }
        }
    }
    for entry in &index.entries {
        if !is.contains_key(entry.path.as_path()) {
            changed.insert(relative(&entry.path));
        }
    }
    Ok(changed)
}

/// A FIFO or a device node like `meta`'s.
fn make_node(target: &Path, meta: &fs::Metadata) -> std::io::Result<()> {
    use nix::sys::stat::{Mode, SFlag, mknod};
    let kind = SFlag::from_bits_truncate(meta.mode() & SFlag::S_IFMT.bits());
    let mode = Mode::from_bits_truncate(meta.mode() & 0o7777);
    mknod(target, kind, mode, meta.rdev()).map_err(std::io::Error::from)
}

/// `meta`'s owner, then mode (a change of owner clears setuid), then times, given to the
/// entry at `path` itself (a link is not followed; its mode is not its own to set).
fn give_metadata(path: &Path, meta: &fs::Metadata) -> Result<(), BackupError> {
    use nix::sys::stat::{UtimensatFlags, utimensat};
    use nix::sys::time::TimeSpec;
    let failed = |errno: nix::Error| BackupError::io(path, errno.into());
    nix::unistd::fchownat(
        nix::fcntl::AT_FDCWD,
        path,
        Some(nix::unistd::Uid::from_raw(meta.uid())),
        Some(nix::unistd::Gid::from_raw(meta.gid())),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .map_err(failed)?;
    if !meta.file_type().is_symlink() {
        fs::set_permissions(path, fs::Permissions::from_mode(meta.mode() & 0o7777))
            .map_err(|e| BackupError::io(path, e))?;
    }
    let atime = TimeSpec::new(meta.atime(), meta.atime_nsec());
    let mtime = TimeSpec::new(meta.mtime(), meta.mtime_nsec());
    utimensat(
        nix::fcntl::AT_FDCWD,
        path,
        &atime,
        &mtime,
        UtimensatFlags::NoFollowSymlink,
    )
    .map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The copy holds the tree with its modes, links and times, and the index tells exactly
    /// what the directory changed since: an edit, a file replaced at its path, a new one, a
    /// deletion, a directory renamed.
    #[test]
    fn a_copy_holds_the_tree_and_its_index_tells_what_changed_since() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("tree");
        let write = |relative: &str, bytes: &[u8]| {
            let path = dir.join(relative);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, bytes).unwrap();
        };
        write("keep.txt", b"kept");
        write("edit.txt", b"old");
        write("replace.txt", b"same");
        write("gone.txt", b"x");
        write("moved/inner/c.txt", b"c");
        fs::set_permissions(dir.join("keep.txt"), fs::Permissions::from_mode(0o751)).unwrap();
        std::os::unix::fs::symlink("keep.txt", dir.join("link")).unwrap();
        let copy = temp.path().join("copy");
        let index = copy_tree(&dir, &copy).unwrap();
        assert_eq!(fs::read(copy.join("moved/inner/c.txt")).unwrap(), b"c");
        assert_eq!(
            fs::read_link(copy.join("link")).unwrap(),
            Path::new("keep.txt")
        );
        let (was, is) = (
            fs::metadata(dir.join("keep.txt")).unwrap(),
            fs::metadata(copy.join("keep.txt")).unwrap(),
        );
        assert_eq!(is.mode() & 0o7777, 0o751);
        assert_eq!(
            (is.mtime(), is.mtime_nsec()),
            (was.mtime(), was.mtime_nsec())
        );
        assert!(
            changed_since(&index, &dir).unwrap().is_empty(),
            "nothing yet"
        );

        write("edit.txt", b"new");
        let stat = fs::metadata(dir.join("replace.txt")).unwrap();
        let replacement = temp.path().join("replacement");
        fs::write(&replacement, b"same").unwrap();
        let times = fs::FileTimes::new().set_modified(stat.modified().unwrap());
        fs::File::options()
            .write(true)
            .open(&replacement)
            .unwrap()
            .set_times(times)
            .unwrap();
        fs::rename(&replacement, dir.join("replace.txt")).unwrap();
        write("new.txt", b"n");
        fs::remove_file(dir.join("gone.txt")).unwrap();
        fs::rename(dir.join("moved"), dir.join("renamed")).unwrap();
        let changed: Vec<String> = changed_since(&index, &dir).unwrap().into_iter().collect();
        assert_eq!(
            changed,
            [
                "edit.txt",
                "gone.txt",
                "moved",
                "moved/inner",
                "moved/inner/c.txt",
                "new.txt",
                "renamed",
                "renamed/inner",
                "renamed/inner/c.txt",
                "replace.txt",
            ]
        );
    }
}
