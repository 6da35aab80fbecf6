//! Backups: archives of a directory, presigned transfers and copy-on-write restores, over
//! the `fsd-backup` crate. `service` owns the restore mounts; `validate` holds the
//! reference's path rules; `routes` parses and answers.

mod routes;
mod service;
mod validate;

use axum::Router;
use axum::routing::{get, post};

pub use service::BackupService;
pub use validate::BackupConfigError;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/backup/create", post(routes::create))
        .route("/api/backup/restore", post(routes::restore))
        .route("/api/backup/upload-parts", post(routes::upload_parts))
        .route("/api/backup/upload", post(routes::upload))
        .route("/api/backup/download", post(routes::download))
        .route("/api/backup/mounts", get(routes::mounts))
        .route("/api/backup/unmount", post(routes::unmount))
}
