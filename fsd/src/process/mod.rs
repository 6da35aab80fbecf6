//! Background processes: `/api/process/*`, and the process side of `/api/execute/stream`
//! and `background: true`.
//!
//! `ops` are its typed operations, `routes` parses and answers; `fsd_process::ProcessService` owns the table, follows
//! output and kills trees; commands start through a session. `next_records` shows the
//! next line's processes (this daemon's and, ended, those of the daemons before it) to the
//! same routes by id.

mod next_records;
pub mod ops;
mod routes;
mod substate;
mod wire_error;

pub use routes::router;
pub use substate::ProcessState;
