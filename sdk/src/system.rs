//! Health, version and host capabilities.

use fsd_api::system::{Capabilities, CapabilitiesResponse, PingResponse, VersionResponse};

use crate::{Sandbox, SdkError};

impl Sandbox {
    /// `true` when the daemon answers healthy.
    pub async fn ping(&self) -> Result<bool, SdkError> {
        let reply: PingResponse = self.get_json("/api/ping").await?;
        Ok(reply.success && reply.status == "healthy")
    }

    pub async fn version(&self) -> Result<String, SdkError> {
        let reply: VersionResponse = self.get_json("/api/version").await?;
        Ok(reply.version)
    }

    pub async fn capabilities(&self) -> Result<Capabilities, SdkError> {
        let reply: CapabilitiesResponse = self.get_json("/api/capabilities").await?;
        Ok(reply.capabilities)
    }
}
