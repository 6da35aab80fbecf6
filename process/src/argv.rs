//! Processes started from an argv (the SDK's next line's `processes`, docs/api.md, RPC): no
//! shell, no session, the base environment overlaid with the caller's, stdin closed,
//! stdout and stderr into a [`SequencedLog`] on disk. Each runs under its own supervisor in
//! the sandbox's process world, so it is `running` until everything it started has ended
//! (a subreaper sees even what detached), and then `exited` with its own outcome: its code,
//! or 128+n with the signal n that ended it, and whether its lifetime ran out. Ended ones
//! are kept up to a bound, oldest dropped first, with their logs.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

use crate::proctree;
use crate::reporting::{NotStarted, Spawned, exit_report, spawn_reporting};
use crate::seqlog::{Kind, LogError, SequencedLog};
use crate::spawner::{SpawnRequest, overlaid};
use crate::stop;
use crate::supervisor::OnExit;
use crate::world::World;

/// How long output may keep coming after the whole tree ended (a descriptor passed out of
/// it); past this the log is closed without it.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// How long a process past its lifetime has between SIGTERM and SIGKILL.
const LIFETIME_GRACE: Duration = Duration::from_secs(1);
/// The most one pipe read takes: one event.
const READ_BYTES: usize = 64 * 1024;

/// Where processes keep their logs, how much, and how many ended ones are kept.
#[derive(Debug, Clone)]
pub struct ArgvConfig {
    /// Each process's log and record live in `<dir>/<id>/`. A new daemon is a new runtime
    /// (none of them is its process), but what a daemon before it left there stays
    /// readable by id (`ArgvProcesses::find`), the newest `retained` of it.
    pub dir: PathBuf,
    pub log_bytes: u64,
    pub retained: usize,
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

/// How a process ended, as the wire carries it (`exit` / `error`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Exit {
    pub code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub timed_out: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Running,
    Exited(Exit),
    Failed(Failure),
}

/// A process as `get` and `list` report it.
#[derive(Debug, Clone)]
pub struct ArgvStatus {
    pub id: String,
    /// As the sandbox sees it (its PID namespace).
    pub pid: u32,
    pub command: Vec<String>,
    pub cwd: PathBuf,
    pub started_at: String,
    pub outcome: Outcome,
    pub ended_at: Option<String>,
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

/// One process.
pub struct ArgvProcess {
    status: Mutex<ArgvStatus>,
    /// The supervisor's pid as the daemon sees it: what it started is below it.
    supervisor: u32,
    log: Arc<SequencedLog>,
    ended: watch::Sender<bool>,
    timed_out: AtomicBool,
}

impl ArgvProcess {
    pub fn status(&self) -> ArgvStatus {
        self.status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn log(&self) -> &Arc<SequencedLog> {
        &self.log
    }

    fn running(&self) -> bool {
        !*self.ended.borrow()
    }
}

/// The next line's processes of this daemon.
pub struct ArgvProcesses {
    config: ArgvConfig,
    table: Mutex<Table>,
    /// The processes of the daemons before this one, ended, by id.
    previous: HashMap<String, Arc<ArgvProcess>>,
}

/// The file beside a process's log that holds its status, rewritten when it ends.
const RECORD: &str = "record.json";

/// A process's status as its record file holds it.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredStatus {
    id: String,
    pid: u32,
    command: Vec<String>,
    cwd: PathBuf,
    started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit: Option<Exit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<Failure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ended_at: Option<String>,
}

impl StoredStatus {
    fn of(status: &ArgvStatus) -> Self {
        let (exit, error) = match &status.outcome {
            Outcome::Running => (None, None),
            Outcome::Exited(exit) => (Some(exit.clone()), None),
            Outcome::Failed(failure) => (None, Some(failure.clone())),
        };
        Self {
            id: status.id.clone(),
            pid: status.pid,
            command: status.command.clone(),
            cwd: status.cwd.clone(),
            started_at: status.started_at.clone(),
            exit,
            error,
            ended_at: status.ended_at.clone(),
        }
    }

    fn status(self) -> ArgvStatus {
        let outcome = match (self.exit, self.error) {
            (Some(exit), _) => Outcome::Exited(exit),
            (None, Some(failure)) => Outcome::Failed(failure),
            (None, None) => Outcome::Running,
        };
        ArgvStatus {
            id: self.id,
            pid: self.pid,
            command: self.command,
            cwd: self.cwd,
            started_at: self.started_at,
            outcome,
            ended_at: self.ended_at,
        }
    }
}

/// Writes `status` to its record file (a new file renamed over the old one).
fn store_status(dir: &Path, status: &ArgvStatus) {
    let path = dir.join(RECORD);
    let temporary = dir.join(format!(".{RECORD}.new"));
    let written = serde_json::to_vec(&StoredStatus::of(status))
        .map_err(std::io::Error::other)
        .and_then(|json| std::fs::write(&temporary, json))
        .and_then(|()| std::fs::rename(&temporary, &path));
    if let Err(error) = written {
        tracing::warn!(%error, path = %path.display(), "a process record could not be written");
    }
}

/// What the daemons before this one left in `config.dir`: each process's record and log,
/// the newest `retained` kept (the rest removed). One that ran when its daemon stopped
/// ended with it (the kernel ends a namespace with its init): it is recorded as such, its
/// log closed with that terminal event.
fn load_previous(config: &ArgvConfig) -> HashMap<String, Arc<ArgvProcess>> {
    let Ok(entries) = std::fs::read_dir(&config.dir) else {
        return HashMap::new();
    };
    let mut found: Vec<(ArgvStatus, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let stored = std::fs::read(dir.join(RECORD))
            .ok()
            .and_then(|json| serde_json::from_slice::<StoredStatus>(&json).ok());
        match stored {
            Some(stored) if dir.file_name() == Some(OsStr::new(&stored.id)) => {
                found.push((stored.status(), dir));
            }
            // Not a process's (or one whose start never finished): nothing to read.
            _ => {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }
    found.sort_by(|a, b| b.0.started_at.cmp(&a.0.started_at));
    let mut previous = HashMap::new();
    for (index, (mut status, dir)) in found.into_iter().enumerate() {
        let log = (index < config.retained)
            .then(|| SequencedLog::open(&dir, &status.id, config.log_bytes).ok())
            .flatten();
        let Some(log) = log else {
            let _ = std::fs::remove_dir_all(&dir);
            continue;
        };
        if status.outcome == Outcome::Running {
            let failure = Failure {
                code: "DAEMON_STOPPED".into(),
                message: "the daemon stopped while the process ran".into(),
            };
            if !log.ended() {
                let terminal = serde_json::json!({ "state": "error", "error": failure });
                let at_ms = chrono::Utc::now().timestamp_millis();
                let _ = log.append(Kind::Terminal, at_ms, terminal.to_string().as_bytes());
            }
            status.outcome = Outcome::Failed(failure);
            status.ended_at = Some(crate::time::now_rfc3339());
            store_status(&dir, &status);
        }
        let process = ArgvProcess {
            status: Mutex::new(status),
            supervisor: 0,
            log: Arc::new(log),
            ended: watch::channel(true).0,
            timed_out: AtomicBool::new(false),
        };
        previous.insert(process.status().id, Arc::new(process));
    }
    previous
}

#[derive(Default)]
struct Table {
    processes: HashMap<String, Arc<ArgvProcess>>,
    /// Ids of ended processes, oldest end first.
    ended: std::collections::VecDeque<String>,
}

impl ArgvProcesses {
    pub fn new(config: ArgvConfig) -> Arc<Self> {
        let previous = load_previous(&config);
        Arc::new(Self {
            config,
            table: Mutex::new(Table::default()),
            previous,
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, id: &str) -> Option<Arc<ArgvProcess>> {
        self.table().processes.get(id).cloned()
    }

    /// Process `id` of this daemon or, ended, of a daemon before it (what the 0.12 routes
    /// read: the next line's calls see this runtime's processes only).
    pub fn find(&self, id: &str) -> Option<Arc<ArgvProcess>> {
        self.get(id).or_else(|| self.previous.get(id).cloned())
    }

    /// Running and kept ended processes, in the order they started.
    pub fn list(&self) -> Vec<ArgvStatus> {
        let mut all: Vec<ArgvStatus> = self
            .table()
            .processes
            .values()
            .map(|process| process.status())
            .collect();
        all.sort_by(|a, b| a.started_at.cmp(&b.started_at));
        all
    }

    /// Whether any process runs (what keeps a sandbox awake).
    pub fn has_active(&self) -> bool {
        self.table().processes.values().any(|p| p.running())
    }

    /// Starts `spec` as process `id` and returns once it runs (or could not start).
    pub async fn start(
        self: &Arc<Self>,
        id: String,
        spec: ArgvSpec,
    ) -> Result<ArgvStatus, StartError> {
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
        let log = Arc::new(SequencedLog::create(
            &self.config.dir.join(&id),
            &id,
            self.config.log_bytes,
        )?);
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
                return Err(StartError::Cwd {
                    cwd: cwd.display().to_string(),
                    reason,
                });
            }
            Err(NotStarted::Failed(message)) => return Err(spawn_failed(message)),
        };
        let status = ArgvStatus {
            id: id.clone(),
            pid,
            command: spec.argv.clone(),
            cwd: cwd.clone(),
            started_at: crate::time::now_rfc3339(),
            outcome: Outcome::Running,
            ended_at: None,
        };
        let process = Arc::new(ArgvProcess {
            status: Mutex::new(status.clone()),
            supervisor,
            log,
            ended: watch::channel(false).0,
            timed_out: AtomicBool::new(false),
        });
        store_status(&self.config.dir.join(&id), &status);
        self.table()
            .processes
            .insert(id.clone(), Arc::clone(&process));
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
        let processes = Arc::clone(self);
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
            processes.finish(&process, outcome);
        });
        Ok(status)
    }

    /// Records how `process` ended: its terminal event, its status, and the bound on kept
    /// ended processes.
    fn finish(&self, process: &Arc<ArgvProcess>, outcome: Outcome) {
        let terminal = match &outcome {
            Outcome::Exited(exit) => serde_json::json!({ "state": "exited", "exit": exit }),
            Outcome::Failed(failure) => serde_json::json!({ "state": "error", "error": failure }),
            Outcome::Running => serde_json::json!({ "state": "running" }),
        };
        let at_ms = chrono::Utc::now().timestamp_millis();
        if let Err(error) =
            process
                .log
                .append(Kind::Terminal, at_ms, terminal.to_string().as_bytes())
        {
            tracing::warn!(%error, "a process's end could not be logged");
        }
        let ended = {
            let mut status = process.status.lock().unwrap_or_else(|p| p.into_inner());
            status.outcome = outcome;
            status.ended_at = Some(crate::time::now_rfc3339());
            status.clone()
        };
        store_status(&self.config.dir.join(&ended.id), &ended);
        let id = ended.id;
        process.ended.send_replace(true);
        let dropped: Vec<String> = {
            let mut table = self.table();
            table.ended.push_back(id);
            let mut dropped = Vec::new();
            while table.ended.len() > self.config.retained {
                if let Some(old) = table.ended.pop_front() {
                    table.processes.remove(&old);
                    dropped.push(old);
                }
            }
            dropped
        };
        for old in dropped {
            let dir = self.config.dir.join(old);
            tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir));
        }
    }

    /// Sends signal `signal` (1–64) to everything the process started; a no-op once it
    /// has exited.
    pub fn kill(&self, id: &str, signal: i32) -> Result<(), KillError> {
        let process = self
            .get(id)
            .ok_or_else(|| KillError::NotFound(id.to_string()))?;
        if !(1..=64).contains(&signal) {
            return Err(KillError::Signal);
        }
        match process.status().outcome {
            Outcome::Exited(_) => return Ok(()),
            Outcome::Failed(failure) => {
                return Err(KillError::Failed {
                    message: failure.message,
                });
            }
            Outcome::Running => {}
        }
        if process.supervisor > 1 {
            for pid in proctree::living_below(process.supervisor) {
                if let Ok(pid) = i32::try_from(pid) {
                    // SAFETY: kill(2) with a pid and a signal number; nix's `Signal` has no
                    // real-time signals, which the API allows.
                    unsafe { nix::libc::kill(pid, signal) };
                }
            }
        }
        Ok(())
    }

    /// Waits until the process `id` has ended (at once if it has, or is unknown).
    pub async fn wait(&self, id: &str) {
        if let Some(process) = self.get(id) {
            let mut ended = process.ended.subscribe();
            let _ = ended.wait_for(|ended| *ended).await;
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
