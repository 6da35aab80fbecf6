//! Tunnels: a public URL for a sandbox port through cloudflared (fsd's own routes).

use fsd_api::tunnels::{
    EnsureTunnelRequest, EnsureTunnelResponse, ListTunnelsResponse, StopTunnelRequest,
    StopTunnelResponse, TunnelRun,
};

use crate::{Sandbox, SdkError};

impl Sandbox {
    /// Starts a tunnel run to `request.port`, or joins the same run already started
    /// (`started` false then).
    pub async fn ensure_tunnel(
        &self,
        request: &EnsureTunnelRequest,
    ) -> Result<EnsureTunnelResponse, SdkError> {
        self.post_json("/api/tunnels", request).await
    }

    /// The tunnel runs that are up.
    pub async fn tunnels(&self) -> Result<Vec<TunnelRun>, SdkError> {
        let list: ListTunnelsResponse = self.get_json("/api/tunnels").await?;
        Ok(list.tunnels)
    }

    /// Stops a run; false when there was no such run.
    pub async fn stop_tunnel(&self, tunnel_id: &str, run_id: &str) -> Result<bool, SdkError> {
        let request = StopTunnelRequest {
            tunnel_id: tunnel_id.to_string(),
            run_id: run_id.to_string(),
        };
        let answer: StopTunnelResponse = self.post_json("/api/tunnels/stop", &request).await?;
        Ok(answer.stopped)
    }
}
