//! The engine where there is no inotify: the `notify` crate (FSEvents on macOS) feeds the
//! same [`Reconciler`] as inotify does. The crate watches whole trees itself and names what
//! happened by path; each path marks its nearest recorded directory dirty, and the
//! reconciler re-reads it. Renames, moves and overflows need no handling of their own.
//!
//! What the crate cannot do is said here and in docs/api.md ("Watch engines"): it watches a
//! new directory only after handing over the events that made it, so a directory that
//! appears is read again 0.1 s and 1 s later (what changed inside it in that moment is
//! found then); excluded directories are watched by the crate (their events are dropped,
//! not avoided). A change check is a barrier as with inotify: the engine writes a cookie
//! (a scratch file of fsd's, never reported) in the root and answers once the crate has
//! handed over its event, everything before it reconciled.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use fsd_api::scratch::{self, ScratchKind};
use notify::{RecursiveMode, Watcher as _};

use crate::WatchError;
use crate::catch_up::{CatchUp, Waiter};
use crate::engine::{Engine, Running};
use crate::reconcile::tree::NodeId;
use crate::reconcile::{Backend, Reconciler, RecordedEntry, WatchFailure};
use crate::report::Reporter;

/// When a new directory is read again after it appeared.
const LATE_READS: [Duration; 2] = [Duration::from_millis(100), Duration::from_secs(1)];
/// How long the thread waits for the crate before it looks at its timers.
const TICK: Duration = Duration::from_millis(50);
/// What the crate's channel carries; a catch-up request is sent on it too.
type Message = notify::Result<notify::Event>;
/// The marker of a catch-up request on the crate's channel.
const CATCH_UP: &str = "fsd-catch-up";

/// The engine where there is no inotify, and on Linux when asked for (`--watch-engine
/// notify`).
pub(crate) struct NotifyEngine;

/// The crate watches everything itself: the reconciler's watches are no-ops, and it cannot
/// tell a directory from another with its inode number.
struct CrateBackend {
    /// Directories watched since the last look, to read again later.
    fresh: Vec<NodeId>,
    /// The mount table (see `crate::mounts`), where there is one.
    #[cfg(target_os = "linux")]
    mounts: Option<crate::mounts::MountTable>,
    /// A mount changed the tree since the crate last watched it: it watches it again.
    rewatch: bool,
}

impl Backend for CrateBackend {
    fn watch(&mut self, _path: &Path, node: NodeId) -> Result<(), WatchFailure> {
        self.fresh.push(node);
        Ok(())
    }

    fn forget(&mut self, _node: NodeId) {}

    fn same_dir(&mut self, _path: &Path, _node: NodeId) -> Option<bool> {
        None
    }

    fn mount_gone(&mut self, _path: &Path) {
        #[cfg(target_os = "linux")]
        if let Some(table) = &mut self.mounts {
            table.forget(_path);
        }
    }

    fn mounts_changed(&mut self) -> Vec<PathBuf> {
        #[cfg(target_os = "linux")]
        if let Some(table) = &mut self.mounts {
            let paths = table.changed();
            self.rewatch |= !paths.is_empty();
            return paths;
        }
        Vec::new()
    }
}

impl Engine for NotifyEngine {
    fn start(
        &self,
        root: &Path,
        recursive: bool,
        reporter: Reporter,
        recorded: Option<&[RecordedEntry]>,
    ) -> Result<Running, WatchError> {
        // Read before the tree: a mount made while it is crawled is told after.
        #[cfg(target_os = "linux")]
        let mounts = crate::mounts::MountTable::open(root)
            .inspect_err(|err| tracing::warn!(error = %err, "cannot read the mount table; mounts in watched trees go unseen"))
            .ok();
        let (sender, events) = std::sync::mpsc::channel::<Message>();
        let config = notify::Config::default().with_follow_symlinks(false);
        let mut watcher = notify::RecommendedWatcher::new(sender.clone(), config)?;
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
        let mut backend = CrateBackend {
            fresh: Vec::new(),
            #[cfg(target_os = "linux")]
            mounts,
            rewatch: false,
        };
        let reconciler = Reconciler::start(root, reporter, recursive, &mut backend, recorded)
            .map_err(|failure| failure.starting(root))?;
        backend.fresh.clear();
        let wake = Mutex::new(sender);
        let catch_up = Arc::new(CatchUp::new(move || {
            let event = notify::Event::new(notify::EventKind::Other).set_info(CATCH_UP);
            let _ = wake.lock().map(|sender| sender.send(Ok(event)));
        }));
        let root_object = reconciler.root_object();
        let mut translator = Translator {
            root: root.to_path_buf(),
            mode,
            reconciler,
            backend,
            late: Vec::new(),
            cookies: Vec::new(),
            catch_up: catch_up.clone(),
            watcher,
        };
        // The crate's watcher lives in the translator, on this thread: dropping it ends the
        // crate's watches.
        Ok(Running::spawn(
            root_object,
            None,
            Some(catch_up),
            move |stop| translator.run(&events, stop),
        )?)
    }
}

/// Turns the crate's events into hints for the reconciler.
struct Translator {
    root: PathBuf,
    mode: RecursiveMode,
    reconciler: Reconciler,
    backend: CrateBackend,
    /// New directories to read again, and when.
    late: Vec<(Instant, NodeId)>,
    /// Cookies written (and when), whether each has been seen, and the requests each
    /// answers.
    cookies: Vec<(PathBuf, SystemTime, bool, Vec<Waiter>)>,
    catch_up: Arc<CatchUp>,
    /// The crate's watcher: dropping it ends the crate's watches.
    watcher: notify::RecommendedWatcher,
}

impl Translator {
    fn run(&mut self, events: &Receiver<Message>, stop: &AtomicBool) {
        while !stop.load(Ordering::SeqCst)
            && !self.reconciler.reporter().closed()
            && !self.reconciler.root_gone()
        {
            self.look_at_mounts();
            match events.recv_timeout(TICK) {
                Ok(event) => {
                    self.handle(event);
                    // What else is queued goes into the same reconciliation.
                    while let Ok(event) = events.try_recv() {
                        self.handle(event);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let now = Instant::now();
            self.late.retain(|&(at, node)| {
                if at <= now {
                    self.reconciler.hint(node, None, false);
                    false
                } else {
                    true
                }
            });
            self.reconciler.reconcile(&mut self.backend);
            // A mount the reconciler found while it read (see `Reconciler::look_at_mounts`).
            self.rewatch_after_mounts();
            for node in self.backend.fresh.drain(..) {
                for wait in LATE_READS {
                    self.late.push((now + wait, node));
                }
            }
            self.answer_seen_cookies();
        }
        self.reconciler.reporter().overflow();
        // Closed before any waiting check is let go: a check then sees the watch ended.
        self.reconciler.reporter_mut().close();
        for (cookie, _, _, _) in self.cookies.drain(..) {
            let _ = std::fs::remove_file(cookie);
        }
        self.catch_up.end();
    }

    fn handle(&mut self, event: Message) {
        let event = match event {
            Ok(event) => event,
            Err(err) => {
                tracing::warn!(error = %err, "the notify watcher reported an error");
                self.reconciler.overflowed();
                return;
            }
        };
        if event.info() == Some(CATCH_UP) {
            self.write_cookie();
            return;
        }
        if event.need_rescan() {
            self.reconciler.overflowed();
        }
        // A write is its data events (a close after writing adds nothing, and comes under
        // the name the file has at the close, which may be one it was renamed to).
        let written = matches!(
            event.kind,
            notify::EventKind::Create(_)
                | notify::EventKind::Modify(notify::event::ModifyKind::Data(_))
                | notify::EventKind::Modify(notify::event::ModifyKind::Any)
        );
        if matches!(event.kind, notify::EventKind::Access(_)) {
            return;
        }
        for path in &event.paths {
            if let Some(cookie) = self.cookies.iter_mut().find(|(c, _, _, _)| c == path) {
                // Seen: answered after this batch is reconciled.
                cookie.2 = true;
                continue;
            }
            if scratch::is_scratch(path) {
                // fsd's own scratch files change nothing reported (their rename into
                // place names the target too).
                continue;
            }
            if path == &self.root && matches!(event.kind, notify::EventKind::Remove(_)) {
                // The crate tells the root's own deletion and drops its watch: a root made
                // again at once (perhaps with the same inode number) is watched by nothing,
                // and a check's cookie written there would never be seen.
                self.reconciler.root_deleted();
                continue;
            }
            self.reconciler.hint_path(path, written);
        }
    }

    /// A mount made or taken away in the tree (see `crate::mounts`): the reconciler reads
    /// what it changed, and the crate watches the tree again (its watches are of what the
    /// mount covered or took away). Looked at every tick and before each cookie, so a
    /// check answers for a mount made before it.
    fn look_at_mounts(&mut self) {
        #[cfg(target_os = "linux")]
        if self
            .backend
            .mounts
            .as_ref()
            .is_some_and(|table| table.polled_changed())
        {
            self.reconciler.look_at_mounts(&mut self.backend);
        }
        self.rewatch_after_mounts();
    }

    /// The crate's watches are of what a mount covered or took away: it watches the tree
    /// again (what the reconciler found changed, it reads again as the mount has it).
    fn rewatch_after_mounts(&mut self) {
        if !std::mem::take(&mut self.backend.rewatch) {
            return;
        }
        let _ = self.watcher.unwatch(&self.root);
        if let Err(err) = self.watcher.watch(&self.root, self.mode) {
            tracing::warn!(error = %err, "cannot watch a tree again after a mount");
            self.reconciler.overflowed();
        }
    }

    /// Writes a cookie for the requests waiting now.
    fn write_cookie(&mut self) {
        let waiting = self.catch_up.take();
        if waiting.is_empty() {
            return;
        }
        self.look_at_mounts();
        if waiting.iter().any(|w| matches!(w, Waiter::Reread(..))) {
            CatchUp::mark_rereads(&waiting, &mut self.reconciler);
            self.reconciler.reconcile(&mut self.backend);
        }
        let cookie = scratch::scratch_path(&self.root.join(".fsd-cookie"), ScratchKind::Partial);
        let written = SystemTime::now();
        if std::fs::write(&cookie, b"").is_err() {
            // A root that cannot be written to: answered from what has been seen.
            self.reconciler.reconcile(&mut self.backend);
            for waiter in waiting {
                waiter.answer(&self.reconciler);
            }
            return;
        }
        self.cookies.push((cookie, written, false, waiting));
    }

    /// Answers the requests whose cookie has been seen (everything before it is
    /// reconciled), and those of every cookie written before it.
    fn answer_seen_cookies(&mut self) {
        let Some(last_seen) = self.cookies.iter().rposition(|(_, _, seen, _)| *seen) else {
            return;
        };
        // The crate may not watch a directory made a moment ago yet, so what was made in it
        // has no event: every directory still waiting for its late reads is read now, so
        // the check answers for what is in it.
        if !self.late.is_empty() {
            for &(_, node) in &self.late {
                self.reconciler.hint(node, None, false);
            }
            self.reconciler.reconcile(&mut self.backend);
            let now = Instant::now();
            for node in self.backend.fresh.drain(..) {
                for wait in LATE_READS {
                    self.late.push((now + wait, node));
                }
            }
        }
        for (cookie, written, _, waiting) in self.cookies.drain(..=last_seen) {
            // Everything before the cookie has been handed over and reconciled.
            self.reconciler.settled(written);
            let _ = std::fs::remove_file(&cookie);
            for waiter in waiting {
                waiter.answer(&self.reconciler);
            }
        }
    }
}
