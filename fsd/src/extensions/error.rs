//! What provisioning and running an extension can fail with.

/// An extension could not be provisioned, started or reached.
#[derive(Debug, thiserror::Error)]
pub enum ExtensionError {
    #[error("packageHash must be the 64 lowercase hex digits of the tarball's SHA-256")]
    BadHash,
    #[error("Extension package '{0}' is not provisioned; resend connect() with tarball bytes")]
    NotProvisioned(String),
    #[error("Extension tarball hash mismatch (declared {declared}…, computed {computed}…)")]
    HashMismatch { declared: String, computed: String },
    #[error("Extension package is not usable: {0}")]
    Package(String),
    #[error("Extension package '{id}' failed to install: {reason}")]
    Install { id: String, reason: String },
    #[error("Extension '{id}' sidecar could not start: {reason}")]
    Spawn { id: String, reason: String },
    #[error("Extension '{id}' sidecar exited before readiness (code {code})")]
    ExitedBeforeReady { id: String, code: i32 },
    #[error("Extension '{id}' sidecar was not ready within {ms} ms")]
    NotReady { id: String, ms: u64 },
    #[error("Extension storage failed: {0}")]
    Io(#[from] std::io::Error),
}
