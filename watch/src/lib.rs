//! `fsd-watch`: recursive watches with glob filters whose change lists are exact, for fsd.
//!
//! [`Watcher::start`] watches a directory tree and sends [`Event`]s on a channel. Events
//! from the kernel are hints, not the truth: one reconciler per root (`reconcile`) owns a
//! tree of what it has seen, each event marks a directory to look at again, and re-reading
//! it finds what changed:
//! - a known inode under a new name is one [`EventKind::Rename`] with both paths, whatever
//!   order the queue told the move in; what moved in from outside is a create, what left a
//!   delete;
//! - directories that appear are watched, then listed, so `mkdir -p a/b/c && touch a/b/c/f`
//!   reports `f` even though it appeared before the watch;
//! - include/exclude globs ([`Filter`]) decide what is reported (`*`, `**`, `?`);
//! - fsd's own scratch files never show: a write's rename into place is the target's
//!   create or modify;
//! - a kernel queue overflow is a recrawl of the tree, told as exact changes;
//!   [`EventKind::Overflow`] is left for what cannot be known (the watch limit, a root
//!   that went away).
//!
//! [`changes::list`] turns a window of events into the list that makes the old tree the new
//! one. Two backends feed the reconciler ([`EngineKind`]): inotify directly on Linux, and
//! the `notify` crate where there is no inotify (macOS). The engine runs on its own thread
//! and knows nothing of HTTP.

mod catch_up;
pub mod changes;
mod engine;
mod error;
mod event;
mod filter;
#[cfg(target_os = "linux")]
mod inotify;
#[cfg(target_os = "linux")]
mod mounts;
mod portable;
mod reconcile;
mod report;
#[cfg(all(test, target_os = "linux"))]
mod restarts;
#[cfg(all(test, target_os = "linux"))]
mod simulation;
mod watcher;

pub use engine::{BURST_AT_MOST, EngineKind};
pub use error::WatchError;
pub use event::{Event, EventKind};
pub use filter::{Filter, GlobError};
pub use reconcile::{EntryKind, RecordedEntry};
pub use watcher::Watcher;
