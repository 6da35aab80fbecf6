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
use crate::index::{Index, IndexEntry, Kind, find, is_within, path_order};
use crate::progress::Progress;
/// How a snapshot differs from its parent, in paths (what a deleted directory held counts).
pub use fsd_api::backup::SnapshotChanges;

/// An incremental snapshot written.
#[derive(Debug)]
pub struct Layered {
    pub summary: ArchiveSummary,
    /// The whole tree, each entry naming the layer that holds it.
    pub index: Index,
    pub changes: SnapshotChanges,
}

/// What goes into the layer at a path.
enum Planned {
    /// The tree's entry (position in `now`).
    Entry(usize),
    Whiteout,
}

/// One path of the tree as the new snapshot records it. Kept inline in one vector (a box
/// per stat'ed entry would be an allocation per path of a whole-tree scan).
#[allow(clippy::large_enum_variant)]
enum Now {
    /// Stat'ed by this snapshot: compared with the parent's entry.
    Fresh(Scanned),
    /// Not touched since the parent (the change list says so): the parent's entry, moved.
    Carried(IndexEntry),
}

impl Now {
    fn path(&self) -> &Path {
        match self {
            Now::Fresh(scanned) => &scanned.relative,
            Now::Carried(entry) => &entry.path,
        }
    }

    fn is_dir(&self) -> bool {
        match self {
            Now::Fresh(scanned) => scanned.meta.is_dir(),
            Now::Carried(entry) => entry.kind == Kind::Dir,
        }
    }
}

/// A path a change list names (relative to the snapshot's directory): created, modified,
/// deleted, or the destination of a rename (`from` its origin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    pub path: PathBuf,
    pub from: Option<PathBuf>,
}

/// Writes what changed in `dir` since the snapshot indexed by `parent` to `archive`, as the
/// layer at `depth` of its chain (the parent's depth plus one): the whole tree is walked
/// and compared with the parent's index.
pub fn create(
    dir: &Path,
    parent: &Index,
    depth: u8,
    archive: &Path,
    options: &ArchiveOptions,
    progress: Progress,
) -> Result<Layered, BackupError> {
    let root_meta = archive::root_of(dir, &options.reader)?;
    let now = archive::scan(dir, archive, options)?
        .map(|scanned| scanned.map(Now::Fresh))
        .collect::<Result<Vec<_>, _>>()?;
    layer(
        dir,
        &root_meta,
        &parent.entries,
        depth,
        now,
        archive,
        options,
        progress,
    )
}

/// The same layer as [`create`], when a change list says what changed since the parent:
/// only the paths it names are looked at (a directory with what it holds), the rest of the
/// parent's index is carried over. Not for `gitignore` snapshots (a changed `.gitignore`
/// changes what is left out anywhere): use [`create`].
pub fn create_from_changes(
    dir: &Path,
    parent: Index,
    depth: u8,
    changed: &[Changed],
    archive: &Path,
    options: &ArchiveOptions,
    progress: Progress,
) -> Result<Layered, BackupError> {
    let root_meta = archive::root_of(dir, &options.reader)?;
    let mut dirty: Vec<&Path> = changed
        .iter()
        .flat_map(|c| std::iter::once(c.path.as_path()).chain(c.from.as_deref()))
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    dirty.sort_by(|a, b| path_order(a, b));
    dirty.dedup();
    // A path under another dirty one is looked at with it.
    let mut tops: Vec<&Path> = Vec::new();
    for path in dirty {
        if !tops.last().is_some_and(|top| is_within(path, top)) {
            tops.push(path);
        }
    }
    // The parent's entries are in path order, and what is under a top is one run of them:
    // carry what lies between the runs (moved, not copied), and put each top's fresh look
    // where its run was; the runs are what the fresh looks are compared with.
    let mut runs = Vec::with_capacity(tops.len());
    let mut next = 0;
    for top in &tops {
        let entries = &parent.entries;
        let start = next + entries[next..].partition_point(|e| path_order(&e.path, top).is_lt());
        let end = start + entries[start..].partition_point(|e| is_within(&e.path, top));
        runs.push((start, end));
        next = end;
    }
    let total = parent.entries.len();
    let mut entries = parent.entries.into_iter();
    let mut now = Vec::with_capacity(total + changed.len());
    let mut replaced = Vec::new();
    let mut at = 0;
    for (top, (start, end)) in tops.iter().zip(runs) {
        now.extend(entries.by_ref().take(start - at).map(Now::Carried));
        replaced.extend(entries.by_ref().take(end - start));
        for scanned in archive::scan_under(dir, top, archive, options)? {
            now.push(Now::Fresh(scanned?));
        }
        at = end;
    }
    now.extend(entries.map(Now::Carried));
    layer(
        dir, &root_meta, &replaced, depth, now, archive, options, progress,
    )
}

/// Compares `now` (path order, parents first) with `parent` and writes the layer.
#[allow(clippy::too_many_arguments)]
fn layer(
    dir: &Path,
    root_meta: &std::fs::Metadata,
    before: &[IndexEntry],
    depth: u8,
    now: Vec<Now>,
    archive: &Path,
    options: &ArchiveOptions,
    progress: Progress,
) -> Result<Layered, BackupError> {
    // Both lists are in path order: lookups are binary searches, and what the parent had
    // that is gone is found walking the two side by side.
    let position = |path: &Path| {
        now.binary_search_by(|entry| path_order(entry.path(), path))
            .ok()
    };
    let mut changes = SnapshotChanges::default();
    let mut plan: BTreeMap<&Path, Planned> = BTreeMap::new();
    // The fresh entries as recorded (carried ones are moved in at the end).
    let mut recorded_entries: Vec<Option<IndexEntry>> = Vec::with_capacity(now.len());
    for (i, entry) in now.iter().enumerate() {
        let scanned = match entry {
            Now::Carried(_) => {
                recorded_entries.push(None);
                continue;
            }
            Now::Fresh(scanned) => scanned,
        };
        let mut recorded = IndexEntry::new(&scanned.relative, &scanned.meta, depth);
        match find(before, &scanned.relative) {
            Some(was) if recorded.unchanged_since(was) => recorded.layer = was.layer,
            found => {
                match found {
                    Some(was) if was.kind == recorded.kind => changes.modified += 1,
                    _ => changes.created += 1,
                }
                plan_with_parents(&mut plan, &now, &position, &scanned.relative);
                plan.insert(&scanned.relative, Planned::Entry(i));
            }
        }
        recorded_entries.push(Some(recorded));
    }
    let mut j = 0;
    for gone in before {
        while j < now.len() && path_order(now[j].path(), &gone.path).is_lt() {
            j += 1;
        }
        if j < now.len() && now[j].path() == gone.path {
            continue;
        }
        changes.deleted += 1;
        let holder = gone.path.parent().unwrap_or(Path::new(""));
        let holder_is_dir =
            holder.as_os_str().is_empty() || position(holder).is_some_and(|i| now[i].is_dir());
        if holder_is_dir {
            plan_with_parents(&mut plan, &now, &position, &gone.path);
            plan.insert(&gone.path, Planned::Whiteout);
        }
    }

    let mut builder = Builder::new(
        options.codec,
        archive::threads(options),
        progress,
        options.reader.clone(),
    )?;
    builder.set_root(root_meta);
    // Path order is component by component: parents come before what they hold.
    for (path, planned) in plan {
        let entry = planned_entry(&planned, &now);
        match (planned, entry) {
            (Planned::Whiteout, _) => {
                builder.push(path, Entry::CharDevice { rdev: 0 }, root_meta)?
            }
            (_, Some(Now::Fresh(scanned))) => {
                let kind = archive::entry_for(&scanned.path, &scanned.meta, &options.reader)?;
                builder.push(path, kind, &scanned.meta)?;
            }
            // A directory above a change that the change list did not name: as it is now.
            (_, _) => {
                let on_disk = dir.join(path);
                let meta = options
                    .reader
                    .lstat(&on_disk)
                    .map_err(|e| BackupError::io(&on_disk, e))?;
                builder.push(path, Entry::Dir, &meta)?;
            }
        }
    }
    let summary = builder.finish(archive)?;
    let entries = now
        .into_iter()
        .zip(recorded_entries)
        .map(|(entry, recorded)| match (entry, recorded) {
            (_, Some(recorded)) => recorded,
            (Now::Carried(carried), None) => carried,
            (Now::Fresh(scanned), None) => IndexEntry::new(&scanned.relative, &scanned.meta, depth),
        })
        .collect();
    Ok(Layered {
        summary,
        index: Index { entries },
        changes,
    })
}

fn planned_entry<'a>(planned: &Planned, now: &'a [Now]) -> Option<&'a Now> {
    match planned {
        Planned::Entry(i) => now.get(*i),
        Planned::Whiteout => None,
    }
}

/// Plans the directories above `path` (as the tree has them now) unless already planned.
fn plan_with_parents<'a>(
    plan: &mut BTreeMap<&'a Path, Planned>,
    now: &'a [Now],
    position: &impl Fn(&Path) -> Option<usize>,
    path: &Path,
) {
    for ancestor in path.ancestors().skip(1) {
        if ancestor.as_os_str().is_empty() {
            break;
        }
        let Some(i) = position(ancestor) else {
            continue;
        };
        let key = now[i].path();
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

/// What changed from `before` to `after`, sorted by path, as a reader of the tree sees it
/// (see [`IndexEntry::looks_unchanged_since`]: a restored tree is not all modified); a file
/// at a new path with the inode, size and mtime of one that is gone is a rename.
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
            Some(old) if entry.looks_unchanged_since(old) => {}
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
    archive::root_of(dir, &options.reader)?;
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
            location: None,
        }
    }

    /// The layer from a change list equals the layer from a whole walk: same index, same
    /// counts, same entries in the archive.
    #[test]
    fn a_change_list_gives_the_layer_a_walk_gives() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("tree");
        let write = |relative: &str, bytes: &[u8]| {
            let path = dir.join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        };
        write("keep/a.txt", b"a");
        write("keep/deep/b.txt", b"b");
        write("edit.txt", b"old");
        write("gone.txt", b"x");
        write("moved/inner/c.txt", b"c");
        write("swap", b"a file");
        write("skip/ignored.log", b"excluded");
        let options = ArchiveOptions {
            excludes: vec!["*.log".into()],
            threads: 1,
            ..ArchiveOptions::default()
        };
        let parent = scan_index(&dir, &options).unwrap();

        write("edit.txt", b"new content");
        std::fs::remove_file(dir.join("gone.txt")).unwrap();
        std::fs::rename(dir.join("moved"), dir.join("renamed")).unwrap();
        std::fs::remove_file(dir.join("swap")).unwrap();
        write("swap/now-a-dir.txt", b"d");
        write("fresh/new.txt", b"n");
        write("fresh/also.log", b"excluded too");
        std::os::unix::fs::symlink("nowhere", dir.join("dangling")).unwrap();
        std::os::unix::fs::symlink("keep", dir.join("to-a-dir")).unwrap();
        let changed: Vec<Changed> = [
            ("edit.txt", None),
            ("gone.txt", None),
            ("renamed", Some("moved")),
            ("swap", None),
            ("swap/now-a-dir.txt", None),
            ("fresh", None),
            ("fresh/new.txt", None),
            ("fresh/also.log", None),
            ("dangling", None),
            ("to-a-dir", None),
        ]
        .into_iter()
        .map(|(path, from)| Changed {
            path: path.into(),
            from: from.map(PathBuf::from),
        })
        .collect();

        let walked = create(
            &dir,
            &parent,
            1,
            &temp.path().join("walked.sqsh"),
            &options,
            Progress::none(),
        )
        .unwrap();
        let listed = create_from_changes(
            &dir,
            parent.clone(),
            1,
            &changed,
            &temp.path().join("listed.sqsh"),
            &options,
            Progress::none(),
        )
        .unwrap();
        assert_eq!(listed.index, walked.index);
        assert_eq!(listed.changes, walked.changes);
        assert_eq!(listed.summary.entries, walked.summary.entries);
        assert_eq!(
            walked.changes,
            SnapshotChanges {
                created: 9,
                modified: 1,
                deleted: 4
            },
            "renamed/, renamed/inner, renamed/inner/c.txt, swap (a directory now), \
             swap/now-a-dir.txt, fresh, fresh/new.txt and the two symlinks created; edit.txt \
             modified; gone.txt and moved/… deleted"
        );
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
