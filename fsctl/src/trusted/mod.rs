//! The trusted side: code that holds object-store credentials. It presigns URLs for the
//! daemon, keeps backup metadata and enforces TTLs; the daemon never sees a secret.

mod access;
mod backups;
mod history;
mod mounts;
mod schedule;
mod store;

pub use access::BucketAccess;
/// The S3 client crate, for callers that presign or inspect objects themselves.
pub use aws_sdk_s3;
pub use backups::{BackupMeta, BackupOptions, Backups, DirectoryBackup, ProgressFn, Restored};
pub use fsd_backup::incremental::Difference;
pub use fsd_backup::index::{IndexEntry, Kind as EntryKind};
pub use history::describe;
pub use mounts::{MountOptions, ProxiedMount, mount_bucket};
pub use schedule::{Round, Schedule, Scheduled};
pub use store::EmbeddedStore;

/// Starts scheduled snapshots (see [`Schedule`]).
pub use schedule::start as start_schedule;
