//! The session table: creation (explicit, or implicit on first use), lookup, deletion,
//! running a command to its end (dropping a session whose shell it ended), and sessionless
//! execution.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::sync::mpsc;

use crate::error::{ExecError, StreamedStdinError};
use crate::session::{CommandSpec, Finished, Session, Streamed};
use crate::shell::Shell;
use crate::stop;
use crate::supervisor::OnExit;
use crate::time::now_rfc3339;
use crate::wake::OutputWakes;
use crate::world::World;
use fsd_api::DISABLE_SESSION_TOKEN;

/// Where sessions live and what their shells start with.
#[derive(Debug, Clone)]
pub struct ExecConfig {
    /// Session directories go under `<state_dir>/sessions/`.
    pub state_dir: PathBuf,
    pub workspace: PathBuf,
    /// The whole environment of a new shell (the daemon's own is not inherited).
    pub base_env: Vec<(String, String)>,
    /// `COMMAND_TIMEOUT_MS`: the timeout of commands that name none.
    pub default_timeout: Option<Duration>,
    /// The process world every command runs in.
    pub world: Arc<World>,
}

/// How a new session starts.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub command_timeout: Option<Duration>,
}

pub struct SessionManager {
    config: ExecConfig,
    sessions: tokio::sync::Mutex<HashMap<String, Arc<Session>>>,
    counter: AtomicU64,
    /// Wakes whoever follows a command's output when it is written.
    wakes: OutputWakes,
}

impl SessionManager {
    pub fn new(config: ExecConfig) -> Self {
        remove_stale_dirs(&config.state_dir.join("sessions"));
        remove_stale_dirs(&config.state_dir.join("sessionless"));
        Self {
            config,
            sessions: tokio::sync::Mutex::default(),
            counter: AtomicU64::new(0),
            wakes: OutputWakes::start(),
        }
    }

    /// The daemon's watches on output files.
    pub(crate) fn wakes(&self) -> &OutputWakes {
        &self.wakes
    }

    pub fn config(&self) -> &ExecConfig {
        &self.config
    }

    /// Creates a session; an id held by a live session is refused, a dead one is replaced.
    pub async fn create(
        &self,
        id: String,
        options: SessionOptions,
    ) -> Result<Arc<Session>, ExecError> {
        let mut sessions = self.sessions.lock().await;
        if sessions.get(&id).is_some_and(|s| !s.is_dead()) {
            return Err(ExecError::SessionExists { id });
        }
        let session = Arc::new(self.spawn(id.clone(), options).await?);
        sessions.insert(id, session.clone());
        Ok(session)
    }

    /// The live session `id`, created with defaults if there is none (a dead one is
    /// replaced: its state is gone, and the caller learned that from the previous call).
    pub async fn get_or_create(&self, id: &str) -> Result<Arc<Session>, ExecError> {
        let mut sessions = self.sessions.lock().await;
        if let Some(session) = sessions.get(id)
            && !session.is_dead()
        {
            return Ok(session.clone());
        }
        let session = Arc::new(
            self.spawn(id.to_string(), SessionOptions::default())
                .await?,
        );
        sessions.insert(id.to_string(), session.clone());
        Ok(session)
    }

    pub async fn delete(&self, id: &str) -> Result<(), ExecError> {
        let session = self.sessions.lock().await.remove(id);
        match session {
            Some(session) => {
                destroy(vec![session]).await;
                Ok(())
            }
            None => Err(ExecError::SessionNotFound { id: id.to_string() }),
        }
    }

    /// Ids of live sessions, sorted; fsd's internal ones (`__fsd_…`) are not listed.
    pub async fn list(&self) -> Vec<String> {
        let sessions = self.sessions.lock().await;
        let mut ids: Vec<String> = sessions
            .iter()
            .filter(|(id, s)| !s.is_dead() && !id.starts_with("__fsd_"))
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// The supervisors of the live sessions' shells (host pids): each shell is the child
    /// of its own, and follows its directory by name (see `script::REENTER`).
    pub async fn supervisors(&self) -> Vec<u32> {
        let sessions = self.sessions.lock().await;
        sessions
            .values()
            .filter(|s| !s.is_dead())
            .map(|s| s.supervisor())
            .collect()
    }

    /// The current directory of a live session, if there is one.
    pub async fn cwd_of(&self, id: &str) -> Option<PathBuf> {
        let sessions = self.sessions.lock().await;
        sessions
            .get(id)
            .filter(|s| !s.is_dead())
            .and_then(|s| s.cwd())
    }

    /// Runs one command to its end in session `id` (created on first use; with
    /// [`DISABLE_SESSION_TOKEN`], in a fresh shell outside any session, where a timeout is
    /// a result with status 124, as the reference has it), within `timeout` or the
    /// session's own. A session whose shell the command ended (`exit`, or a timeout
    /// that had to kill the shell too) is dropped, so the next command starts a fresh one.
    pub async fn exec(
        &self,
        id: &str,
        spec: &CommandSpec,
        timeout: Option<Duration>,
    ) -> Result<Finished, ExecError> {
        if id == DISABLE_SESSION_TOKEN {
            return self.exec_sessionless(spec, timeout).await;
        }
        let session = self.get_or_create(id).await?;
        let result = session
            .exec(spec, timeout.or(session.command_timeout))
            .await;
        if matches!(
            result,
            Err(ExecError::ShellExited { .. })
                | Err(ExecError::Timeout {
                    session_kept: false,
                    ..
                })
        ) {
            self.evict_dead(id).await;
        }
        result
    }

    /// Runs one command in session `id`'s shell as [`SessionManager::exec`] does,
    /// streaming its start and output to `sink` (see [`Session::exec_streamed`]).
    pub async fn exec_streamed(
        &self,
        id: &str,
        spec: &CommandSpec,
        timeout: Option<Duration>,
        sink: &mpsc::Sender<Streamed>,
    ) -> Result<i32, ExecError> {
        let session = self.get_or_create(id).await?;
        let result = session
            .exec_streamed(spec, timeout.or(session.command_timeout), &self.wakes, sink)
            .await;
        if result.is_err() {
            self.evict_dead(id).await;
        }
        result
    }

    /// Sends `signal` to the streamed command `job` of session `id` (see
    /// [`Session::signal_streamed`]); says whether that command was running.
    pub async fn signal_streamed(
        &self,
        id: &str,
        job: u64,
        signal: Signal,
    ) -> Result<bool, ExecError> {
        Ok(self.live(id).await?.signal_streamed(job, signal))
    }

    /// Writes to the stdin pipe of the streamed command `job` of session `id` (see
    /// [`Session::write_streamed_stdin`]).
    pub async fn write_streamed_stdin(
        &self,
        id: &str,
        job: u64,
        bytes: &[u8],
        close: bool,
        wait: std::time::Duration,
    ) -> Result<crate::stdin::Written, StreamedStdinError> {
        let session = self.live(id).await?;
        Ok(session
            .write_streamed_stdin(job, bytes, close, wait)
            .await?)
    }

    /// Session `id`, unless it is gone or its shell has died.
    async fn live(&self, id: &str) -> Result<Arc<Session>, ExecError> {
        self.sessions
            .lock()
            .await
            .get(id)
            .filter(|s| !s.is_dead())
            .cloned()
            .ok_or_else(|| ExecError::SessionNotFound { id: id.to_string() })
    }

    /// Drops a session whose shell has exited, so the next call starts a fresh one.
    async fn evict_dead(&self, id: &str) {
        let mut sessions = self.sessions.lock().await;
        if sessions.get(id).is_some_and(|s| s.is_dead()) {
            sessions.remove(id);
        }
    }

    /// Kills every session, then every process of the world (daemon shutdown).
    pub async fn shutdown(&self) {
        let sessions: Vec<Arc<Session>> = self
            .sessions
            .lock()
            .await
            .drain()
            .map(|(_, session)| session)
            .collect();
        destroy(sessions).await;
        self.config.world.shutdown();
    }

    async fn spawn(&self, id: String, options: SessionOptions) -> Result<Session, ExecError> {
        let number = self.counter.fetch_add(1, Ordering::Relaxed);
        let dir = self
            .config
            .state_dir
            .join("sessions")
            .join(std::process::id().to_string())
            .join(number.to_string());
        let mut env = self.config.base_env.clone();
        merge_env(&mut env, &options.env);
        let start = options.cwd.unwrap_or_else(|| self.config.workspace.clone());
        let shell = Shell::spawn(dir, &start, &env, &self.config.world).await?;
        let timeout = options.command_timeout.or(self.config.default_timeout);
        Ok(Session::new(id, shell, timeout, now_rfc3339()))
    }

    /// Runs a command in a fresh `bash -c`, in its own process group, outside any session.
    /// Output goes to files, so a command that leaves `nohup x &` behind still returns.
    async fn exec_sessionless(
        &self,
        spec: &CommandSpec,
        timeout: Option<Duration>,
    ) -> Result<Finished, ExecError> {
        let number = self.counter.fetch_add(1, Ordering::Relaxed);
        let dir = self
            .config
            .state_dir
            .join("sessionless")
            .join(std::process::id().to_string())
            .join(number.to_string());
        std::fs::create_dir_all(&dir)?;
        let result = run_sessionless(
            &self.config,
            spec,
            timeout.or(self.config.default_timeout),
            &dir,
        )
        .await;
        let _ = std::fs::remove_dir_all(&dir);
        result
    }
}

async fn run_sessionless(
    config: &ExecConfig,
    spec: &CommandSpec,
    timeout: Option<Duration>,
    dir: &Path,
) -> Result<Finished, ExecError> {
    let (out_path, err_path) = (dir.join("stdout"), dir.join("stderr"));
    let mut env = config.base_env.clone();
    merge_env(&mut env, &spec.env);
    let started = Instant::now();
    let bash = [
        OsStr::new("bash"),
        OsStr::new("--norc"),
        OsStr::new("--noprofile"),
        OsStr::new("-c"),
        OsStr::new(&spec.command),
    ];
    let cwd = spec.cwd.as_deref().unwrap_or(&config.workspace);
    let mut child = config
        .world
        .command(OnExit::Leave, cwd, &bash)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(std::fs::File::create(&err_path)?)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| ExecError::Spawn(format!("bash: {err}")))?;
    let spawned = child.id();
    let wait = async {
        match timeout {
            Some(limit) => tokio::time::timeout(limit, child.wait()).await.ok(),
            None => Some(child.wait().await),
        }
    };
    let status = match wait.await {
        Some(status) => status?,
        None => {
            if let Some(root) = spawned.and_then(|pid| config.world.supervisor_of(pid)) {
                stop::stop_supervised(root).await;
            }
            let _ = child.kill().await;
            // As the reference answers it (and as timeout(1) exits): a result, not an
            // error, with 124 and the reason on the last line of stderr.
            let mut finished =
                Finished::from_files(TIMED_OUT, &out_path, &err_path, started.elapsed()).await?;
            let limit = timeout.map_or(0, |t| t.as_millis());
            append_line(
                &mut finished.stderr,
                &format!("Command timed out after {limit}ms"),
            );
            return Ok(finished);
        }
    };
    let duration = started.elapsed();
    let exit_code = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        128 + status.signal().unwrap_or(0)
    });
    Finished::from_files(exit_code, &out_path, &err_path, duration).await
}

/// The status of a sessionless command stopped at its timeout, as timeout(1) exits.
const TIMED_OUT: i32 = 124;

/// Appends `line` to `text` on a line of its own (no newline after it, as the reference
/// writes it).
fn append_line(text: &mut Vec<u8>, line: &str) {
    if !text.is_empty() && !text.ends_with(b"\n") {
        text.push(b'\n');
    }
    text.extend_from_slice(line.as_bytes());
}

/// Destroys sessions off the async threads (the kills poll /proc).
async fn destroy(sessions: Vec<Arc<Session>>) {
    if sessions.is_empty() {
        return;
    }
    let _ = tokio::task::spawn_blocking(move || {
        for session in sessions {
            session.destroy();
        }
    })
    .await;
}

/// Removes the per-daemon directories under `parent` whose daemon (named by pid) is gone.
fn remove_stale_dirs(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let pid = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok());
        if pid.is_none_or(|pid| !crate::proctree::alive(pid)) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Adds or replaces `extra` variables in `env`.
fn merge_env(env: &mut Vec<(String, String)>, extra: &[(String, String)]) {
    for (name, value) in extra {
        match env.iter_mut().find(|(k, _)| k == name) {
            Some(entry) => entry.1 = value.clone(),
            None => env.push((name.clone(), value.clone())),
        }
    }
}

/// The environment a shell starts with: a fixed set from the daemon's own (PATH, HOME, …),
/// the names in `pass`, and a UTF-8 locale. Nothing else of the daemon's environment (API
/// tokens, cloud keys) reaches user commands.
pub fn base_env(pass: &[String]) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_else(|_| {
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()
            }),
        ),
        (
            "HOME".to_string(),
            std::env::var("HOME").unwrap_or_else(|_| "/root".into()),
        ),
        ("LANG".to_string(), "C.UTF-8".to_string()),
        ("LC_ALL".to_string(), "C.UTF-8".to_string()),
        ("SHELL".to_string(), "/bin/bash".to_string()),
    ];
    // SANDBOX_VERSION: the SDK release the image stands in for, which commands see in
    // the reference's image too.
    for name in ["USER", "LOGNAME", "TERM", "TZ", "TMPDIR", "SANDBOX_VERSION"]
        .iter()
        .map(|s| s.to_string())
        .chain(pass.iter().cloned())
    {
        if let Ok(value) = std::env::var(&name) {
            merge_env(&mut env, &[(name, value)]);
        }
    }
    env
}
