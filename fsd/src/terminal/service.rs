//! The terminals: one per session, started on first connect from the session's current
//! environment and directory, kept while its shell lives, ended with its session.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::{broadcast, mpsc, watch};

use super::pty::{self, Size};
use super::ring::Ring;
use fsd_process::stop;
use fsd_process::{CommandSpec, ExecError, SessionManager};

/// Output chunks a connection may fall behind by before it is dropped (it reconnects and
/// gets the replay). Reads are at most [`READ_BYTES`], so this bounds what one terminal's
/// output costs while its slowest reader lags: 256 × 16 KiB = 4 MiB.
const LAGGING_CHUNKS: usize = 256;
const READ_BYTES: usize = 16 * 1024;
/// Keystroke writes queued for the terminal.
const INPUT_QUEUE: usize = 256;
/// How long a shell's exit waits for the terminal's last output to be read.
const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How a terminal's shell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    pub code: i32,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
}

/// Why a terminal could not start.
#[derive(Debug, thiserror::Error)]
pub enum TerminalError {
    #[error("{0}")]
    Session(#[from] ExecError),
    #[error("Failed to create PTY: {0}")]
    Start(String),
}

/// One shell on a PTY.
pub struct Terminal {
    master: Arc<OwnedFd>,
    /// The shell's supervisor (host pid): ending it ends the shell and all it started.
    supervisor: u32,
    ring: Mutex<Ring>,
    output: broadcast::Sender<Bytes>,
    input: mpsc::Sender<Bytes>,
    exit: watch::Receiver<Option<Exit>>,
    /// Set by the reader once the terminal has nothing more to read, so the exit is
    /// announced after the shell's last output, not before it.
    drained: watch::Sender<bool>,
}

impl Terminal {
    /// What the terminal showed so far and a subscription to what it shows next, taken
    /// together so nothing is missed or seen twice.
    pub fn join(&self) -> (Vec<u8>, broadcast::Receiver<Bytes>) {
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        (ring.contents(), self.output.subscribe())
    }

    /// Queues keystrokes; false once the shell is gone.
    pub async fn write(&self, bytes: Bytes) -> bool {
        self.input.send(bytes).await.is_ok()
    }

    pub fn resize(&self, size: Size) -> std::io::Result<()> {
        pty::resize(&self.master, size)
    }

    /// Resolves when the shell has exited.
    pub fn exit(&self) -> watch::Receiver<Option<Exit>> {
        self.exit.clone()
    }
}

pub struct TerminalService {
    sessions: Arc<SessionManager>,
    terminals: tokio::sync::Mutex<HashMap<String, Arc<Terminal>>>,
}

impl TerminalService {
    pub fn new(sessions: Arc<SessionManager>) -> Self {
        Self {
            sessions,
            terminals: tokio::sync::Mutex::default(),
        }
    }

    /// The session's terminal, started if it has none (or its shell exited): `shell` on a
    /// PTY of `size`, with the session's environment and directory as they are now.
    pub async fn get_or_start(
        self: &Arc<Self>,
        session_id: &str,
        size: Size,
        shell: &str,
    ) -> Result<Arc<Terminal>, TerminalError> {
        let mut terminals = self.terminals.lock().await;
        if let Some(terminal) = terminals.get(session_id)
            && terminal.exit.borrow().is_none()
        {
            return Ok(terminal.clone());
        }
        let session = self.sessions.get_or_create(session_id).await?;
        let (env, cwd) = self.snapshot(&session).await;
        let terminal = Arc::new(self.start(size, shell, &env, &cwd)?);
        terminal.spawn_reader();
        terminals.insert(session_id.to_string(), terminal.clone());
        let service = Arc::downgrade(self);
        let (id, ended) = (session_id.to_string(), terminal.clone());
        tokio::spawn(async move {
            let mut exit = ended.exit();
            let _ = exit.wait_for(Option::is_some).await;
            if let Some(service) = service.upgrade() {
                let mut terminals = service.terminals.lock().await;
                if terminals.get(&id).is_some_and(|t| Arc::ptr_eq(t, &ended)) {
                    terminals.remove(&id);
                }
            }
        });
        Ok(terminal)
    }

    /// Ends the session's terminal (the session was deleted): the shell and everything it
    /// started.
    pub async fn end(&self, session_id: &str) {
        let terminal = self.terminals.lock().await.remove(session_id);
        if let Some(terminal) = terminal {
            let supervisor = terminal.supervisor;
            let _ = tokio::task::spawn_blocking(move || stop::kill_supervised(supervisor)).await;
        }
    }

    /// Ends every terminal (shutdown).
    pub async fn shutdown(&self) {
        let ids: Vec<String> = self.terminals.lock().await.keys().cloned().collect();
        for id in ids {
            self.end(&id).await;
        }
    }

    /// The session's environment and directory now, read through its shell (an empty
    /// environment and the workspace when that fails, as the reference does).
    async fn snapshot(&self, session: &fsd_process::Session) -> (Vec<(String, String)>, PathBuf) {
        let spec = CommandSpec {
            command: "env -0".into(),
            ..CommandSpec::default()
        };
        let env = match session.exec(&spec, None).await {
            Ok(finished) => finished
                .stdout
                .split(|&byte| byte == 0)
                .filter_map(|pair| {
                    let pair = std::str::from_utf8(pair).ok()?;
                    let (name, value) = pair.split_once('=')?;
                    Some((name.to_string(), value.to_string()))
                })
                .filter(|(name, _)| name != "_" && name != "SHLVL")
                .collect(),
            Err(error) => {
                tracing::warn!(%error, "cannot read the session's environment for a terminal");
                Vec::new()
            }
        };
        // A session that moved out of a confined workspace opens its terminal in the
        // workspace, where a confined command may start.
        let config = self.sessions.config();
        let cwd = session
            .cwd()
            .filter(|cwd| config.world.admits(cwd))
            .unwrap_or_else(|| config.workspace.clone());
        (env, cwd)
    }

    fn start(
        &self,
        size: Size,
        shell: &str,
        env: &[(String, String)],
        cwd: &std::path::Path,
    ) -> Result<Terminal, TerminalError> {
        let failed = |error: std::io::Error| TerminalError::Start(error.to_string());
        let (master, slave) = pty::open(size).map_err(failed)?;
        let mut env: Vec<(String, String)> = env
            .iter()
            .filter(|(name, _)| name != "TERM")
            .cloned()
            .collect();
        env.push(("TERM".into(), "xterm-256color".into()));
        let world = &self.sessions.config().world;
        let mut child = pty::spawn_shell(world, &slave, shell, cwd, &env).map_err(failed)?;
        drop(slave);
        let spawned = child
            .id()
            .ok_or_else(|| TerminalError::Start(format!("{shell} exited at once")))?;
        let supervisor = world
            .supervisor_of(spawned)
            .ok_or_else(|| TerminalError::Start(format!("{shell} exited at once")))?;
        let master = Arc::new(master);
        let (output, _) = broadcast::channel(LAGGING_CHUNKS);
        let ring = Mutex::new(Ring::default());
        let (input, keystrokes) = mpsc::channel(INPUT_QUEUE);
        let (exit_tx, exit) = watch::channel(None);
        let (drained, mut output_done) = watch::channel(false);
        let terminal = Terminal {
            master: master.clone(),
            supervisor,
            ring,
            output,
            input,
            exit,
            drained,
        };
        spawn_writer(master.clone(), keystrokes);
        tokio::spawn(async move {
            let (code, signal) = pty::exit_of(child.wait().await);
            let exit = Exit { code, signal };
            // The reader ends once nothing holds the terminal open; a detached job that
            // still does is not waited for long.
            let _ =
                tokio::time::timeout(DRAIN_WAIT, output_done.wait_for(|drained| *drained)).await;
            let _ = exit_tx.send(Some(exit));
        });
        Ok(terminal)
    }
}

impl Terminal {
    /// Starts the thread that reads the terminal's output into the ring and out to every
    /// connection, until the terminal closes (its shell and all it started are gone).
    pub fn spawn_reader(self: &Arc<Self>) {
        let terminal = Arc::downgrade(self);
        let master = self.master.clone();
        let drained = self.drained.clone();
        let _ = std::thread::Builder::new()
            .name("fsd-pty-read".into())
            .spawn(move || {
                let mut buffer = vec![0u8; READ_BYTES];
                loop {
                    let read = match nix::unistd::read(&*master, &mut buffer) {
                        Ok(0) | Err(_) => {
                            drained.send_replace(true);
                            return;
                        }
                        Ok(read) => read,
                    };
                    let Some(terminal) = terminal.upgrade() else {
                        return;
                    };
                    let chunk = Bytes::copy_from_slice(&buffer[..read]);
                    let mut ring = terminal.ring.lock().unwrap_or_else(|p| p.into_inner());
                    ring.push(&chunk);
                    let _ = terminal.output.send(chunk);
                }
            });
    }
}

/// Writes queued keystrokes to the terminal on a thread of its own (a full terminal input
/// queue blocks the writer, not the runtime).
pub(super) fn spawn_writer(master: Arc<OwnedFd>, mut keystrokes: mpsc::Receiver<Bytes>) {
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
