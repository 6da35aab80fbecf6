//! Bucket mounts: `POST /api/mounts`, `DELETE /api/mounts`, `GET /api/mounts`, over the
//! `fsd-mounts` FUSE filesystem. `service` owns the mounts; `validate` holds the reference's
//! rules; `routes` parses and answers.

mod routes;
mod service;
mod validate;

use axum::Router;
use axum::routing::get;

pub use service::{MountService, MountServiceError};
pub use validate::MountConfigError;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route(
        "/api/mounts",
        get(routes::list)
            .post(routes::mount)
            .delete(routes::unmount),
    )
}
