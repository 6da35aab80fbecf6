//! What a caller can get wrong in a watch request; `wire_error` maps it to the wire.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum WatchRequestError {
    #[error("must be a non-empty path without NUL")]
    Path,
    #[error("give include or exclude, not both")]
    IncludeAndExclude,
    /// A glob the filter cannot take; `field` is `include` or `exclude`.
    #[error("{reason}")]
    Pattern { field: &'static str, reason: String },
    #[error("unknown event type {0:?}")]
    EventType(String),
    #[error("since must be a version returned by checkChanges()")]
    Token,
    #[error("since refers to a newer version than this watch has")]
    FutureToken,
    /// The path resolves outside the workspace; with where it resolved, when it exists.
    #[error("path must be inside the workspace")]
    Outside { found: Option<(String, PathBuf)> },
    #[error("Path does not exist: {0}")]
    Missing(String),
    /// The task starting the watch failed.
    #[error("{0}")]
    Start(String),
}
