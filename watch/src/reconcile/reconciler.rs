//! The reconciler itself: the tree it owns, the dirty set events fill, and a batch's
//! rounds of listing and matching (see the module above for the rules).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::batch::Batch;
use super::record::{self, RecordedEntry};
use super::tree::{Kind, NodeId, ROOT, Stat, Tree};
use super::{emit, list};
use crate::report::Reporter;

/// Why a directory could not be watched.
#[derive(Debug)]
pub(crate) enum WatchFailure {
    /// The backend's watch limit: what happens inside is not seen (an overflow is reported).
    Limit,
    /// Gone or no longer a directory: the next listing of its parent tells.
    Gone,
    Io(std::io::Error),
}

impl WatchFailure {
    /// What starting a watch of `root` answers when its first crawl failed so.
    pub fn starting(self, root: &Path) -> crate::WatchError {
        match self {
            WatchFailure::Limit => crate::WatchError::LimitReached {
                path: root.to_path_buf(),
            },
            WatchFailure::Gone => crate::WatchError::NotFound(root.to_path_buf()),
            WatchFailure::Io(err) => crate::WatchError::Io(err),
        }
    }
}

/// What watches directories for the reconciler: inotify (one watch per directory) or the
/// `notify` crate (which watches whole trees itself).
pub(crate) trait Backend {
    /// Watches the directory at `path`, recorded as `node`, before it is listed.
    fn watch(&mut self, path: &Path, node: NodeId) -> Result<(), WatchFailure>;
    /// The node left the tree.
    fn forget(&mut self, node: NodeId);
    /// Whether the directory at `path` is the object recorded as `node` (not another one
    /// with its inode number); `None` when the backend cannot tell.
    fn same_dir(&mut self, path: &Path, node: NodeId) -> Option<bool>;
    /// Where in the tree a mount was made or taken away since the mount table was last
    /// read (see `crate::mounts`); nothing where it cannot be read.
    fn mounts_changed(&mut self) -> Vec<std::path::PathBuf> {
        Vec::new()
    }
    /// A mount at `path` is known gone: the table forgets it, so one made there later is
    /// a change even if the table writes it the same.
    fn mount_gone(&mut self, _path: &Path) {}
}

/// How recent an mtime must be, at the moment it is recorded, for a later comparison of
/// size and mtime alone to be unable to see a write (the kernel's file times advance by
/// clock ticks of up to 10 ms).
const RACY: Duration = Duration::from_millis(50);
/// Rounds of one batch before the rest waits for the next (a tree that keeps moving).
const MAX_ROUNDS: usize = 64;

/// An entry found in a listing that is not the object recorded at its name.
struct Appeared {
    parent: NodeId,
    name: OsString,
    stat: Stat,
    written: bool,
    retried: bool,
}

pub(crate) struct Reconciler {
    tree: Tree,
    reporter: Reporter,
    recursive: bool,
    /// Directories to read again.
    dirty: BTreeSet<NodeId>,
    /// Names hinted in dirty directories, and whether each was written.
    hinted: HashMap<NodeId, HashMap<OsString, bool>>,
    /// Events were lost: every directory is re-read, no size and mtime trusted.
    recrawl: bool,
    /// The root was deleted or moved away.
    root_gone: bool,
    /// Whether anything is emitted: not for the first crawl.
    reporting: bool,
    /// Why a directory of this batch could not be watched (its changes are not seen).
    unwatched: Option<WatchFailure>,
    /// Records taken in the clock tick of their mtime, oldest first (see `settled`).
    racy_nodes: VecDeque<(SystemTime, NodeId)>,
    /// The time of this batch's listings (what `racy` compares with).
    now: SystemTime,
    /// Directories a mount came or went over since they were read (see `remounted`): read
    /// next as another filesystem's.
    rebase: HashSet<NodeId>,
    /// Entries recorded from a filesystem a mount has since covered or taken away, not read
    /// again yet: their inode numbers name nothing at their paths any more (and may be given
    /// to new files there), so nothing is matched to them by inode.
    stale: HashSet<NodeId>,
    /// Directories watched anew since they were listed (a watch lost to a move or a mount
    /// and made again): what changed in them between their last listing and the new watch
    /// was told to no watch, so their next listing looks at every entry, not only at those
    /// whose inode number changed.
    watched_anew: HashSet<NodeId>,
    /// Devices of overlays that show another filesystem's objects under their inode
    /// numbers (a workspace fork's, see `mounts::fork_views`), to that filesystem's:
    /// read at each mount change.
    views: HashMap<u64, u64>,
}

impl Reconciler {
    /// Records the tree at `root` (watched through `backend` first) without reporting it;
    /// or, given the record of an earlier watch of it (`recorded`, see [`Self::recorded`]),
    /// reads it whole against that record and reports what changed since.
    pub fn start(
        root: &Path,
        reporter: Reporter,
        recursive: bool,
        backend: &mut dyn Backend,
        recorded: Option<&[RecordedEntry]>,
    ) -> Result<Self, WatchFailure> {
        let stat = list::lstat(root).map_err(|err| match err.kind() {
            std::io::ErrorKind::NotFound => WatchFailure::Gone,
            _ => WatchFailure::Io(err),
        })?;
        let mut reconciler = Self {
            tree: Tree::new(root.to_path_buf(), stat),
            reporter,
            recursive,
            dirty: BTreeSet::new(),
            hinted: HashMap::new(),
            recrawl: false,
            root_gone: false,
            reporting: false,
            unwatched: None,
            racy_nodes: VecDeque::new(),
            now: SystemTime::now(),
            rebase: HashSet::new(),
            stale: HashSet::new(),
            watched_anew: HashSet::new(),
            views: HashMap::new(),
        };
        backend.watch(root, ROOT)?;
        reconciler.tree.node_mut(ROOT).watched = true;
        reconciler.dirty.insert(ROOT);
        if let Some(entries) = recorded {
            // The record as the tree, none of its directories watched: each is watched
            // where its parent's listing finds it (or where it moved, found by its inode),
            // then listed entry by entry, as a directory watched anew is. What changed
            // while nothing watched is then one batch of this reconciler's changes.
            let racy = record::load(&mut reconciler.tree, entries, reconciler.now);
            reconciler.racy_nodes.extend(racy);
            reconciler.watched_anew.insert(ROOT);
            reconciler.reporting = true;
            reconciler.reconcile(backend);
            if reconciler.root_gone {
                return Err(WatchFailure::Gone);
            }
            reconciler.tree.compact();
            return Ok(reconciler);
        }
        reconciler.reconcile(backend);
        if let Some(failure) = reconciler.unwatched.take() {
            return Err(failure);
        }
        reconciler.tree.compact();
        reconciler.reporting = true;
        Ok(reconciler)
    }

    /// The record of the tree as the changes reported so far leave it, for a later watch
    /// of the same root to start from (see [`Self::start`]).
    pub fn recorded(&self) -> Vec<RecordedEntry> {
        record::export(&self.tree)
    }

    pub fn reporter(&self) -> &Reporter {
        &self.reporter
    }

    pub fn reporter_mut(&mut self) -> &mut Reporter {
        &mut self.reporter
    }

    pub fn root_gone(&self) -> bool {
        self.root_gone
    }

    /// The device and inode number of the directory recorded as the root.
    pub fn root_object(&self) -> (u64, u64) {
        let stat = self.tree.node(ROOT).stat;
        (stat.dev, stat.ino)
    }

    /// Something happened in the directory `dir` (to `name` in it, `written` when its
    /// content changed).
    pub fn hint(&mut self, dir: NodeId, name: Option<&OsStr>, written: bool) {
        if self.tree.get(dir).is_none() {
            return;
        }
        self.dirty.insert(dir);
        if let Some(name) = name {
            let flag = self
                .hinted
                .entry(dir)
                .or_default()
                .entry(name.to_os_string())
                .or_insert(false);
            *flag |= written;
        }
    }

    /// Everything recorded at and below `point` (absolute) is looked at again: each
    /// directory listed, each entry's stat compared. For a filesystem others write without
    /// an event reaching the kernel here (a bucket, a network share), which only a look
    /// finds changed.
    pub fn reread_below(&mut self, point: &Path) {
        let Some((top, None)) = self.tree.nearest(point) else {
            return;
        };
        let mut below = vec![top];
        while let Some(id) = below.pop() {
            let node = self.tree.node(id);
            if node.stat.kind != Kind::Dir || !node.watched {
                continue;
            }
            let names: Vec<(OsString, NodeId)> = node
                .children
                .iter()
                .map(|(name, child)| (name.clone(), *child))
                .collect();
            self.hint(id, None, false);
            for (name, child) in names {
                self.hint(id, Some(&name), false);
                below.push(child);
            }
        }
        if top != ROOT {
            self.hint_own_entry(top);
        }
    }

    /// Something happened at `path` (absolute): its nearest recorded directory is looked at.
    /// A backend that tells of everything (the `notify` crate watches excluded directories
    /// too) is heard as inotify is: nothing below a directory that is not watched (excluded
    /// by the filter, or below the root of a non-recursive watch) is looked at or recorded.
    pub fn hint_path(&mut self, path: &Path, written: bool) {
        match self.tree.nearest(path) {
            Some((node, name)) if self.tree.node(node).stat.kind == Kind::Dir => {
                if name.is_none() && node != ROOT {
                    // The directory itself: its mode or times are in its parent's listing.
                    let (parent, own) = {
                        let dir = self.tree.node(node);
                        (dir.parent, dir.name.clone())
                    };
                    self.hint(parent, Some(&own), false);
                }
                if self.tree.node(node).watched {
                    self.hint(node, name, written);
                }
            }
            Some((node, None)) => {
                let parent = self.tree.node(node).parent;
                let name = self.tree.node(node).name.clone();
                self.hint(parent, Some(&name), written);
            }
            // Below a file, or outside the root: the parent of the nearest node is re-read.
            Some((node, Some(_))) => {
                let parent = self.tree.node(node).parent;
                self.hint(parent, None, false);
            }
            None => {}
        }
    }

    /// The directory recorded as `node` is gone or moved (its watch ended): its parent is
    /// re-read.
    pub fn hint_gone(&mut self, node: NodeId) {
        if node == ROOT {
            // Believed once its path shows another directory or none (see `root_lost`).
            self.dirty.insert(ROOT);
        } else {
            self.hint_own_entry(node);
        }
    }

    /// The backend saw the root itself deleted (its watch of the root ended with it): the
    /// watch ends whatever is at the path now, even a directory given the same inode
    /// number, which nothing watches.
    pub fn root_deleted(&mut self) {
        self.root_gone = true;
    }

    /// A mount was made or taken away at, below or above the root (the mount table said
    /// so, or the kernel told an unmount to a watch): what some paths show is another
    /// filesystem's, and the kernel tells no event of it. Where is read again from the
    /// whole tree, so that which recorded directory is at a mount point never rests on a
    /// record a move may have made stale: every directory loses its watch and is watched
    /// again, and is read by name (`rebase_dir`), an entry that is the object recorded at
    /// its name compared as always, one that is another object (what a mount covered or
    /// took away) compared by name, so the change list is the difference between the two
    /// trees, path by path. Until an entry is found again at its name, nothing is matched
    /// to it by inode (its number may be another filesystem's, given again).
    pub fn remounted(&mut self, backend: &mut dyn Backend) {
        // The watch of the root that went with an unmount may have said it was gone: the
        // path is read again before that is believed.
        self.root_gone = false;
        self.views = crate::mounts::fork_views();
        for id in self.tree.ids().collect::<Vec<_>>() {
            self.stale.insert(id);
            let node = self.tree.node(id);
            if node.stat.kind == Kind::Dir && node.watched && self.tree.attached(id) {
                backend.forget(id);
                self.rebase.insert(id);
                self.dirty.insert(id);
            }
        }
    }

    /// The directory recorded as `node` changed itself (its mode): its entry in its parent
    /// is looked at again (the root's own mode is not reported).
    pub fn hint_own_entry(&mut self, node: NodeId) {
        if node != ROOT
            && let Some((parent, name)) = self.tree.get(node).map(|n| (n.parent, n.name.clone()))
        {
            self.hint(parent, Some(&name), false);
        }
    }

    /// Reads what the mount table says changed (see `remounted`); whether a mount changed
    /// what the tree shows.
    pub fn look_at_mounts(&mut self, backend: &mut dyn Backend) -> bool {
        let paths = backend.mounts_changed();
        for path in &paths {
            tracing::debug!(path = %path.display(), "a mount changed what a watched tree shows");
        }
        if !paths.is_empty() {
            self.remounted(backend);
        }
        !paths.is_empty()
    }

    /// Events were lost: the next reconciliation re-reads everything.
    pub fn overflowed(&mut self) {
        self.recrawl = true;
    }

    /// Every event of a change made before `since` has been handed over and reconciled (the
    /// backend's queue was read to the end after it): a write in the clock tick of a
    /// recording made before then would have been told, so those records are trusted
    /// from now on, even by a later recrawl.
    pub fn settled(&mut self, since: SystemTime) {
        if self.recrawl {
            return;
        }
        while let Some(&(at, id)) = self.racy_nodes.front() {
            if at.checked_add(RACY).is_none_or(|end| end >= since) {
                break;
            }
            self.racy_nodes.pop_front();
            if let Some(node) = self.tree.get(id)
                && node.racy == Some(at)
            {
                self.tree.node_mut(id).racy = None;
            }
        }
    }

    /// Whether a reconciliation has anything to do.
    pub fn pending(&self) -> bool {
        self.recrawl || !self.dirty.is_empty()
    }

    /// Re-reads what is dirty, diffs it against the tree and emits the changes.
    pub fn reconcile(&mut self, backend: &mut dyn Backend) {
        if !self.pending() || self.root_gone {
            return;
        }
        self.now = SystemTime::now();
        if self.reporting {
            self.unwatched = None;
        }
        let recrawl = std::mem::take(&mut self.recrawl);
        if recrawl {
            self.dirty = self
                .tree
                .ids()
                .filter(|&id| self.tree.node(id).watched)
                .collect();
        }
        let mut batch = Batch::default();
        let mut deferred: Vec<Appeared> = Vec::new();
        for _ in 0..MAX_ROUNDS {
            let mut dirs: Vec<(usize, NodeId)> = Vec::new();
            for id in std::mem::take(&mut self.dirty) {
                if self.tree.get(id).is_none() {
                    continue;
                }
                if self.tree.attached(id) {
                    dirs.push((self.depth(id), id));
                } else {
                    batch.waiting.insert(id);
                }
            }
            if dirs.is_empty() && deferred.is_empty() {
                break;
            }
            dirs.sort_unstable();
            let mut appeared = std::mem::take(&mut deferred);
            for (_, dir) in dirs {
                self.list_dir(dir, &mut batch, &mut appeared, recrawl, backend);
                if self.root_gone {
                    return;
                }
            }
            deferred = self.match_appeared(appeared, &mut batch, backend);
            let found: Vec<NodeId> = batch
                .waiting
                .iter()
                .copied()
                .filter(|&id| self.tree.get(id).is_some() && self.tree.attached(id))
                .collect();
            for id in found {
                batch.waiting.remove(&id);
                self.dirty.insert(id);
            }
        }
        // What is left for the next batch (a tree that kept moving past the rounds): the
        // entries deferred are found again by listing their directories then, and the
        // directories not found at their recorded paths are listed once found.
        for appeared in deferred {
            self.dirty.insert(appeared.parent);
        }
        self.dirty.extend(batch.waiting.iter().copied());
        self.finish(batch, backend);
    }

    fn depth(&self, mut id: NodeId) -> usize {
        let mut depth = 0;
        while id != ROOT {
            id = self.tree.node(id).parent;
            depth += 1;
        }
        depth
    }

    /// The record time, if `stat` was taken in the moment of its mtime.
    fn racy(&self, stat: &Stat) -> Option<SystemTime> {
        let mtime = SystemTime::UNIX_EPOCH
            .checked_add(Duration::new(
                stat.mtime.0.max(0) as u64,
                stat.mtime.1.clamp(0, 999_999_999) as u32,
            ))
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let racy = match self.now.duration_since(mtime) {
            Ok(age) => age < RACY,
            Err(_) => true,
        };
        racy.then_some(self.now)
    }

    /// Reads one directory and records how it differs from the tree.
    fn list_dir(
        &mut self,
        dir: NodeId,
        batch: &mut Batch,
        appeared: &mut Vec<Appeared>,
        recrawl: bool,
        backend: &mut dyn Backend,
    ) {
        let path = self.tree.path(dir);
        if self.rebase.remove(&dir) && !self.rebase_dir(dir, &path, batch, backend) {
            return;
        }
        let rebasing = batch.rebased.contains(&dir);
        // Every entry looked at, as in a recrawl (see `watched_anew`).
        let recrawl = self.watched_anew.remove(&dir) || recrawl;
        // The inode number says which directory is at the path unless it was reused (a
        // directory deleted and another made); the backend's watch tells those apart.
        let opened = list::open_dir(&path, &self.tree.node(dir).stat).and_then(|listing| {
            match backend.same_dir(&path, dir) {
                Some(false) => Err(std::io::Error::other("another directory is at the path")),
                _ => Ok(listing),
            }
        });
        let mut listing = match opened {
            Ok(listing) => listing,
            Err(_) if dir == ROOT => {
                self.root_lost(backend);
                return;
            }
            Err(_) => {
                // Not the recorded directory at its recorded path: an ancestor moved, or it
                // went, or another directory took its name (and perhaps its inode number).
                // Its name is looked at again in its parent (not passed over for an inode
                // number that matches), and it is listed once found.
                self.hint_gone(dir);
                batch.waiting.insert(dir);
                return;
            }
        };
        let hints = self.hinted.remove(&dir).unwrap_or_default();
        let children = self.tree.node(dir).children.clone();
        let mut seen: HashSet<OsString> = HashSet::with_capacity(children.len());
        for (name, d_ino) in listing.names() {
            if fsd_api::scratch::is_scratch(Path::new(&name)) {
                continue;
            }
            let child = children.get(&name).copied();
            let hint = hints.get(&name).copied();
            // A child in a tree a mount replaced (or the mount point itself, seen from the
            // directory it is in): the entry at the name, whatever object it is now, until
            // it is found once; from then on its record is the object's, matched as always
            // (what moves while the tree is read again is then a move, and a watch made
            // anew stays with the directory it was made on).
            let replaced = child.filter(|child| {
                (rebasing || self.rebase.contains(child)) && self.stale.contains(child)
            });
            if let Some(child) = child
                && hint.is_none()
                && !recrawl
                && replaced.is_none()
                // A record not found again since a mount changed is looked at once: its
                // directory's watch was made anew, and what changed meanwhile was not told.
                && !self.stale.contains(&child)
                && d_ino == self.tree.node(child).stat.ino
            {
                seen.insert(name);
                self.ensure_watched(child, backend);
                continue;
            }
            let Ok(stat) = listing.stat(&name) else {
                continue;
            };
            if let Some(child) = replaced
                && self.tree.node(child).stat.kind == stat.kind
                && !self.recorded_elsewhere(&stat, child)
            {
                seen.insert(name);
                self.rebase_compare(child, stat, batch);
                self.ensure_watched(child, backend);
                continue;
            }
            let written = hint == Some(true);
            // A directory removed and made again often gets the same inode number back:
            // one looked at again is checked to be the same object.
            let same = child.is_some_and(|child| {
                self.tree.node(child).stat.same_object(&stat)
                    && (stat.kind != Kind::Dir
                        || backend.same_dir(&path.join(&name), child) != Some(false))
            });
            match child {
                Some(child) if same => {
                    seen.insert(name);
                    self.compare(child, stat, written, recrawl, batch);
                    self.ensure_watched(child, backend);
                }
                other => {
                    seen.insert(name.clone());
                    if let Some(child) = other {
                        self.left_mount_point(child, dir, &path.join(&name), backend);
                        self.disappear(child, written, batch);
                    }
                    appeared.push(Appeared {
                        parent: dir,
                        name,
                        stat,
                        written,
                        retried: false,
                    });
                }
            }
        }
        for (name, child) in children {
            if !seen.contains(&name) {
                let written = hints.get(&name).copied() == Some(true);
                self.left_mount_point(child, dir, &path.join(&name), backend);
                self.disappear(child, written, batch);
            }
        }
    }

    /// A recorded entry, `lstat`ed again: modified, attributes changed, or not. A `suspect`
    /// one (found under a new name, or in a recrawl) recorded in the clock tick of its
    /// last write is taken as modified: a write in the same tick keeps size and mtime, and
    /// its event names the old name, or was lost.
    fn compare(&mut self, id: NodeId, stat: Stat, written: bool, suspect: bool, batch: &mut Batch) {
        // Found again: its record is to be trusted (see `stale`).
        self.stale.remove(&id);
        let node = self.tree.node(id);
        let old = node.stat;
        // A link's content is its target: changed only by a new link, whose inode number
        // may be one just freed.
        let content = stat.kind != Kind::Dir
            && (old.size != stat.size
                || old.mtime != stat.mtime
                || written
                || (suspect && node.racy.is_some()));
        if content {
            self.written(id, batch);
        }
        if old.mode != stat.mode {
            self.with_links(id, &mut batch.attrib);
        }
        let racy = self.racy(&stat);
        self.tree.set_stat(id, stat, racy);
        if let Some(at) = racy {
            self.racy_nodes.push_back((at, id));
        }
        // Size, mtime and mode belong to the file, not the name: its other hard links are
        // recorded with them too, or a later change back through another name (a mode
        // set back, say) would compare equal to a stale record there.
        for link in self.other_names(id) {
            self.tree.set_stat(link, stat, racy);
            if let Some(at) = racy {
                self.racy_nodes.push_back((at, link));
            }
        }
    }

    /// Takes the directory at `path` as the one recorded as `dir`, whatever object it is
    /// now (a mount came or went over it): its record and its watch become those of what
    /// is there, and what it holds is matched by name as it is listed. `false` when no
    /// directory is at the path (its parent's listing tells what is).
    fn rebase_dir(
        &mut self,
        dir: NodeId,
        path: &Path,
        batch: &mut Batch,
        backend: &mut dyn Backend,
    ) -> bool {
        // Without a watch now: watched again where it is found (`ensure_watched`, `moved`).
        let gone = |this: &mut Self, batch: &mut Batch| {
            this.tree.node_mut(dir).watched = false;
            if dir == ROOT {
                this.root_gone = true;
            } else {
                this.hint_gone(dir);
                batch.waiting.insert(dir);
            }
            false
        };
        // The watch is of whatever is at the path when it is made: the directory looked at
        // just before must still be there after it (a mount may have come or gone between;
        // then the one there now is taken, a few times at most). What is recorded is what
        // the look after the watch saw: a mode set before the watch was made is in it, one
        // set after is told (the top of a mounted filesystem is told to its own watch only).
        let mut stat = match list::lstat(path) {
            Ok(stat) if stat.kind == Kind::Dir => stat,
            _ => return gone(self, batch),
        };
        let mut tries = 0;
        loop {
            backend.forget(dir);
            match backend.watch(path, dir) {
                Ok(()) => match list::lstat(path) {
                    Ok(now) if now.same_object(&stat) => {
                        stat = now;
                        break;
                    }
                    Ok(now) if now.kind == Kind::Dir && tries < 3 => {
                        stat = now;
                        tries += 1;
                    }
                    _ => {
                        backend.forget(dir);
                        return gone(self, batch);
                    }
                },
                Err(WatchFailure::Gone) => return gone(self, batch),
                Err(failure) => {
                    self.tree.node_mut(dir).watched = false;
                    self.cannot_watch(path, failure);
                    break;
                }
            }
        }
        // The path is this directory's only while its parent's path still shows the parent
        // read (and watched anew) before it: a directory above that moved since (a swap
        // while the tree is read) puts another directory's entry at the path, and its
        // parent's listing finds where each went.
        if dir != ROOT {
            let parent = self.tree.node(dir).parent;
            let parent_stat = self.tree.node(parent).stat;
            let in_place = path
                .parent()
                .and_then(|parent_path| list::lstat(parent_path).ok())
                .is_some_and(|now| now.same_object(&parent_stat));
            if !in_place {
                backend.forget(dir);
                return gone(self, batch);
            }
        }
        if dir == ROOT {
            // The root's own mode and times are not reported (its parent is not watched).
            self.tree.set_stat(ROOT, stat, None);
            self.stale.remove(&ROOT);
        } else {
            self.rebase_compare(dir, stat, batch);
        }
        batch.rebased.insert(dir);
        true
    }

    /// The root's path does not show the recorded directory. Where it shows the top of
    /// another filesystem now, or the one a filesystem that was mounted there covered (a
    /// mount made or taken away that the table cannot show, as a mount replaced by another
    /// with the same id and device), the tree is read again as that mount's; otherwise the
    /// root is gone (deleted, moved away, or made again), and the watch ends.
    fn root_lost(&mut self, backend: &mut dyn Backend) {
        if self.look_at_mounts(backend) {
            return;
        }
        let root = self.tree.root_path();
        let recorded = self.tree.node(ROOT).stat;
        let remounted = list::lstat(root).is_ok_and(|now| {
            now.kind == Kind::Dir
                && (now.dev != recorded.dev
                    || root
                        .parent()
                        .and_then(|parent| list::lstat(parent).ok())
                        .is_some_and(|parent| parent.dev != now.dev))
        });
        if remounted {
            self.remounted(backend);
        } else {
            self.root_gone = true;
        }
    }

    /// A recorded entry found at its name as a mount may have changed it: the same entry in
    /// the lists. The object recorded there is compared as always; another object (what a
    /// mount covered or took away) is another file, so its content is taken as changed:
    /// no time tells two files apart (an archive keeps whole seconds, and the kernel's file
    /// times advance by clock ticks, so two files written in one tick share their mtime).
    fn rebase_compare(&mut self, id: NodeId, stat: Stat, batch: &mut Batch) {
        let old = self.tree.node(id).stat;
        if old.same_object(&stat) || self.same_through_views(&old, &stat) {
            self.compare(id, stat, false, false, batch);
            return;
        }
        self.stale.remove(&id);
        if stat.kind != Kind::Dir {
            batch.modified.insert(id);
        }
        if old.mode != stat.mode {
            batch.attrib.insert(id);
        }
        let racy = self.racy(&stat);
        self.tree.set_stat(id, stat, racy);
        if let Some(at) = racy {
            self.racy_nodes.push_back((at, id));
        }
    }

    /// Whether `old` and `new`, on two devices, are one object as a fork's overlay shows it:
    /// the same inode and kind on one filesystem, seen through it or beneath it.
    fn same_through_views(&self, old: &Stat, new: &Stat) -> bool {
        let base = |dev: u64| self.views.get(&dev).copied().unwrap_or(dev);
        old.dev != new.dev
            && old.ino == new.ino
            && old.kind == new.kind
            && base(old.dev) == base(new.dev)
    }

    /// Whether `stat` is the object of a recorded entry other than `id` whose record is
    /// to be trusted: something that moved to where a mount was (matched by inode, not
    /// taken as the mount's entry at that name).
    fn recorded_elsewhere(&self, stat: &Stat, id: NodeId) -> bool {
        self.tree
            .with_inode(stat.dev, stat.ino)
            .iter()
            .any(|&other| {
                other != id
                    && self.tree.node(other).stat.kind == stat.kind
                    && !self.unmatchable(other)
            })
    }

    /// Whether a recorded entry's inode number may be another filesystem's now (see
    /// `stale`).
    fn unmatchable(&self, id: NodeId) -> bool {
        self.stale.contains(&id)
    }

    /// The file's other hard links in the tree (none for a directory).
    fn other_names(&self, id: NodeId) -> Vec<NodeId> {
        let stat = self.tree.node(id).stat;
        if stat.kind == Kind::Dir {
            return Vec::new();
        }
        self.tree
            .with_inode(stat.dev, stat.ino)
            .iter()
            .copied()
            .filter(|&other| {
                other != id
                    && self.tree.node(other).stat.kind == stat.kind
                    && !self.unmatchable(other)
            })
            .collect()
    }

    /// A recorded directory leaves `path` (in `dir`): where it was the top of another
    /// filesystem than its parent's, that mount went (or is found gone), and a mount at the
    /// path from now on is new to the table however it is keyed (an id and a device are
    /// given again once free).
    fn left_mount_point(&self, id: NodeId, dir: NodeId, path: &Path, backend: &mut dyn Backend) {
        let stat = self.tree.node(id).stat;
        if stat.kind == Kind::Dir && stat.dev != self.tree.node(dir).stat.dev {
            backend.mount_gone(path);
        }
    }

    /// A recorded entry is no longer at its name: it waits to be found elsewhere.
    fn disappear(&mut self, id: NodeId, written: bool, batch: &mut Batch) {
        let (parent, name) = {
            let node = self.tree.node(id);
            (node.parent, node.name.clone())
        };
        batch.before.entry(id).or_insert(Some((parent, name)));
        self.tree.detach(id);
        batch.limbo.insert(id);
        // A write told by its name may be read after the name has moved on to another
        // file: one of several hard links leaving its name takes the others along.
        if written || self.hard_linked(id) {
            self.written(id, batch);
        }
    }

    /// Whether a file (not a directory) has other names in the tree.
    fn hard_linked(&self, id: NodeId) -> bool {
        let stat = self.tree.node(id).stat;
        stat.kind != Kind::Dir && self.tree.with_inode(stat.dev, stat.ino).len() > 1
    }

    /// A file's content changed: hard links are one file under several names, and each
    /// name shows the write.
    fn written(&self, id: NodeId, batch: &mut Batch) {
        self.with_links(id, &mut batch.modified);
    }

    /// Puts `id` and every other name of its inode in `set`.
    fn with_links(&self, id: NodeId, set: &mut BTreeSet<NodeId>) {
        let stat = self.tree.node(id).stat;
        set.extend(self.tree.with_inode(stat.dev, stat.ino));
        set.insert(id);
    }

    /// Finds each appeared entry in the tree by its inode (a rename), or records it as new.
    /// Returns the entries to look at again next round (their inode is recorded at a path
    /// not read yet).
    fn match_appeared(
        &mut self,
        appeared: Vec<Appeared>,
        batch: &mut Batch,
        backend: &mut dyn Backend,
    ) -> Vec<Appeared> {
        let mut deferred = Vec::new();
        // Directories first: one cannot be in two places, so each match is certain, and a
        // directory matched puts back in place the files it holds (which a new hard link
        // elsewhere must not take).
        let mut appeared = appeared;
        appeared.sort_by_key(|entry| entry.stat.kind != Kind::Dir);
        // Files whose recorded name hangs inside a subtree that left its place: matched last.
        let mut nested: Vec<Appeared> = Vec::new();
        let mut last_pass = false;
        loop {
            for entry in appeared {
                self.match_one(entry, last_pass, batch, backend, &mut nested, &mut deferred);
            }
            if last_pass || nested.is_empty() {
                break;
            }
            // That subtree may be found where it went by a directory this batch has yet
            // to read (one found this round, or one a move made dirty): until none is left,
            // the file waits, since the name it is recorded at may still be there (a new
            // hard link, not a move).
            if !self.dirty.is_empty() {
                deferred.append(&mut nested);
                break;
            }
            appeared = std::mem::take(&mut nested);
            last_pass = true;
        }
        deferred
    }

    /// Matches one appeared entry (see `match_appeared`); `last_pass`: nothing is left to
    /// read, a file inside a subtree that left is taken as moved out of it.
    fn match_one(
        &mut self,
        entry: Appeared,
        last_pass: bool,
        batch: &mut Batch,
        backend: &mut dyn Backend,
        nested: &mut Vec<Appeared>,
        deferred: &mut Vec<Appeared>,
    ) {
        if self.tree.get(entry.parent).is_none() {
            return;
        }
        if !self.tree.attached(entry.parent) {
            // Its directory was read at its recorded path, then taken out with an ancestor
            // that left this round (and may be found again where it went, with this entry
            // in it: an atomic save in a directory moved over another). It waits for the
            // next round rather than being dropped; one whose directory never comes back
            // goes with it.
            deferred.push(entry);
            return;
        }
        if self
            .tree
            .node(entry.parent)
            .children
            .contains_key(&entry.name)
        {
            // Found already (a retried entry whose name was taken meanwhile).
            return;
        }
        let mut candidates: Vec<NodeId> = self
            .tree
            .with_inode(entry.stat.dev, entry.stat.ino)
            .iter()
            .copied()
            .filter(|&id| {
                self.tree.node(id).stat.kind == entry.stat.kind && !self.stale.contains(&id)
            })
            .collect();
        let path = self.tree.path(entry.parent).join(&entry.name);
        if entry.stat.kind == Kind::Dir && candidates.len() > 1 {
            // A directory is one object, and several recorded ones share its inode number
            // only when some were deleted (the number reused): where the backend can tell
            // (the watch the path has), the one it is, else those it may be.
            let told: Vec<Option<bool>> = candidates
                .iter()
                .map(|&id| backend.same_dir(&path, id))
                .collect();
            match told.iter().position(|&same| same == Some(true)) {
                Some(at) => candidates = vec![candidates[at]],
                None => {
                    let mut told = told.into_iter();
                    candidates.retain(|_| told.next().flatten() != Some(false));
                }
            }
        }
        // Taken out of its directory itself, or (less certain: the directory may be
        // found again, the file in it) inside something taken out.
        let loose = candidates
            .iter()
            .copied()
            .find(|id| batch.limbo.contains(id))
            .or_else(|| {
                candidates
                    .iter()
                    .copied()
                    .find(|&id| !self.tree.attached(id))
            });
        // A directory is one object: the recorded one whose watch the path has is this
        // one, even recorded at a place still attached (its old directory not read yet,
        // or found gone and waiting), else a second node would claim its watch.
        if loose.is_none()
            && entry.stat.kind == Kind::Dir
            && let Some(&id) = candidates.first()
            && !self.tree.within(entry.parent, id)
            && backend.same_dir(&path, id) == Some(true)
        {
            self.moved(id, &entry, batch, backend);
            return;
        }
        if let Some(id) = loose
            && !batch.limbo.contains(&id)
            && entry.stat.kind != Kind::Dir
            && !last_pass
        {
            nested.push(entry);
            return;
        }
        if let Some(id) = loose {
            // A rename keeps a file's mtime; a file with the inode number of one that just
            // left but another mtime is a new file that got the number back (an atomic
            // save frees one, the next file made takes it), or one moved and written at
            // once: told as made, which is exact either way.
            let same = match entry.stat.kind {
                Kind::Dir => backend.same_dir(&path, id) != Some(false),
                _ => self.tree.node(id).stat.mtime == entry.stat.mtime,
            };
            if same {
                self.moved(id, &entry, batch, backend);
                return;
            }
        } else if let Some(&id) = candidates.first()
            && !entry.retried
        {
            // Recorded at a path still attached: a new hard link (files), or a move
            // whose origin's directory is not read yet.
            let still_there = entry.stat.kind != Kind::Dir
                && list::lstat(&self.tree.path(id)).is_ok_and(|stat| stat.same_object(&entry.stat));
            if !still_there {
                let parent = self.tree.node(id).parent;
                self.dirty.insert(parent);
                deferred.push(Appeared {
                    retried: true,
                    ..entry
                });
                return;
            }
        }
        let (stat, written) = (entry.stat, entry.written);
        let id = self.create(entry.parent, entry.name, stat, batch, backend);
        // A new hard link: the other names of the file see what this one saw (one compare
        // records it for them all).
        if let Some(link) = self
            .other_names(id)
            .into_iter()
            .find(|&other| self.tree.attached(other))
        {
            self.compare(link, stat, written, false, batch);
        }
    }

    /// A recorded node found at a new name.
    fn moved(
        &mut self,
        id: NodeId,
        entry: &Appeared,
        batch: &mut Batch,
        backend: &mut dyn Backend,
    ) {
        let (parent, name) = {
            let node = self.tree.node(id);
            (node.parent, node.name.clone())
        };
        // It may hang inside a subtree that left: its place then was where it hangs.
        batch.before.entry(id).or_insert(Some((parent, name)));
        self.tree.detach(id);
        batch.limbo.remove(&id);
        self.tree.attach(id, entry.parent, entry.name.clone());
        self.compare(id, entry.stat, entry.written, true, batch);
        if entry.stat.kind == Kind::Dir {
            let path = self.tree.path(id);
            let wanted = self.wants_watch(&path);
            if self.reporter.moves_unprune() {
                // A filter of longer patterns can prune or want a directory inside for the
                // new name it has through this one.
                for inner in self.tree.descendants(id) {
                    let node = self.tree.node(inner);
                    if node.stat.kind != Kind::Dir {
                        continue;
                    }
                    let path = self.tree.path(inner);
                    match (node.watched, self.wants_watch(&path)) {
                        (false, true) => self.watch_new(inner, &path, backend),
                        (true, false) => batch.pruned.push(inner),
                        _ => {}
                    }
                }
            }
            let node = self.tree.node(id);
            if node.watched && !wanted {
                batch.pruned.push(id);
            } else if wanted && !node.watched {
                self.watch_new(id, &path, backend);
            } else if node.watched
                // A backend that cannot tell names a moved directory's changes by old
                // paths (the `notify` crate): it is listed again where it is now.
                && (batch.waiting.remove(&id) || backend.same_dir(&path, id).is_none())
            {
                self.dirty.insert(id);
            }
        }
    }

    /// Watches (and lists) a directory that is wanted but has no watch yet: one whose
    /// watch could not be made where it was a moment before.
    fn ensure_watched(&mut self, id: NodeId, backend: &mut dyn Backend) {
        let node = self.tree.node(id);
        if node.stat.kind == Kind::Dir && !node.watched {
            let path = self.tree.path(id);
            if self.wants_watch(&path) {
                self.watch_new(id, &path, backend);
            }
        }
    }

    fn wants_watch(&self, path: &Path) -> bool {
        self.recursive && !self.reporter.prunes_dir(path)
    }

    /// Watches a directory, then marks it for listing.
    fn watch_new(&mut self, id: NodeId, path: &Path, backend: &mut dyn Backend) {
        let watched = backend.watch(path, id).and_then(|()| {
            // The watch is of whatever is at the path now: the object listed a moment ago
            // may have moved on, and another taken its name.
            let stat = self.tree.node(id).stat;
            match list::lstat(path) {
                Ok(now) if now.same_object(&stat) => {
                    // A mode set between the listing and the watch: the top of a mounted
                    // filesystem tells it to its own watch only, made too late for it.
                    if now.mode != stat.mode {
                        self.hint_own_entry(id);
                    }
                    Ok(())
                }
                _ => {
                    backend.forget(id);
                    Err(WatchFailure::Gone)
                }
            }
        });
        match watched {
            Ok(()) => {
                self.tree.node_mut(id).watched = true;
                self.dirty.insert(id);
                if !self.tree.node(id).children.is_empty() {
                    self.watched_anew.insert(id);
                }
            }
            Err(WatchFailure::Gone) => {
                // Moved or removed since its directory was read (the path was that of a
                // moment ago): its name is read again (whatever inode number is there now),
                // and the watch made where it is.
                self.hint_gone(id);
            }
            Err(failure) => self.cannot_watch(path, failure),
        }
    }

    /// What happens inside the directory at `path` is not seen: told once per batch as lost
    /// events (or, in the first crawl, as the watch failing to start).
    fn cannot_watch(&mut self, path: &Path, failure: WatchFailure) {
        if self.unwatched.is_none() {
            match &failure {
                WatchFailure::Limit => {
                    tracing::warn!(dir = %path.display(), "the watch limit is reached")
                }
                other => {
                    tracing::warn!(dir = %path.display(), error = ?other, "cannot watch a directory")
                }
            }
            if self.reporting {
                self.reporter.overflow();
            }
            self.unwatched = Some(failure);
        }
    }

    fn create(
        &mut self,
        parent: NodeId,
        name: OsString,
        stat: Stat,
        batch: &mut Batch,
        backend: &mut dyn Backend,
    ) -> NodeId {
        let racy = self.racy(&stat);
        let id = self.tree.insert(parent, name, stat, racy);
        if let Some(at) = racy {
            self.racy_nodes.push_back((at, id));
        }
        batch.before.insert(id, None);
        if stat.kind == Kind::Dir {
            let path = self.tree.path(id);
            if self.wants_watch(&path) {
                self.watch_new(id, &path, backend);
            }
        }
        id
    }

    /// Settles the batch (files replaced in place, what left for good) and emits it.
    fn finish(&mut self, mut batch: Batch, backend: &mut dyn Backend) {
        // A file that left its name with a new file there and found nowhere else was
        // replaced in place (an atomic save): the same entry, modified.
        let mut left_from: HashMap<(NodeId, OsString), NodeId> = HashMap::new();
        for &id in &batch.limbo {
            if let Some(Some(place)) = batch.before.get(&id)
                && matches!(self.tree.node(id).stat.kind, Kind::File | Kind::Other)
            {
                left_from.insert(place.clone(), id);
            }
        }
        if !left_from.is_empty() {
            let new: Vec<NodeId> = batch
                .before
                .iter()
                .filter(|(_, place)| place.is_none())
                .map(|(&id, _)| id)
                .collect();
            for id in new {
                let node = self.tree.node(id);
                if !matches!(node.stat.kind, Kind::File | Kind::Other) || !self.tree.attached(id) {
                    continue;
                }
                let place = (node.parent, node.name.clone());
                let Some(old) = left_from.remove(&place) else {
                    continue;
                };
                let (stat, racy) = (node.stat, node.racy);
                self.tree.detach(id);
                self.tree.remove_subtree(id);
                batch.before.remove(&id);
                batch.modified.remove(&id);
                batch.limbo.remove(&old);
                self.tree.attach(old, place.0, place.1);
                self.tree.set_stat(old, stat, racy);
                batch.modified.insert(old);
            }
        }
        let gone: Vec<NodeId> = batch.limbo.iter().copied().collect();
        // A file that left with its directory may have been written or changed mode under
        // that name just before: its other hard links show it.
        for &top in &gone {
            for id in std::iter::once(top).chain(self.tree.descendants(top)) {
                if self.hard_linked(id) {
                    self.written(id, &mut batch);
                }
            }
        }
        if self.reporting {
            emit::emit(&self.tree, &batch, &gone, &self.reporter);
        }
        for id in gone {
            self.forget_subtree(id, backend);
        }
        // Nothing below a directory the filter prunes is watched or recorded, wherever it
        // came from: brought back into view, it is listed afresh.
        for id in batch.pruned {
            let Some(node) = self.tree.get(id) else {
                continue;
            };
            if !node.watched || !self.tree.attached(id) || self.wants_watch(&self.tree.path(id)) {
                continue;
            }
            let children: Vec<NodeId> = node.children.values().copied().collect();
            for child in children {
                self.tree.detach(child);
                self.forget_subtree(child, backend);
            }
            backend.forget(id);
            self.tree.node_mut(id).watched = false;
            self.hinted.remove(&id);
            self.dirty.remove(&id);
            self.rebase.remove(&id);
        }
    }

    /// Frees a detached node and what it holds, with their watches.
    fn forget_subtree(&mut self, id: NodeId, backend: &mut dyn Backend) {
        for removed in self.tree.remove_subtree(id) {
            backend.forget(removed);
            self.hinted.remove(&removed);
            self.dirty.remove(&removed);
            self.rebase.remove(&removed);
            self.stale.remove(&removed);
            self.watched_anew.remove(&removed);
        }
    }
}
