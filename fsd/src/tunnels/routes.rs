//! The tunnel routes: thin over `fsd_tunnels::Runs`.

use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use fsd_api::tunnels::{
    EnsureTunnelRequest, EnsureTunnelResponse, ListTunnelsResponse, StopTunnelRequest,
    StopTunnelResponse, TunnelEvent, TunnelRun,
};
use fsd_tunnels::{Mode, RunInfo, RunSpec};
use futures_util::{StreamExt, stream};
use tokio::sync::broadcast::error::RecvError;

use super::error::TunnelRequestError;
use crate::error::ApiError;
use crate::state::AppState;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;
use crate::wire::time::now_rfc3339;

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
    let spec = run_spec(req)?;
    let (info, started) = state.tunnels.ensure(spec).await?;
    Ok(Json(EnsureTunnelResponse {
        success: true,
        run: tunnel_run(info),
        started,
        timestamp: now_rfc3339(),
    }))
}

async fn list(State(state): State<AppState>) -> Json<ListTunnelsResponse> {
    Json(ListTunnelsResponse {
        success: true,
        tunnels: state.tunnels.list().into_iter().map(tunnel_run).collect(),
        timestamp: now_rfc3339(),
    })
}

async fn stop(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<StopTunnelRequest>,
) -> Json<StopTunnelResponse> {
    let stopped = state.tunnels.stop(&req.tunnel_id, &req.run_id).await;
    Json(StopTunnelResponse {
        success: true,
        stopped,
        timestamp: now_rfc3339(),
    })
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

/// The run a request asks for, checked.
fn run_spec(req: EnsureTunnelRequest) -> Result<RunSpec, TunnelRequestError> {
    let port = u16::try_from(req.port)
        .ok()
        .filter(|&port| port > 0)
        .ok_or(TunnelRequestError::Port)?;
    let mode = match (req.mode.as_str(), req.token) {
        ("quick", None) => Mode::Quick,
        ("quick", Some(_)) => return Err(TunnelRequestError::TokenUnexpected),
        ("named", Some(token)) if !token.trim().is_empty() => Mode::Named { token },
        ("named", _) => return Err(TunnelRequestError::TokenMissing),
        _ => return Err(TunnelRequestError::Mode),
    };
    let tunnel_id = match req.tunnel_id {
        Some(id) => checked_id(id, "tunnelId")?,
        None => format!("{}-{port}", req.mode),
    };
    let run_id = match req.run_id {
        Some(id) => checked_id(id, "runId")?,
        None => tunnel_id.clone(),
    };
    Ok(RunSpec {
        tunnel_id,
        run_id,
        port,
        mode,
    })
}

fn checked_id(id: String, field: &'static str) -> Result<String, TunnelRequestError> {
    let valid = (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if valid {
        Ok(id)
    } else {
        Err(TunnelRequestError::Id { field })
    }
}

fn tunnel_run(info: RunInfo) -> TunnelRun {
    let hostname = info
        .url
        .as_deref()
        .and_then(|url| url.strip_prefix("https://"))
        .map(|host| host.trim_end_matches('/').to_string());
    let started = chrono::DateTime::<chrono::Utc>::from(info.started_at)
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    TunnelRun {
        tunnel_id: info.tunnel_id,
        run_id: info.run_id,
        mode: info.mode.to_string(),
        port: info.port,
        url: info.url,
        hostname,
        started_at: started,
    }
}
