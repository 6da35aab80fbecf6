//! The next line's `tunnels` (docs/api.md, RPC: `tunnels`): `ensureTunnelRun` with
//! `cloudflaredToken`, `stopTunnelRun`, and every cloudflared exit told to the latest
//! activated socket's object as `onTunnelRunExit`.

use std::sync::OnceLock;

use fsd_api::tunnels::EnsureTunnelRequest;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::args::{Answer, api_error, options};
use crate::capnweb::protocol::{self as capnweb, Arg};
use crate::error::ApiError;
use crate::rpc::api::invalid;
use crate::rpc::control;
use crate::state::AppState;

/// Serves `tunnels.ensureTunnelRun` and `tunnels.stopTunnelRun`.
pub async fn call(state: &AppState, method: &str, args: &[Arg]) -> Option<Answer> {
    let options = options(args, 0).unwrap_or_default();
    let text = |name: &str| {
        options
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    // A duration that is present but not a whole number of ms is told as out of range.
    let milliseconds = |name: &str| match options.get(name) {
        None | Some(Value::Null) => None,
        Some(value) => Some(value.as_u64().unwrap_or(0)),
    };
    Some(match method {
        "ensureTunnelRun" => {
            tell_exits(state);
            let request = EnsureTunnelRequest {
                mode: text("mode").unwrap_or_default(),
                port: options
                    .get("port")
                    .and_then(Value::as_u64)
                    .and_then(|port| u32::try_from(port).ok())
                    .unwrap_or(0),
                token: text("cloudflaredToken"),
                tunnel_id: text("tunnelId"),
                run_id: text("runId"),
                ready_timeout_ms: milliseconds("readyTimeoutMs"),
                stop_grace_ms: milliseconds("stopGraceMs"),
            };
            ensure(state, request).await
        }
        "stopTunnelRun" => {
            let (Some(tunnel), Some(run)) = (text("tunnelId"), text("runId")) else {
                return Some(Err(invalid("tunnelId", "tunnelId and runId are required")));
            };
            let stopped = state.tunnels.stop(&tunnel, &run).await;
            Ok(json!({ "stopped": stopped }))
        }
        _ => return None,
    })
}

async fn ensure(state: &AppState, request: EnsureTunnelRequest) -> Answer {
    let spec =
        crate::tunnels::run_spec(request).map_err(|error| api_error(&ApiError::from(error)))?;
    let (info, started) = state
        .tunnels
        .ensure(spec)
        .await
        .map_err(|error| api_error(&ApiError::from(error)))?;
    let run = crate::tunnels::tunnel_run(info);
    let mut shown = Map::new();
    shown.insert("tunnelId".into(), json!(run.tunnel_id));
    shown.insert("runId".into(), json!(run.run_id));
    shown.insert("mode".into(), json!(run.mode));
    shown.insert("port".into(), json!(run.port));
    // A named run's snapshot has no url or hostname.
    if run.mode == "quick" {
        shown.insert("url".into(), json!(run.url));
        shown.insert("hostname".into(), json!(run.hostname));
    }
    shown.insert("startedAt".into(), json!(run.started_at));
    Ok(capnweb::from_json(
        json!({ "run": shown, "started": started }),
    ))
}

/// Tells the control callback of every cloudflared exit from the first next-line tunnel on,
/// for the daemon's life (one follower, whichever socket is the callback at each exit).
fn tell_exits(state: &AppState) {
    static FOLLOWING: OnceLock<()> = OnceLock::new();
    if FOLLOWING.set(()).is_err() {
        return;
    }
    let mut exits = state.tunnels.exits();
    tokio::spawn(async move {
        loop {
            let exit = match exits.recv().await {
                Ok(exit) => exit,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            };
            let event = json!({
                "tunnelId": exit.tunnel_id,
                "runId": exit.run_id,
                "mode": exit.mode,
                "port": exit.port,
                "exitCode": exit.exit_code,
            });
            // Fire and forget: an object that fails is not retried.
            tokio::spawn(control::call_callback("onTunnelRunExit", vec![event]));
        }
    });
}
