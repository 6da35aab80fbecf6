//! Processes started from an argv (the SDK's next line's `processes`, docs/api.md, RPC): no
//! shell, no session, the base environment overlaid with the caller's, stdin closed,
//! stdout and stderr into a [`SequencedLog`] on disk. Each runs under its own supervisor in
//! the sandbox's process world, so it is `running` until everything it started has ended
//! (a subreaper sees even what detached), and then `exited` with its own outcome: its code,
//! or 128+n with the signal n that ended it, and whether its lifetime ran out. They live
//! in the one [`ProcessTable`] beside 0.12's, kept and bounded as those are.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::proctree;
use crate::reporting::{NotStarted, Spawned, exit_report, spawn_reporting};
use crate::seqlog::{Kind, LogError, SequencedLog};
use crate::spawner::{SpawnRequest, overlaid};
use crate::stop;
use crate::supervisor::OnExit;
pub use crate::table::{Exit, Failure, Outcome};
use crate::table::{Launcher, Process, ProcessTable, Record};
use crate::world::World;

/// How long output may keep coming after the whole tree ended (a descriptor passed out of
/// it); past this the log is closed without it.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// How long a process past its lifetime has between SIGTERM and SIGKILL.
const LIFETIME_GRACE: Duration = Duration::from_secs(1);
/// The most one pipe read takes: one event.
const READ_BYTES: usize = 64 * 1024;

/// What an argv starts with and where.
#[derive(Debug, Clone)]
pub struct ArgvConfig {
    pub base_env: Vec<(String, String)>,
    pub workspace: PathBuf,
    pub world: Arc<World>,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct ArgvSpec {
    pub argv: Vec<String>,
    /// Default: the workspace.
    pub cwd: Option<PathBuf>,
    /// Laid over the base environment.
    pub env: Vec<(String, String)>,
    /// The lifetime: SIGTERM to the tree past it, SIGKILL a second later.
    pub timeout: Option<Duration>,
}

/// What a caller can get wrong, or what went wrong starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Command(&'static str),
    #[error("Process cwd is invalid: {reason}")]
    Cwd { cwd: String, reason: String },
    #[error("Process environment is invalid: {reason}")]
    Environment { name: String, reason: &'static str },
    #[error("Failed to start process: {message}")]
    Spawn { command: String, message: String },
    #[error(transparent)]
    Log(#[from] LogError),
}

/// What `kill` can refuse.
#[derive(Debug, thiserror::Error)]
pub enum KillError {
    #[error("Process {0} not found")]
    NotFound(String),
    #[error("signal must be an integer from 1 through 64")]
    Signal,
    #[error("{message}")]
    Failed { message: String },
}

/// The next line's processes: started from an argv into the one [`ProcessTable`], where
/// its calls read every process this daemon runs or ran (0.12's too).
pub struct ArgvProcesses {
    config: ArgvConfig,
    table: Arc<ProcessTable>,
}

impl ArgvProcesses {
    pub fn new(config: ArgvConfig, table: Arc<ProcessTable>) -> Arc<Self> {
        Arc::new(Self { config, table })
    }

    /// Process `id` of this daemon, whichever line started it.
    pub fn get(&self, id: &str) -> Option<Arc<Process>> {
        self.table.current(id)
    }

    /// This daemon's running and kept ended processes, in the order they started.
    pub fn list(&self) -> Vec<Record> {
        self.table
            .all(false)
            .iter()
            .map(|process| process.record())
            .collect()
    }

    /// Whether any process runs (what keeps a sandbox awake).
    pub fn has_active(&self) -> bool {
        !self.table.running().is_empty()
    }

    /// Starts `spec` as process `id` and returns once it runs (or could not start).
    pub async fn start(self: &Arc<Self>, id: String, spec: ArgvSpec) -> Result<Record, StartError> {
        let (program, _) = spec.argv.split_first().ok_or(StartError::Command(
            "Process command must include an executable",
        ))?;
        if program.is_empty() {
            return Err(StartError::Command(
                "Process executable must be a non-empty string",
            ));
        }
        if spec.argv.iter().any(|arg| arg.contains('\0')) {
            return Err(StartError::Command(
                "Process argv members must be strings without NUL",
            ));
        }
        for (name, value) in &spec.env {
            let reason = if name.is_empty() {
                Some("name must be non-empty")
            } else if name.contains('=') || name.contains('\0') {
                Some("name must not contain '=' or NUL")
            } else if value.contains('\0') {
                Some("value must not contain NUL")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(StartError::Environment {
                    name: name.clone(),
                    reason,
                });
            }
        }
        let cwd = spec
            .cwd
            .clone()
            .unwrap_or_else(|| self.config.workspace.clone());
        check_cwd(&cwd, &self.config.world)?;
        let log = self.table.create_log(&id)?;
        let spawn_failed = |message: String| StartError::Spawn {
            command: spec.argv.join(" "),
            message,
        };
        let env = overlaid(&self.config.base_env, &spec.env);
        let world = &self.config.world;
        let request = SpawnRequest {
            program: spec.argv.clone(),
            cwd: cwd.clone(),
            within: world.within().to_vec(),
            on_exit: OnExit::Linger,
            terminal: false,
            env,
        };
        let Spawned {
            pid,
            supervisor,
            output,
            reports: mut status_lines,
        } = match spawn_reporting(world, request, None).await {
            Ok(started) => started,
            Err(NotStarted::Cwd(reason)) => {
                self.table.discard(&id);
                return Err(StartError::Cwd {
                    cwd: cwd.display().to_string(),
                    reason,
                });
            }
            Err(NotStarted::Failed(message)) => {
                self.table.discard(&id);
                return Err(spawn_failed(message));
            }
        };
        let record = Record {
            id: id.clone(),
            pid,
            launcher: Launcher::Argv {
                argv: spec.argv.clone(),
            },
            cwd: cwd.clone(),
            started_at: crate::time::now_rfc3339(),
            outcome: Outcome::Running,
            ended_at: None,
            kill_requested: false,
            cpu_seconds: None,
        };
        let process = Process::new(record.clone(), supervisor, log, None);
        self.table.insert(Arc::clone(&process));
        if let Some(limit) = spec.timeout {
            let process = Arc::clone(&process);
            tokio::spawn(async move {
                let mut ended = process.ended.subscribe();
                tokio::select! {
                    () = async { drop(ended.wait_for(|ended| *ended).await) } => {}
                    () = tokio::time::sleep(limit) => {
                        process.timed_out.store(true, Ordering::Release);
                        end_lifetime(process.supervisor).await;
                    }
                }
            });
        }
        let table = Arc::clone(&self.table);
        tokio::spawn(async move {
            // Output and status are read by this one task, so that the end of a process
            // is not handed between tasks (each hand-off a wake of another thread).
            let log = &process.log;
            let mut drained = std::pin::pin!(async {
                if let Some((stdout, stderr)) = output {
                    tokio::join!(
                        drain(stdout, Kind::Stdout, log),
                        drain(stderr, Kind::Stderr, log)
                    );
                }
            });
            let mut reported = std::pin::pin!(exit_report(&mut status_lines));
            let exit = tokio::select! {
                exit = &mut reported => {
                    // The status pipe ends with the supervisor, once nothing is left below
                    // it; output held open elsewhere is read a little longer.
                    let _ = tokio::time::timeout(DRAIN_LIMIT, &mut drained).await;
                    exit
                }
                () = &mut drained => reported.await,
            };
            let timed_out = process.timed_out.load(Ordering::Acquire);
            let outcome = match exit {
                Some((code, signal)) => Outcome::Exited(Exit {
                    code,
                    signal: (signal > 0).then_some(signal),
                    timed_out,
                }),
                None => Outcome::Failed(Failure {
                    code: "EXIT_FAILED".into(),
                    message: "the process's supervisor ended without its exit status".into(),
                }),
            };
            table.end(&process, outcome);
        });
        Ok(record)
    }

    /// Sends signal `signal` (1–64) to everything the process started (a session's
    /// command as 0.12's signal route does it); a no-op once it has exited.
    pub fn kill(&self, id: &str, signal: i32) -> Result<(), KillError> {
        let process = self
            .get(id)
            .ok_or_else(|| KillError::NotFound(id.to_string()))?;
        if !(1..=64).contains(&signal) {
            return Err(KillError::Signal);
        }
        match process.record().outcome {
            Outcome::Exited(_) => return Ok(()),
            Outcome::Failed(failure) => {
                return Err(KillError::Failed {
                    message: failure.message,
                });
            }
            Outcome::Running => {}
        }
        process.signal_tree(signal);
        Ok(())
    }

    /// Waits until the process `id` has ended (at once if it has, or is unknown).
    pub async fn wait(&self, id: &str) {
        if let Some(process) = self.get(id) {
            process.wait().await;
        }
    }
}

/// Ends what runs below `supervisor` as the reference ends a process past its lifetime:
/// SIGTERM, a second's grace, then SIGKILL until nothing is left.
async fn end_lifetime(supervisor: u32) {
    if supervisor <= 1 {
        return;
    }
    proctree::signal_all(
        &proctree::living_below(supervisor),
        nix::sys::signal::Signal::SIGTERM,
    );
    let deadline = tokio::time::Instant::now() + LIFETIME_GRACE;
    while tokio::time::Instant::now() < deadline {
        if proctree::living_below(supervisor).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = tokio::task::spawn_blocking(move || {
        stop::kill_until_gone(|| proctree::living_below(supervisor), || {})
    })
    .await;
}

/// The reference's cwd checks: given, a directory, enterable; under `--confine`, inside.
fn check_cwd(cwd: &Path, world: &World) -> Result<(), StartError> {
    let refused = |reason: &str| StartError::Cwd {
        cwd: cwd.display().to_string(),
        reason: reason.to_string(),
    };
    if cwd.as_os_str().is_empty() {
        return Err(refused("cwd must be non-empty"));
    }
    match std::fs::metadata(cwd) {
        Err(error) => return Err(refused(&error.to_string())),
        Ok(meta) if !meta.is_dir() => return Err(refused("not a directory")),
        Ok(_) => {}
    }
    if nix::unistd::access(cwd, nix::unistd::AccessFlags::X_OK).is_err() {
        return Err(refused("not searchable"));
    }
    if !world.admits(cwd) {
        return Err(refused("outside the directories commands may run in"));
    }
    Ok(())
}

/// Reads one output pipe into the log, one event per read, until its end.
async fn drain(mut pipe: impl AsyncRead + Unpin, kind: Kind, log: &SequencedLog) {
    let mut buffer = vec![0u8; READ_BYTES];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                let at_ms = chrono::Utc::now().timestamp_millis();
                if let Err(error) = log.append(kind, at_ms, &buffer[..read]) {
                    tracing::warn!(%error, "process output could not be logged");
                }
            }
        }
    }
}
