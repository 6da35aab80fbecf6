//! What can go wrong with a file operation, independent of HTTP.

use std::io;

use super::special::Special;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A mode, owner or group that does not parse or name anyone; `field` names it.
    #[error("{field}: {reason}")]
    InvalidPermission { field: &'static str, reason: String },
    /// The path itself is refused (see `crate::paths`).
    #[error(transparent)]
    Path(#[from] crate::paths::PathError),
    #[error("{what} not found: {path}")]
    NotFound { what: &'static str, path: String },
    #[error("{message}")]
    IsDirectory { path: String, message: String },
    #[error("Path is not a directory: {path}")]
    NotDirectory { path: String },
    #[error("Path already exists: {path}")]
    AlreadyExists { path: String },
    #[error("File too large: {path} is {} bytes, the limit is {max}", actual.map_or_else(|| format!("more than {max}"), |n| n.to_string()))]
    TooLarge {
        path: String,
        /// `None` when `stat` cannot tell (a device, a procfs file) and the read hit the limit.
        actual: Option<u64>,
        max: u64,
        operation: &'static str,
    },
    #[error("Cannot {operation} {}: {path}", kind.described())]
    Special {
        path: String,
        kind: Special,
        operation: &'static str,
    },
    #[error("No process is reading the FIFO at {path}")]
    NoReader { path: String },
    #[error("content is not valid base64")]
    InvalidBase64,
    /// The raw routes' query string does not parse.
    #[error("{0}")]
    InvalidQuery(String),
    /// A pattern of `exclude` that is not one (the wire names the field).
    #[error("{0}")]
    InvalidExclude(String),
    /// A raw upload's body ended before the client finished sending it.
    #[error("the upload was interrupted after {written} bytes: {reason}")]
    IncompleteBody { written: u64, reason: String },
    /// `POST /api/files/apply`'s body ended inside a file's content.
    #[error(transparent)]
    ApplyBody(#[from] super::apply::ApplyError),
    /// A step of `POST /api/files/apply` that names no plain path below the tree.
    #[error("{field}: {reason}")]
    InvalidStep { field: String, reason: String },
    #[error("{reason}")]
    InvalidMove { field: &'static str, reason: String },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
}

impl FileError {
    pub fn io(op: &'static str, path: &std::path::Path) -> impl FnOnce(io::Error) -> Self {
        let path = path.display().to_string();
        move |source| Self::Io { op, path, source }
    }

    pub fn not_found(what: &'static str, path: &str) -> Self {
        Self::NotFound {
            what,
            path: path.to_string(),
        }
    }
}
