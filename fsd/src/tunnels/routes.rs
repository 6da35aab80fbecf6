//! The tunnel routes: thin over `fsd_tunnels::Runs`.

use axum::extract::State;
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
use crate::state::AppState;
use crate::time::now_rfc3339;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;

/// The domain's routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/tunnels", post(ensure).get(list))
        .route("/api/tunnels/stop", post(stop))
        .route("/api/tunnels/events", get(events))
}

async fn ensure(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<EnsureTunnelRequest>,
) -> Result<Json<EnsureTunnelResponse>, ApiError> {
    Ok(Json(ops::ensure(&state, req).await?))
}

async fn list(State(state): State<AppState>) -> Json<ListTunnelsResponse> {
    Json(ops::list(&state))
}

async fn stop(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<StopTunnelRequest>,
) -> Json<StopTunnelResponse> {
    Json(ops::stop(&state, req).await)
}

/// Tunnel exits as they happen, for the trusted side (a tunnel whose cloudflared died is
/// gone and must be ensured again).
async fn events(State(state): State<AppState>) -> Response {
    let exits = state.tunnels.exits();
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
