//! `/rpc`: the control plane of the official Sandbox object over capnweb (0.8) on one
//! WebSocket (`reference-rpc.md`). `wire` reads and writes the protocol's messages and
//! expressions, `session` keeps one connection's tables, pipes and limits, `api` serves the
//! `SandboxAPI` methods through the same routes as HTTP, `control` tells the SDK's lines
//! apart per socket (the next line's handshake and gate), and `routes` upgrades.

mod api;
mod control;
mod routes;
mod session;
mod wire;

pub use routes::router;
