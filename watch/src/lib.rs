//! `fsd-watch`: recursive watches with glob filters and never-silent overflow, for fsd.
//!
//! [`Watcher::start`] watches a directory tree and sends [`Event`]s on a channel:
//! - directories created (or moved in) later are watched and then scanned, so
//!   `mkdir -p a/b/c && touch a/b/c/f` reports `f` even though it appeared before the watch;
//! - a rename inside the tree is one [`EventKind::Rename`] with both paths (paired by the
//!   kernel's cookie); a move out is a delete, a move in an [`EventKind::MoveIn`];
//! - include/exclude globs ([`Filter`]) decide what is reported (`*`, `**`, `?`);
//! - fsd's own scratch files never show: a write's rename into place is the target's
//!   create or modify;
//! - a kernel queue overflow or a watch limit is an [`EventKind::Overflow`], never a silent
//!   gap: the consumer must rescan.
//!
//! Two engines sit behind one trait ([`EngineKind`]): inotify directly on Linux, and the
//! `notify` crate where there is no inotify (macOS). The engine runs on its own thread and
//! knows nothing of HTTP.

mod catch_up;
pub mod changes;
mod engine;
mod error;
mod event;
mod filter;
#[cfg(target_os = "linux")]
mod inotify;
mod portable;
mod reconcile;
mod report;
#[cfg(all(test, target_os = "linux"))]
mod simulation;
mod watcher;

pub use engine::EngineKind;
pub use error::WatchError;
pub use event::{Event, EventKind};
pub use filter::{Filter, GlobError};
pub use watcher::Watcher;
