//! capnweb (0.8), the object protocol both SDK lines speak on `/rpc` and fsd speaks to its
//! extension sidecars: `protocol` reads and writes its messages and expressions, `session`
//! keeps one connection's tables, pipes and limits, `subscription` is an exported stream
//! object, `link` runs a session over a sidecar's framed unix socket (fsd the client),
//! `forward` passes objects between two sessions, and `text` writes and reads a frame's JSON.
//! No domain and no call here: the transports (`rpc`) and the extension host use it.

pub mod forward;
pub mod link;
pub mod protocol;
pub mod session;
pub mod subscription;
mod text;
