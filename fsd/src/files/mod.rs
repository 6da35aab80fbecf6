//! Files: the reference's file routes and fsd's raw transfer and stat extensions.
//!
//! `routes` and `raw` parse and answer; [`FileService`] does the work; `paths` decides what a
//! path means and whether it is allowed; `atomic` makes every write all-or-nothing; `special` keeps FIFOs, devices and procfs
//! files from holding a request forever.

pub(crate) mod atomic;
mod error;
mod json_write;
mod listing;
mod mime;
pub mod paths;
mod raw;
mod routes;
mod scratch_log;
mod service;
mod session_path;
mod special;
mod stream;

use axum::Router;
use axum::routing::{get, post};

pub use error::FileError;
pub use scratch_log::ScratchLog;
pub use service::FileService;
pub use special::is_stalled;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/read", post(routes::read))
        .route("/api/read/stream", post(routes::read_stream))
        .route("/api/write", post(routes::write))
        .route("/api/delete", post(routes::delete))
        .route("/api/rename", post(routes::rename))
        .route("/api/move", post(routes::move_file))
        .route("/api/mkdir", post(routes::mkdir))
        .route("/api/list-files", post(routes::list_files))
        .route("/api/exists", post(routes::exists))
        .route("/api/stat", post(routes::stat))
        .route("/api/files/raw", get(raw::download).put(raw::upload))
}
