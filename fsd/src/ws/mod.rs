//! WebSockets: `/ws` and `/api/ws` carry the route API (`transport`), a streaming route's
//! body read back into events by `wire::sse_parse`. A request to these paths that is not an
//! upgrade is an unknown route, as in the reference.

mod routes;
mod transport;

pub use routes::router;
