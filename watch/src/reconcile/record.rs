//! A reconciler's record taken out and put back: what a daemon saves of a watch so that,
//! started again, the same reconciler diffs the tree as it is against the tree as it was
//! and tells what changed meanwhile with the moves, deletes and creates it orders for any
//! batch (one differ for live changes, lost events and restarts alike).

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use super::tree::{Kind, NodeId, ROOT, Stat, Tree};

/// One entry of a watch's record of its tree (the root itself left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedEntry {
    /// Relative to the watched root.
    pub path: PathBuf,
    pub kind: Kind,
    /// The device and inode number the entry had: with the kind, what says an entry found
    /// under another name is this one, moved.
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    /// Seconds and nanoseconds.
    pub mtime: (i64, i64),
    /// Permission bits.
    pub mode: u32,
    /// Recorded in the clock tick of its mtime: a write in that tick keeps size and mtime,
    /// so the entry is taken as modified when it is compared again.
    pub racy: bool,
}

/// Every entry of `tree` hanging from its root, parents before children.
pub(super) fn export(tree: &Tree) -> Vec<RecordedEntry> {
    let root = tree.root_path();
    tree.descendants(ROOT)
        .into_iter()
        .map(|id| {
            let node = tree.node(id);
            let path = tree.path(id);
            RecordedEntry {
                path: path.strip_prefix(root).unwrap_or(&path).to_path_buf(),
                kind: node.stat.kind,
                dev: node.stat.dev,
                ino: node.stat.ino,
                size: node.stat.size,
                mtime: node.stat.mtime,
                mode: node.stat.mode,
                racy: node.racy.is_some(),
            }
        })
        .collect()
}

/// Puts `entries` into `tree` (which holds its root alone), none of its directories
/// watched; returns the nodes recorded racy. An entry whose directory is not among them
/// (or is not a directory), or whose path is not a plain relative one, is left out: it
/// is then found as new.
pub(super) fn load(
    tree: &mut Tree,
    entries: &[RecordedEntry],
    now: SystemTime,
) -> Vec<(SystemTime, NodeId)> {
    let mut sorted: Vec<&RecordedEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let mut racy = Vec::new();
    for entry in sorted {
        let Some((parent, name)) = place(tree, &entry.path) else {
            continue;
        };
        let stat = Stat {
            dev: entry.dev,
            ino: entry.ino,
            kind: entry.kind,
            size: entry.size,
            mtime: entry.mtime,
            mode: entry.mode,
        };
        let at = entry.racy.then_some(now);
        let id = tree.insert(parent, name, stat, at);
        if let Some(at) = at {
            racy.push((at, id));
        }
    }
    racy
}

/// The recorded directory `path` goes in and its name there, if the directory is recorded
/// and the name is free.
fn place(tree: &Tree, path: &Path) -> Option<(NodeId, OsString)> {
    let mut names = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => names.push(name),
            _ => return None,
        }
    }
    let (name, dirs) = names.split_last()?;
    let mut at = ROOT;
    for dir in dirs {
        at = *tree.node(at).children.get(*dir)?;
        if tree.node(at).stat.kind != Kind::Dir {
            return None;
        }
    }
    let free = !tree.node(at).children.contains_key(*name);
    free.then(|| (at, name.to_os_string()))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::collections::BTreeSet;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    use tokio::sync::mpsc;

    use crate::inotify::Session;
    use crate::report::Reporter;
    use crate::{Event, EventKind, Filter};

    fn kind(kind: EventKind) -> String {
        format!("{kind:?}")
    }

    /// A time well before now: a file written with it is not recorded as racy.
    fn long_ago() -> SystemTime {
        SystemTime::now() - Duration::from_secs(3600)
    }

    fn write(path: &Path, content: &[u8], mtime: Option<SystemTime>) {
        std::fs::write(path, content).unwrap();
        if let Some(mtime) = mtime {
            let file = std::fs::File::options().write(true).open(path).unwrap();
            file.set_modified(mtime).unwrap();
        }
    }

    /// What a watch of a tree `before` made, stopped after its first crawl and started
    /// again from its record once `down` has changed the tree, tells at its start: each
    /// event's kind, path and origin, relative.
    fn told_across_a_restart(
        before: impl FnOnce(&Path),
        down: impl FnOnce(&Path),
    ) -> BTreeSet<(String, String, Option<String>)> {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        before(&root);
        let (sender, mut receiver) = mpsc::unbounded_channel::<Event>();
        let reporter =
            || Reporter::new(root.clone(), Filter::new(&[], &[]).unwrap(), sender.clone());
        let session = Session::start(&root, true, reporter(), None).unwrap();
        let recorded = session.reconciler.recorded();
        drop(session);
        assert!(receiver.try_recv().is_err(), "a first crawl tells nothing");
        down(&root);
        let _session = Session::start(&root, true, reporter(), Some(&recorded)).unwrap();
        let relative = |path: &Path| path.strip_prefix(&root).unwrap().display().to_string();
        let mut told = BTreeSet::new();
        while let Ok(event) = receiver.try_recv() {
            told.insert((
                format!("{:?}", event.kind),
                relative(&event.path),
                event.from.as_deref().map(relative),
            ));
        }
        told
    }

    /// The changes made while no watch ran are told as one batch of the reconciler's:
    /// a directory moved is one rename (a file written in it a modify at its new path),
    /// a file gone a delete, a mode set an attribute change, a new file a create. (The
    /// restart's differ before this one told a file changed in a renamed directory as
    /// made and then deleted.)
    #[test]
    fn a_restart_tells_what_changed_meanwhile_with_moves_as_moves() {
        let told = told_across_a_restart(
            |root| {
                std::fs::create_dir(root.join("a")).unwrap();
                write(&root.join("a/f"), b"one", Some(long_ago()));
                write(&root.join("g"), b"gone", Some(long_ago()));
                write(&root.join("h"), b"kept", Some(long_ago()));
            },
            |root| {
                write(&root.join("n"), b"new", None);
                std::fs::rename(root.join("a"), root.join("b")).unwrap();
                write(&root.join("b/f"), b"one and two", None);
                std::fs::remove_file(root.join("g")).unwrap();
                std::fs::set_permissions(root.join("h"), std::fs::Permissions::from_mode(0o755))
                    .unwrap();
            },
        );
        let expected: BTreeSet<_> = [
            (
                kind(EventKind::Rename),
                "b".to_string(),
                Some("a".to_string()),
            ),
            (kind(EventKind::Modify), "b/f".to_string(), None),
            (kind(EventKind::Delete), "g".to_string(), None),
            (kind(EventKind::Attrib), "h".to_string(), None),
            // A file made with content is told made and written, as the kernel tells it.
            (kind(EventKind::Create), "n".to_string(), None),
            (kind(EventKind::Modify), "n".to_string(), None),
        ]
        .into_iter()
        .collect();
        assert_eq!(told, expected);
    }

    /// A tree that did not change is told nothing.
    #[test]
    fn a_restart_over_an_unchanged_tree_tells_nothing() {
        let told = told_across_a_restart(
            |root| {
                std::fs::create_dir_all(root.join("a/b")).unwrap();
                write(&root.join("a/b/f"), b"one", Some(long_ago()));
                std::os::unix::fs::symlink("a/b/f", root.join("l")).unwrap();
                let then = nix::sys::time::TimeSpec::from_duration(
                    long_ago().duration_since(SystemTime::UNIX_EPOCH).unwrap(),
                );
                nix::sys::stat::utimensat(
                    nix::fcntl::AT_FDCWD,
                    &root.join("l"),
                    &then,
                    &then,
                    nix::sys::stat::UtimensatFlags::NoFollowSymlink,
                )
                .unwrap();
            },
            |_| {},
        );
        assert!(told.is_empty(), "{told:?}");
    }

    /// A file recorded in the clock tick of its last write may be written again in that
    /// tick with its size and mtime kept: the record carries that, and the restart takes
    /// it as modified rather than trusting them.
    #[test]
    fn a_file_recorded_in_its_writes_tick_is_taken_as_modified() {
        let mtime = std::sync::OnceLock::new();
        let told = told_across_a_restart(
            |root| {
                write(&root.join("f"), b"one", None);
                let _ = mtime.set(
                    std::fs::metadata(root.join("f"))
                        .unwrap()
                        .modified()
                        .unwrap(),
                );
            },
            |root| write(&root.join("f"), b"two", mtime.get().copied()),
        );
        let expected: BTreeSet<_> = [(kind(EventKind::Modify), "f".to_string(), None)]
            .into_iter()
            .collect();
        assert_eq!(told, expected);
    }
}
