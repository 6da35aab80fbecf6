//! What both sides of the trust line share about S3-compatible stores: the endpoint and its
//! keys ([`Upstream`]), SigV4 signing and key encoding ([`sign`]), the object client
//! ([`ObjectClient`]), the [`ObjectStore`] trait it implements with an in-memory store for
//! tests ([`MemoryStore`]), and the sandbox side's [`retry`] policy. Without the default `client` feature it is signing, presigning
//! and key encoding alone, with no runtime, so the Cloudflare Worker can presign as `fsctl`
//! does.
//!
//! The credential proxy holds secret keys and so belongs to the trusted side: it is behind
//! the `proxy` feature, which the daemon does not enable; the scope it enforces is
//! `fsd-control`'s plain-Rust [`fsd_control::Scope`], and what it does with one request is
//! [`forward`]'s (the `forward` feature, no runtime), which the Cloudflare Worker's proxy
//! runs too.

#[cfg(feature = "client")]
pub mod client;
#[cfg(feature = "forward")]
pub mod forward;
#[cfg(feature = "client")]
pub mod memory;
#[cfg(feature = "proxy")]
pub mod proxy;
pub mod retry;
pub mod sign;
#[cfg(feature = "client")]
pub mod store;
pub mod upstream;

#[cfg(feature = "client")]
pub use client::{ClientError, Listing, ObjectClient, ObjectInfo};
#[cfg(feature = "client")]
pub use memory::MemoryStore;
#[cfg(feature = "proxy")]
pub use proxy::{CredentialProxy, ProxyError};
#[cfg(feature = "client")]
pub use store::{ByteStream, ObjectStore};
pub use upstream::Upstream;
