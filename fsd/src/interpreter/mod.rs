//! Code contexts (Python, JavaScript, TypeScript): long-lived interpreters that keep their
//! state between calls and stream rich results. See `service` for contexts and pools,
//! `executor` for one interpreter process and its protocol.

mod error;
mod executor;
mod kind;
pub mod ops;
mod output;
mod routes;
mod service;
mod wire_error;

pub use error::InterpreterError;
pub use executor::Programs;
pub use routes::router;
pub use service::{InterpreterConfig, InterpreterService};
