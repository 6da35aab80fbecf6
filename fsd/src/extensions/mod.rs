//! Extensions (docs/api.md, RPC: `extensions`): packages the object sends as tarballs,
//! provisioned with Bun (`package`), each run as one sidecar shared by every connection and
//! reached over capnweb on a unix socket (`sidecar`). The interpreter's package is not
//! run this way: fsd serves it on its own code contexts (`rpc::next::extensions`).

mod error;
mod host;
mod package;
mod sidecar;

pub use error::ExtensionError;
pub use host::{ExtensionConfig, ExtensionHost};
pub use package::ConnectOptions;
