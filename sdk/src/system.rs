//! Health, version, host capabilities and resource figures.

use fsd_api::metrics::MetricsResponse;
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

    /// The sandbox's CPU, memory, disks, connections and processes (`GET /api/metrics`).
    pub async fn metrics(&self) -> Result<MetricsResponse, SdkError> {
        self.get_json("/api/metrics").await
    }
}
