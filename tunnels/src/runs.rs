//! Tunnel runs by run id, with the reference's idempotency and conflict rules (§9.1): the
//! same run id and parameters (the timeouts included) share one start; another run on the
//! same port or tunnel id
//! is a conflict; a failed start is not kept. A run whose cloudflared exits is removed and
//! its exit announced.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OnceCell, broadcast};

use crate::error::TunnelError;
use crate::process::{Config, Mode, Process};

/// What a run is asked to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec {
    pub tunnel_id: String,
    pub run_id: String,
    pub port: u16,
    pub mode: Mode,
    /// How long cloudflared may take to become ready; the daemon's default when `None`.
    pub ready_timeout: Option<Duration>,
    /// Between SIGTERM and SIGKILL when the run stops; the daemon's default when `None`.
    pub stop_grace: Option<Duration>,
}

impl RunSpec {
    /// The spec with the defaults of `config` where it names none, as runs are compared:
    /// a request that leaves the timeouts out is the same run as one that names the defaults.
    fn resolved(mut self, config: &Config) -> RunSpec {
        self.ready_timeout.get_or_insert(config.start_timeout);
        self.stop_grace.get_or_insert(config.stop_grace);
        self
    }
}

/// A running tunnel, as answers show it (never with the token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunInfo {
    pub tunnel_id: String,
    pub run_id: String,
    pub port: u16,
    /// cloudflared's pid.
    pub pid: u32,
    /// `quick` or `named`.
    pub mode: &'static str,
    /// The public URL of a quick tunnel.
    pub url: Option<String>,
    pub started_at: std::time::SystemTime,
}

/// A tunnel process that exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelExit {
    pub tunnel_id: String,
    pub run_id: String,
    pub port: u16,
    /// `quick` or `named`.
    pub mode: &'static str,
    /// `None` when a signal ended it.
    pub exit_code: Option<i32>,
}

/// A run's process and how answers show it.
struct Running {
    process: Process,
    info: RunInfo,
}

/// A run's start, shared by every ensure of the same run (set once it succeeded or failed).
type Start = Arc<OnceCell<Result<Arc<Running>, TunnelError>>>;

struct Run {
    spec: RunSpec,
    started: Start,
}

/// Every tunnel run of a daemon.
pub struct Runs {
    config: Config,
    runs: Mutex<HashMap<String, Run>>,
    exits: broadcast::Sender<TunnelExit>,
}

impl Runs {
    pub fn new(config: Config) -> Arc<Runs> {
        Arc::new(Runs {
            config,
            runs: Mutex::default(),
            exits: broadcast::channel(64).0,
        })
    }

    /// Exits of tunnel processes from now on.
    pub fn exits(&self) -> broadcast::Receiver<TunnelExit> {
        self.exits.subscribe()
    }

    /// Starts the run, or joins the start of the same run; `true` when this call started
    /// it.
    pub async fn ensure(self: &Arc<Self>, spec: RunSpec) -> Result<(RunInfo, bool), TunnelError> {
        let spec = spec.resolved(&self.config);
        let (cell, first) = {
            let mut runs = lock(&self.runs);
            if let Some(run) = runs.get(&spec.run_id) {
                if run.spec != spec {
                    return Err(TunnelError::Conflict(format!(
                        "Run {} already active with different params",
                        spec.run_id
                    )));
                }
                (run.started.clone(), false)
            } else {
                for run in runs.values() {
                    if run.spec.port == spec.port {
                        return Err(TunnelError::Conflict(format!(
                            "Port {} already active under run {}",
                            spec.port, run.spec.run_id
                        )));
                    }
                    if run.spec.tunnel_id == spec.tunnel_id {
                        return Err(TunnelError::Conflict(format!(
                            "Tunnel {} already active under run {}",
                            spec.tunnel_id, run.spec.run_id
                        )));
                    }
                }
                let started = Arc::new(OnceCell::new());
                runs.insert(
                    spec.run_id.clone(),
                    Run {
                        spec: spec.clone(),
                        started: started.clone(),
                    },
                );
                (started, true)
            }
        };
        let outcome = cell
            .get_or_init(|| self.clone().start(spec.clone()))
            .await
            .clone();
        match outcome {
            Ok(running) => Ok((running.info.clone(), first)),
            Err(error) => {
                // A failed start is not kept: the next ensure tries again.
                let mut runs = lock(&self.runs);
                if runs
                    .get(&spec.run_id)
                    .is_some_and(|run| Arc::ptr_eq(&run.started, &cell))
                {
                    runs.remove(&spec.run_id);
                }
                Err(error)
            }
        }
    }

    async fn start(self: Arc<Self>, spec: RunSpec) -> Result<Arc<Running>, TunnelError> {
        let config = Config {
            start_timeout: spec.ready_timeout.unwrap_or(self.config.start_timeout),
            stop_grace: spec.stop_grace.unwrap_or(self.config.stop_grace),
            ..self.config.clone()
        };
        let process = Process::start(&config, &spec.mode, spec.port).await?;
        let info = RunInfo {
            tunnel_id: spec.tunnel_id.clone(),
            run_id: spec.run_id.clone(),
            port: spec.port,
            pid: process.pid(),
            mode: match spec.mode {
                Mode::Quick => "quick",
                Mode::Named { .. } => "named",
            },
            url: process.url.clone(),
            started_at: std::time::SystemTime::now(),
        };
        tracing::info!(run = %spec.run_id, port = spec.port, mode = ?spec.mode, url = ?info.url, "tunnel ready");
        let mut exit = process.exit.clone();
        let runs = Arc::downgrade(&self);
        tokio::spawn(async move {
            let code = exit
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|code| *code)
                .flatten();
            let Some(runs) = runs.upgrade() else { return };
            lock(&runs.runs).remove(&spec.run_id);
            tracing::info!(run = %spec.run_id, port = spec.port, ?code, "tunnel exited");
            let mode = match spec.mode {
                Mode::Quick => "quick",
                Mode::Named { .. } => "named",
            };
            let _ = runs.exits.send(TunnelExit {
                tunnel_id: spec.tunnel_id,
                run_id: spec.run_id,
                port: spec.port,
                mode,
                exit_code: code,
            });
        });
        Ok(Arc::new(Running { process, info }))
    }

    /// Stops the run `run_id` of `tunnel_id`; false when there is no such run.
    pub async fn stop(&self, tunnel_id: &str, run_id: &str) -> bool {
        let started = {
            let runs = lock(&self.runs);
            match runs.get(run_id) {
                Some(run) if run.spec.tunnel_id == tunnel_id => run.started.clone(),
                _ => return false,
            }
        };
        if let Some(Ok(running)) = started.get() {
            running.process.stop().await;
        }
        lock(&self.runs).remove(run_id);
        true
    }

    /// The runs that are up.
    pub fn list(&self) -> Vec<RunInfo> {
        let runs = lock(&self.runs);
        let mut list: Vec<RunInfo> = runs
            .values()
            .filter_map(|run| match run.started.get() {
                Some(Ok(running)) => Some(running.info.clone()),
                _ => None,
            })
            .collect();
        list.sort_by_key(|info| info.port);
        list
    }

    /// Stops every run (shutdown).
    pub async fn shutdown(&self) {
        let all: Vec<(String, String)> = lock(&self.runs)
            .values()
            .map(|run| (run.spec.tunnel_id.clone(), run.spec.run_id.clone()))
            .collect();
        for (tunnel_id, run_id) in all {
            self.stop(&tunnel_id, &run_id).await;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
