//! `/rpc`: the control plane of the official Sandbox object over capnweb (0.8) on one
//! WebSocket (docs/api.md, RPC). `capnweb` reads and writes the protocol's messages and
//! expressions, `session` keeps one connection's tables, pipes and limits, `api` serves the
//! `SandboxAPI` methods through the same routes as HTTP, `control` tells the SDK's lines
//! apart per socket (the next line's handshake and gate), `next` serves the next line's
//! domains on the services, `subscription` is the next line's exported stream object, and
//! `routes` upgrades. `link` runs a session over an extension sidecar's socket, and
//! `forward` passes objects between two sessions.

mod api;
mod capnweb;
mod control;
mod forward;
pub mod link;
mod next;
mod routes;
pub mod session;
mod subscription;

pub use control::incarnation;
pub use routes::router;
