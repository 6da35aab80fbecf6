//! Bucket mounts. `proxy`: the credential proxy the trusted side runs, so a sandbox can
//! reach a bucket without holding its secret key.

pub mod proxy;
pub mod scope;

pub use proxy::{CredentialProxy, ProxyError, Upstream};
pub use scope::{Scope, ScopeDenied};
