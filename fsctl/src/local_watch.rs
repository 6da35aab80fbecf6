//! The local side's watcher for `fsctl sync --two-way --follow`: fsd-watch's engine (the
//! one the daemon runs, so both sides' change lists are exact the same way), whose events
//! tell a following sync which local paths to read again.

use std::path::{Path, PathBuf};

use fsd_sdk::two_way::LocalWatch;
use futures_util::future::BoxFuture;
use tokio::sync::mpsc::UnboundedReceiver;

/// A watch of the local directory of a two-way sync.
pub struct Watched {
    watcher: fsd_watch::Watcher,
    events: UnboundedReceiver<fsd_watch::Event>,
    /// Paths told and not yet taken.
    pending: Vec<PathBuf>,
    /// Changes were lost (an overflow, the watch ended): the next take reads everything.
    lost: bool,
}

impl Watched {
    /// Watches `local`, leaving out `exclude` (fsd-watch's globs: the sync's own files and
    /// what it leaves out by default). Every change after this returns is told.
    pub fn start(local: &Path, exclude: &[String]) -> std::io::Result<Self> {
        let filter = fsd_watch::Filter::new(&[], exclude)
            .map_err(|err| std::io::Error::other(err.to_string()))?;
        let (watcher, events) = fsd_watch::Watcher::start(local, filter, true)
            .map_err(|err| std::io::Error::other(err.to_string()))?;
        Ok(Self {
            watcher,
            events,
            pending: Vec::new(),
            lost: false,
        })
    }

    fn keep(&mut self, event: fsd_watch::Event) {
        if event.kind == fsd_watch::EventKind::Overflow {
            self.lost = true;
            return;
        }
        self.pending.push(event.path);
        self.pending.extend(event.from);
    }
}

impl LocalWatch for Watched {
    fn changed(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            match self.events.recv().await {
                Some(event) => self.keep(event),
                // The watch ended: only the sync's timer passes are left.
                None => {
                    self.lost = true;
                    std::future::pending::<()>().await;
                }
            }
        })
    }

    fn take(&mut self) -> BoxFuture<'_, Option<Vec<PathBuf>>> {
        Box::pin(async move {
            self.watcher.caught_up().await;
            while let Ok(event) = self.events.try_recv() {
                self.keep(event);
            }
            let paths = std::mem::take(&mut self.pending);
            (!std::mem::take(&mut self.lost)).then_some(paths)
        })
    }
}
