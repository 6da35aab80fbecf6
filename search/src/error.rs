//! What can go wrong with a search, before it runs.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The pattern does not compile.
    #[error("pattern: {0}")]
    Pattern(String),
    /// A glob does not parse.
    #[error("globs: {glob:?}: {message}")]
    Glob { glob: String, message: String },
    #[error("{path}: not a directory or file to search")]
    Root { path: PathBuf },
}
