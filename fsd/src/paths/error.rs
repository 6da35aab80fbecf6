//! Why a path in a request is refused, before anything is done with it.

#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// Empty, holding NUL, or too long (the reference's rules); `field` names the field.
    #[error("{field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("path resolves outside the allowed roots: {path}")]
    OutsideRoots { path: String },
    #[error("The daemon's own /proc entries are not served: {path}")]
    DaemonProc { path: String },
}
