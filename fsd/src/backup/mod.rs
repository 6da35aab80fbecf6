//! Backups: archives of a directory, presigned transfers and copy-on-write restores, over
//! the `fsd-backup` crate. `service` owns the restore mounts; `validate` holds the
//! reference's path rules; `routes` parses and answers; `history` and `extract` serve the
//! time machine (a live tree's index, paths brought back from a stored snapshot);
//! `pending` removes at start what a create killed half way wrote; `fork` serves workspace
//! forks and their branches, `merge` merges a branch back.

mod extract;
pub mod fork;
mod history;
mod holders;
mod merge;
pub mod operations;
mod pending;
mod request;
mod routes;
mod service;
mod substate;
mod validate;
mod wire_error;

pub use routes::router;
pub use service::BackupService;
pub use substate::BackupState;
pub use validate::UrlRule;
