//! File watching: `/api/watch` (SSE) and `/api/watch/check` (change tokens), over the
//! `fsd-watch` engine. `service` shares one engine and journal per watch key; `journal`
//! keeps the events a token can ask about; `fsd_watch::changes` turns a window of them into
//! the list that makes the old tree the new one; `routes` validates and answers.

mod error;
mod journal;
mod key;
mod operations;
mod persist;
mod routes;
mod service;
mod snapshot;
mod wire_error;

pub use operations::{changes, events};
pub use routes::router;
pub use service::WatchService;
pub use snapshot::token_and_changes;
