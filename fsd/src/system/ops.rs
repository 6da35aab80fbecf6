//! The domain's typed operations, for every transport.

use fsd_api::system::VersionResponse;

use crate::wire::time::now_rfc3339;

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
