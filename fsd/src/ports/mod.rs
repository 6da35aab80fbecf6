//! Port readiness: `POST /api/port-watch` probes a local port until it answers.
//!
//! `probe` checks once (TCP connect, or an HTTP GET read up to its status line); `routes`
//! repeats it on an interval as an SSE stream that ends with `ready`, `process_exited` or
//! `error`, and stops polling as soon as the client goes away.

mod error;
mod probe;
mod readiness;
mod routes;
mod wire_error;

pub use readiness::readiness;
pub use routes::router;
