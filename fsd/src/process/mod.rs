//! Background processes: `/api/process/*`, and the process side of `/api/execute/stream`
//! and `background: true`.
//!
//! `routes` parses and answers; `fsd_process::ProcessService` owns the table, follows
//! output and kills trees; commands start through a session.

mod routes;
mod wire_error;

pub use routes::router;
