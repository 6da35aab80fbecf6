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
