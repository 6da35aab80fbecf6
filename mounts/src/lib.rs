//! Bucket mounts. `fs`: the FUSE filesystem over a bucket; `mount`: mounting and
//! unmounting it; `proxy`: the credential proxy the trusted side runs, so a sandbox can
//! reach a bucket without holding its secret key; `client`: the S3 calls a mount makes.

pub mod client;
pub mod fs;
pub mod mount;
pub mod proxy;
pub mod scope;

pub use client::{ClientError, Listing, ObjectClient, ObjectInfo};
pub use mount::{BucketMount, MountError, MountSpec};
pub use proxy::{CredentialProxy, ProxyError, Upstream};
pub use scope::{Scope, ScopeDenied};
