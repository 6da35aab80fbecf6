//! The terminals of both SDK lines: PTYs by id, each running the argv it was created with
//! (no implied shell) under a supervisor in the sandbox's process world, its output in a
//! [`SequencedLog`] read by cursor like a process's. A terminal is `running` until its
//! program has exited and nothing holds the PTY open any more; ended ones are kept up to a
//! bound, oldest dropped first. The next line's are created and listed by id (docs/api.md,
//! RPC: `terminals`); a 0.12 session's (`/ws/pty`, see `sessions.rs`) is not listed.

use std::collections::{HashMap, VecDeque};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use fsd_process::reporting::{Spawned, exit_report, spawn_reporting};
use fsd_process::seqlog::{Kind, LogError, SequencedLog};
use fsd_process::spawner::{SpawnRequest, overlaid};
use fsd_process::supervisor::OnExit;
use fsd_process::{World, proctree, stop};
use serde::Serialize;
use tokio::sync::{mpsc, watch};

use super::pty::{self, Size};

/// Ended terminals kept (the reference's).
const RETAINED: usize = 25;
/// Keystroke writes queued for one terminal.
const INPUT_QUEUE: usize = 256;
const READ_BYTES: usize = 16 * 1024;
/// How long an exit waits for the terminal's last output.
const DRAIN_WAIT: Duration = Duration::from_secs(1);
/// How long `terminate` gives SIGTERM before SIGKILL.
const TERMINATE_GRACE: Duration = Duration::from_millis(500);
/// The least output a terminal keeps, whatever `bufferSize` asks.
const MIN_BUFFER: u64 = 64 * 1024;

/// What to start.
#[derive(Debug, Clone)]
pub struct TerminalSpec {
    pub argv: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    pub cols: u16,
    pub rows: u16,
    pub buffer_bytes: u64,
    /// `env` is the whole environment (a 0.12 session's, read from its shell), not
    /// additions to the daemon's.
    pub whole_env: bool,
    /// Listed to the next line (`list`): false for a 0.12 session's, which no next-line
    /// caller made.
    pub listed: bool,
}

/// How a terminal's program ended, as the wire carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalExit {
    pub code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub timed_out: bool,
}

/// A terminal as `get` and `list` report it.
#[derive(Debug, Clone)]
pub struct TerminalStatus {
    pub id: String,
    pub pid: u32,
    pub command: Vec<String>,
    pub cwd: PathBuf,
    pub exit: Option<TerminalExit>,
}

/// Why an operation on a terminal failed.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("Terminal {0} not found")]
    NotFound(String),
    #[error("Terminal cwd is invalid: {reason}")]
    Cwd { cwd: String, reason: String },
    #[error("{reason}")]
    Control {
        operation: &'static str,
        reason: String,
    },
    #[error(transparent)]
    Log(#[from] LogError),
}

fn control(operation: &'static str, reason: impl Into<String>) -> TableError {
    TableError::Control {
        operation,
        reason: reason.into(),
    }
}

/// One terminal.
pub struct Terminal {
    snapshot: Mutex<TerminalStatus>,
    log: Arc<SequencedLog>,
    master: Arc<OwnedFd>,
    supervisor: u32,
    input: mpsc::Sender<Bytes>,
    ended: watch::Sender<bool>,
    listed: bool,
    /// Ended by [`TerminalTable::end`]: its supervisor was killed before it could say how
    /// the program ended, which was by SIGKILL.
    killed: AtomicBool,
}

impl Terminal {
    pub fn snapshot(&self) -> TerminalStatus {
        self.snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn log(&self) -> &Arc<SequencedLog> {
        &self.log
    }

    pub fn running(&self) -> bool {
        !*self.ended.borrow()
    }

    /// Resolves once the terminal has ended (its end is in the log by then).
    pub async fn ended(&self) {
        let mut ended = self.ended.subscribe();
        drop(ended.wait_for(|ended| *ended).await);
    }
}

/// Where terminals run and keep their output.
pub struct TableConfig {
    pub world: Arc<World>,
    /// Logs live in `<dir>/<store id>/`; emptied at start.
    pub dir: PathBuf,
    pub base_env: Vec<(String, String)>,
    pub workspace: PathBuf,
}

/// The next line's terminals of this daemon.
pub struct TerminalTable {
    config: TableConfig,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    terminals: HashMap<String, Arc<Terminal>>,
    /// Ids of ended terminals, oldest end first.
    ended: VecDeque<String>,
}

impl TerminalTable {
    pub fn new(config: TableConfig) -> Arc<Self> {
        let _ = std::fs::remove_dir_all(&config.dir);
        Arc::new(Self {
            config,
            table: Mutex::default(),
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, id: &str) -> Option<Arc<Terminal>> {
        self.table().terminals.get(id).cloned()
    }

    pub fn list(&self) -> Vec<TerminalStatus> {
        let mut all: Vec<TerminalStatus> = self
            .table()
            .terminals
            .values()
            .filter(|t| t.listed)
            .map(|t| t.snapshot())
            .collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }

    pub fn has_active(&self) -> bool {
        self.table().terminals.values().any(|t| t.running())
    }

    /// Starts `spec` as terminal `id` on a new PTY.
    pub async fn create(
        self: &Arc<Self>,
        id: String,
        spec: TerminalSpec,
    ) -> Result<TerminalStatus, TableError> {
        if spec.cols == 0 || spec.rows == 0 {
            return Err(control("create", "Invalid dimensions"));
        }
        let cwd = match spec.cwd.clone() {
            Some(cwd) => cwd,
            None if self.config.workspace.is_dir() => self.config.workspace.clone(),
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        };
        let cwd_refused = |reason: &str| TableError::Cwd {
            cwd: cwd.display().to_string(),
            reason: reason.to_string(),
        };
        match std::fs::metadata(&cwd) {
            Err(error) => return Err(cwd_refused(&error.to_string())),
            Ok(meta) if !meta.is_dir() => return Err(cwd_refused("not a directory")),
            Ok(_) => {}
        }
        if !self.config.world.admits(&cwd) {
            return Err(cwd_refused("outside the directories commands may run in"));
        }
        let store = crate::random::uuid_v4();
        let log = Arc::new(SequencedLog::create(
            &self.config.dir.join(&store),
            &store,
            spec.buffer_bytes.max(MIN_BUFFER),
        )?);
        let size = Size {
            cols: spec.cols,
            rows: spec.rows,
        };
        let failed = |error: std::io::Error| control("create", error.to_string());
        let (master, slave) = pty::open(size).map_err(failed)?;
        let term = ("TERM".to_string(), "xterm-256color".to_string());
        let base: &[(String, String)] = if spec.whole_env {
            &[]
        } else {
            &self.config.base_env
        };
        let env = overlaid(base, spec.env.iter().chain(std::iter::once(&term)));
        // The supervisor says whether the program started, and its pid.
        let world = &self.config.world;
        let request = SpawnRequest {
            program: spec.argv.clone(),
            cwd: cwd.clone(),
            within: world.within().to_vec(),
            on_exit: OnExit::Kill,
            terminal: true,
            env,
        };
        let Spawned {
            pid: program_pid,
            supervisor,
            mut reports,
            ..
        } = spawn_reporting(world, request, Some(slave))
            .await
            .map_err(|error| control("create", error.to_string()))?;
        let master = Arc::new(master);
        let (input, keystrokes) = mpsc::channel(INPUT_QUEUE);
        let snapshot = TerminalStatus {
            id: id.clone(),
            pid: program_pid,
            command: spec.argv.clone(),
            cwd,
            exit: None,
        };
        let terminal = Arc::new(Terminal {
            snapshot: Mutex::new(snapshot.clone()),
            log,
            master: Arc::clone(&master),
            supervisor,
            input,
            ended: watch::channel(false).0,
            listed: spec.listed,
            killed: AtomicBool::new(false),
        });
        self.table().terminals.insert(id, Arc::clone(&terminal));
        spawn_writer(Arc::clone(&master), keystrokes);
        let (drained_tx, mut drained) = watch::channel(false);
        spawn_reader(Arc::clone(&master), Arc::clone(&terminal.log), drained_tx);
        let table = Arc::clone(self);
        tokio::spawn(async move {
            // A supervisor killed before it said how the program ended: SIGKILL when this
            // table killed it, else -1, as a wait that failed was told.
            let sigkill = nix::sys::signal::Signal::SIGKILL as i32;
            let killed = (128 + sigkill, sigkill);
            let (code, signal) = exit_report(&mut reports).await.unwrap_or(
                if terminal.killed.load(Ordering::Relaxed) {
                    killed
                } else {
                    (-1, 0)
                },
            );
            let exit = TerminalExit {
                code,
                signal: (signal > 0).then_some(signal),
                timed_out: false,
            };
            let _ = tokio::time::timeout(DRAIN_WAIT, drained.wait_for(|done| *done)).await;
            table.finish(&terminal, exit);
        });
        Ok(snapshot)
    }

    fn finish(&self, terminal: &Arc<Terminal>, exit: TerminalExit) {
        let event = serde_json::json!({ "state": "exited", "exit": exit });
        let at_ms = chrono::Utc::now().timestamp_millis();
        if let Err(error) = terminal
            .log
            .append(Kind::Terminal, at_ms, event.to_string().as_bytes())
        {
            tracing::warn!(%error, "a terminal's end could not be logged");
        }
        let id = {
            let mut snapshot = terminal.snapshot.lock().unwrap_or_else(|p| p.into_inner());
            snapshot.exit = Some(exit);
            snapshot.id.clone()
        };
        terminal.ended.send_replace(true);
        let mut table = self.table();
        table.ended.push_back(id);
        while table.ended.len() > RETAINED {
            if let Some(old) = table.ended.pop_front()
                && let Some(dropped) = table.terminals.remove(&old)
            {
                let dir = self.config.dir.join(dropped.log.store());
                tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir));
            }
        }
    }

    /// Ends terminal `id` at once, its program and everything it started, without waiting
    /// (a 0.12 session deleted, or the daemon stopping).
    pub async fn end(&self, id: &str) {
        let Some(terminal) = self.get(id) else {
            return;
        };
        if !terminal.running() {
            return;
        }
        terminal.killed.store(true, Ordering::Relaxed);
        let supervisor = terminal.supervisor;
        let _ = tokio::task::spawn_blocking(move || stop::kill_supervised(supervisor)).await;
    }

    fn running(&self, id: &str, operation: &'static str) -> Result<Arc<Terminal>, TableError> {
        let terminal = self
            .get(id)
            .ok_or_else(|| TableError::NotFound(id.to_string()))?;
        if !terminal.running() {
            return Err(control(operation, "PTY is closed"));
        }
        Ok(terminal)
    }

    pub async fn write(&self, id: &str, bytes: Bytes) -> Result<(), TableError> {
        let terminal = self.running(id, "write")?;
        terminal
            .input
            .send(bytes)
            .await
            .map_err(|_| control("write", "PTY is closed"))
    }

    pub fn resize(&self, id: &str, cols: u16, rows: u16) -> Result<(), TableError> {
        if cols == 0 || rows == 0 {
            return Err(control("resize", "Invalid dimensions"));
        }
        let terminal = self.running(id, "resize")?;
        pty::resize(&terminal.master, Size { cols, rows })
            .map_err(|error| control("resize", error.to_string()))
    }

    /// SIGINT to everything on the terminal (a no-op once it ended).
    pub fn interrupt(&self, id: &str) -> Result<(), TableError> {
        let terminal = self
            .get(id)
            .ok_or_else(|| TableError::NotFound(id.to_string()))?;
        if terminal.running() && terminal.supervisor > 1 {
            proctree::signal_all(
                &proctree::living_below(terminal.supervisor),
                nix::sys::signal::Signal::SIGINT,
            );
        }
        Ok(())
    }

    /// SIGTERM to everything on the terminal, SIGKILL after half a second, and back once it
    /// has ended.
    pub async fn terminate(&self, id: &str) -> Result<(), TableError> {
        let terminal = self
            .get(id)
            .ok_or_else(|| TableError::NotFound(id.to_string()))?;
        let supervisor = terminal.supervisor;
        if terminal.running() && supervisor > 1 {
            proctree::signal_all(
                &proctree::living_below(supervisor),
                nix::sys::signal::Signal::SIGTERM,
            );
            let waited = tokio::time::timeout(TERMINATE_GRACE, terminal.ended()).await;
            if waited.is_err() {
                let _ = tokio::task::spawn_blocking(move || {
                    stop::kill_until_gone(|| proctree::living_below(supervisor), || {})
                })
                .await;
            }
        }
        terminal.ended().await;
        Ok(())
    }
}

/// Writes queued keystrokes to the terminal on a thread of its own (a full terminal input
/// queue blocks the writer, not the runtime).
fn spawn_writer(master: Arc<OwnedFd>, mut keystrokes: mpsc::Receiver<Bytes>) {
    let _ = std::thread::Builder::new()
        .name("fsd-pty-write".into())
        .spawn(move || {
            while let Some(bytes) = keystrokes.blocking_recv() {
                let mut rest = &bytes[..];
                while !rest.is_empty() {
                    match nix::unistd::write(&*master, rest) {
                        Ok(written) => rest = &rest[written..],
                        Err(nix::errno::Errno::EINTR) => {}
                        Err(_) => return,
                    }
                }
            }
        });
}

/// Reads the PTY's output into the log on a thread of its own until nothing holds the
/// terminal open.
fn spawn_reader(master: Arc<OwnedFd>, log: Arc<SequencedLog>, drained: watch::Sender<bool>) {
    let _ = std::thread::Builder::new()
        .name("fsd-pty-log".into())
        .spawn(move || {
            let mut buffer = vec![0u8; READ_BYTES];
            loop {
                match nix::unistd::read(&*master, &mut buffer) {
                    Ok(0) | Err(_) => {
                        drained.send_replace(true);
                        return;
                    }
                    Ok(read) => {
                        let at_ms = chrono::Utc::now().timestamp_millis();
                        if let Err(error) = log.append(Kind::Stdout, at_ms, &buffer[..read]) {
                            tracing::warn!(%error, "terminal output could not be logged");
                        }
                    }
                }
            }
        });
}
