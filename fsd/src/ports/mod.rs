//! Port readiness: `POST /api/port-watch` probes a local port until it answers.
//!
//! `probe` checks once (TCP connect, or an HTTP GET read up to its status line); `routes`
//! repeats it on an interval as an SSE stream that ends with `ready`, `process_exited` or
//! `error`, and stops polling as soon as the client goes away.

mod probe;
mod routes;

use axum::Router;
use axum::routing::post;

use crate::state::AppState;

/// What a caller can get wrong in a port-watch request; `crate::error` maps it.
#[derive(Debug, thiserror::Error)]
pub enum PortWatchRequestError {
    #[error("must be between 1 and 65535")]
    Port,
    #[error("must start with / and contain no spaces or control characters")]
    Path,
    #[error("must not be above statusMax")]
    StatusRange,
}

pub fn router() -> Router<AppState> {
    Router::new().route("/api/port-watch", post(routes::watch))
}
