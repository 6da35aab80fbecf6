//! Trusted-side policy in plain Rust: no I/O, no async runtime and no platform crates, so
//! `fsctl` and (later) the Cloudflare Worker run the same rules: the scope a credential
//! proxy grants ([`Scope`]), and preview URLs (`preview`: ports, tokens, hosts, staleness).

pub mod preview;
pub mod scope;

pub use scope::{Scope, ScopeDenied};
