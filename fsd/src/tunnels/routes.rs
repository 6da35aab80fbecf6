//! The tunnel routes: thin over `fsd_tunnels::Runs`.

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use fsd_api::tunnels::{
    EnsureTunnelRequest, EnsureTunnelResponse, ListTunnelsResponse, StopTunnelRequest,
    StopTunnelResponse, TunnelEvent,
};
use futures_util::{StreamExt, stream};
use tokio::sync::broadcast::error::RecvError;

use super::ops;
use crate::error::ApiError;
use crate::time::now_rfc3339;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;

/// The domain's routes.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<fsd_tunnels::Runs>: FromRef<S>,
{
    Router::new()
        .route("/api/tunnels", post(ensure).get(list))
        .route("/api/tunnels/stop", post(stop))
        .route("/api/tunnels/events", get(events))
}

async fn ensure(
    State(tunnels): State<Arc<fsd_tunnels::Runs>>,
    JsonBody(req): JsonBody<EnsureTunnelRequest>,
) -> Result<Json<EnsureTunnelResponse>, ApiError> {
    Ok(Json(ops::ensure(&tunnels, req).await?))
}

async fn list(State(tunnels): State<Arc<fsd_tunnels::Runs>>) -> Json<ListTunnelsResponse> {
    Json(ops::list(&tunnels))
}

async fn stop(
    State(tunnels): State<Arc<fsd_tunnels::Runs>>,
    JsonBody(req): JsonBody<StopTunnelRequest>,
) -> Json<StopTunnelResponse> {
    Json(ops::stop(&tunnels, req).await)
}

/// Tunnel exits as they happen, for the trusted side (a tunnel whose cloudflared died is
/// gone and must be ensured again).
async fn events(State(tunnels): State<Arc<fsd_tunnels::Runs>>) -> Response {
    let exits = tunnels.exits();
    let events = stream::unfold(exits, |mut exits| async move {
        loop {
            match exits.recv().await {
                Ok(exit) => {
                    let event = TunnelEvent::Exited {
                        tunnel_id: exit.tunnel_id,
                        run_id: exit.run_id,
                        port: exit.port,
                        exit_code: exit.exit_code,
                        timestamp: now_rfc3339(),
                    };
                    return Some((event, exits));
                }
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return None,
            }
        }
    });
    sse_response(events.boxed())
}
