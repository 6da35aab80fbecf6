//! What can go wrong with code contexts; mapped to wire errors in `wire_error`.

use super::kind::Kind;

#[derive(Debug, thiserror::Error)]
pub enum InterpreterError {
    #[error("{reason}")]
    Spawn { kind: Kind, reason: String },
    #[error("the executor could not enter {0}")]
    Init(String),
    /// Confined: the directory the executor entered was outside the roots (a link swapped
    /// in since the request was checked).
    #[error("cwd is outside the allowed roots: {0}")]
    Outside(String),
    #[error("executor protocol: {0}")]
    Protocol(String),
    #[error("Code context '{0}' not found")]
    NotFound(String),
    #[error("Context executor has terminated. Please delete and recreate the context.")]
    Dead(String),
    #[error("Context {id} was created for {context}, cannot execute {asked} code")]
    WrongLanguage {
        id: String,
        context: String,
        asked: String,
    },
    #[error("{field}: {reason}")]
    Invalid { field: &'static str, reason: String },
}
