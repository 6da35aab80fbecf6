//! `fsd-sdk`: a typed async client for the fsd HTTP API. It builds on any OS: the code
//! that holds store credentials and the `fsctl` command line are the `fsctl` package's.
//!
//! ```no_run
//! # async fn demo() -> Result<(), fsd_sdk::SdkError> {
//! let sandbox = fsd_sdk::Sandbox::connect("http://127.0.0.1:3000", Some("token"))?;
//! sandbox.write_file("notes/todo.txt", "ship it\n").await?;
//! let text = sandbox.read_file("notes/todo.txt").await?.content;
//! # Ok(()) }
//! ```
//!
//! Errors from the daemon arrive as [`SdkError::Api`] carrying the wire [`ErrorCode`], so
//! callers match on codes, not on strings. Raw transfers are streams: nothing is buffered
//! whole in memory.

mod backup;
mod client;
mod error;
mod exec;
mod files;
mod follow;
mod gateway;
mod interpreter;
mod mounts;
pub mod scan;
mod search;
mod sse;
mod stdin;
mod sync;
mod system;
mod terminal;
mod tunnels;
pub mod two_way;
mod watch;
mod ws;

pub use client::{POOL_IDLE_TIMEOUT, Sandbox};
pub use error::SdkError;
pub use exec::{LogPattern, PortProbe, ProcessHandle};
pub use files::ListOptions;
pub use fsd_api as api;
pub use fsd_api::ErrorCode;
use fsd_merge::kept;
/// The three-way merge of trees (and the content hashes it compares), shared with the
/// daemon's workspace merges.
pub use fsd_merge::{self as merge, content_hash};
pub use gateway::{ExposedPort, Gateway};
pub use interpreter::{EventStream, Execution};
pub use regex::Regex;
pub use stdin::ProcessStdin;
pub use sync::{MIRROR_SKIPS, MirrorOptions, SyncReport};
pub use terminal::{Terminal, TerminalEvent, TerminalReader, TerminalWriter};
