//! What a path in a request means and whether it is allowed, for every route: `policy`
//! holds the rules (the reference's, `--confine`'s roots, `--allow-root`, the daemon's own
//! `/proc`), `resolver` the one entry point routes use ([`Paths`]: a session's directory or
//! the workspace, then the rules).

mod error;
mod policy;
mod remote;
mod resolver;
mod wire_error;

pub use error::PathError;
pub use policy::{Follow, PathPolicy};
pub use remote::{on_remote_mount, refresh as refresh_mount_table};
pub use resolver::Paths;
