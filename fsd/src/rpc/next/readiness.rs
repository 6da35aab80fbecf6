//! The next line's `ports.openWatch` and `watch` (docs/api.md, RPC: `ports` and `watch`): port
//! readiness as a subscription of event objects, a watch as a subscription of 0.12's SSE
//! bytes, and `checkChanges` as in 0.12, on the same calls the HTTP routes make.

use std::sync::Arc;

use fsd_api::ports::{PortWatchEvent, PortWatchRequest, ProbeMode};
use fsd_api::watch::{CheckChangesRequest, WatchRequest};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::args::{Answer, api_error, options, subscription, value};
use crate::capnweb::protocol::{self as capnweb, Arg};
use crate::capnweb::session::Session;
use crate::capnweb::subscription::Source;
use crate::rpc::api::invalid;
use crate::state::AppState;
use crate::wire::sse::sse_frame;

/// Serves `ports.openWatch`, `watch.watch` and `watch.checkChanges`.
pub async fn call(
    state: &AppState,
    session: &Arc<Session>,
    domain: &str,
    method: &str,
    args: Vec<Arg>,
) -> Option<Answer> {
    Some(match (domain, method) {
        ("ports", "openWatch") => open_port_watch(state, session, &args),
        ("watch", "watch") => watch(state, session, &args).await,
        ("watch", "checkChanges") => {
            let request = options(&args, 0).map(Value::Object).unwrap_or(Value::Null);
            match serde_json::from_value::<CheckChangesRequest>(request) {
                Ok(request) => crate::watch::changes(&state.watches, &state.paths, &request)
                    .await
                    .map(value)
                    .map_err(|error| api_error(&error)),
                Err(error) => Err(invalid("options", &error.to_string())),
            }
        }
        _ => return None,
    })
}

/// `openWatch(port, {mode = "tcp", path = "/", status = 200–399, interval = 500})`.
fn open_port_watch(state: &AppState, session: &Arc<Session>, args: &[Arg]) -> Answer {
    let port = match args.first() {
        Some(Arg::Json(port)) => port.as_u64().and_then(|p| u32::try_from(p).ok()),
        _ => None,
    }
    .ok_or_else(|| invalid("port", "must be an integer between 1 and 65535"))?;
    let options = options(args, 1).ok_or_else(|| invalid("options", "must be an object"))?;
    let mode = match options.get("mode").and_then(Value::as_str) {
        None | Some("tcp") => ProbeMode::Tcp,
        Some("http") => ProbeMode::Http,
        Some(_) => return Err(invalid("mode", "must be \"tcp\" or \"http\"")),
    };
    let (status_min, status_max) = match options.get("status") {
        None => (None, None),
        Some(Value::Number(code)) => {
            let code = code.as_u64().and_then(|c| u16::try_from(c).ok());
            (code, code)
        }
        Some(Value::Object(range)) => {
            let bound = |name: &str| {
                range
                    .get(name)
                    .and_then(Value::as_u64)
                    .and_then(|c| u16::try_from(c).ok())
            };
            (bound("min"), bound("max"))
        }
        Some(_) => return Err(invalid("status", "must be a status or {min, max}")),
    };
    let request = PortWatchRequest {
        port,
        mode,
        path: options
            .get("path")
            .and_then(Value::as_str)
            .map(str::to_string),
        status_min,
        status_max,
        process_id: None,
        interval: options.get("interval").and_then(Value::as_u64),
    };
    let events =
        crate::ports::readiness(&state.processes, request).map_err(|error| api_error(&error))?;
    subscription(session, Source::Objects(events.map(port_event).boxed()))
}

/// A port watch's event as the object reads it: `statusCode` is present, `undefined` in
/// TCP mode.
fn port_event(event: PortWatchEvent) -> Value {
    match event {
        PortWatchEvent::Watching { port } => json!({ "type": "watching", "port": port }),
        PortWatchEvent::Ready { port, status_code } => json!({
            "type": "ready",
            "port": port,
            "statusCode": status_code.map_or_else(capnweb::undefined, Value::from),
        }),
        PortWatchEvent::ProcessExited { port, .. } => {
            json!({ "type": "error", "port": port, "error": "the process exited" })
        }
        PortWatchEvent::Error { port, error } => {
            json!({ "type": "error", "port": port, "error": error })
        }
    }
}

/// `watch({path, recursive, include, exclude})`: the watch's SSE bytes, as 0.12 streams
/// them, behind a subscription. Refusals come before the subscription exists.
async fn watch(state: &AppState, session: &Arc<Session>, args: &[Arg]) -> Answer {
    let request = options(args, 0).map(Value::Object).unwrap_or(Value::Null);
    let request: WatchRequest =
        serde_json::from_value(request).map_err(|error| invalid("options", &error.to_string()))?;
    let events = crate::watch::events(&state.watches, &state.paths, &request)
        .await
        .map_err(|error| api_error(&error))?;
    let frames = events.map(|event| sse_frame(None, &event));
    subscription(session, Source::Bytes(frames.boxed()))
}
