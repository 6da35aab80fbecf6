//! The mount's view of the bucket: inode numbers for the names the kernel has seen, their
//! attributes as last read from the store, which directory listings are still fresh, and
//! which names are known to be absent. Pure bookkeeping; no I/O.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime};

pub type Ino = u64;
pub const ROOT: Ino = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
}

/// One name in the tree.
#[derive(Debug, Clone)]
pub struct Node {
    pub parent: Ino,
    pub name: String,
    pub kind: Kind,
    pub size: u64,
    pub mtime: SystemTime,
    /// When the store last vouched for these attributes.
    pub checked: Instant,
    /// Written here and not yet in the store: a listing that lacks it must not drop it.
    pub local: bool,
    /// References the kernel holds (each entry reply adds one; `forget` takes them back).
    pub lookups: u64,
    pub etag: String,
    /// The version (size, mtime, ETag) the kernel last read: if a new open finds the same,
    /// the kernel may keep its cached pages.
    pub opened_as: Option<(u64, SystemTime, String)>,
}

/// An entry as the store describes it (from a listing or a HEAD).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
    pub size: u64,
    pub mtime: SystemTime,
    /// The object's ETag; empty for directories and files written here.
    pub etag: String,
}

/// What the cache alone can say about a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cached {
    Present(Ino),
    Absent,
    /// Ask the store.
    Unknown,
}

pub struct Tree {
    nodes: HashMap<Ino, Node>,
    children: HashMap<Ino, BTreeMap<String, Ino>>,
    /// Directories whose whole listing was read at this instant.
    listed: HashMap<Ino, Instant>,
    /// Names the store said do not exist, and when.
    absent: HashMap<(Ino, String), Instant>,
    next: Ino,
    ttl: Duration,
}

impl Tree {
    pub fn new(ttl: Duration) -> Tree {
        let now = Instant::now();
        let root = Node {
            parent: ROOT,
            name: String::new(),
            kind: Kind::Dir,
            size: 0,
            mtime: SystemTime::now(),
            checked: now,
            local: false,
            lookups: 0,
            etag: String::new(),
            opened_as: None,
        };
        Tree {
            nodes: HashMap::from([(ROOT, root)]),
            children: HashMap::new(),
            listed: HashMap::new(),
            absent: HashMap::new(),
            next: ROOT + 1,
            ttl,
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn get(&self, ino: Ino) -> Option<&Node> {
        self.nodes.get(&ino)
    }

    pub fn get_mut(&mut self, ino: Ino) -> Option<&mut Node> {
        self.nodes.get_mut(&ino)
    }

    /// The path of `ino` below the mount root, `/`-separated (`""` for the root).
    pub fn path(&self, ino: Ino) -> Option<String> {
        let mut parts = Vec::new();
        let mut current = ino;
        while current != ROOT {
            let node = self.nodes.get(&current)?;
            parts.push(node.name.as_str());
            current = node.parent;
        }
        parts.reverse();
        Some(parts.join("/"))
    }

    pub fn child(&self, parent: Ino, name: &str) -> Option<Ino> {
        self.children.get(&parent)?.get(name).copied()
    }

    fn fresh(&self, at: Instant, now: Instant) -> bool {
        now.saturating_duration_since(at) < self.ttl
    }

    /// Whether `ino`'s attributes can be served without asking the store.
    pub fn is_fresh(&self, ino: Ino, now: Instant) -> bool {
        self.nodes
            .get(&ino)
            .is_some_and(|node| ino == ROOT || node.local || self.fresh(node.checked, now))
    }

    pub fn is_listed(&self, dir: Ino, now: Instant) -> bool {
        self.listed.get(&dir).is_some_and(|at| self.fresh(*at, now))
    }

    pub fn lookup_cached(&self, parent: Ino, name: &str, now: Instant) -> Cached {
        if let Some(ino) = self.child(parent, name) {
            if self.is_fresh(ino, now) || self.is_listed(parent, now) {
                return Cached::Present(ino);
            }
            return Cached::Unknown;
        }
        let known_absent = self
            .absent
            .get(&(parent, name.to_string()))
            .is_some_and(|at| self.fresh(*at, now));
        if known_absent || self.is_listed(parent, now) {
            Cached::Absent
        } else {
            Cached::Unknown
        }
    }

    /// Records `entry` under `parent` as the store (or a local write) describes it. A name
    /// that changed kind gets a new inode.
    pub fn upsert(&mut self, parent: Ino, entry: &Entry, now: Instant) -> Ino {
        self.absent.remove(&(parent, entry.name.clone()));
        if let Some(ino) = self.child(parent, &entry.name)
            && let Some(node) = self.nodes.get_mut(&ino)
            && node.kind == entry.kind
        {
            node.size = entry.size;
            node.mtime = entry.mtime;
            node.etag.clone_from(&entry.etag);
            node.checked = now;
            return ino;
        }
        self.detach(parent, &entry.name);
        let ino = self.next;
        self.next += 1;
        self.nodes.insert(
            ino,
            Node {
                parent,
                name: entry.name.clone(),
                kind: entry.kind,
                size: entry.size,
                mtime: entry.mtime,
                checked: now,
                local: false,
                lookups: 0,
                etag: entry.etag.clone(),
                opened_as: None,
            },
        );
        self.children
            .entry(parent)
            .or_default()
            .insert(entry.name.clone(), ino);
        ino
    }

    /// Forgets `name` under `parent` and remembers that it is absent.
    pub fn remove(&mut self, parent: Ino, name: &str, now: Instant) {
        self.detach(parent, name);
        self.absent.insert((parent, name.to_string()), now);
    }

    fn detach(&mut self, parent: Ino, name: &str) {
        let Some(ino) = self
            .children
            .get_mut(&parent)
            .and_then(|names| names.remove(name))
        else {
            return;
        };
        self.forget_subtree(ino);
    }

    /// Drops `ino` and everything below it (open handles keep what they need themselves).
    /// A node the kernel still holds stays, nameless, until the kernel forgets it: a file
    /// replaced by a rename or removed is still the inode of a name the kernel resolved a
    /// moment before, and of its open descriptors: asked of, it answers what it was.
    fn forget_subtree(&mut self, ino: Ino) {
        let mut pending = vec![ino];
        while let Some(current) = pending.pop() {
            if self
                .nodes
                .get(&current)
                .is_none_or(|node| node.lookups == 0)
            {
                self.nodes.remove(&current);
            }
            self.listed.remove(&current);
            if let Some(names) = self.children.remove(&current) {
                pending.extend(names.into_values());
            }
        }
    }

    /// Replaces the children of `dir` with a complete listing the store was asked for at
    /// `asked`; names written here that the store does not show yet are kept, and names
    /// removed here since it was asked stay removed (the store answered before the delete).
    pub fn apply_listing(&mut self, dir: Ino, entries: &[Entry], asked: Instant) {
        let keep: std::collections::HashSet<&str> =
            entries.iter().map(|entry| entry.name.as_str()).collect();
        let stale: Vec<String> = self
            .children
            .get(&dir)
            .map(|names| {
                names
                    .iter()
                    .filter(|(name, ino)| {
                        // Kept: written here and not in the store yet, or put here (a
                        // rename, a lookup) after the listing was asked for.
                        !keep.contains(name.as_str())
                            && !self
                                .nodes
                                .get(ino)
                                .is_some_and(|node| node.local || node.checked > asked)
                    })
                    .map(|(name, _)| name.clone())
                    .collect()
            })
            .unwrap_or_default();
        for name in stale {
            self.detach(dir, &name);
        }
        for entry in entries {
            if !self.removed_since(dir, &entry.name, asked) {
                self.upsert(dir, entry, asked);
            }
        }
        self.absent
            .retain(|(parent, _), at| *parent != dir || *at >= asked);
        self.listed.insert(dir, asked);
    }

    /// Whether `name` under `parent` is known to be gone (removed here, or not found by a
    /// lookup since the last listing).
    pub fn known_absent(&self, parent: Ino, name: &str) -> bool {
        self.child(parent, name).is_none() && self.absent.contains_key(&(parent, name.to_string()))
    }

    /// Whether `name` under `parent` was removed here at or after `since`: a store's
    /// answer asked for before then is older than the removal.
    pub fn removed_since(&self, parent: Ino, name: &str, since: Instant) -> bool {
        self.absent
            .get(&(parent, name.to_string()))
            .is_some_and(|at| *at >= since)
    }

    /// Whether `ino` is at its name still (not replaced, removed or dropped by a listing).
    pub fn is_attached(&self, ino: Ino) -> bool {
        ino == ROOT
            || self.nodes.get(&ino).is_some_and(|node| {
                self.children
                    .get(&node.parent)
                    .is_some_and(|names| names.get(&node.name) == Some(&ino))
            })
    }

    /// The kernel was handed `ino` once more.
    pub fn note_lookup(&mut self, ino: Ino) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.lookups += 1;
        }
    }

    /// The kernel dropped `count` references to `ino`. Once it holds none, the node goes
    /// with everything below it (unless something there has local data or is still held),
    /// so memory follows the kernel's inode cache rather than every name ever listed. Its
    /// directory is no longer known complete, so the name is asked for again if it comes up.
    pub fn forget(&mut self, ino: Ino, count: u64) {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        node.lookups = node.lookups.saturating_sub(count);
        let (held, parent, name) = (node.lookups > 0, node.parent, node.name.clone());
        if ino == ROOT || held || self.pinned_below(ino) {
            return;
        }

        if self
            .children
            .get(&parent)
            .is_some_and(|names| names.get(&name) == Some(&ino))
        {
            if let Some(names) = self.children.get_mut(&parent) {
                names.remove(&name);
            }
            self.listed.remove(&parent);
        }
        self.forget_subtree(ino);
    }

    /// Whether `ino` or anything below it is local or held by the kernel.
    fn pinned_below(&self, ino: Ino) -> bool {
        let mut pending = vec![ino];
        while let Some(current) = pending.pop() {
            if let Some(node) = self.nodes.get(&current)
                && (node.local || (current != ino && node.lookups > 0))
            {
                return true;
            }
            if let Some(names) = self.children.get(&current) {
                pending.extend(names.values().copied());
            }
        }
        false
    }

    /// Whether the kernel may keep the pages it cached for `ino`: the version it read last
    /// time is the one the store shows now. Records the version for the next open.
    pub fn reopen_keeps_cache(&mut self, ino: Ino) -> bool {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return false;
        };
        let version = (node.size, node.mtime, node.etag.clone());
        let same =
            !node.local && !node.etag.is_empty() && node.opened_as.as_ref() == Some(&version);
        node.opened_as = Some(version);
        same
    }

    /// How many names are known.
    pub fn known(&self) -> usize {
        self.nodes.len()
    }

    /// The children of `dir`, by name.
    pub fn list(&self, dir: Ino) -> Vec<(String, Ino, Kind)> {
        self.children
            .get(&dir)
            .map(|names| {
                names
                    .iter()
                    .filter_map(|(name, ino)| {
                        self.nodes
                            .get(ino)
                            .map(|node| (name.clone(), *ino, node.kind))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Moves `ino` to `new_parent/new_name`, replacing whatever was there.
    pub fn rename(&mut self, ino: Ino, new_parent: Ino, new_name: &str, now: Instant) {
        let Some((old_parent, old_name)) = self
            .nodes
            .get(&ino)
            .map(|node| (node.parent, node.name.clone()))
        else {
            return;
        };
        if old_parent == new_parent && old_name == new_name {
            return;
        }
        if let Some(names) = self.children.get_mut(&old_parent) {
            names.remove(&old_name);
        }
        self.absent.insert((old_parent, old_name), now);
        self.detach(new_parent, new_name);
        self.absent.remove(&(new_parent, new_name.to_string()));
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.parent = new_parent;
            node.name = new_name.to_string();
            node.checked = now;
        }
        self.children
            .entry(new_parent)
            .or_default()
            .insert(new_name.to_string(), ino);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, size: u64) -> Entry {
        Entry {
            name: name.into(),
            kind: Kind::File,
            size,
            mtime: SystemTime::UNIX_EPOCH,
            etag: String::new(),
        }
    }

    fn dir(name: &str) -> Entry {
        Entry {
            name: name.into(),
            kind: Kind::Dir,
            size: 0,
            mtime: SystemTime::UNIX_EPOCH,
            etag: String::new(),
        }
    }

    #[test]
    fn paths_are_built_from_parents() {
        let mut tree = Tree::new(Duration::from_secs(1));
        let now = Instant::now();
        let a = tree.upsert(ROOT, &dir("a"), now);
        let b = tree.upsert(a, &file("b.txt", 3), now);
        assert_eq!(tree.path(ROOT).as_deref(), Some(""));
        assert_eq!(tree.path(b).as_deref(), Some("a/b.txt"));
    }

    #[test]
    fn a_store_answer_older_than_a_removal_does_not_bring_the_name_back() {
        let mut tree = Tree::new(Duration::from_secs(60));
        let asked = Instant::now();
        tree.upsert(ROOT, &file("gone", 1), asked);
        let removed = asked + Duration::from_millis(1);
        tree.remove(ROOT, "gone", removed);
        assert!(tree.known_absent(ROOT, "gone"));
        assert!(tree.removed_since(ROOT, "gone", asked));
        // A listing asked for before the removal still shows the name: it stays removed.
        tree.apply_listing(ROOT, &[file("gone", 1), file("stays", 1)], asked);
        assert_eq!(tree.child(ROOT, "gone"), None);
        assert!(tree.child(ROOT, "stays").is_some());
        assert!(tree.known_absent(ROOT, "gone"));
        // One asked for after it is the store's word.
        let later = removed + Duration::from_millis(1);
        assert!(!tree.removed_since(ROOT, "gone", later));
        tree.apply_listing(ROOT, &[file("gone", 1)], later);
        assert!(tree.child(ROOT, "gone").is_some());
        assert!(!tree.known_absent(ROOT, "gone"));
    }

    /// A file renamed into a directory while a listing of it was on its way (a restore's
    /// temp file renamed onto its name as the daemon's watch listed the bucket) stays: the
    /// listing, asked for before the rename, cannot know it. Dropped, its inode answered
    /// ENOENT to the restore's next step.
    #[test]
    fn a_listing_asked_for_before_a_rename_keeps_the_renamed_file() {
        let mut tree = Tree::new(Duration::from_secs(60));
        let asked = Instant::now();
        let temp = tree.upsert(ROOT, &file(".seed.txt.tmp", 1), asked);
        let renamed = asked + Duration::from_millis(1);
        tree.rename(temp, ROOT, "seed.txt", renamed);
        // The listing: the temp's key, not yet the new one.
        tree.apply_listing(ROOT, &[file(".seed.txt.tmp", 1)], asked);
        assert_eq!(tree.child(ROOT, "seed.txt"), Some(temp));
        assert_eq!(tree.child(ROOT, ".seed.txt.tmp"), None);
        assert!(tree.get(temp).is_some());
        // A listing asked for after the rename is the store's word.
        let later = renamed + Duration::from_millis(1);
        tree.apply_listing(ROOT, &[], later);
        assert_eq!(tree.child(ROOT, "seed.txt"), None);
    }

    #[test]
    fn a_file_replaced_by_a_rename_stays_while_the_kernel_holds_it() {
        let mut tree = Tree::new(Duration::from_secs(1));
        let now = Instant::now();
        let old = tree.upsert(ROOT, &file("seed.txt", 1), now);
        tree.note_lookup(old);
        let temp = tree.upsert(ROOT, &file(".seed.txt.tmp", 2), now);
        tree.rename(temp, ROOT, "seed.txt", now);
        assert_eq!(tree.child(ROOT, "seed.txt"), Some(temp));
        assert!(tree.get(old).is_some(), "held by the kernel");
        assert!(!tree.is_attached(old) && tree.is_attached(temp));
        tree.forget(old, 1);
        assert!(tree.get(old).is_none(), "gone once forgotten");
        assert_eq!(tree.child(ROOT, "seed.txt"), Some(temp));
        // One the kernel does not hold goes at once.
        let unheld = tree.upsert(ROOT, &file("other.txt", 1), now);
        tree.remove(ROOT, "other.txt", now);
        assert!(tree.get(unheld).is_none());
    }

    #[test]
    fn a_fresh_listing_answers_absent_names_and_expires() {
        let mut tree = Tree::new(Duration::from_secs(1));
        let now = Instant::now();
        assert_eq!(tree.lookup_cached(ROOT, "x", now), Cached::Unknown);
        tree.apply_listing(ROOT, &[file("x", 1)], now);
        assert!(matches!(
            tree.lookup_cached(ROOT, "x", now),
            Cached::Present(_)
        ));
        assert_eq!(tree.lookup_cached(ROOT, "y", now), Cached::Absent);
        let later = now + Duration::from_secs(2);
        assert_eq!(tree.lookup_cached(ROOT, "y", later), Cached::Unknown);
        assert_eq!(tree.lookup_cached(ROOT, "x", later), Cached::Unknown);
    }

    #[test]
    fn listings_drop_vanished_names_but_keep_local_ones() {
        let mut tree = Tree::new(Duration::from_secs(1));
        let now = Instant::now();
        tree.apply_listing(ROOT, &[file("gone", 1), file("stays", 1)], now);
        let new = tree.upsert(ROOT, &file("new", 0), now);
        tree.get_mut(new).unwrap().local = true;
        tree.apply_listing(ROOT, &[file("stays", 2)], now);
        let names: Vec<String> = tree.list(ROOT).into_iter().map(|(n, _, _)| n).collect();
        assert_eq!(names, vec!["new", "stays"]);
        assert_eq!(
            tree.get(tree.child(ROOT, "stays").unwrap()).unwrap().size,
            2
        );
    }

    #[test]
    fn a_name_that_changes_kind_gets_a_new_inode() {
        let mut tree = Tree::new(Duration::from_secs(1));
        let now = Instant::now();
        let first = tree.upsert(ROOT, &file("n", 1), now);
        let second = tree.upsert(ROOT, &dir("n"), now);
        assert_ne!(first, second);
        assert_eq!(tree.get(second).unwrap().kind, Kind::Dir);
    }

    #[test]
    fn forgotten_nodes_go_and_their_directory_is_asked_again() {
        let mut tree = Tree::new(Duration::from_secs(60));
        let now = Instant::now();
        tree.apply_listing(ROOT, &[file("a", 1), file("b", 1), dir("d")], now);
        let a = tree.child(ROOT, "a").unwrap();
        let d = tree.child(ROOT, "d").unwrap();
        let inside = tree.upsert(d, &file("x", 1), now);
        tree.note_lookup(a);
        tree.note_lookup(a);
        tree.forget(a, 1);
        assert!(
            tree.get(a).is_some(),
            "the kernel still holds one reference"
        );
        tree.forget(a, 1);
        assert!(tree.get(a).is_none());
        assert_eq!(tree.lookup_cached(ROOT, "a", now), Cached::Unknown);
        assert_eq!(tree.known(), 5 - 1);
        tree.note_lookup(inside);
        tree.forget(d, 0);
        assert!(
            tree.get(d).is_some(),
            "a directory whose child is held stays"
        );
        tree.forget(inside, 1);
        assert!(tree.get(inside).is_none());
        let again = tree.upsert(d, &file("y", 1), now);
        tree.forget(d, 0);
        assert!(
            tree.get(d).is_none() && tree.get(again).is_none(),
            "the subtree goes"
        );
    }

    #[test]
    fn the_kernel_keeps_its_cache_only_for_the_version_it_read() {
        let mut tree = Tree::new(Duration::from_secs(1));
        let now = Instant::now();
        let mut entry = file("f", 3);
        entry.etag = "\"e1\"".into();
        let f = tree.upsert(ROOT, &entry, now);
        assert!(!tree.reopen_keeps_cache(f), "nothing cached yet");
        assert!(tree.reopen_keeps_cache(f));
        entry.etag = "\"e2\"".into();
        tree.upsert(ROOT, &entry, now);
        assert!(!tree.reopen_keeps_cache(f), "same size and time, new ETag");
        tree.get_mut(f).unwrap().local = true;
        assert!(!tree.reopen_keeps_cache(f), "written here");
    }

    #[test]
    fn rename_moves_the_inode_and_marks_the_old_name_absent() {
        let mut tree = Tree::new(Duration::from_secs(1));
        let now = Instant::now();
        let a = tree.upsert(ROOT, &dir("a"), now);
        let f = tree.upsert(ROOT, &file("f", 1), now);
        tree.rename(f, a, "g", now);
        assert_eq!(tree.path(f).as_deref(), Some("a/g"));
        assert_eq!(tree.lookup_cached(ROOT, "f", now), Cached::Absent);
        assert_eq!(tree.lookup_cached(a, "g", now), Cached::Present(f));
    }
}
