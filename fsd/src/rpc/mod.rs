//! `/rpc`: the control plane of the official Sandbox object over capnweb (0.8, see
//! `crate::capnweb`) on one WebSocket (docs/api.md, RPC). `api` serves 0.12's `SandboxAPI`
//! methods on the domains' typed operations, `control` tells the SDK's lines apart per
//! socket (the next line's handshake and gate), `next` serves the next line's domains, and
//! `routes` upgrades.

mod api;
mod control;
mod next;
mod routes;

pub use routes::router;
