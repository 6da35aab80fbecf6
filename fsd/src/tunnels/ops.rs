//! The domain's typed operations: a request in, a response or an [`ApiError`] out, no HTTP.
//! The routes and the 0.12 `/rpc` are codecs over these (exits are each transport's own
//! follow of `fsd_tunnels::Runs::exits`).

use std::sync::Arc;

use fsd_api::tunnels::{
    EnsureTunnelRequest, EnsureTunnelResponse, ListTunnelsResponse, StopTunnelRequest,
    StopTunnelResponse,
};

use super::requests::{run_spec, tunnel_run};
use crate::error::ApiError;
use crate::time::now_rfc3339;

/// Starts the run `req` names unless it runs already (`started: false`).
pub async fn ensure(
    tunnels: &Arc<fsd_tunnels::Runs>,
    req: EnsureTunnelRequest,
) -> Result<EnsureTunnelResponse, ApiError> {
    let spec = run_spec(req)?;
    let (info, started) = tunnels.ensure(spec).await?;
    Ok(EnsureTunnelResponse {
        success: true,
        run: tunnel_run(info),
        started,
        timestamp: now_rfc3339(),
    })
}

pub fn list(tunnels: &fsd_tunnels::Runs) -> ListTunnelsResponse {
    ListTunnelsResponse {
        success: true,
        tunnels: tunnels.list().into_iter().map(tunnel_run).collect(),
        timestamp: now_rfc3339(),
    }
}

/// Stops a run (`stopped: false` when it was not running).
pub async fn stop(tunnels: &fsd_tunnels::Runs, req: StopTunnelRequest) -> StopTunnelResponse {
    let stopped = tunnels.stop(&req.tunnel_id, &req.run_id).await;
    StopTunnelResponse {
        success: true,
        stopped,
        timestamp: now_rfc3339(),
    }
}
