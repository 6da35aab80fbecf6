//! What both sides of the trust line share about S3-compatible stores: the endpoint and its
//! keys ([`Upstream`]), SigV4 signing and key encoding ([`sign`]), the object client
//! ([`ObjectClient`]), the [`ObjectStore`] trait it implements with an in-memory store for
//! tests ([`MemoryStore`]).
//!
//! The credential proxy holds secret keys and so belongs to the trusted side: it is behind
//! the `proxy` feature, which the daemon does not enable; the scope it enforces is
//! `fsd-control`'s plain-Rust [`fsd_control::Scope`] (with the feature).

pub mod client;
pub mod memory;
#[cfg(feature = "proxy")]
pub mod proxy;
pub mod sign;
pub mod store;
pub mod upstream;

pub use client::{ClientError, Listing, ObjectClient, ObjectInfo};
pub use memory::MemoryStore;
#[cfg(feature = "proxy")]
pub use proxy::{CredentialProxy, ProxyError};
pub use store::{ByteStream, ObjectStore};
pub use upstream::Upstream;
