//! The `fsctl` package: the command line (the `fsctl` binary) and, in [`trusted`], the
//! one-machine trusted side it runs: the embedded S3-compatible store, backups through
//! presigned URLs with their metadata and TTLs, and bucket mounts through a credential
//! proxy. This is the code that holds object-store credentials; the daemon never does.
//! [`local_watch`] is the local side's watcher of a following two-way sync, and
//! [`pair_watch`] the one a two-way sync leaves between single passes.

pub mod local_watch;
pub mod pair_watch;
pub mod trusted;
