//! The inotify engine: one thread per watched root owns the inotify instance and a
//! [`Reconciler`]. Each kernel event marks a directory (by its watch, which follows the
//! directory's inode across renames) and a name in it dirty; after each read of the queue
//! the reconciler re-reads what is dirty and reports what changed. An overflow of the
//! kernel's queue is a recrawl, not a loss.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::WatchError;
use crate::catch_up::CatchUp;
use crate::engine::{BURST_AT_MOST, Engine, Running};
use crate::mounts::MountTable;
use crate::reconcile::tree::NodeId;
use crate::reconcile::{Backend, Reconciler, RecordedEntry, WatchFailure};
use crate::report::Reporter;
use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};

/// What every directory watch listens for.
const DIR_MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::MODIFY)
    .union(WatchMask::DELETE)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::ATTRIB)
    .union(WatchMask::MOVE_SELF)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::ONLYDIR)
    .union(WatchMask::DONT_FOLLOW)
    .union(WatchMask::EXCL_UNLINK);

/// Events that say a file's content may have changed.
const WRITTEN: EventMask = EventMask::MODIFY
    .union(EventMask::CREATE)
    .union(EventMask::CLOSE_WRITE);

/// The engine on Linux: inotify directly, one watch per directory, excluded directories
/// not watched at all.
pub(crate) struct InotifyEngine {
    /// Reconciles only when asked to catch up, or once events have waited
    /// [`WHEN_ASKED_AT_MOST`] (`EngineKind::InotifyWhenAsked`).
    pub when_asked: bool,
}

/// How long what is read waits to be reconciled when the engine reconciles when asked.
const WHEN_ASKED_AT_MOST: std::time::Duration = std::time::Duration::from_secs(1);

/// Events that come within [`BURST_AT_MOST`] of the last reconciliation are a burst (an
/// upload of 20,000 files, a checkout): they are read on until the queue has been quiet
/// this long, or until the first of them has waited [`BURST_AT_MOST`], and reconciled once
/// per such window, not once per event (which listed each busy directory again for every
/// file made in it). An event after a quiet spell is reconciled at once, as before, and so
/// is a catch-up.
const BURST_QUIET: std::time::Duration = std::time::Duration::from_millis(2);

impl Engine for InotifyEngine {
    fn start(
        &self,
        root: &Path,
        recursive: bool,
        reporter: Reporter,
        recorded: Option<&[RecordedEntry]>,
    ) -> Result<Running, WatchError> {
        let session = Session::start(root, recursive, reporter, recorded)?;
        let watched = session.backend.count.clone();
        let wake = Arc::new(
            EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
                .map_err(std::io::Error::from)?,
        );
        let waker = wake.clone();
        let catch_up = Arc::new(CatchUp::new(move || {
            let _ = waker.write(1);
        }));
        let requests = catch_up.clone();
        let when_asked = self.when_asked;
        Ok(Running::spawn(
            session.reconciler.root_object(),
            Some(watched),
            Some(catch_up),
            move |stop| run(session, &wake, &requests, when_asked, stop),
        )?)
    }
}

/// Reads of the kernel's queue one catch-up may make (64 KiB each): more than the queue
/// holds at its default limit (16,384 events), so a writer that never stops cannot keep a
/// check waiting forever.
const CATCH_UP_READS: usize = 128;

/// The watch thread: poll with a short timeout (so stop is noticed), read, reconcile. A
/// catch-up request (`wake`) reads until the kernel's queue is empty and reconciles before
/// it is answered: every change that finished before the request is then reported.
/// `when_asked`: what is read is reconciled only then, or once it has waited
/// [`WHEN_ASKED_AT_MOST`] (the reconciler takes any batch, however long it waited);
/// otherwise at once, or once its burst is over (see [`BURST_QUIET`]).
fn run(
    mut session: Session,
    wake: &EventFd,
    catch_up: &CatchUp,
    when_asked: bool,
    stop: &AtomicBool,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    // Since when what was read has waited to be reconciled (`when_asked`).
    let mut waiting_since: Option<std::time::Instant> = None;
    // Since when what was read has waited for its burst to end (see [`BURST_QUIET`]).
    let mut burst_since: Option<std::time::Instant> = None;
    let mut reconciled_at: Option<std::time::Instant> = None;
    while !stop.load(Ordering::SeqCst)
        && !session.reconciler.reporter().closed()
        && !session.reconciler.root_gone()
    {
        // In a burst the queue is left to fill for the window (a catch-up still wakes
        // this at once) and then read whole: a poll woken by each event, and a read of
        // each, cost more than the reconciling they replaced.
        let in_burst = burst_since.is_some();
        let timeout = match burst_since {
            Some(since) => BURST_QUIET.min(BURST_AT_MOST.saturating_sub(since.elapsed())),
            None => std::time::Duration::from_millis(100),
        };
        let (queued, woken, remounted) = {
            let mut fds = vec![PollFd::new(wake.as_fd(), PollFlags::POLLIN)];
            if !in_burst {
                fds.push(PollFd::new(session.inotify.as_fd(), PollFlags::POLLIN));
            }
            let mounts_at = fds.len();
            if let Some(mounts) = session.mount_table() {
                fds.push(PollFd::new(mounts, PollFlags::POLLPRI));
            }
            let millis = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
            let _ = poll(&mut fds, PollTimeout::from(millis));
            let ready = |fd: &PollFd| fd.revents().is_some_and(|r| r.contains(PollFlags::POLLIN));
            let remounted = fds.get(mounts_at).is_some_and(crate::mounts::is_change);
            let queued = in_burst || ready(&fds[1]);
            (queued, ready(&fds[0]), remounted)
        };
        let due = waiting_since.is_some_and(|since| since.elapsed() >= WHEN_ASKED_AT_MOST);
        if !queued && !woken && !remounted && !due {
            continue;
        }
        // Before the queue is read: the watches of what a mount covered or took away are
        // dropped first, so what the kernel still tells of them is not heard (an unmount's
        // IN_IGNORED would say the root is gone).
        if remounted {
            session.remounted();
        }
        let waiting = if woken {
            let _ = wake.read();
            catch_up.take()
        } else {
            Vec::new()
        };
        CatchUp::mark_rereads(&waiting, &mut session.reconciler);
        let reads = if waiting.is_empty() && !in_burst {
            1
        } else {
            CATCH_UP_READS
        };
        let mut failed = false;
        // Reads that end on an empty queue hand over every event of what happened before
        // they began.
        let began = std::time::SystemTime::now();
        let mut drained = false;
        let mut heard = false;
        for _ in 0..reads {
            match session.read(&mut buffer) {
                Ok(events) => {
                    for event in events {
                        heard = true;
                        session.apply(event);
                    }
                }
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    drained = true;
                    break;
                }
                Err(err) => {
                    tracing::error!(error = %err, "reading inotify events failed");
                    failed = true;
                    break;
                }
            }
        }
        if when_asked && !woken && !remounted && !due && !failed {
            // Left for whoever asks next (or for the second to pass).
            if session.reconciler.pending() && waiting_since.is_none() {
                waiting_since = Some(std::time::Instant::now());
            }
            continue;
        }
        // The burst is over once a window passed with nothing told, or it waited enough.
        let burst_over =
            burst_since.is_some_and(|since| !heard || since.elapsed() >= BURST_AT_MOST);
        if !when_asked && !woken && !remounted && !failed && !burst_over {
            // Read on while the burst lasts.
            if session.reconciler.pending()
                && burst_since.is_none()
                && reconciled_at.is_some_and(|at| at.elapsed() < BURST_AT_MOST)
            {
                burst_since = Some(std::time::Instant::now());
            }
            if burst_since.is_some() {
                continue;
            }
        }
        waiting_since = None;
        burst_since = None;
        session.reconcile();
        reconciled_at = Some(std::time::Instant::now());
        if drained {
            session.reconciler.settled(began);
        }
        if session.reconciler.root_gone() || failed {
            // The consumer starts a new watch once the path exists again. The channel is
            // closed before a waiting check is answered, so the check sees the watch ended.
            session.reconciler.reporter().overflow();
            drop(session);
            catch_up.end();
            drop(waiting);
            return;
        }
        // Everything read is on the consumer's channel now, ahead of these answers.
        for waiter in waiting {
            waiter.answer(&session.reconciler);
        }
    }
    catch_up.end();
}

/// One kernel event, as read.
pub(crate) type RawEvent = (EventMask, Option<WatchDescriptor>, Option<OsString>);

/// The watches of one root, each mapped to the directory it watches.
pub(crate) struct InotifyBackend {
    watches: Watches,
    by_wd: HashMap<WatchDescriptor, NodeId>,
    by_node: HashMap<NodeId, WatchDescriptor>,
    /// Directories whose watch the kernel ended (they were deleted): no directory found
    /// later is the same object.
    ended: HashSet<NodeId>,
    count: Arc<AtomicUsize>,
    /// The mount table, for `mounts_changed` (`None` where it cannot be read: mounts then
    /// go unseen, as before).
    mounts: Option<MountTable>,
}

impl InotifyBackend {
    fn unmap(&mut self, wd: &WatchDescriptor) -> Option<NodeId> {
        let node = self.by_wd.remove(wd)?;
        self.count.fetch_sub(1, Ordering::Relaxed);
        if self.by_node.get(&node) == Some(wd) {
            self.by_node.remove(&node);
        }
        Some(node)
    }
}

impl Backend for InotifyBackend {
    fn watch(&mut self, path: &Path, node: NodeId) -> Result<(), WatchFailure> {
        let wd = self.watches.add(path, DIR_MASK).map_err(|err| {
            match err.raw_os_error().map(Errno::from_raw) {
                Some(Errno::ENOSPC) => WatchFailure::Limit,
                Some(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => WatchFailure::Gone,
                _ => WatchFailure::Io(err),
            }
        })?;
        if self.by_wd.get(&wd).is_some_and(|&other| other != node) {
            // The kernel keeps one watch per directory, and a watch pins its inode: the
            // directory at the path now is the one recorded as `other`, moved here since
            // the path was read. Taking its watch would leave `other` blind (and forgetting
            // this node later would end the watch); the path is read again instead.
            return Err(WatchFailure::Gone);
        }
        if self.by_wd.get(&wd) != Some(&node) {
            if let Some(previous) = self.by_node.remove(&node) {
                self.unmap(&previous);
                let _ = self.watches.remove(previous);
            }
            self.by_wd.insert(wd.clone(), node);
            self.by_node.insert(node, wd);
            self.count.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn forget(&mut self, node: NodeId) {
        self.ended.remove(&node);
        if let Some(wd) = self.by_node.get(&node).cloned() {
            self.unmap(&wd);
            let _ = self.watches.remove(wd);
        }
    }

    fn same_dir(&mut self, path: &Path, node: NodeId) -> Option<bool> {
        if self.ended.contains(&node) {
            return Some(false);
        }
        let known = self.by_node.get(&node)?.clone();
        // The kernel keeps one watch per inode and ends it when the directory goes: the
        // watch it gives for the path now is the recorded one only for the same directory.
        let now = self.watches.add(path, DIR_MASK).ok()?;
        if now != known && !self.by_wd.contains_key(&now) {
            let _ = self.watches.remove(now);
            return Some(false);
        }
        Some(now == known)
    }

    fn mounts_changed(&mut self) -> Vec<PathBuf> {
        match &mut self.mounts {
            Some(table) => table.changed(),
            None => Vec::new(),
        }
    }

    fn mount_gone(&mut self, path: &Path) {
        if let Some(table) = &mut self.mounts {
            table.forget(path);
        }
    }
}

/// An inotify instance, its watches and the reconciler they feed.
pub(crate) struct Session {
    pub inotify: Inotify,
    pub backend: InotifyBackend,
    pub reconciler: Reconciler,
}

impl Session {
    /// Watches and records the tree at `root` (canonical), or reads it against `recorded`
    /// (see [`Reconciler::start`]).
    pub fn start(
        root: &Path,
        recursive: bool,
        reporter: Reporter,
        recorded: Option<&[RecordedEntry]>,
    ) -> Result<Self, WatchError> {
        let inotify = Inotify::init()?;
        // Read before the tree: a mount made while it is crawled is told after.
        let mounts = MountTable::open(root)
            .inspect_err(|err| tracing::warn!(error = %err, "cannot read the mount table; mounts in watched trees go unseen"))
            .ok();
        let mut backend = InotifyBackend {
            watches: inotify.watches(),
            by_wd: HashMap::new(),
            by_node: HashMap::new(),
            ended: HashSet::new(),
            count: Arc::new(AtomicUsize::new(0)),
            mounts,
        };
        let reconciler = Reconciler::start(root, reporter, recursive, &mut backend, recorded)
            .map_err(|failure| failure.starting(root))?;
        Ok(Self {
            inotify,
            backend,
            reconciler,
        })
    }

    /// The descriptor of the mount table, to poll for `POLLPRI`.
    pub fn mount_table(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.backend.mounts.as_ref().map(MountTable::fd)
    }

    /// The mount table changed: what changed in this tree is read again as the mount has
    /// it (see [`Reconciler::remounted`]).
    pub fn remounted(&mut self) {
        self.reconciler.look_at_mounts(&mut self.backend);
    }

    /// One read of the kernel's queue (`WouldBlock` when it is empty).
    pub fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<Vec<RawEvent>> {
        Ok(self
            .inotify
            .read_events(buffer)?
            .map(|e| {
                let wd = (!e.mask.contains(EventMask::Q_OVERFLOW)).then(|| e.wd.clone());
                (e.mask, wd, e.name.map(|n| n.to_os_string()))
            })
            .collect())
    }

    /// Marks what one event says to look at.
    pub fn apply(&mut self, (mask, wd, name): RawEvent) {
        if mask.contains(EventMask::Q_OVERFLOW) {
            self.reconciler.overflowed();
            return;
        }
        if mask.contains(EventMask::UNMOUNT) {
            // A filesystem the tree watched went away: the table says where (it changed
            // before the kernel told this), and the watches of what the mount took away are
            // dropped before their IN_IGNORED would say a directory is gone.
            self.remounted();
        }
        let Some(wd) = wd else { return };
        let Some(&node) = self.backend.by_wd.get(&wd) else {
            return;
        };
        if mask.contains(EventMask::UNMOUNT) {
            // Still watched: the table showed no change (a mount replaced by another with
            // the same id and device between two reads).
            self.reconciler.remounted(&mut self.backend);
            return;
        }
        if mask.contains(EventMask::IGNORED) {
            self.backend.unmap(&wd);
            self.backend.ended.insert(node);
            self.reconciler.hint_gone(node);
            return;
        }
        if mask.intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF) {
            self.reconciler.hint_gone(node);
            return;
        }
        match name {
            Some(name) => self
                .reconciler
                .hint(node, Some(&name), mask.intersects(WRITTEN)),
            // A directory's own mode: told to its parent's watch too, but for the root of
            // a mounted filesystem, whose parent is itself to the kernel.
            None if mask.contains(EventMask::ATTRIB) => self.reconciler.hint_own_entry(node),
            None => {}
        }
    }

    pub fn reconcile(&mut self) {
        self.reconciler.reconcile(&mut self.backend);
    }
}
