//! Watched roots: one engine and journal per (path, recursive, include, exclude), shared by
//! every SSE subscriber and token holder. A root held only by subscribers stops when the last
//! one leaves; one used for tokens is retained and expires after 10 idle minutes without
//! subscribers (as in the reference).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fsd_watch::{Event, Filter, Watcher};
use tokio::sync::broadcast;

use super::journal::Journal;

/// How long a retained root without subscribers lives after its last use.
pub const IDLE_TTL: Duration = Duration::from_secs(600);

/// What identifies a watch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WatchKey {
    pub path: PathBuf,
    pub recursive: bool,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

pub struct Root {
    pub id: String,
    pub path: PathBuf,
    journal: Mutex<Journal>,
    live: broadcast::Sender<Event>,
    subscribers: AtomicUsize,
    retained: AtomicBool,
    last_used: Mutex<Instant>,
    _watcher: Watcher,
}

impl Root {
    pub fn journal(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
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
}

impl WatchService {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<WatchKey, Arc<Root>>> {
        self.roots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The root for `key`, started if needed; `true` when this call started it.
    pub fn get_or_start(
        &self,
        key: &WatchKey,
        filter: Filter,
    ) -> Result<(Arc<Root>, bool), fsd_watch::WatchError> {
        let mut roots = self.table();
        if let Some(root) = roots.get(key) {
            return Ok((root.clone(), false));
        }
        let (watcher, mut events) = Watcher::start(&key.path, filter, key.recursive)?;
        let number = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let root = Arc::new(Root {
            id: format!("watch-{number}-{millis}"),
            path: key.path.clone(),
            journal: Mutex::default(),
            live: broadcast::channel(4096).0,
            subscribers: AtomicUsize::new(0),
            retained: AtomicBool::new(false),
            last_used: Mutex::new(Instant::now()),
            _watcher: watcher,
        });
        let pumped = Arc::downgrade(&root);
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let Some(root) = pumped.upgrade() else { return };
                root.journal().record(event.clone());
                let _ = root.live.send(event);
            }
        });
        roots.insert(key.clone(), root.clone());
        Ok((root, true))
    }

    pub fn subscribe(self: &Arc<Self>, root: Arc<Root>) -> Subscription {
        root.subscribers.fetch_add(1, Ordering::SeqCst);
        let events = root.live.subscribe();
        Subscription {
            root,
            events,
            service: self.clone(),
        }
    }

    /// Marks a root as used for tokens, so it outlives its subscribers.
    pub fn retain(&self, root: &Root) {
        root.retained.store(true, Ordering::SeqCst);
        root.touch();
    }

    fn release_if_unused(&self, root: &Arc<Root>) {
        if !root.retained.load(Ordering::SeqCst) && root.subscribers.load(Ordering::SeqCst) == 0 {
            self.table().retain(|_, r| !Arc::ptr_eq(r, root));
        }
    }

    /// Drops retained roots idle past the TTL (run periodically).
    pub fn expire_idle(&self) {
        let now = Instant::now();
        self.table().retain(|_, root| {
            let idle =
                now.duration_since(*root.last_used.lock().unwrap_or_else(|p| p.into_inner()));
            root.subscribers.load(Ordering::SeqCst) > 0 || idle < IDLE_TTL
        });
    }

    /// Stops every watch (daemon shutdown).
    pub fn shutdown(&self) {
        self.table().clear();
    }
}
