//! `fsd-watch`: recursive inotify watches for fsd.
//!
//! [`Watcher::start`] watches a directory tree and sends [`Event`]s on a channel:
//! - directories created (or moved in) later are watched and then scanned, so
//!   `mkdir -p a/b/c && touch a/b/c/f` reports `f` even though it appeared before the watch;
//! - a rename inside the tree is one [`EventKind::Rename`] with both paths (paired by the
//!   kernel's cookie); a move out is a delete, a move in an [`EventKind::MoveIn`];
//! - include/exclude globs ([`Filter`]) decide what is reported (`*`, `**`, `?`), and
//!   excluded directories are not watched at all;
//! - a kernel queue overflow or a watch limit is an [`EventKind::Overflow`], never a silent
//!   gap: the consumer must rescan.
//!
//! The engine runs on its own thread and knows nothing of HTTP.

mod engine;
mod error;
mod filter;

pub use engine::{Event, EventKind, Watcher};
pub use error::WatchError;
pub use filter::{Filter, GlobError};
