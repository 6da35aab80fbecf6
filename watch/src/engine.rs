//! The engines behind one trait, the thread each runs on, and [`EngineKind`], which names
//! them for configuration (`--watch-engine`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;

use crate::catch_up::CatchUp;
use crate::error::WatchError;
use crate::reconcile::RecordedEntry;
use crate::report::Reporter;

/// The longest an event of a burst waits in the engine before it is reported: while events
/// keep coming, reports come about this far apart, so a consumer that collapses a burst
/// waits longer than this between reports before it takes the burst as over.
pub const BURST_AT_MOST: std::time::Duration = std::time::Duration::from_millis(20);

/// Which engine watches trees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// inotify directly (Linux): excluded directories are never watched, and a write is
    /// reported a few microseconds after the kernel saw it.
    Inotify,
    /// The `notify` crate: FSEvents on macOS, inotify through the crate on Linux (where it
    /// is chosen only to run the same tests through it).
    Notify,
    /// inotify, its events read as they come but reconciled only when a caller asks to
    /// catch up ([`crate::Watcher::caught_up`]) or once they have waited a second: for a
    /// watch asked now and then rather than followed (the watcher a two-way sync leaves
    /// between passes), which would otherwise read each directory a pass writes in while
    /// the pass writes there.
    InotifyWhenAsked,
}

impl Default for EngineKind {
    fn default() -> Self {
        if cfg!(target_os = "linux") {
            EngineKind::Inotify
        } else {
            EngineKind::Notify
        }
    }
}

impl std::str::FromStr for EngineKind {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "inotify" => Ok(EngineKind::Inotify),
            "notify" => Ok(EngineKind::Notify),
            "inotify-when-asked" => Ok(EngineKind::InotifyWhenAsked),
            _ => Err(format!(
                "unknown watch engine {name:?} (inotify, notify or inotify-when-asked)"
            )),
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EngineKind::Inotify => "inotify",
            EngineKind::Notify => "notify",
            EngineKind::InotifyWhenAsked => "inotify-when-asked",
        })
    }
}

/// A way of watching a tree.
pub(crate) trait Engine {
    /// Watches `root` (canonical, a directory; recursively unless `recursive` is false)
    /// and reports what happens through `reporter`, from a thread of its own; given the
    /// record of an earlier watch (`recorded`), first what changed since it. Returns once
    /// every watch is in place.
    fn start(
        &self,
        root: &Path,
        recursive: bool,
        reporter: Reporter,
        recorded: Option<&[RecordedEntry]>,
    ) -> Result<Running, WatchError>;
}

/// An engine's thread, stopped and joined when dropped.
pub(crate) struct Running {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Directories watched, for engines that know.
    watched: Option<Arc<AtomicUsize>>,
    /// How to wait for the thread to report what the kernel has queued, for engines that
    /// can tell.
    catch_up: Option<Arc<CatchUp>>,
    /// The device and inode number of the directory the engine recorded as its root.
    root: (u64, u64),
}

impl Running {
    /// Directories watched, for engines that know.
    pub fn watched(&self) -> Option<&Arc<AtomicUsize>> {
        self.watched.as_ref()
    }

    /// How to wait for the thread to report what the kernel has queued, if it can tell.
    pub fn catch_up(&self) -> Option<&Arc<CatchUp>> {
        self.catch_up.as_ref()
    }

    /// The device and inode number of the directory the engine recorded as its root.
    pub fn root(&self) -> (u64, u64) {
        self.root
    }

    /// Runs `body` on a thread named `fsd-watch`; it should return soon after its flag is
    /// set. `root` is what the engine recorded as its root (see [`Running::root`]).
    pub fn spawn(
        root: (u64, u64),
        watched: Option<Arc<AtomicUsize>>,
        catch_up: Option<Arc<CatchUp>>,
        body: impl FnOnce(&AtomicBool) + Send + 'static,
    ) -> std::io::Result<Running> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("fsd-watch".into())
            .spawn(move || body(&flag))?;
        Ok(Running {
            stop,
            thread: Some(thread),
            watched,
            catch_up,
            root,
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_are_named_for_configuration() {
        for engine in [
            EngineKind::Inotify,
            EngineKind::Notify,
            EngineKind::InotifyWhenAsked,
        ] {
            assert_eq!(engine.to_string().parse::<EngineKind>(), Ok(engine));
        }
        assert!("fsevents".parse::<EngineKind>().is_err());
        #[cfg(target_os = "linux")]
        assert_eq!(EngineKind::default(), EngineKind::Inotify);
    }
}
