//! File watching: `/api/watch` (SSE) and `/api/watch/check` (change tokens), over the
//! `fsd-watch` engine. `service` shares one engine and journal per watch key; `journal`
//! keeps the events a token can ask about; `changes` turns a window of them into the list
//! that makes the old tree the new one; `routes` validates and answers.

mod changes;
mod error;
mod journal;
mod key;
mod persist;
mod routes;
mod service;

use axum::Router;
use axum::routing::post;

pub use error::WatchRequestError;
pub use service::WatchService;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/watch", post(routes::watch))
        .route("/api/watch/check", post(routes::check))
}
