//! One table of processes for both SDK lines. A process is a log on disk and a record
//! beside it, of one form whichever launched it: a session's shell running a command line
//! (0.12's background processes, [`crate::ProcessService`]) or the spawner running an argv
//! with no shell (the next line's, [`crate::argv::ArgvProcesses`]). Both lines read every
//! process by id, each in its own shape ([`Record::info`] for 0.12, the next line's status
//! from the same record), and one bound keeps ended ones: the oldest end goes first.
//!
//! On disk: `<dir>/<id>/`, the log's segments and `record.json`. What a daemon before this
//! one left there is loaded as ended, readable by id (0.12's reads and lists show it; the
//! next line's calls see this runtime's processes only, as the reference's new runtime
//! does). One that ran when its daemon stopped ended with it and is recorded as such.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use fsd_api::process::{ProcessInfo, ProcessStatus};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::error::ProcessError;
use crate::proctree;
use crate::seqlog::{Kind, LogError, SequencedLog};
use crate::stdin::StdinPipe;

/// The file beside a process's log that holds its record.
const RECORD: &str = "record.json";

/// How a process ended, as the next line's wire carries it (`exit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Exit {
    pub code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    #[serde(default)]
    pub timed_out: bool,
}

/// Why a process has no exit status (`error` on the next line's wire).
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

/// What started a process, and so what each line shows as its command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launcher {
    /// A command line run by a session's bash (0.12's `startProcess` and streamed exec).
    Session { session_id: String, command: String },
    /// A program and its arguments, spawned without a shell (the next line's `start`).
    Argv { argv: Vec<String> },
}

impl Launcher {
    /// The command as one line (0.12's `command`).
    pub fn line(&self) -> String {
        match self {
            Self::Session { command, .. } => command.clone(),
            Self::Argv { argv } => argv.join(" "),
        }
    }

    /// The command as an argv (the next line's `command`): a session's line as the bash
    /// that ran it.
    pub fn argv(&self) -> Vec<String> {
        match self {
            Self::Session { command, .. } => vec!["bash".into(), "-c".into(), command.clone()],
            Self::Argv { argv } => argv.clone(),
        }
    }
}

/// A process's lasting state: what `record.json` holds.
#[derive(Debug, Clone)]
pub struct Record {
    pub id: String,
    /// As the sandbox sees it (its PID namespace).
    pub pid: u32,
    pub launcher: Launcher,
    pub cwd: PathBuf,
    pub started_at: String,
    pub outcome: Outcome,
    pub ended_at: Option<String>,
    /// Ended after a kill asked of the daemon (0.12 shows such an exit as `killed`).
    pub kill_requested: bool,
    /// CPU time of the whole tree, as its supervisor reported it at the end.
    pub cpu_seconds: Option<f64>,
}

impl Record {
    /// As 0.12 shows a process (no session for the next line's).
    pub fn info(&self) -> ProcessInfo {
        let status = match &self.outcome {
            Outcome::Running => ProcessStatus::Running,
            Outcome::Exited(exit) => {
                let killed = self.kill_requested || exit.signal.is_some() || exit.timed_out;
                ProcessStatus::from_exit(exit.code, killed)
            }
            Outcome::Failed(_) => ProcessStatus::Error,
        };
        let exit_code = self.exit_code();
        let session_id = match &self.launcher {
            Launcher::Session { session_id, .. } => session_id.clone(),
            Launcher::Argv { .. } => String::new(),
        };
        ProcessInfo {
            id: self.id.clone(),
            pid: self.pid,
            command: self.launcher.line(),
            status,
            start_time: self.started_at.clone(),
            end_time: self.ended_at.clone(),
            exit_code,
            session_id,
            cpu_seconds: self.cpu_seconds,
            rss_bytes: None,
        }
    }

    pub fn running(&self) -> bool {
        self.outcome == Outcome::Running
    }

    /// Its exit code, once it exited (none while it runs, or when it has none).
    pub fn exit_code(&self) -> Option<i32> {
        match &self.outcome {
            Outcome::Exited(exit) => Some(exit.code),
            Outcome::Running | Outcome::Failed(_) => None,
        }
    }
}

/// The command's part of a stored record: a line (with the session that ran it) or an
/// argv. Records of the next line's processes before the one table hold the same form.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum StoredCommand {
    Line(String),
    Argv(Vec<String>),
}

/// A record as `record.json` holds it.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    id: String,
    pid: u32,
    command: StoredCommand,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    #[serde(default)]
    cwd: PathBuf,
    started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit: Option<Exit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<Failure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ended_at: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    kill_requested: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_seconds: Option<f64>,
}

impl From<&Record> for Stored {
    fn from(record: &Record) -> Self {
        let (exit, error) = match &record.outcome {
            Outcome::Running => (None, None),
            Outcome::Exited(exit) => (Some(exit.clone()), None),
            Outcome::Failed(failure) => (None, Some(failure.clone())),
        };
        let (command, session_id) = match &record.launcher {
            Launcher::Session {
                session_id,
                command,
            } => (
                StoredCommand::Line(command.clone()),
                Some(session_id.clone()),
            ),
            Launcher::Argv { argv } => (StoredCommand::Argv(argv.clone()), None),
        };
        Self {
            id: record.id.clone(),
            pid: record.pid,
            command,
            session_id,
            cwd: record.cwd.clone(),
            started_at: record.started_at.clone(),
            exit,
            error,
            ended_at: record.ended_at.clone(),
            kill_requested: record.kill_requested,
            cpu_seconds: record.cpu_seconds,
        }
    }
}

impl From<Stored> for Record {
    fn from(stored: Stored) -> Self {
        let outcome = match (stored.exit, stored.error) {
            (Some(exit), _) => Outcome::Exited(exit),
            (None, Some(failure)) => Outcome::Failed(failure),
            (None, None) => Outcome::Running,
        };
        let launcher = match stored.command {
            StoredCommand::Line(command) => Launcher::Session {
                session_id: stored.session_id.unwrap_or_default(),
                command,
            },
            StoredCommand::Argv(argv) => Launcher::Argv { argv },
        };
        Self {
            id: stored.id,
            pid: stored.pid,
            launcher,
            cwd: stored.cwd,
            started_at: stored.started_at,
            outcome,
            ended_at: stored.ended_at,
            kill_requested: stored.kill_requested,
            cpu_seconds: stored.cpu_seconds,
        }
    }
}

/// 0.12's record as daemons before the one table wrote it (`{"info": …}`).
#[derive(Deserialize)]
struct InfoRecord {
    info: ProcessInfo,
}

/// A record of 0.12's form in the one form.
fn from_info(info: ProcessInfo) -> Record {
    let outcome = match info.status {
        ProcessStatus::Running => Outcome::Running,
        ProcessStatus::Error => Outcome::Failed(Failure {
            code: "ERROR".into(),
            message: "the process could not be run".into(),
        }),
        _ => Outcome::Exited(Exit {
            code: info.exit_code.unwrap_or(-1),
            signal: None,
            timed_out: false,
        }),
    };
    Record {
        kill_requested: info.status == ProcessStatus::Killed,
        id: info.id,
        pid: info.pid,
        launcher: Launcher::Session {
            session_id: info.session_id,
            command: info.command,
        },
        cwd: PathBuf::new(),
        started_at: info.start_time,
        outcome,
        ended_at: info.end_time,
        cpu_seconds: info.cpu_seconds,
    }
}

/// The log's terminal event for `outcome`, which both lines' readers take.
fn terminal_event(outcome: &Outcome) -> serde_json::Value {
    match outcome {
        Outcome::Exited(exit) => serde_json::json!({ "state": "exited", "exit": exit }),
        Outcome::Failed(failure) => serde_json::json!({ "state": "error", "error": failure }),
        Outcome::Running => serde_json::json!({ "state": "running" }),
    }
}

/// The exit code a terminal event tells (0.12's form before the one table: `exitCode`);
/// -1 for a process that has none.
pub(crate) fn terminal_exit_code(data: &[u8]) -> i32 {
    let Ok(end) = serde_json::from_slice::<serde_json::Value>(data) else {
        return -1;
    };
    end["exit"]["code"]
        .as_i64()
        .or_else(|| end["exitCode"].as_i64())
        .and_then(|code| i32::try_from(code).ok())
        .unwrap_or(-1)
}

/// One process, whichever launched it.
pub struct Process {
    pub id: String,
    /// Its supervisor as the daemon sees it: everything it started is below it. 0 for a
    /// process of a daemon before this one, which never runs again.
    pub(crate) supervisor: u32,
    /// Under this lock the log is appended to, so a reader that takes what the log keeps
    /// and where it ends under it, then follows the log from there, misses nothing.
    record: Mutex<Record>,
    pub(crate) log: Arc<SequencedLog>,
    pub(crate) ended: watch::Sender<bool>,
    /// A daemon before this one ran it.
    previous: bool,
    pub(crate) kill_requested: AtomicBool,
    /// Set once a kill has ended the whole tree, with whether SIGKILL was needed.
    pub(crate) killed: watch::Sender<Option<bool>>,
    /// Its lifetime ran out (the next line's `timeout`).
    pub(crate) timed_out: AtomicBool,
    /// What a session's command has beside (its stdin, its shell's signal flag); `None`
    /// for an argv and for a process of a daemon before this one.
    pub(crate) shell: Option<ShellParts>,
}

impl Process {
    /// A process this daemon started.
    pub(crate) fn new(
        record: Record,
        supervisor: u32,
        log: Arc<SequencedLog>,
        shell: Option<ShellParts>,
    ) -> Arc<Self> {
        Self::built(record, supervisor, log, shell, false)
    }

    /// An ended process a daemon before this one ran.
    fn loaded(record: Record, log: SequencedLog) -> Arc<Self> {
        Self::built(record, 0, Arc::new(log), None, true)
    }

    fn built(
        record: Record,
        supervisor: u32,
        log: Arc<SequencedLog>,
        shell: Option<ShellParts>,
        previous: bool,
    ) -> Arc<Self> {
        let ended = !record.running();
        Arc::new(Self {
            id: record.id.clone(),
            supervisor,
            record: Mutex::new(record),
            log,
            ended: watch::channel(ended).0,
            previous,
            kill_requested: AtomicBool::new(false),
            killed: watch::channel(None).0,
            timed_out: AtomicBool::new(false),
            shell,
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn record(&self) -> Record {
        self.lock().clone()
    }

    /// As 0.12 shows it.
    pub fn info(&self) -> ProcessInfo {
        self.lock().info()
    }

    /// [`Process::info`] with what its tree uses now, while it runs (from `/proc`); an
    /// ended one keeps the CPU time its supervisor reported.
    pub fn described(&self) -> ProcessInfo {
        let mut info = self.info();
        if !info.status.is_terminal() && self.supervisor != 0 {
            let usage = proctree::usage_below(self.supervisor);
            info.cpu_seconds = Some(usage.cpu_seconds);
            info.rss_bytes = Some(usage.rss_bytes);
        }
        info
    }

    pub fn log(&self) -> &Arc<SequencedLog> {
        &self.log
    }

    pub fn running(&self) -> bool {
        !*self.ended.borrow()
    }

    /// Resolves once the process has ended.
    pub async fn wait(&self) {
        let mut ended = self.ended.subscribe();
        let _ = ended.wait_for(|ended| *ended).await;
    }

    /// Records how the process ended: the log's terminal event, then the record, then the
    /// wake of those waiting for the end. Answers the record to store.
    pub(crate) fn end(&self, outcome: Outcome) -> Record {
        let mut record = self.lock();
        let terminal = terminal_event(&outcome).to_string();
        let at_ms = chrono::Utc::now().timestamp_millis();
        if let Err(error) = self.log.append(Kind::Terminal, at_ms, terminal.as_bytes()) {
            tracing::warn!(process = %self.id, %error, "the end of the output could not be kept");
        }
        record.outcome = outcome;
        record.ended_at = Some(crate::time::now_rfc3339());
        record.kill_requested = self.kill_requested.load(Ordering::SeqCst);
        self.ended.send_replace(true);
        record.clone()
    }
}

/// What a command a session runs in the background has beside: its stdin, the catch-up
/// its logs' readers ask of its follower, its shell's signal flag.
pub(crate) struct ShellParts {
    pub(crate) stdin: StdinPipe,
    pub(crate) catch_up: CatchUp,
    /// Where the daemon tells the command's shell that a signal came while it ran no
    /// command (`script::signal_flag`).
    pub(crate) signal_flag: PathBuf,
}

/// A read of a running process's logs asks its follower to copy what its output files hold
/// first: output is otherwise copied on inotify's wake-ups and a 20 ms tick, and a command
/// that printed and ended a moment before the read (`echo`, then the logs at once) must
/// not come back without what it printed.
#[derive(Default)]
pub(crate) struct CatchUp {
    /// Catch-ups asked for so far.
    pub(crate) asked: AtomicU64,
    pub(crate) wake: tokio::sync::Notify,
    /// The catch-ups done: each copied what the files held when it was asked for.
    pub(crate) done: watch::Sender<u64>,
}

/// Every process of this daemon and the ended ones kept from daemons before it.
pub struct ProcessTable {
    dir: PathBuf,
    /// Ended processes kept, all launchers together.
    retained: usize,
    /// Output kept per process, both streams together (the latest).
    log_bytes: u64,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    processes: HashMap<String, Arc<Process>>,
    /// Ids of ended processes, oldest end first.
    ended: VecDeque<String>,
    /// Ids taken by starts not yet in `processes` (see [`ProcessTable::reserve`]).
    starting: HashSet<String>,
}

/// An id a start holds from its check to its entry in the table: a second start asking
/// for it meanwhile is refused, so it can neither replace the first's log directory nor
/// leave the first's process running where no id reaches it. Let go when dropped.
pub(crate) struct Reserved<'t> {
    table: &'t ProcessTable,
    id: String,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        self.table.inner().starting.remove(&self.id);
    }
}

impl ProcessTable {
    /// Opens the table kept in `dir`, first moving in the processes kept in `older` (where
    /// a daemon before the one table kept the next line's).
    pub fn open(dir: PathBuf, older: &[PathBuf], retained: usize, log_bytes: u64) -> Arc<Self> {
        let _ = std::fs::create_dir_all(&dir);
        for old in older {
            move_in(old, &dir);
        }
        let table = Self {
            dir,
            retained,
            log_bytes,
            inner: Mutex::new(Inner::default()),
        };
        let mut loaded = load(&table.dir, log_bytes);
        loaded.sort_by(|a, b| {
            let (a, b) = (a.lock(), b.lock());
            (&a.ended_at, &a.id).cmp(&(&b.ended_at, &b.id))
        });
        let dropped = {
            let mut inner = table.inner();
            for process in loaded {
                inner.ended.push_back(process.id.clone());
                inner.processes.insert(process.id.clone(), process);
            }
            inner.trim(retained)
        };
        for id in dropped {
            let _ = std::fs::remove_dir_all(table.dir.join(id));
        }
        Arc::new(table)
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Process `id`, whichever daemon ran it.
    pub fn get(&self, id: &str) -> Option<Arc<Process>> {
        self.inner().processes.get(id).cloned()
    }

    /// Process `id` if this daemon runs or ran it.
    pub fn current(&self, id: &str) -> Option<Arc<Process>> {
        self.get(id).filter(|process| !process.previous)
    }

    /// Every process kept, in the order they started (`previous` too when asked).
    pub fn all(&self, previous: bool) -> Vec<Arc<Process>> {
        let mut all: Vec<(Record, Arc<Process>)> = self
            .inner()
            .processes
            .values()
            .filter(|process| previous || !process.previous)
            .map(|process| (process.record(), Arc::clone(process)))
            .collect();
        all.sort_by(|a, b| (&a.0.started_at, &a.0.id).cmp(&(&b.0.started_at, &b.0.id)));
        all.into_iter().map(|(_, process)| process).collect()
    }

    /// Processes running now.
    pub fn running(&self) -> Vec<Arc<Process>> {
        let inner = self.inner();
        inner
            .processes
            .values()
            .filter(|process| process.running())
            .cloned()
            .collect()
    }

    /// A new log for process `id` (one kept before under that id is replaced).
    pub(crate) fn create_log(&self, id: &str) -> Result<Arc<SequencedLog>, LogError> {
        Ok(Arc::new(SequencedLog::create(
            &self.dir.join(id),
            id,
            self.log_bytes,
        )?))
    }

    /// Removes what a start that failed made.
    pub(crate) fn discard(&self, id: &str) {
        let _ = std::fs::remove_dir_all(self.dir.join(id));
    }

    /// Holds `id` for a start, until the guard is dropped (after the start's
    /// [`insert`](Self::insert), or its failure); `None` when a process runs under it or
    /// another start holds it.
    pub(crate) fn reserve(&self, id: &str) -> Option<Reserved<'_>> {
        let mut inner = self.inner();
        let runs = inner.processes.get(id).is_some_and(|p| p.running());
        if runs || !inner.starting.insert(id.to_string()) {
            return None;
        }
        Some(Reserved {
            table: self,
            id: id.to_string(),
        })
    }

    /// Adds a started process and writes its record; one ended under the same id is
    /// replaced.
    pub(crate) fn insert(&self, process: Arc<Process>) {
        self.store(&process.record());
        let mut inner = self.inner();
        inner.ended.retain(|id| *id != process.id);
        inner.processes.insert(process.id.clone(), process);
    }

    /// Ends `process` with `outcome` and drops the oldest ended processes past the bound
    /// in the same step, under the table's lock, so no reader sees the end before the bound
    /// holds again; then stores its record and removes the dropped ones' directories.
    pub(crate) fn end(&self, process: &Process, outcome: Outcome) -> Record {
        let (record, dropped) = {
            let mut inner = self.inner();
            let record = process.end(outcome);
            inner.ended.push_back(record.id.clone());
            let dropped = inner.trim(self.retained);
            (record, dropped)
        };
        self.store(&record);
        for id in dropped {
            let dir = self.dir.join(id);
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn_blocking(move || std::fs::remove_dir_all(dir))),
                Err(_) => drop(std::fs::remove_dir_all(dir)),
            }
        }
        record
    }

    /// Writes `record` beside its log (a new file renamed over the old one).
    fn store(&self, record: &Record) {
        store(&self.dir.join(&record.id), record);
    }
}

impl Inner {
    /// Drops the oldest ended processes past `retained`; answers their ids.
    fn trim(&mut self, retained: usize) -> Vec<String> {
        let mut dropped = Vec::new();
        while self.ended.len() > retained {
            if let Some(old) = self.ended.pop_front() {
                // An id started again since is not this ended one.
                if self.processes.get(&old).is_some_and(|p| !p.running()) {
                    self.processes.remove(&old);
                    dropped.push(old);
                }
            }
        }
        dropped
    }
}

/// Writes `record` into process directory `dir` (a new file renamed over the old one).
pub(crate) fn store(dir: &Path, record: &Record) {
    let path = dir.join(RECORD);
    let temporary = dir.join(format!(".{RECORD}.new"));
    let written = serde_json::to_vec(&Stored::from(record))
        .map_err(std::io::Error::other)
        .and_then(|json| std::fs::write(&temporary, json))
        .and_then(|()| std::fs::rename(&temporary, &path));
    if let Err(error) = written {
        tracing::warn!(%error, path = %path.display(), "a process record could not be written");
    }
}

/// Moves each process directory in `old` into `dir` (one whose id is there already is
/// dropped), then removes `old`.
fn move_in(old: &Path, dir: &Path) {
    let Ok(entries) = std::fs::read_dir(old) else {
        return;
    };
    for entry in entries.flatten() {
        let target = dir.join(entry.file_name());
        if target.exists() || std::fs::rename(entry.path(), &target).is_err() {
            tracing::warn!(path = %entry.path().display(), "a kept process could not be moved into the process table");
        }
    }
    let _ = std::fs::remove_dir_all(old);
}

/// The processes daemons before this one left in `dir`, each ended, with its log. What
/// holds no readable record is removed; one that was running ended with its daemon (the
/// kernel ends a PID namespace with its init) and is recorded so, its log closed with that
/// end. A record of 0.12's form with its output inside (`<id>.json`) is moved into a log.
fn load(dir: &Path, log_bytes: u64) -> Vec<Arc<Process>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut loaded = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let found = if path.extension().is_some_and(|ext| ext == "json") {
            let moved = moved_into_log(dir, &path, log_bytes);
            let _ = std::fs::remove_file(&path);
            moved
        } else {
            opened(&path, log_bytes)
        };
        match found {
            Some((record, log)) => loaded.push(Process::loaded(record, log)),
            None => {
                tracing::warn!(path = %path.display(), "ignoring an unreadable process record");
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
    loaded
}

/// A process's record and its log, from its directory; ended if it was not.
fn opened(dir: &Path, log_bytes: u64) -> Option<(Record, SequencedLog)> {
    let bytes = std::fs::read(dir.join(RECORD)).ok()?;
    let mut record = match serde_json::from_slice::<Stored>(&bytes) {
        Ok(stored) => Record::from(stored),
        Err(_) => from_info(serde_json::from_slice::<InfoRecord>(&bytes).ok()?.info),
    };
    if dir.file_name()? != std::ffi::OsStr::new(&record.id) {
        return None;
    }
    let log = SequencedLog::open(dir, &record.id, log_bytes).ok()?;
    if record.running() {
        record.outcome = Outcome::Failed(Failure {
            code: "DAEMON_STOPPED".into(),
            message: "the daemon stopped while the process ran".into(),
        });
        if !log.ended() {
            let terminal = terminal_event(&record.outcome).to_string();
            let at_ms = chrono::Utc::now().timestamp_millis();
            let _ = log.append(Kind::Terminal, at_ms, terminal.as_bytes());
        }
        record.ended_at = Some(crate::time::now_rfc3339());
        store(dir, &record);
    }
    Some((record, log))
}

/// 0.12's record as daemons before the log kept it (`<id>.json`, its output inside), read
/// once to move it into a log.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecordWithOutput {
    info: ProcessInfo,
    stdout: String,
    stderr: String,
    #[serde(default)]
    stdout_dropped: u64,
    #[serde(default)]
    stderr_dropped: u64,
}

/// A record of the form before the logs, moved into a log of its own beside it, with a
/// record of the one form.
fn moved_into_log(dir: &Path, path: &Path, log_bytes: u64) -> Option<(Record, SequencedLog)> {
    let old = serde_json::from_slice::<RecordWithOutput>(&std::fs::read(path).ok()?).ok()?;
    let id = old.info.id.clone();
    if validate_id(&id).is_err() || !old.info.status.is_terminal() {
        return None;
    }
    let log_dir = dir.join(&id);
    let before = [old.stdout_dropped, old.stderr_dropped];
    let log = SequencedLog::create_after(&log_dir, &id, log_bytes, before).ok()?;
    let at_ms = chrono::Utc::now().timestamp_millis();
    for (kind, text) in [(Kind::Stdout, &old.stdout), (Kind::Stderr, &old.stderr)] {
        for chunk in text.as_bytes().chunks(1 << 20) {
            log.append(kind, at_ms, chunk).ok()?;
        }
    }
    let record = from_info(old.info);
    let terminal = terminal_event(&record.outcome).to_string();
    log.append(Kind::Terminal, at_ms, terminal.as_bytes())
        .ok()?;
    store(&log_dir, &record);
    Some((record, log))
}

/// Process ids name their directories, so they are kept to a safe alphabet.
pub(crate) fn validate_id(id: &str) -> Result<(), ProcessError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !id.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(ProcessError::InvalidId {
            reason:
                "must be 1 to 128 characters of A-Z, a-z, 0-9, '_', '-', '.', not starting with '.'"
                    .into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, launcher: Launcher, outcome: Outcome) -> Record {
        Record {
            id: id.into(),
            pid: 7,
            launcher,
            cwd: "/workspace".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            ended_at: (outcome != Outcome::Running).then(|| "2026-01-01T00:00:01Z".into()),
            outcome,
            kill_requested: false,
            cpu_seconds: None,
        }
    }

    #[test]
    fn one_record_form_reads_both_launchers_and_the_forms_before() {
        let exited = Outcome::Exited(Exit {
            code: 3,
            signal: None,
            timed_out: false,
        });
        let session = Launcher::Session {
            session_id: "s1".into(),
            command: "make -j2".into(),
        };
        let argv = Launcher::Argv {
            argv: vec!["/bin/echo".into(), "a b".into()],
        };
        for launcher in [session, argv] {
            let before = record("p", launcher, exited.clone());
            let json = serde_json::to_vec(&Stored::from(&before)).unwrap();
            let after = Record::from(serde_json::from_slice::<Stored>(&json).unwrap());
            assert_eq!(after.launcher, before.launcher);
            assert_eq!(after.outcome, before.outcome);
            assert_eq!(after.info().status, ProcessStatus::Failed);
        }
        // The next line's record before the one table.
        let next: Stored = serde_json::from_value(serde_json::json!({
            "id": "n", "pid": 9, "command": ["sleep", "1"], "cwd": "/w",
            "startedAt": "t", "exit": { "code": 0, "timedOut": false }, "endedAt": "u"
        }))
        .unwrap();
        let next = Record::from(next);
        assert_eq!(next.launcher.line(), "sleep 1");
        assert_eq!(next.info().status, ProcessStatus::Completed);
        assert_eq!(next.info().session_id, "");
        // 0.12's before it.
        let old: InfoRecord = serde_json::from_value(serde_json::json!({ "info": {
            "id": "o", "pid": 4, "command": "sleep 9", "status": "killed",
            "startTime": "t", "endTime": "u", "exitCode": 143, "sessionId": "s"
        }}))
        .unwrap();
        let old = from_info(old.info);
        assert_eq!(old.info().status, ProcessStatus::Killed);
        assert_eq!(old.launcher.argv(), ["bash", "-c", "sleep 9"]);
    }

    #[test]
    fn terminal_events_of_both_forms_tell_the_exit() {
        let exited = terminal_event(&Outcome::Exited(Exit {
            code: 4,
            signal: None,
            timed_out: false,
        }));
        assert_eq!(terminal_exit_code(exited.to_string().as_bytes()), 4);
        assert_eq!(terminal_exit_code(br#"{"exitCode":5}"#), 5);
        let failed = terminal_event(&Outcome::Failed(Failure {
            code: "X".into(),
            message: "y".into(),
        }));
        assert_eq!(terminal_exit_code(failed.to_string().as_bytes()), -1);
    }

    #[test]
    fn one_bound_keeps_the_latest_ended_of_every_launcher() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("processes");
        let older = state.path().join("next-processes");
        // Two daemons' worth: one of each launcher in the table's directory, one in the
        // next line's directory before the one table, one still running.
        for (at, id, place, launcher, outcome) in [
            (
                1,
                "a",
                &dir,
                Launcher::Argv {
                    argv: vec!["true".into()],
                },
                Outcome::Exited(Exit {
                    code: 0,
                    signal: None,
                    timed_out: false,
                }),
            ),
            (
                2,
                "b",
                &older,
                Launcher::Argv {
                    argv: vec!["false".into()],
                },
                Outcome::Exited(Exit {
                    code: 1,
                    signal: None,
                    timed_out: false,
                }),
            ),
            (
                3,
                "c",
                &dir,
                Launcher::Session {
                    session_id: "s".into(),
                    command: "sleep 100".into(),
                },
                Outcome::Running,
            ),
        ] {
            let process_dir = place.join(id);
            let log = SequencedLog::create(&process_dir, id, 1 << 20).unwrap();
            log.append(Kind::Stdout, 0, id.as_bytes()).unwrap();
            let mut record = record(id, launcher, outcome);
            record.ended_at = record.ended_at.map(|_| format!("2026-01-01T00:00:0{at}Z"));
            store(&process_dir, &record);
        }
        let table = ProcessTable::open(dir.clone(), std::slice::from_ref(&older), 2, 1 << 20);
        assert!(!older.exists(), "the older directory is moved in");
        // The running one ended with its daemon, so it ended last: `a` is dropped.
        assert!(table.get("a").is_none() && !dir.join("a").exists());
        let b = table.get("b").unwrap();
        assert_eq!(b.info().exit_code, Some(1));
        let c = table.get("c").unwrap();
        assert_eq!(c.info().status, ProcessStatus::Error);
        assert!(c.log().ended(), "its log is closed with that end");
        // Kept from before: readable by id, not this daemon's.
        assert!(table.current("b").is_none());
        assert_eq!(table.all(true).len(), 2);
        assert!(table.all(false).is_empty());
    }
}
