//! What a tunnel request asks for, checked, and a run as answers show it: shared by the
//! routes and the next line's `tunnels` domain.

use std::time::Duration;

use fsd_api::tunnels::{EnsureTunnelRequest, TunnelRun};
use fsd_tunnels::{Mode, RunInfo, RunSpec};

use super::error::TunnelRequestError;

/// The run a request asks for, checked.
pub fn run_spec(req: EnsureTunnelRequest) -> Result<RunSpec, TunnelRequestError> {
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
        ready_timeout: checked_ms(req.ready_timeout_ms, MAX_READY_MS, "readyTimeoutMs")?,
        stop_grace: checked_ms(req.stop_grace_ms, MAX_STOP_GRACE_MS, "stopGraceMs")?,
    })
}

/// The longest a run may be given to become ready (10 minutes).
const MAX_READY_MS: u64 = 600_000;
/// The longest grace a run's stop may be given (1 minute).
const MAX_STOP_GRACE_MS: u64 = 60_000;

fn checked_ms(
    ms: Option<u64>,
    max: u64,
    field: &'static str,
) -> Result<Option<Duration>, TunnelRequestError> {
    match ms {
        None => Ok(None),
        Some(ms) if (1..=max).contains(&ms) => Ok(Some(Duration::from_millis(ms))),
        Some(_) => Err(TunnelRequestError::Milliseconds { field, max }),
    }
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

pub fn tunnel_run(info: RunInfo) -> TunnelRun {
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
