//! Files: the reference's file routes and fsd's raw transfer and stat extensions.
//!
//! `ops` are its typed JSON operations; `routes` and `raw` parse and answer; [`FileService`] does the work (its paths resolved by
//! `crate::paths`), `transfer` its streamed writes and reads for every transport; `atomic` makes every write all-or-nothing; `special` keeps FIFOs, devices and procfs
//! files from holding a request forever.

mod across;
mod apply;
mod archive;
pub(crate) mod atomic;
pub mod durability;
mod error;
mod json_write;
mod listing;
mod manifest;
mod mime;
pub mod ops;
mod permissions;
mod raw;
mod routes;
mod scratch_log;
mod service;
mod special;
mod stream;
mod transfer;
mod wire_error;
pub mod workspace_archive;

pub use routes::router;
pub use scratch_log::ScratchLog;
pub use service::FileService;
pub use stream::events as read_events;
