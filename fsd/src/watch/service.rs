//! Watched roots: one engine and journal per (path, recursive, include, exclude), shared by
//! every SSE subscriber and token holder. A root held only by subscribers stops when the last
//! one leaves; one used for tokens is retained and expires after 10 idle minutes without
//! subscribers (as in the reference).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fsd_search::{Refused, Within};
use fsd_watch::{EngineKind, Event, Filter, RecordedEntry, Watcher};
use nix::fcntl::OFlag;
use tokio::sync::{broadcast, mpsc, oneshot};

use super::journal::{Journal, Saved};
use super::key::WatchKey;
use super::persist;

/// How long a retained root without subscribers lives after its last use.
pub const IDLE_TTL: Duration = Duration::from_secs(600);
/// How long a token check waits for the watch to catch up with the tree before it answers
/// from what the journal holds.
const CATCH_UP_WAIT: Duration = Duration::from_secs(5);
/// Cursors skipped after a restart: tokens handed out after the last save fall in the
/// gap and are answered with a resync.
const RESTART_GAP: u64 = 1_000_000;

pub struct Root {
    pub id: String,
    pub path: PathBuf,
    key: WatchKey,
    /// The journal cursor at the last save (`u64::MAX`: never saved).
    saved_cursor: AtomicU64,
    journal: Mutex<Journal>,
    live: broadcast::Sender<Event>,
    subscribers: AtomicUsize,
    retained: AtomicBool,
    last_used: Mutex<Instant>,
    /// The engine ended (its root was deleted or moved away); the next call replaces it.
    ended: AtomicBool,
    /// Asks the task that feeds the journal to answer once it has journaled what the
    /// engine has sent.
    journaled: mpsc::UnboundedSender<oneshot::Sender<()>>,
    watcher: Watcher,
}

impl Root {
    pub fn journal(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Whether the engine ended (the root was deleted or moved away).
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// Resolves once every change made to the tree before this call is in the journal (or
    /// the watch has ended, its overflow journaled), so a token check answers for the
    /// tree as it is, not for the part of the kernel's queue read so far. Gives up after
    /// [`CATCH_UP_WAIT`] (a tree so busy the engine cannot keep up); the journal then
    /// answers for what it holds, as it would without this.
    pub async fn caught_up(&self) {
        let points = written_elsewhere_below(&self.path);
        let journaled = async {
            self.watcher.caught_up_reading(points).await;
            let (done, answer) = oneshot::channel();
            if self.journaled.send(done).is_ok() {
                let _ = answer.await;
            }
        };
        if tokio::time::timeout(CATCH_UP_WAIT, journaled)
            .await
            .is_err()
        {
            tracing::warn!(root = %self.id, "the watch did not catch up with its tree in time");
        }
    }
}

/// Filesystems others write without an event reaching this kernel: a bucket (s3fs,
/// rclone, gcsfuse; fsd's own mounts are known by their source), a network share. inotify
/// tells only what is done through the mount here, so a token check looks at what is below
/// their mount points again.
const WRITTEN_ELSEWHERE: &[&str] = &[
    "fuse.s3fs",
    "fuse.rclone",
    "fuse.gcsfuse",
    "fuse.sshfs",
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "9p",
    "ceph",
];

/// The mount points at or below `root` of filesystems others write ([`WRITTEN_ELSEWHERE`]).
fn written_elsewhere_below(root: &Path) -> Vec<PathBuf> {
    let Ok(table) = std::fs::read("/proc/self/mountinfo") else {
        return Vec::new();
    };
    fsd_api::mountinfo::parse(&table)
        .into_iter()
        .filter(|mount| {
            // fsd's own bucket mounts read as plain `fuse`, known by their source.
            let bucket = mount.source.starts_with(fsd_mounts::mount::SOURCE_PREFIX);
            mount.target.starts_with(root)
                && (bucket || WRITTEN_ELSEWHERE.contains(&mount.fstype.as_str()))
        })
        .map(|mount| mount.target)
        .collect()
}

/// What a caller of [`WatchService::get_or_start`] keeps the root for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Change tokens: the root outlives its subscribers (until it idles out).
    Retain,
    /// A live stream: the root lives while its [`Subscription`] does.
    Subscribe,
}

impl Hold {
    fn apply(self, root: &Root) {
        match self {
            Hold::Retain => {
                root.retained.store(true, Ordering::SeqCst);
                root.touch();
            }
            Hold::Subscribe => {
                root.subscribers.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

/// Keeps a subscriber counted while its SSE stream lives.
pub struct Subscription {
    pub root: Arc<Root>,
    pub events: broadcast::Receiver<Event>,
    service: Arc<WatchService>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if self.root.subscribers.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.root.touch();
            self.service.release_if_unused(&self.root);
        }
    }
}

#[derive(Default)]
pub struct WatchService {
    roots: Mutex<HashMap<WatchKey, Arc<Root>>>,
    counter: AtomicU64,
    /// Where retained roots are saved; `None`: tokens do not survive restarts.
    saved_dir: Option<PathBuf>,
    /// Lines in one change list; more is a resync.
    max_changes: usize,
    /// What watches the trees.
    engine: EngineKind,
    /// The workspace held open: a watch is of the workspace, so the directory each one
    /// starts on is checked to be the one opened beneath it.
    workspace: Option<Arc<Within>>,
}

impl WatchService {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<WatchKey, Arc<Root>>> {
        self.roots.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn new(saved_dir: Option<PathBuf>, max_changes: usize, engine: EngineKind) -> Self {
        Self {
            saved_dir,
            max_changes,
            engine,
            ..Self::default()
        }
    }

    /// Checks every watch's directory against `workspace` (held open), so a directory swapped
    /// for a link out while a watch starts is refused instead of watched.
    pub fn within(mut self, workspace: Arc<Within>) -> Self {
        self.workspace = Some(workspace);
        self
    }

    /// The root for `key`, started if needed, and held as `hold` says before the table is
    /// let go (so a subscriber leaving at the same moment cannot drop it in between);
    /// `true` when this call started the key's watch from nothing (`false` when it
    /// replaced one whose directory went away: a token of that one was not lost to an
    /// expiry or a restart, its directory was replaced).
    pub fn get_or_start(
        &self,
        key: &WatchKey,
        filter: Filter,
        hold: Hold,
    ) -> Result<(Arc<Root>, bool), fsd_watch::WatchError> {
        let mut roots = self.table();
        let mut replaced = false;
        if let Some(root) = roots.get(key) {
            if !root.ended.load(Ordering::SeqCst) {
                hold.apply(root);
                return Ok((root.clone(), false));
            }
            // The watched directory went away: a token of the old root gets a resync, and
            // the key watches the directory now at the path (if there is one).
            roots.remove(key);
            replaced = true;
        }
        let number = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let root = start_root(
            self.engine,
            key,
            filter,
            format!("watch-{number}-{millis}"),
            Journal::new(self.max_changes),
            self.workspace.as_deref(),
            None,
        )?;
        hold.apply(&root);
        roots.insert(key.clone(), root.clone());
        Ok((root, !replaced))
    }

    /// Restarts the retained watches of the last run under their ids and journals what
    /// changed while the daemon was down.
    pub fn restore(&self) {
        let Some(dir) = &self.saved_dir else { return };
        for saved_watch in persist::load_all(dir) {
            let filter = match Filter::new(&saved_watch.key.include, &saved_watch.key.exclude) {
                Ok(filter) if saved_watch.key.path.is_dir() => filter,
                _ => {
                    let _ = std::fs::remove_file(&saved_watch.file);
                    continue;
                }
            };
            let saved_cursor = saved_watch.saved.cursor;
            let journal = Journal::restored(saved_watch.saved, RESTART_GAP, self.max_changes);
            // Saved once the watch runs, as it is before the restart's changes are
            // journaled: the record loaded, exact at the journal's saved cursor, with the
            // cursors this run begins after and the range before them unknown. A crash
            // before the next save then restores this (not the old saved watch again, which
            // would hand out, after the same gap, cursors this run already handed out),
            // and the engine finds all that changed since the record, this run's changes
            // with it.
            let gap = journal.save();
            let recorded = persist::recorded(&saved_watch.index, &saved_watch.key.path);
            // The engine starts from the record: its first events, journaled in order
            // before any later one, are what changed while the daemon was down.
            let started = start_root(
                self.engine,
                &saved_watch.key,
                filter,
                saved_watch.id,
                journal,
                self.workspace.as_deref(),
                Some(&recorded),
            );
            let root = match started {
                Ok(root) => root,
                Err(err) => {
                    tracing::warn!(path = %saved_watch.key.path.display(), error = %err, "cannot restore a watch");
                    continue;
                }
            };
            tracing::info!(path = %root.path.display(), saved_cursor, entries = recorded.len(), "restored a watch");
            save_root(dir, &root, saved_watch.index, gap);
            root.retained.store(true, Ordering::SeqCst);
            self.table().insert(saved_watch.key, root);
        }
    }

    /// Saves retained roots whose journal moved since the last save (all of them
    /// with `force`). Blocking: waits for each engine's record of its tree.
    pub fn save(&self, force: bool) {
        let Some(dir) = &self.saved_dir else { return };
        let roots: Vec<Arc<Root>> = self
            .table()
            .values()
            .filter(|r| r.retained.load(Ordering::SeqCst))
            .cloned()
            .collect();
        let runtime = tokio::runtime::Handle::try_current().ok();
        for root in roots {
            if !force && root.saved_cursor.load(Ordering::SeqCst) == root.journal().cursor() {
                continue;
            }
            match quiet_index(&root, runtime.as_ref()) {
                Some((index, saved)) => save_root(dir, &root, index, saved),
                None => tracing::info!(
                    path = %root.path.display(),
                    "the tree kept changing while its record was taken: its last save is kept"
                ),
            }
        }
    }

    /// The subscription of a root got with [`Hold::Subscribe`] (already counted).
    pub fn subscription(self: &Arc<Self>, root: Arc<Root>) -> Subscription {
        let events = root.live.subscribe();
        Subscription {
            root,
            events,
            service: self.clone(),
        }
    }

    /// Drops `root` from the table when nothing holds it; decided under the table's lock,
    /// where every hold is taken.
    fn release_if_unused(&self, root: &Arc<Root>) {
        let mut table = self.table();
        if !root.retained.load(Ordering::SeqCst) && root.subscribers.load(Ordering::SeqCst) == 0 {
            table.retain(|_, r| !Arc::ptr_eq(r, root));
        }
    }

    /// Drops retained roots idle past the TTL, and their saved files (run periodically).
    pub fn expire_idle(&self) {
        let now = Instant::now();
        let saved_dir = self.saved_dir.clone();
        self.table().retain(|key, root| {
            let idle =
                now.duration_since(*root.last_used.lock().unwrap_or_else(|p| p.into_inner()));
            let keep = root.subscribers.load(Ordering::SeqCst) > 0 || idle < IDLE_TTL;
            if !keep && let Some(dir) = &saved_dir {
                let _ = std::fs::remove_file(persist::file_for(dir, key));
            }
            keep
        });
    }

    /// Saves every retained watch and stops them all (daemon shutdown).
    pub fn shutdown(&self) {
        self.save(true);
        self.table().clear();
    }
}

/// Records of one save taken before it gives up (a tree that never stops changing).
const SAVE_TRIES: usize = 3;

/// The engine's record of `root`'s tree and the journal it is exact for: taken between
/// two catch-ups that journaled nothing, so the record is the tree the journal's events
/// leave. A restart starts the engine from the record and journals what it tells after
/// the saved journal: with a record older than the journal, a change the journal already
/// holds would be told twice (a file made again over itself, whose later move then keeps
/// the old one at its name) and a file made and removed after the record would be in the
/// journal and in no tree. `None` when every try saw a change (`runtime`: where the
/// catch-ups run; without one, nothing is known to be journaled).
fn quiet_index(
    root: &Root,
    runtime: Option<&tokio::runtime::Handle>,
) -> Option<(Vec<persist::IndexEntry>, Saved)> {
    let runtime = runtime?;
    for _ in 0..SAVE_TRIES {
        runtime.block_on(root.caught_up());
        let before = root.journal().cursor();
        let recorded = runtime.block_on(root.watcher.record())?;
        runtime.block_on(root.caught_up());
        let saved = root.journal().save();
        if saved.cursor == before {
            return Some((persist::index(recorded, &root.path), saved));
        }
    }
    None
}

/// Saves `root`: `index`, the tree as it was at `saved`'s cursor.
fn save_root(dir: &Path, root: &Root, index: Vec<persist::IndexEntry>, saved: Saved) {
    match persist::save(dir, &root.key, &root.id, &saved, index) {
        Ok(()) => root.saved_cursor.store(saved.cursor, Ordering::SeqCst),
        Err(err) => {
            tracing::warn!(path = %root.path.display(), error = %err, "cannot save a watch")
        }
    }
}

/// Starts the engine for `key` and the task that feeds its journal and subscribers. With
/// `workspace`, the directory the engine recorded must be the one opened beneath it at the
/// key's path: the path is resolved before the engine starts, and a link swapped in
/// between would have it watch (and list) a directory outside.
fn start_root(
    engine: EngineKind,
    key: &WatchKey,
    filter: Filter,
    id: String,
    journal: Journal,
    workspace: Option<&Within>,
    recorded: Option<&[RecordedEntry]>,
) -> Result<Arc<Root>, fsd_watch::WatchError> {
    let inside = |watcher: &Watcher| {
        let Some(within) = workspace else {
            return true;
        };
        within
            .open_with(&key.path, OFlag::O_PATH | OFlag::O_DIRECTORY)
            .and_then(|dir| dir.metadata().map_err(Refused::Io))
            .is_ok_and(|meta| (meta.dev(), meta.ino()) == watcher.root_object())
    };
    let (watcher, mut events) =
        Watcher::resume_with(engine, &key.path, filter, key.recursive, recorded)?;
    if !inside(&watcher) {
        return Err(fsd_watch::WatchError::Elsewhere(key.path.clone()));
    }
    let (journaled, mut waiting) = mpsc::unbounded_channel::<oneshot::Sender<()>>();
    let root = Arc::new(Root {
        id,
        path: key.path.clone(),
        key: key.clone(),
        saved_cursor: AtomicU64::new(u64::MAX),
        journal: Mutex::new(journal),
        live: broadcast::channel(4096).0,
        subscribers: AtomicUsize::new(0),
        retained: AtomicBool::new(false),
        last_used: Mutex::new(Instant::now()),
        ended: AtomicBool::new(false),
        journaled,
        watcher,
    });
    let pumped = Arc::downgrade(&root);
    tokio::spawn(async move {
        loop {
            // Events first: a request is answered only when none is waiting, so every event
            // the engine sent before it is journaled.
            tokio::select! {
                biased;
                event = events.recv() => {
                    let Some(event) = event else { break };
                    let Some(root) = pumped.upgrade() else { return };
                    tracing::trace!(root = %root.id, kind = ?event.kind, path = %event.path.display(), from = ?event.from, "journaled");
                    root.journal().record(event.clone());
                    let _ = root.live.send(event);
                }
                Some(done) = waiting.recv() => {
                    let _ = done.send(());
                }
            }
        }
        if let Some(root) = pumped.upgrade() {
            root.ended.store(true, Ordering::SeqCst);
        }
    });
    Ok(root)
}
