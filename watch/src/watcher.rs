//! A watch of one tree, whichever engine runs it.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use tokio::sync::mpsc;

use crate::engine::{Engine, EngineKind, Running};
use crate::error::WatchError;
use crate::event::Event;
use crate::filter::Filter;
use crate::reconcile::RecordedEntry;
use crate::report::Reporter;

/// A running watch; stops when dropped.
pub struct Watcher {
    root: PathBuf,
    running: Running,
}

impl Watcher {
    /// Watches `root` with the default engine; see [`Watcher::start_with`].
    pub fn start(
        root: &Path,
        filter: Filter,
        recursive: bool,
    ) -> Result<(Self, mpsc::UnboundedReceiver<Event>), WatchError> {
        Self::start_with(EngineKind::default(), root, filter, recursive)
    }

    /// Watches `root` (recursively unless `recursive` is false) with `engine`. Returns once
    /// every watch is in place, so anything that happens after this returns is reported.
    pub fn start_with(
        engine: EngineKind,
        root: &Path,
        filter: Filter,
        recursive: bool,
    ) -> Result<(Self, mpsc::UnboundedReceiver<Event>), WatchError> {
        Self::resume_with(engine, root, filter, recursive, None)
    }

    /// [`start_with`](Self::start_with), from the record of an earlier watch of the same
    /// root ([`Watcher::record`], saved by a daemon that stopped): the first events are
    /// what changed since that record, told as any batch of changes is (moves as moves),
    /// so a change list from a token of the earlier watch continues exact across the gap.
    pub fn resume_with(
        engine: EngineKind,
        root: &Path,
        filter: Filter,
        recursive: bool,
        recorded: Option<&[RecordedEntry]>,
    ) -> Result<(Self, mpsc::UnboundedReceiver<Event>), WatchError> {
        let meta = std::fs::metadata(root).map_err(|_| WatchError::NotFound(root.to_path_buf()))?;
        if !meta.is_dir() {
            return Err(WatchError::NotDirectory(root.to_path_buf()));
        }
        let root = std::fs::canonicalize(root)?;
        let (sender, receiver) = mpsc::unbounded_channel();
        let reporter = Reporter::new(root.clone(), filter, sender);
        let running = match engine {
            #[cfg(target_os = "linux")]
            EngineKind::Inotify | EngineKind::InotifyWhenAsked => crate::inotify::InotifyEngine {
                when_asked: engine == EngineKind::InotifyWhenAsked,
            }
            .start(&root, recursive, reporter, recorded)?,
            #[cfg(not(target_os = "linux"))]
            EngineKind::Inotify | EngineKind::InotifyWhenAsked => {
                return Err(WatchError::Unsupported(engine.to_string()));
            }
            EngineKind::Notify => {
                crate::portable::NotifyEngine.start(&root, recursive, reporter, recorded)?
            }
        };
        Ok((Self { root, running }, receiver))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves once every change made before this call has been sent on the event channel
    /// (or the watch has ended). The inotify engine reads the kernel's queue to the end
    /// first; the `notify` engine writes a cookie in the root and waits for the crate to
    /// hand over its event.
    pub fn caught_up(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.caught_up_reading(Vec::new())
    }

    /// [`Watcher::caught_up`], with everything recorded below `points` looked at again
    /// first: mounts of filesystems others write (a bucket), whose changes no event tells.
    pub fn caught_up_reading(
        &self,
        points: Vec<PathBuf>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let answer = self
            .running
            .catch_up()
            .map(|catch_up| match points.is_empty() {
                true => catch_up.request(),
                false => catch_up.reread(points),
            });
        async move {
            if let Some(answer) = answer {
                let _ = answer.await;
            }
        }
    }

    /// The watch's record of its tree once every change made before this call has been
    /// sent on the event channel: the tree those events leave, for a later watch of the
    /// same root to start from ([`Watcher::resume_with`]). `None` from an engine that cannot
    /// catch up, or once the watch has ended.
    pub fn record(
        &self,
    ) -> impl std::future::Future<Output = Option<Vec<RecordedEntry>>> + Send + 'static {
        let answer = self.running.catch_up().map(|catch_up| catch_up.record());
        async move { answer?.await.ok() }
    }

    /// The device and inode number of the directory this watch recorded as its root when
    /// it started: a caller that must know the watch is of a directory it trusts (one it
    /// opened beneath a root, say) compares it with that directory's, since the path may
    /// have led elsewhere a moment before.
    pub fn root_object(&self) -> (u64, u64) {
        self.running.root()
    }

    /// Directories currently watched, when the engine knows (inotify does).
    pub fn watched_dirs(&self) -> Option<usize> {
        self.running
            .watched()
            .map(|watched| watched.load(Ordering::Relaxed))
    }
}
