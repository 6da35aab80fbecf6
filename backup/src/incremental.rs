//! Incremental snapshots of any directory: the tree compared with the parent snapshot's
//! index (type, mode, owner, size, mtime, inode), and only what differs archived, as a
//! layer the existing restore stacks over its parents.
//!
//! What the layer holds:
//! - every path that is new, or whose entry differs from the parent's (a file replaced by a
//!   directory, a directory made again, a renamed directory's subtree: new inodes);
//! - the directories on the way to them, as they are now (overlay merges a directory with
//!   the one below, so unchanged contents still show from the parents);
//! - a whiteout (a 0/0 character device, which overlay honours in lower layers) for every
//!   path the parent had and the tree has not, where its directory is still a directory
//!   (a whiteout of a directory hides what it held).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::BackupError;
use crate::archive::{self, ArchiveOptions, ArchiveSummary, Builder, Entry, Scanned};
use crate::index::{Index, IndexEntry, Kind};
use crate::progress::Progress;

/// How a snapshot differs from its parent (paths; what a deleted directory held counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChangeCounts {
    pub created: u64,
    pub modified: u64,
    pub deleted: u64,
}

/// An incremental snapshot written.
#[derive(Debug)]
pub struct Layered {
    pub summary: ArchiveSummary,
    /// The whole tree, each entry naming the layer that holds it.
    pub index: Index,
    pub changes: ChangeCounts,
}

/// What goes into the layer at a path.
enum Planned {
    /// The tree's entry (position in the scan).
    Entry(usize),
    Whiteout,
}

/// Writes what changed in `dir` since the snapshot indexed by `parent` to `archive`, as the
/// layer at `depth` of its chain (the parent's depth plus one).
pub fn create(
    dir: &Path,
    parent: &Index,
    depth: u8,
    archive: &Path,
    options: &ArchiveOptions,
    progress: Progress,
) -> Result<Layered, BackupError> {
    let root_meta = archive::root_of(dir)?;
    let scanned: Vec<Scanned> = archive::scan(dir, archive, options)?.collect::<Result<_, _>>()?;
    let before = parent.by_path();
    let position: HashMap<&Path, usize> = scanned
        .iter()
        .enumerate()
        .map(|(i, s)| (s.relative.as_path(), i))
        .collect();

    let mut changes = ChangeCounts::default();
    let mut plan: BTreeMap<&Path, Planned> = BTreeMap::new();
    let mut index = Index::default();
    for (i, entry) in scanned.iter().enumerate() {
        let mut now = IndexEntry::new(&entry.relative, &entry.meta, depth);
        match before.get(entry.relative.as_path()) {
            Some(was) if now.unchanged_since(was) => now.layer = was.layer,
            found => {
                match found {
                    Some(was) if was.kind == now.kind => changes.modified += 1,
                    _ => changes.created += 1,
                }
                plan_with_parents(&mut plan, &position, &entry.relative);
                plan.insert(&entry.relative, Planned::Entry(i));
            }
        }
        index.entries.push(now);
    }
    for gone in &parent.entries {
        if position.contains_key(gone.path.as_path()) {
            continue;
        }
        changes.deleted += 1;
        let holder = gone.path.parent().unwrap_or(Path::new(""));
        let holder_is_dir = holder.as_os_str().is_empty()
            || position
                .get(holder)
                .is_some_and(|&i| Kind::of(&scanned[i].meta) == Kind::Dir);
        if holder_is_dir {
            plan_with_parents(&mut plan, &position, &gone.path);
            plan.insert(&gone.path, Planned::Whiteout);
        }
    }

    let mut builder = Builder::new(options.codec, archive::threads(options), progress)?;
    builder.set_root(&root_meta);
    // Path order is component by component: parents come before what they hold.
    for (path, planned) in plan {
        match planned {
            Planned::Entry(i) => {
                let entry = &scanned[i];
                let kind = archive::entry_for(&entry.path, &entry.meta)?;
                builder.push(path, kind, &entry.meta)?;
            }
            Planned::Whiteout => builder.push(path, Entry::CharDevice { rdev: 0 }, &root_meta)?,
        }
    }
    let summary = builder.finish(archive)?;
    Ok(Layered {
        summary,
        index,
        changes,
    })
}

/// Plans the directories above `path` (as the tree has them now) unless already planned.
fn plan_with_parents<'a>(
    plan: &mut BTreeMap<&'a Path, Planned>,
    position: &HashMap<&'a Path, usize>,
    path: &Path,
) {
    for ancestor in path.ancestors().skip(1) {
        if ancestor.as_os_str().is_empty() {
            break;
        }
        let Some((&key, &i)) = position.get_key_value(ancestor) else {
            continue;
        };
        if plan.contains_key(key) {
            break;
        }
        plan.insert(key, Planned::Entry(i));
    }
}

/// What differs between two snapshots' indexes (or a snapshot's and the tree's), by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    Created(PathBuf),
    Modified(PathBuf),
    Deleted(PathBuf),
    /// The same inode at another path, unchanged otherwise.
    Renamed {
        from: PathBuf,
        to: PathBuf,
    },
}

/// What changed from `before` to `after`, sorted by path; a file at a new path with the
/// inode, size and mtime of one that is gone is a rename.
pub fn difference(before: &Index, after: &Index) -> Vec<Difference> {
    let was = before.by_path();
    let is = after.by_path();
    let mut gone: HashMap<(u64, Kind, u64, i64), &Path> = HashMap::new();
    for entry in &before.entries {
        if !is.contains_key(entry.path.as_path()) && entry.kind != Kind::Dir {
            gone.insert(
                (entry.inode, entry.kind, entry.size, entry.mtime_ns),
                &entry.path,
            );
        }
    }
    let mut out = Vec::new();
    let mut renamed_from = std::collections::HashSet::new();
    for entry in &after.entries {
        match was.get(entry.path.as_path()) {
            Some(old) if entry.unchanged_since(old) => {}
            Some(old) if old.kind == entry.kind => {
                out.push(Difference::Modified(entry.path.clone()))
            }
            Some(_) => out.push(Difference::Created(entry.path.clone())),
            None => match gone.get(&(entry.inode, entry.kind, entry.size, entry.mtime_ns)) {
                Some(&from) if renamed_from.insert(from) => out.push(Difference::Renamed {
                    from: from.to_path_buf(),
                    to: entry.path.clone(),
                }),
                _ => out.push(Difference::Created(entry.path.clone())),
            },
        }
    }
    for entry in &before.entries {
        if !is.contains_key(entry.path.as_path()) && !renamed_from.contains(entry.path.as_path()) {
            out.push(Difference::Deleted(entry.path.clone()));
        }
    }
    out.sort_by(|a, b| a.path().cmp(b.path()));
    out
}

impl Difference {
    /// The path it is about (the new one of a rename).
    pub fn path(&self) -> &Path {
        match self {
            Difference::Created(p) | Difference::Modified(p) | Difference::Deleted(p) => p,
            Difference::Renamed { to, .. } => to,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Difference::Created(_) => "created",
            Difference::Modified(_) => "modified",
            Difference::Deleted(_) => "deleted",
            Difference::Renamed { .. } => "renamed",
        }
    }
}

/// The tree's index as a snapshot would record it now, without archiving anything (what
/// `diff` compares a snapshot with).
pub fn scan_index(dir: &Path, options: &ArchiveOptions) -> Result<Index, BackupError> {
    archive::root_of(dir)?;
    let mut index = Index::default();
    for scanned in archive::scan(dir, Path::new(""), options)? {
        let scanned = scanned?;
        index
            .entries
            .push(IndexEntry::new(&scanned.relative, &scanned.meta, 0));
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, kind: Kind, inode: u64, size: u64) -> IndexEntry {
        IndexEntry {
            path: PathBuf::from(path),
            kind,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size,
            mtime_ns: 1,
            inode,
            layer: 0,
        }
    }

    #[test]
    fn differences_name_creates_edits_deletes_and_renames() {
        let before = Index {
            entries: vec![
                entry("d", Kind::Dir, 1, 0),
                entry("d/a", Kind::File, 2, 5),
                entry("d/b", Kind::File, 3, 5),
                entry("c", Kind::File, 4, 1),
                entry("x", Kind::File, 5, 1),
            ],
        };
        let after = Index {
            entries: vec![
                entry("d", Kind::Dir, 1, 0),
                entry("d/a", Kind::File, 2, 6),
                entry("d/moved", Kind::File, 3, 5),
                entry("c", Kind::Dir, 9, 0),
                entry("new", Kind::File, 10, 1),
            ],
        };
        assert_eq!(
            difference(&before, &after),
            [
                Difference::Created("c".into()),
                Difference::Modified("d/a".into()),
                Difference::Renamed {
                    from: "d/b".into(),
                    to: "d/moved".into()
                },
                Difference::Created("new".into()),
                Difference::Deleted("x".into()),
            ]
        );
        assert!(difference(&after, &after).is_empty());
    }
}
