//! Trusted-side policy in plain Rust: no I/O, no async runtime and no platform crates, so
//! `fsctl` and the Cloudflare Worker (`worker/`) run the same rules: the scope a credential
//! proxy grants ([`Scope`]), preview URLs (`preview`: ports, tokens, hosts, staleness; and
//! `exposures`, a sandbox's exposed ports as both keep them), and
//! the Sandbox Durable Object's lifecycle (`sandbox`: ids, `sleepAfter`, the 503 budget),
//! backups as the bucket keeps them (`backup`: keys, the meta document, TTLs), and bucket
//! mounts served by the object's credential proxy (`mounts`: routing, tokens, the saved
//! list, and the bucket-name and key-prefix rules the daemon's mounts share), and which snapshots a retention
//! policy keeps (`retention`: restic's `forget` rules, chains never broken).

pub mod backup;
pub mod exposures;
pub mod mounts;
pub mod preview;
pub mod retention;
pub mod sandbox;
pub mod scope;
pub mod xml;

pub use scope::{Scope, ScopeDenied};
