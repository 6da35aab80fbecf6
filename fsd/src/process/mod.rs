//! Background processes: `/api/process/*`, and the process side of `/api/execute/stream`
//! and `background: true`.
//!
//! `routes` parses and answers; [`ProcessService`] owns the table, follows output and
//! kills trees; commands start through a session (see `exec`).

mod error;
mod routes;
mod service;

pub use error::ProcessError;
pub use routes::router;
pub use service::{Live, ProcessService, Stream};
