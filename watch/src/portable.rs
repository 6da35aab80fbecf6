//! The engine where there is no inotify: the `notify` crate (FSEvents on macOS). It
//! watches whole trees itself; this module turns its events into fsd's: renames paired by
//! their tracker, a lone rename's origin resolved as a move out after a short wait, new
//! directories scanned (what they hold may predate their watch), fsd's scratch files told
//! as the writes they finish.
//!
//! The crate watches a new or renamed directory only after it has handed over the batch of
//! events that made it, so what happens inside it in that moment is lost or named by the
//! old path. So the engine keeps a map of the tree (kind, size and mtime of every path it
//! reports on). When a directory appears or is renamed, the engine waits until the crate
//! watches it, then reads it and reports how it differs from the map: what appeared,
//! changed or went. Events that name a path by its old name are renamed as the directories
//! were; those that still name a directory the map does not know are dropped (the
//! comparison told what they did). The map also says whether what left was a directory, which the
//! crate does not.
//!
//! Weaker than the inotify engine, and said so in docs/api.md ("Watch engines"): excluded directories are
//! watched (their events are dropped, not avoided); inside a directory created or
//! renamed a moment before, a change made in that moment is found by the comparison (a rename there is a delete and a create, and a
//! rewrite that keeps size and mtime is not seen); where the platform does not pair
//! renames (FSEvents), a rename is a delete and a move in.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, SystemTime};

use notify::event::{ModifyKind, RenameMode};
use notify::{RecursiveMode, Watcher as _};

use crate::engine::{Engine, Running};
use crate::report::Reporter;
use crate::{EventKind, WatchError};

/// Directory renames remembered to rename old paths in the crate's events: it names
/// paths by its own table, which it brings up to date after each batch of events.
const RENAMES_KEPT: usize = 64;
/// How long a rename's origin waits for its destination before it is a move out.
const MOVE_WAIT: Duration = Duration::from_millis(100);

/// The engine where there is no inotify, and on Linux when asked for (`--watch-engine
/// notify`).
pub(crate) struct NotifyEngine;

impl Engine for NotifyEngine {
    fn start(
        &self,
        root: &Path,
        recursive: bool,
        reporter: Reporter,
    ) -> Result<Running, WatchError> {
        let (sender, events) = std::sync::mpsc::channel();
        let config = notify::Config::default().with_follow_symlinks(false);
        let mut watcher = notify::RecommendedWatcher::new(sender, config)?;
        let mode = if recursive {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        watcher.watch(root, mode).map_err(|err| match err.kind {
            notify::ErrorKind::MaxFilesWatch => WatchError::LimitReached {
                path: root.to_path_buf(),
            },
            _ => WatchError::Notify(err),
        })?;
        let mut translator = Translator {
            reporter,
            recursive,
            pending_move: None,
            known: BTreeMap::new(),
            renames: VecDeque::new(),
            root_gone: false,
            watcher,
        };
        translator.learn(root);
        // The crate's watcher lives in the translator, on this thread: dropping it ends the
        // crate's watches.
        Ok(Running::spawn(None, None, move |stop| {
            translator.run(&events, stop)
        })?)
    }
}

/// What the map knows of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    is_dir: bool,
    len: u64,
    modified: Option<SystemTime>,
}

impl Entry {
    fn of(meta: &std::fs::Metadata) -> Entry {
        Entry {
            is_dir: meta.is_dir(),
            len: if meta.is_dir() { 0 } else { meta.len() },
            modified: meta.modified().ok(),
        }
    }

    /// `path` as it is now (a symlink itself, not what it points to).
    fn at(path: &Path) -> Option<Entry> {
        std::fs::symlink_metadata(path)
            .ok()
            .map(|meta| Entry::of(&meta))
    }
}

/// Turns the crate's events into fsd's.
struct Translator {
    reporter: Reporter,
    recursive: bool,
    /// A rename's origin waiting for its destination: (tracker, path).
    pending_move: Option<(Option<usize>, PathBuf)>,
    /// Every path of the tree the engine reports on (excluded directories' contents left
    /// out). Sorted, so what is below a directory is one range.
    known: BTreeMap<PathBuf, Entry>,
    /// The last directory renames, oldest first, to name what the crate calls by an old
    /// path as it is now.
    renames: VecDeque<(PathBuf, PathBuf)>,
    /// The root was deleted or moved away: an overflow is reported and the watch ends.
    root_gone: bool,
    watcher: notify::RecommendedWatcher,
}

impl Translator {
    fn run(&mut self, events: &Receiver<notify::Result<notify::Event>>, stop: &AtomicBool) {
        while !stop.load(Ordering::SeqCst) && !self.reporter.closed() && !self.root_gone {
            match events.recv_timeout(MOVE_WAIT) {
                Ok(event) => self.handle(event),
                Err(RecvTimeoutError::Timeout) => self.flush_move(),
                Err(RecvTimeoutError::Disconnected) => {
                    self.reporter.overflow();
                    return;
                }
            }
        }
    }

    fn handle(&mut self, event: notify::Result<notify::Event>) {
        let event = match event {
            Ok(event) => event,
            Err(err) => {
                // A watch limit or a read error: events may be missing.
                tracing::warn!(error = %err, "the notify engine lost events");
                self.flush_move();
                self.reporter.overflow();
                return;
            }
        };
        if event.need_rescan() {
            self.flush_move();
            self.reporter.overflow();
            return;
        }
        let Some(path) = event.paths.first().map(|path| self.resolve(path)) else {
            return;
        };
        let renamed_to = matches!(
            event.kind,
            notify::EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both))
        );
        if !renamed_to {
            self.flush_move();
        }
        let leaves = matches!(
            event.kind,
            notify::EventKind::Remove(_)
                | notify::EventKind::Modify(ModifyKind::Name(RenameMode::From))
        );
        if leaves && path == self.reporter.root() {
            self.reporter.overflow();
            self.root_gone = true;
            return;
        }
        match event.kind {
            notify::EventKind::Create(kind) => {
                let is_dir = kind == notify::event::CreateKind::Folder;
                self.appeared(path, EventKind::Create, is_dir);
            }
            notify::EventKind::Modify(ModifyKind::Name(RenameMode::From)) => {
                self.pending_move = Some((event.tracker(), path));
            }
            notify::EventKind::Modify(ModifyKind::Name(RenameMode::To)) => {
                match self.pending_move.take() {
                    Some((Some(tracker), from)) if event.tracker() == Some(tracker) => {
                        self.renamed(from, path);
                    }
                    other => {
                        self.pending_move = other;
                        self.flush_move();
                        self.appeared(path, EventKind::MoveIn, false);
                    }
                }
            }
            // The crate also sends both paths after the destination; the pair is made above.
            notify::EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {}
            // A platform that does not pair renames: each side on its own.
            notify::EventKind::Modify(ModifyKind::Name(_)) => {
                if Entry::at(&path).is_some() {
                    self.appeared(path, EventKind::MoveIn, false);
                } else {
                    self.left(path, false);
                }
            }
            notify::EventKind::Modify(ModifyKind::Metadata(_)) => {
                self.changed(path, EventKind::Attrib);
            }
            notify::EventKind::Modify(_) => self.changed(path, EventKind::Modify),
            notify::EventKind::Remove(_) => self.left(path, true),
            notify::EventKind::Access(_) | notify::EventKind::Any | notify::EventKind::Other => {}
        }
    }

    /// `path` as it is named now: a path the map neither knows nor could hold (its
    /// directory is unknown) is an old name inside a renamed directory, renamed as the
    /// directories were since.
    fn resolve(&self, path: &Path) -> PathBuf {
        if self.known.contains_key(path) || self.current(path) {
            return path.to_path_buf();
        }
        let mut now = path.to_path_buf();
        for (from, to) in &self.renames {
            if let Ok(rest) = now.strip_prefix(from) {
                now = to.join(rest);
            }
        }
        if self.known.contains_key(&now) || self.current(&now) {
            now
        } else {
            path.to_path_buf()
        }
    }

    /// Whether an event about `path` names it as it is now: its directory is one the map
    /// knows. The crate names what happens inside a directory renamed a moment before by
    /// the old path (that directory is known under its new name only); such an event is
    /// dropped, and the comparison of the renamed directory tells what it did.
    fn current(&self, path: &Path) -> bool {
        path.parent()
            .and_then(|parent| self.known.get(parent))
            .is_some_and(|parent| parent.is_dir)
    }

    /// What is at `path` now; when it is gone already (events are handled a moment late),
    /// what the map or the event says (`is_dir`).
    fn entry(&self, path: &Path, is_dir: bool) -> Entry {
        Entry::at(path)
            .or_else(|| self.known.get(path).copied())
            .unwrap_or(Entry {
                is_dir,
                len: 0,
                modified: None,
            })
    }

    /// Something is now at `path` (created, or moved in from outside the tree). A
    /// directory is compared with the map once the crate watches it: what it holds was
    /// there before.
    fn appeared(&mut self, path: PathBuf, kind: EventKind, is_dir: bool) {
        if !self.current(&path) {
            return;
        }
        let entry = self.entry(&path, is_dir);
        // A comparison may have reported it already.
        let seen = self
            .known
            .get(&path)
            .is_some_and(|known| known.is_dir == entry.is_dir);
        self.known.insert(path.clone(), entry);
        if !seen || kind == EventKind::MoveIn {
            self.reporter.report(kind, path.clone(), entry.is_dir);
        }
        if entry.is_dir {
            self.compare_now(path);
        }
    }

    /// Contents or metadata of a path changed.
    fn changed(&mut self, path: PathBuf, kind: EventKind) {
        if !self.known.contains_key(&path) && !self.current(&path) {
            return;
        }
        let entry = self.entry(&path, false);
        self.known.insert(path.clone(), entry);
        self.reporter.report(kind, path, entry.is_dir);
    }

    /// A rename inside the tree: what the map holds below it moves, one event, and a
    /// renamed directory is compared with the map once the crate watches its new name.
    /// A side named by an old path is told by what the map knows: an origin it does not
    /// know makes the destination a move in (unless a comparison found that directory
    /// there already); a destination in a directory it does not know makes the origin a
    /// move out, and the comparison of the directory really holding it reports it there.
    /// fsd's scratch files are often gone before their creation is handled: their rename
    /// is the write it finishes, known or not.
    fn renamed(&mut self, from: PathBuf, to: PathBuf) {
        if !self.current(&to) {
            self.left(from, false);
            return;
        }
        let scratch = self.reporter.finishes_write(&from);
        if !self.known.contains_key(&from) && !scratch {
            let found = self.known.get(&to).is_some_and(|known| known.is_dir);
            if !(found && Entry::at(&to).is_some_and(|now| now.is_dir)) {
                self.appeared(to, EventKind::MoveIn, false);
            }
            return;
        }
        let moved = self.take_below(&from);
        let is_dir = match moved.first() {
            Some((path, entry)) if *path == from => entry.is_dir,
            _ => Entry::at(&to).is_some_and(|now| now.is_dir),
        };
        self.take_below(&to);
        for (path, entry) in moved {
            if let Ok(rest) = path.strip_prefix(&from) {
                self.known.insert(to.join(rest), entry);
            }
        }
        let entry = self.entry(&to, is_dir);
        self.known.insert(to.clone(), entry);
        self.reporter.renamed(from.clone(), to.clone(), is_dir);
        if is_dir {
            if self.renames.len() == RENAMES_KEPT {
                self.renames.pop_front();
            }
            self.renames.push_back((from, to.clone()));
            self.compare_now(to);
        }
    }

    /// Deleted (`deleted`), or moved out of the tree. A path the map does not know was
    /// reported gone already (by a comparison) or never reported. A deleted directory's
    /// contents went first; what of them the map still holds lost its events in a
    /// rename's moment, so it is reported deleted too, deepest first, as the kernel tells
    /// `rm -r`.
    fn left(&mut self, path: PathBuf, deleted: bool) {
        let gone = self.take_below(&path);
        let Some((_, entry)) = gone.first().filter(|(p, _)| *p == path) else {
            return;
        };
        let is_dir = entry.is_dir;
        if deleted {
            for (below, entry) in gone.iter().skip(1).rev() {
                self.reporter
                    .report(EventKind::Delete, below.clone(), entry.is_dir);
            }
        }
        self.reporter.report(EventKind::Delete, path, is_dir);
    }

    /// A rename's origin whose destination never came: the path left the tree.
    fn flush_move(&mut self) {
        if let Some((_, from)) = self.pending_move.take() {
            self.left(from, false);
        }
    }

    /// A directory appeared or was renamed: once the crate watches it, it is compared with
    /// the map, and anything later is an event. The crate adds the watches a batch of
    /// events asks for before it reads its next request, so a request that does nothing
    /// (unwatching a path never watched) returns when they are in place.
    fn compare_now(&mut self, dir: PathBuf) {
        if !self.recursive || self.reporter.prunes_dir(&dir) {
            return;
        }
        let _ = self.watcher.unwatch(Path::new(""));
        self.compare_with_map(&dir);
    }

    /// Reads `dir` and reports how it differs from the map: what appeared, changed or
    /// went while the crate was not watching it.
    fn compare_with_map(&mut self, dir: &Path) {
        if Entry::at(dir).is_none_or(|entry| !entry.is_dir) {
            // Gone or replaced since: its own events tell it.
            return;
        }
        let mut before: BTreeMap<PathBuf, Entry> = self.take_below(dir).into_iter().collect();
        before.remove(dir);
        self.learn(dir);
        let now: Vec<(PathBuf, Entry)> = self
            .known
            .range(dir.to_path_buf()..)
            .take_while(|(p, _)| p.starts_with(dir))
            .filter(|(p, _)| *p != dir)
            .map(|(p, entry)| (p.clone(), *entry))
            .collect();
        for (path, entry) in &now {
            match before.get(path) {
                None => self
                    .reporter
                    .report(EventKind::Create, path.clone(), entry.is_dir),
                Some(old) if old.is_dir != entry.is_dir => {
                    self.reporter
                        .report(EventKind::Delete, path.clone(), old.is_dir);
                    self.reporter
                        .report(EventKind::Create, path.clone(), entry.is_dir);
                }
                Some(old) if !entry.is_dir && old != entry => {
                    self.reporter.report(EventKind::Modify, path.clone(), false);
                }
                Some(_) => {}
            }
        }
        let present: HashSet<&PathBuf> = now.iter().map(|(p, _)| p).collect();
        for (path, old) in before.iter().rev() {
            if !present.contains(path) {
                self.reporter
                    .report(EventKind::Delete, path.clone(), old.is_dir);
            }
        }
    }

    /// Records `dir` and everything below it (not inside excluded directories).
    fn learn(&mut self, dir: &Path) {
        if let Some(entry) = Entry::at(dir) {
            self.known.insert(dir.to_path_buf(), entry);
        }
        let mut pending = vec![dir.to_path_buf()];
        while let Some(dir) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for found in entries.flatten() {
                let path = found.path();
                let Some(entry) = Entry::at(&path) else {
                    continue;
                };
                self.known.insert(path.clone(), entry);
                if entry.is_dir && self.recursive && !self.reporter.prunes_dir(&path) {
                    pending.push(path);
                }
            }
        }
    }

    /// Removes `path` and everything below it from the map; returns them, `path` first.
    fn take_below(&mut self, path: &Path) -> Vec<(PathBuf, Entry)> {
        let below: Vec<PathBuf> = self
            .known
            .range(path.to_path_buf()..)
            .take_while(|(p, _)| p.starts_with(path))
            .map(|(p, _)| p.clone())
            .collect();
        below
            .into_iter()
            .filter_map(|p| self.known.remove(&p).map(|entry| (p, entry)))
            .collect()
    }
}
