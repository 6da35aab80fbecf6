//! Port readiness as a typed call: what `POST /api/port-watch`, 0.12's `/rpc` and the next
//! line's `ports.openWatch` all run.

use std::time::Duration;

use fsd_api::ports::{PortWatchEvent, PortWatchRequest, ProbeMode};
use futures_util::{Stream, StreamExt, stream};

use super::error::PortWatchRequestError;
use super::probe;
use crate::error::ApiError;
use fsd_process::ProcessService;

/// Probes a port until it answers as `req` asks: `watching` at once, then `ready` (or
/// `process_exited` when the named process ends first), after which the stream ends. It
/// never gives up on its own; dropping the stream stops the polling. Every transport's
/// port watch is this call.
pub fn readiness(
    processes: &ProcessService,
    req: PortWatchRequest,
) -> Result<impl Stream<Item = PortWatchEvent> + Send + 'static, ApiError> {
    let port = u16::try_from(req.port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| ApiError::from(PortWatchRequestError::Port))?;
    let path = req.path.clone().unwrap_or_else(|| "/".into());
    if !path.starts_with('/') || path.chars().any(|c| c.is_control() || c == ' ') {
        return Err(PortWatchRequestError::Path.into());
    }
    let (min, max) = (req.status_min.unwrap_or(200), req.status_max.unwrap_or(399));
    if min > max {
        return Err(PortWatchRequestError::StatusRange.into());
    }
    let process = match &req.process_id {
        Some(id) => Some(processes.get(id)?),
        None => None,
    };
    let interval = Duration::from_millis(req.interval.unwrap_or(500).clamp(100, 10_000));
    let port_number = req.port;
    let polling = stream::unfold(false, move |finished| {
        let (path, process) = (path.clone(), process.clone());
        async move {
            if finished {
                return None;
            }
            loop {
                if let Some(process) = &process {
                    let info = process.info();
                    if info.status.is_terminal() {
                        return Some((
                            PortWatchEvent::ProcessExited {
                                port: port_number,
                                exit_code: info.exit_code,
                            },
                            true,
                        ));
                    }
                }
                match req.mode {
                    ProbeMode::Tcp if probe::tcp(port).await => {
                        return Some((
                            PortWatchEvent::Ready {
                                port: port_number,
                                status_code: None,
                            },
                            true,
                        ));
                    }
                    ProbeMode::Http => {
                        if let Some(code) = probe::http_status(port, &path).await
                            && (min..=max).contains(&code)
                        {
                            return Some((
                                PortWatchEvent::Ready {
                                    port: port_number,
                                    status_code: Some(code),
                                },
                                true,
                            ));
                        }
                    }
                    ProbeMode::Tcp => {}
                }
                tokio::time::sleep(interval).await;
            }
        }
    });
    let first = stream::once(async move { PortWatchEvent::Watching { port: port_number } });
    Ok(first.chain(polling))
}
