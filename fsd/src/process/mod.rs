//! Background processes: `/api/process/*`, and the process side of `/api/execute/stream`
//! and `background: true`.
//!
//! `routes` parses and answers; [`ProcessService`] owns the table, follows output and
//! kills trees; commands start through a session (see `exec`).

mod error;
mod routes;
mod service;

use axum::Router;
use axum::routing::{delete, get, post};

pub use error::ProcessError;
pub use service::{Live, ProcessService, Stream};

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/process/start", post(routes::start))
        .route("/api/process/list", get(routes::list))
        .route("/api/process/kill-all", delete(routes::kill_all))
        .route("/api/process/{id}", get(routes::get).delete(routes::kill))
        .route("/api/process/{id}/logs", get(routes::logs))
        .route("/api/process/{id}/stream", get(routes::stream))
}
