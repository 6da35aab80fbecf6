//! WebSockets: `/ws` and `/api/ws` carry the route API (`transport`), with `sse` reading a
//! streaming route's body back into events. A request to these paths that is not an
//! upgrade is an unknown route, as in the reference.

mod routes;
mod sse;
mod transport;

pub use routes::router;
