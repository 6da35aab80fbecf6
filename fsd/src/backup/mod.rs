//! Backups: archives of a directory, presigned transfers and copy-on-write restores, over
//! the `fsd-backup` crate. `service` owns the restore mounts; `validate` holds the
//! reference's path rules; `routes` parses and answers.

mod routes;
mod service;
mod validate;

pub use routes::router;
pub use service::BackupService;
pub use validate::BackupConfigError;
