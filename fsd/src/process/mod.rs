//! Background processes: `/api/process/*`, and the process side of `/api/execute/stream`
//! and `background: true`.
//!
//! `ops` are its typed operations, `routes` parses and answers; `fsd_process::ProcessService`
//! starts commands through a session, follows output and kills trees, over the one
//! `ProcessTable` both lines' processes are in (so these routes read the next line's by id
//! too, and list them).

pub mod ops;
mod routes;
mod substate;
mod wire_error;

pub use routes::router;
pub use substate::ProcessState;
