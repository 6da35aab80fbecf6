//! Wakes a background process's follower when its output files are written, so output
//! reaches streams at once instead of at the next 20 ms tick (which stays, for what
//! inotify cannot tell: the process's death, a watch that could not be set).
//!
//! One inotify instance for the daemon (instances are few per user; watches are many), two
//! watches per running process, removed when its follower ends.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use tokio::sync::Notify;

/// Followers' wake-ups by watch.
type Waiters = Arc<Mutex<HashMap<WatchDescriptor, Arc<Notify>>>>;

/// The daemon's watches on output files; without inotify, nobody is woken early.
pub struct OutputWakes {
    shared: Option<(Arc<Inotify>, Waiters)>,
}

/// A follower's watches; dropping it removes them.
pub struct Woken<'a> {
    wakes: &'a OutputWakes,
    descriptors: Vec<WatchDescriptor>,
    pub notify: Arc<Notify>,
}

impl OutputWakes {
    /// Starts reading the daemon's inotify instance, on a thread of its own (a blocking
    /// read: no readiness to register, and nothing on the runtime's threads).
    pub fn start() -> Self {
        match Self::started() {
            Ok(shared) => Self {
                shared: Some(shared),
            },
            Err(error) => {
                tracing::warn!(%error, "no inotify for process output: streams read it every 20 ms");
                Self { shared: None }
            }
        }
    }

    fn started() -> std::io::Result<(Arc<Inotify>, Waiters)> {
        let inotify = Arc::new(Inotify::init(InitFlags::IN_CLOEXEC)?);
        let waiters: Waiters = Arc::default();
        let (events, woken) = (inotify.clone(), waiters.clone());
        std::thread::Builder::new()
            .name("fsd-output-wakes".into())
            .spawn(move || {
                loop {
                    let read = match events.read_events() {
                        Ok(read) => read,
                        Err(nix::errno::Errno::EINTR) => continue,
                        Err(error) => {
                            tracing::warn!(%error, "inotify for process output failed: streams read it every 20 ms");
                            return;
                        }
                    };
                    let waiters = woken.lock().unwrap_or_else(|p| p.into_inner());
                    for event in read {
                        if let Some(notify) = waiters.get(&event.wd) {
                            notify.notify_one();
                        }
                    }
                }
            })?;
        Ok((inotify, waiters))
    }

    /// Watches `paths` for writes; `None` without inotify or when a watch cannot be set.
    pub fn watch(&self, paths: &[&Path]) -> Option<Woken<'_>> {
        let (inotify, waiters) = self.shared.as_ref()?;
        let notify = Arc::new(Notify::new());
        let mut woken = Woken {
            wakes: self,
            descriptors: Vec::new(),
            notify: notify.clone(),
        };
        for path in paths {
            let wd = inotify
                .add_watch(
                    *path,
                    AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CLOSE_WRITE,
                )
                .ok()?;
            waiters
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(wd, notify.clone());
            woken.descriptors.push(wd);
        }
        Some(woken)
    }
}

impl Drop for Woken<'_> {
    fn drop(&mut self) {
        let Some((inotify, waiters)) = &self.wakes.shared else {
            return;
        };
        let mut waiters = waiters.lock().unwrap_or_else(|p| p.into_inner());
        for wd in self.descriptors.drain(..) {
            waiters.remove(&wd);
            // Gone already when the file was removed first.
            let _ = inotify.rm_watch(wd);
        }
    }
}

/// Resolves when the watched output files are written; never without watches.
pub async fn written(woken: Option<&Woken<'_>>) {
    match woken {
        Some(woken) => woken.notify.notified().await,
        None => std::future::pending().await,
    }
}
