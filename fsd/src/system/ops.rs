//! The domain's typed operations, for every transport.

use std::sync::OnceLock;

use fsd_api::system::VersionResponse;

use crate::time::now_rfc3339;

/// The SDK version this daemon speaks for (the image's, else the one it was built for) and
/// its own; what `/api/version` and the 0.12 `/rpc`'s `getVersion` answer.
pub fn version() -> VersionResponse {
    let version = crate::config::environment()
        .sandbox_version
        .clone()
        .unwrap_or_else(|| fsd_api::system::COMPATIBLE_SDK_VERSION.to_string());
    VersionResponse {
        success: true,
        version,
        fsd_version: Some(env!("CARGO_PKG_VERSION").to_string()),
        timestamp: now_rfc3339(),
    }
}

/// This daemon's runtime incarnation: made once per process start and the same for every
/// socket, so a restarted daemon is a new runtime to the next line's object (its old
/// handles are gone) and a reconnect to the same daemon is not.
pub fn incarnation() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(crate::random::uuid_v4)
}
