//! `POST /api/git/checkout`: clone a repository into the sandbox, with the reference's
//! error classes told apart more finely and credentials redacted everywhere (the success
//! answer too).

mod classify;
pub mod ops;
mod redact;
mod routes;
mod service;
mod wire_error;

pub use routes::router;
