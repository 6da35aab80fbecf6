//! Sessions and commands: `/api/session/*` and `/api/execute`, over the process world of
//! `fsd-process`. `request` checks what a command request says, whichever route brought it;
//! `ops` are its typed operations, `routes` parses and answers; `wire_error` gives the wire codes.

mod error;
pub mod ops;
mod request;
mod routes;
mod substate;
mod wire_error;

pub use request::{CommandRequest, DEFAULT_SESSION, signal_named, stdin_write};
pub use routes::router;
pub use substate::ExecState;
