//! Search: `POST /api/search`, `/api/search/stream` and `/api/replace`, over the
//! `fsd-search` engine (ripgrep's walk and matcher). `request` checks what a search asks for, `routes` runs it
//! and answers, `wire_error` gives the wire codes.

mod request;
mod routes;
mod wire_error;

pub use routes::router;
