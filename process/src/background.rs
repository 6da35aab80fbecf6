//! Background processes of 0.12: a command line started through a session, its output
//! followed, its tree killed. They are kept in the one [`ProcessTable`] with the next
//! line's, by the same record form and bound, so they survive a daemon restart.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fsd_api::process::{ProcessInfo, ProcessStatus};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use nix::sys::signal::Signal;
use tokio::sync::watch;

use crate::error::{ProcessError, StdinError};
use crate::log::{Slice, capped_start, slice};
use crate::proctree;
use crate::script;
use crate::seqlog::{Entry, Kind, SequencedLog, Until};
use crate::session::{CommandSpec, Session, Started};
use crate::sessions::SessionManager;
use crate::shell::Report;
use crate::stdin::{StdinPipe, Written};
use crate::stop::{Below, Escalation};
use crate::table::{
    CatchUp, Exit, Launcher, Outcome, Process, ProcessTable, Record, ShellParts,
    terminal_exit_code, validate_id,
};
use crate::tail::{OutputTail, POLL, Stream};
use crate::text::{Utf8Chunker, incomplete_tail};
use crate::time::now_rfc3339;
use crate::wake::{OutputWakes, written};

/// Output answered per stream of one process at most (the latest).
pub const OUTPUT_CAP_BYTES: u64 = 8 * 1024 * 1024;
/// The internal session that runs background commands asked for without a session.
pub const SESSIONLESS_HOST: &str = "__fsd_background__";

/// What a follower of a process receives.
#[derive(Debug, Clone)]
pub enum Live {
    /// Output text, and the stream's absolute offset after it (where a follower that
    /// reconnects continues).
    Output(Stream, String, u64),
    Exit(i32),
}

/// Where a follower starts in each stream: absolute offsets, 0 for everything kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Since {
    pub stdout: u64,
    pub stderr: u64,
}

impl Since {
    fn of(&mut self, stream: Stream) -> &mut u64 {
        match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        }
    }
}

/// A process's output read from [`Since`].
#[derive(Debug, Clone)]
pub struct Logs {
    pub stdout: Slice,
    pub stderr: Slice,
    /// Whether output was dropped past the cap.
    pub truncated: bool,
}

fn kind(stream: Stream) -> Kind {
    match stream {
        Stream::Stdout => Kind::Stdout,
        Stream::Stderr => Kind::Stderr,
    }
}

/// Output from `since` as a process's log keeps it (either line's); while the process runs
/// (`whole` false), a character cut at the end waits. Reads files when `since` is older
/// than the log's memory.
pub fn read_logs(log: &SequencedLog, since: Since, whole: bool) -> Logs {
    let [stdout, stderr] = log.streams_from([since.stdout, since.stderr]);
    let (kept, ends) = (log.kept_from(), log.stream_ends());
    Logs {
        stdout: slice(stdout, since.stdout, whole, OUTPUT_CAP_BYTES),
        stderr: slice(stderr, since.stderr, whole, OUTPUT_CAP_BYTES),
        truncated: (0..2).any(|i| capped_start(kept[i], ends[i], OUTPUT_CAP_BYTES) > 0),
    }
}

/// The longest a read of logs waits for its catch-up (a follower busy copying a flood).
const CATCH_UP_AT_MOST: Duration = Duration::from_millis(500);

impl Process {
    /// After a kill was asked for: waits until the kill has ended the whole tree, and says
    /// whether SIGKILL was needed.
    async fn wait_killed(&self) -> bool {
        let mut killed = self.killed.subscribe();
        match killed.wait_for(Option::is_some).await {
            Ok(needed) => needed.unwrap_or(false),
            Err(_) => false,
        }
    }

    /// The output kept from `since` on (lossy text), with the offsets to continue from.
    /// Reads files when `since` is older than the log's memory: off the runtime's workers.
    pub fn logs(&self, since: Since) -> Logs {
        // Not under the lock: the follower's appends go on meanwhile.
        let whole = !self.lock().running();
        read_logs(&self.log, since, whole)
    }

    /// [`Process::logs`] once everything the process wrote before this was asked is kept:
    /// a session's command's follower copies what the output files hold (an ended
    /// process's was, before it was marked ended). The log is read on a blocking thread.
    pub async fn logs_now(self: &Arc<Self>, since: Since) -> Logs {
        let mut finished = self.ended.subscribe();
        if let Some(shell) = &self.shell
            && !*finished.borrow()
        {
            let ticket = shell.catch_up.asked.fetch_add(1, Ordering::SeqCst) + 1;
            shell.catch_up.wake.notify_one();
            let mut done = shell.catch_up.done.subscribe();
            let _ = tokio::time::timeout(CATCH_UP_AT_MOST, async {
                tokio::select! {
                    _ = done.wait_for(|done| *done >= ticket) => {}
                    _ = finished.wait_for(|finished| *finished) => {}
                }
            })
            .await;
        }
        let process = Arc::clone(self);
        match tokio::task::spawn_blocking(move || process.logs(since)).await {
            Ok(logs) => logs,
            Err(_) => self.logs(since),
        }
    }

    /// Everything a follower sees from `since`: the output kept from there, then live
    /// output, ending with the exit (at once if the process has already ended). Live output
    /// is the log followed from where the replay ended, both read under one lock, so
    /// nothing is lost or repeated between them; a follower that falls behind what the log
    /// keeps catches up the same way (as far as the cap keeps it).
    pub fn events(
        self: &Arc<Self>,
        since: Since,
    ) -> (
        ProcessInfo,
        impl futures_util::Stream<Item = Live> + Send + 'static,
    ) {
        let (info, follower) = {
            let record = self.lock();
            let mut follower = Follower {
                process: self.clone(),
                entries: None,
                finished: self.ended.subscribe(),
                seen: since,
                text: Default::default(),
                pending: std::collections::VecDeque::new(),
                done: false,
            };
            follower.catch_up(&record);
            (record.info(), follower)
        };
        let live = futures_util::stream::unfold(follower, |mut follower| async move {
            let event = follower.next().await?;
            Some((event, follower))
        });
        (info, live)
    }

    /// Sends signal number `signal` to every process of the tree (its supervisor, which
    /// ignores the polite signals, stays); answers how many it reached. The shell fsd runs
    /// a session's command in survives a polite signal its command's program handled (see
    /// `script::background`): it is held still while the signal goes out.
    pub fn signal_tree(&self, signal: i32) -> usize {
        if self.supervisor <= 1 {
            return 0;
        }
        let held = match (&self.shell, Signal::try_from(signal)) {
            (Some(shell), Ok(signal))
                if script::TRAPPED_SIGNALS.iter().any(|&(_, s)| s == signal) =>
            {
                held_shells(self.supervisor, &shell.signal_flag, signal)
            }
            _ => Vec::new(),
        };
        // Looked at once the shells are held: a command one started a moment before is in.
        let pids = proctree::living_below(self.supervisor);
        for &pid in &pids {
            if let Ok(pid) = i32::try_from(pid) {
                // SAFETY: kill(2) with a pid and a signal number; nix's `Signal` has no
                // real-time signals, which the next line allows.
                unsafe { nix::libc::kill(pid, signal) };
            }
        }
        proctree::signal_all(&held, Signal::SIGCONT);
        pids.len()
    }

    /// Keeps `bytes` of `stream` in the log, where followers read them.
    fn append(&self, stream: Stream, bytes: &[u8]) {
        let _record = self.lock();
        if !bytes.is_empty()
            && let Err(error) = self.log.append(kind(stream), now_ms(), bytes)
        {
            tracing::warn!(process = %self.id, %error, "output could not be kept");
        }
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// One follower of a process: what it has been given, and what is queued for it.
struct Follower {
    process: Arc<Process>,
    /// The log's entries after the last catch-up.
    entries: Option<BoxStream<'static, Entry>>,
    /// Whether the process has ended: a follower whose log could not take the end (a full
    /// disk) catches up from the process then, and ends too.
    finished: watch::Receiver<bool>,
    /// The offsets after the output given so far.
    seen: Since,
    /// Each stream's text past `seen`: it holds a character not whole yet.
    text: [Utf8Chunker; 2],
    pending: std::collections::VecDeque<Live>,
    /// The exit is queued or given: nothing more is read.
    done: bool,
}

impl Follower {
    /// Queues the kept output after what was given and follows the log from its end, or
    /// queues the exit when the process has ended (under the process's lock, held by the
    /// caller with its `info`, so no output comes between the two).
    fn catch_up(&mut self, record: &Record) {
        let whole = !record.running();
        let log = &self.process.log;
        let reads = log.streams_from([self.seen.stdout, self.seen.stderr]);
        for (index, (stream, read)) in [Stream::Stdout, Stream::Stderr]
            .into_iter()
            .zip(reads)
            .enumerate()
        {
            // What `slice` leaves at the end while the process runs: the follower holds it.
            let cut = if whole {
                0
            } else {
                incomplete_tail(&read.bytes)
            };
            let held = read.bytes[read.bytes.len() - cut..].to_vec();
            let since = *self.seen.of(stream);
            let slice = slice(read, since, whole, OUTPUT_CAP_BYTES);
            if slice.skipped > 0 {
                tracing::warn!(process = %self.process.id, skipped = slice.skipped, "a follower fell behind past the kept output");
            }
            self.text[index] = Utf8Chunker::default();
            self.text[index].push(&held);
            *self.seen.of(stream) = slice.end;
            if !slice.text.is_empty() {
                self.pending
                    .push_back(Live::Output(stream, slice.text, slice.end));
            }
        }
        self.entries = (!whole).then(|| {
            crate::seqlog::follow(Arc::clone(log), log.end() + 1, Until::Terminal).boxed()
        });
        if whole {
            self.pending
                .push_back(Live::Exit(record.exit_code().unwrap_or(-1)));
            self.done = true;
        }
    }

    /// Queues what one entry of the log says.
    fn read(&mut self, entry: Entry) {
        let Entry::Record(record) = entry else {
            tracing::debug!(process = %self.process.id, "a follower fell behind what the log keeps: caught up from it");
            let process = Arc::clone(&self.process);
            let record = process.lock();
            self.catch_up(&record);
            return;
        };
        let (index, stream) = match record.kind {
            Kind::Stdout => (0, Stream::Stdout),
            Kind::Stderr => (1, Stream::Stderr),
            Kind::Terminal => {
                // A character never finished is given as it is (U+FFFD).
                for (index, stream) in [(0, Stream::Stdout), (1, Stream::Stderr)] {
                    let held = self.text[index].held() as u64;
                    let text = self.text[index].finish();
                    self.given(stream, text, held);
                }
                let code = terminal_exit_code(&record.data);
                self.pending.push_back(Live::Exit(code));
                self.done = true;
                return;
            }
        };
        let held = self.text[index].held();
        let text = self.text[index].push(&record.data);
        let bytes = held + record.data.len() - self.text[index].held();
        self.given(stream, text, bytes as u64);
    }

    /// Queues `text`, `bytes` of `stream` after what was given.
    fn given(&mut self, stream: Stream, text: String, bytes: u64) {
        if !text.is_empty() {
            let end = *self.seen.of(stream) + bytes;
            *self.seen.of(stream) = end;
            self.pending.push_back(Live::Output(stream, text, end));
        }
    }

    async fn next(&mut self) -> Option<Live> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.done {
                return None;
            }
            let entries = self.entries.as_mut()?;
            let finished = &mut self.finished;
            let entry = tokio::select! {
                biased;
                entry = entries.next() => Some(entry?),
                _ = finished.wait_for(|ended| *ended) => None,
            };
            match entry {
                Some(entry) => self.read(entry),
                None => {
                    let process = Arc::clone(&self.process);
                    let record = process.lock();
                    self.catch_up(&record);
                }
            }
        }
    }
}

/// 0.12's processes: started through sessions, read, followed and killed by id. Every
/// process of the table is one of them to read and kill, the next line's too.
pub struct ProcessService {
    sessions: Arc<SessionManager>,
    table: Arc<ProcessTable>,
}

impl ProcessService {
    pub fn new(sessions: Arc<SessionManager>, table: Arc<ProcessTable>) -> Self {
        Self { sessions, table }
    }

    pub fn get(&self, id: &str) -> Result<Arc<Process>, ProcessError> {
        self.table
            .get(id)
            .ok_or_else(|| ProcessError::NotFound { id: id.to_string() })
    }

    /// All processes, oldest first, optionally of one status, with what each uses.
    pub fn list(&self, status: Option<ProcessStatus>) -> Vec<ProcessInfo> {
        self.table
            .all(true)
            .iter()
            .filter(|process| status.is_none_or(|s| process.info().status == s))
            .map(|process| process.described())
            .collect()
    }

    /// Starts `spec` in the background in session `session_id` (an internal one when the
    /// caller asked for none) and follows it.
    pub async fn start(
        self: &Arc<Self>,
        session_id: &str,
        spec: &CommandSpec,
        requested_id: Option<String>,
    ) -> Result<Arc<Process>, ProcessError> {
        let id = match requested_id {
            Some(id) => {
                validate_id(&id)?;
                id
            }
            None => generated_id(),
        };
        let Some(_reserved) = self.table.reserve(&id) else {
            return Err(ProcessError::DuplicateId { id });
        };
        let host = if session_id == fsd_api::DISABLE_SESSION_TOKEN {
            SESSIONLESS_HOST
        } else {
            session_id
        };
        let session = self.sessions.get_or_create(host).await?;
        let cwd = spec
            .cwd
            .clone()
            .or_else(|| session.cwd())
            .unwrap_or_default();
        let log = self.table.create_log(&id)?;
        let mut started = match session.start_background(spec).await {
            Ok(started) => started,
            Err(error) => {
                self.table.discard(&id);
                return Err(error.into());
            }
        };
        let record = Record {
            id: id.clone(),
            pid: started.pid,
            launcher: Launcher::Session {
                session_id: session_id.to_string(),
                command: spec.command.clone(),
            },
            cwd,
            started_at: now_rfc3339(),
            outcome: Outcome::Running,
            ended_at: None,
            kill_requested: false,
            cpu_seconds: None,
        };
        let shell = ShellParts {
            stdin: StdinPipe::new(started.stdin.take()),
            catch_up: CatchUp::default(),
            signal_flag: script::signal_flag(&started.job.state),
        };
        let process = Process::new(record, started.supervisor, log, Some(shell));
        self.table.insert(process.clone());
        let service = self.clone();
        let followed = process.clone();
        tokio::spawn(async move {
            let mut code = follow(&followed, started, &session, service.sessions.wakes()).await;
            if followed.kill_requested.load(Ordering::SeqCst) && followed.wait_killed().await {
                // SIGKILL was needed to end the tree: that is what ended the process.
                code = 137;
            }
            let outcome = Outcome::Exited(Exit {
                code,
                signal: None,
                timed_out: false,
            });
            service.table.end(&followed, outcome);
            if let Some(shell) = &followed.shell {
                shell.stdin.shut().await;
            }
        });
        Ok(process)
    }

    /// Kills a running process's whole tree (SIGTERM, the grace period, then SIGKILL until
    /// nothing of it runs) and returns once its record is terminal. The kill runs as a task
    /// of its own, so a caller that goes away does not stop it half-way.
    pub async fn kill(&self, id: &str) -> Result<(), ProcessError> {
        let process = self.get(id)?;
        let info = process.info();
        if info.status.is_terminal() {
            return Err(ProcessError::AlreadyFinished {
                id: id.to_string(),
                session_id: info.session_id,
            });
        }
        if !process.kill_requested.swap(true, Ordering::SeqCst) {
            let killing = process.clone();
            tokio::spawn(async move {
                // Everything the process started is below its supervisor, including what
                // left its process group or session.
                let stopped = Escalation::REQUESTED
                    .stop(&mut Below(killing.supervisor))
                    .await;
                let needed = stopped.needed_kill();
                killing.killed.send_replace(Some(needed));
            });
        }
        // The record turns terminal once the tree is gone and the exit is known; a process
        // whose supervisor was killed from inside the sandbox is noticed within a second.
        process.wait().await;
        Ok(())
    }

    /// Sends `signal` to every process of `id`'s tree (its supervisor, which ignores the
    /// polite signals, stays); returns how many it reached. The shell fsd runs a session's
    /// command in survives a signal its command's program handled (see
    /// `script::background`).
    pub fn signal(&self, id: &str, signal: Signal) -> Result<usize, ProcessError> {
        let process = self.get(id)?;
        let info = process.info();
        if info.status.is_terminal() || process.supervisor == 0 {
            return Err(ProcessError::AlreadyFinished {
                id: id.to_string(),
                session_id: info.session_id,
            });
        }
        Ok(process.signal_tree(signal as i32))
    }

    /// Writes `bytes` to a running process's stdin pipe, in order with other writes, and
    /// closes it after when `close` says so (the process then reads end of file). Waits
    /// up to `wait` for the pipe to have room each time it is full. An argv's stdin is
    /// closed from its start.
    pub async fn write_stdin(
        &self,
        id: &str,
        bytes: &[u8],
        close: bool,
        wait: Duration,
    ) -> Result<Written, ProcessError> {
        let process = self.get(id)?;
        let stdin_error = |source| ProcessError::Stdin {
            id: id.to_string(),
            source,
        };
        if !process.running() {
            return Err(stdin_error(StdinError::Exited { written: 0 }));
        }
        let Some(shell) = &process.shell else {
            return Err(stdin_error(StdinError::NotPiped));
        };
        shell
            .stdin
            .write(bytes, close, wait, process.wait())
            .await
            .map_err(stdin_error)
    }

    /// Processes running now.
    pub fn running(&self) -> usize {
        self.table.running().len()
    }

    /// Kills every running process; returns how many there were.
    pub async fn kill_all(&self) -> usize {
        let running = self.table.running();
        let kills = running.iter().map(|process| self.kill(&process.id));
        futures_util::future::join_all(kills)
            .await
            .into_iter()
            .filter(Result::is_ok)
            .count()
    }
}

/// Follows a started command until it exits: copies new output when the files are written
/// (and every tick, for what inotify misses) and returns the exit status (128+N after signal N). If the shell's report never comes (its reporter was
/// killed), the process's death is noticed from /proc.
async fn follow(
    process: &Process,
    mut started: Started,
    session: &Session,
    wakes: &OutputWakes,
) -> i32 {
    let mut out = Tail::new(&started.job.stdout, Stream::Stdout);
    let mut err = Tail::new(&started.job.stderr, Stream::Stderr);
    let mut ticker = tokio::time::interval(POLL);
    let mut dead_ticks = 0;
    let woken = wakes.watch(&[&started.job.stdout, &started.job.stderr]);
    let Some(shell) = &process.shell else {
        return -1;
    };
    let code = loop {
        tokio::select! {
            // A write between two waits is not lost: the notification waits for the next.
            () = written(woken.as_ref()) => {
                out.pump(process);
                err.pump(process);
            }
            // A read of the logs asked for what the files hold now.
            () = shell.catch_up.wake.notified() => {
                let asked = shell.catch_up.asked.load(Ordering::SeqCst);
                out.pump_all(process);
                err.pump_all(process);
                shell.catch_up.done.send_replace(asked);
            }
            report = started.reports.recv() => match report {
                Some(Report::Exit(code)) => break code,
                Some(Report::Cpu(micros)) => process.lock().cpu_seconds = Some(micros as f64 / 1e6),
                Some(_) => {}
                None => break -1,
            },
            _ = ticker.tick() => {
                out.pump(process);
                err.pump(process);
                if proctree::alive(started.host_pid) {
                    dead_ticks = 0;
                } else {
                    dead_ticks += 1;
                    // The reporter normally answers within a tick; 50 ticks is a lost report.
                    if dead_ticks > 50 || session.destroyed() {
                        if session.destroyed() {
                            // Killed with its session, before its supervisor could report.
                            process.kill_requested.store(true, Ordering::SeqCst);
                            process.killed.send_replace(Some(true));
                        }
                        break if process.kill_requested.load(Ordering::SeqCst) { 137 } else { -1 };
                    }
                }
            }
        }
    };
    out.drain(process);
    err.drain(process);
    out.finish(process);
    err.finish(process);
    session.background_ended(&started);
    started.job.remove_files();
    code
}

/// How long the daemon waits for what it stops to stop before it signals the tree.
const HOLD_AT_MOST: Duration = Duration::from_millis(50);

/// Holds still the shells that run `supervisor`'s command (its children) and the commands
/// each runs (their children), and, for a shell that runs no command then, writes
/// `signal`'s number in its signal flag. Held, a shell can neither start a command nor
/// reap one, and its command can neither end nor start another, so what the shell does
/// with the signal follows from what it was doing when the signal came (see
/// `script::signal_traps`). Answers what it stopped, to continue once the signal is sent:
/// the commands first, then their shells. What was stopped already is left as it was.
fn held_shells(supervisor: u32, flag: &Path, signal: Signal) -> Vec<u32> {
    let mut held = Vec::new();
    for shell in proctree::children(supervisor) {
        if !hold(shell) {
            continue;
        }
        // Held, the shell makes no new child: its children are read once.
        let children = proctree::children(shell);
        let commands: Vec<u32> = children.iter().copied().filter(|&c| hold(c)).collect();
        let idle = !children.into_iter().any(proctree::alive);
        if idle && let Err(error) = std::fs::write(flag, format!("{}\n", signal as i32)) {
            tracing::warn!(%error, flag = %flag.display(), "a signal flag could not be written");
        }
        held.extend(commands);
        held.push(shell);
    }
    held
}

/// Stops `pid` and waits (a moment at most) until it is stopped; `false` when it is not
/// alive or was stopped already (it is not to be continued then).
fn hold(pid: u32) -> bool {
    if !proctree::alive(pid) || proctree::stopped(pid) {
        return false;
    }
    proctree::signal_all(&[pid], Signal::SIGSTOP);
    let asked = std::time::Instant::now();
    while !proctree::stopped(pid) && proctree::alive(pid) && asked.elapsed() < HOLD_AT_MOST {
        std::thread::sleep(Duration::from_micros(50));
    }
    true
}

/// Reads of 4 MiB one catch-up makes at most, a stream.
const CATCH_UP_READS: usize = 16;

/// An output file of a process, copied into its log as it grows.
struct Tail {
    file: OutputTail,
    stream: Stream,
}

impl Tail {
    fn new(path: &Path, stream: Stream) -> Self {
        Self {
            file: OutputTail::new(path, stream),
            stream,
        }
    }

    /// Copies up to 4 MiB of new output; returns how much there was.
    fn pump(&mut self, process: &Process) -> usize {
        match self.file.read() {
            // All of it held back (a line's start that may be a script's name).
            Some(appended) if appended.bytes.is_empty() => 0,
            Some(appended) => {
                process.append(self.stream, &appended.bytes);
                appended.bytes.len()
            }
            None => 0,
        }
    }

    /// Copies everything that is left, however much the process wrote in its last tick.
    fn drain(&mut self, process: &Process) {
        while self.pump(process) > 0 {}
    }

    /// Copies what the file holds now, up to [`CATCH_UP_READS`] reads (a process that
    /// writes faster than it is copied cannot hold a catch-up for ever).
    fn pump_all(&mut self, process: &Process) {
        for _ in 0..CATCH_UP_READS {
            if self.pump(process) == 0 {
                return;
            }
        }
    }

    fn finish(&mut self, process: &Process) {
        let (bytes, _) = self.file.finish();
        process.append(self.stream, &bytes);
    }
}

/// `proc_<ms>_<6 base36>`, as the reference makes them.
fn generated_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut n = (now.subsec_nanos() as u64) ^ (u64::from(std::process::id()) << 20);
    let mut suffix = String::new();
    for _ in 0..6 {
        suffix.push(char::from_digit((n % 36) as u32, 36).unwrap_or('0'));
        n /= 36;
    }
    format!("proc_{}_{suffix}", now.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_ids() {
        assert!(validate_id("proc_1_abc").is_ok());
        assert!(validate_id("web-server.1").is_ok());
        for bad in ["", ".hidden", "a/b", "../x", "a b", &"x".repeat(129)] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
        assert!(generated_id().starts_with("proc_"));
    }

    #[test]
    fn records_with_their_output_inside_move_into_logs() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path();
        let info = |id: &str, status: &str| {
            serde_json::json!({
                "id": id, "pid": 7, "command": "seq 3", "status": status,
                "startTime": "2026-01-01T00:00:00Z", "endTime": "2026-01-01T00:00:01Z",
                "exitCode": 0, "sessionId": "s",
            })
        };
        let old = serde_json::json!({
            "info": info("old", "completed"), "stdout": "€ 2\n3\n", "stderr": "e",
            "truncated": true, "stdoutDropped": 10, "stderrDropped": 0,
        });
        std::fs::write(dir.join("old.json"), old.to_string()).unwrap();
        // A directory with no record (a start cut short): removed.
        std::fs::create_dir(dir.join("cut")).unwrap();
        std::fs::write(dir.join("cut/00000000000000000001.0.0.log"), b"x").unwrap();

        let open = || ProcessTable::open(dir.to_path_buf(), &[], 64, 2 * OUTPUT_CAP_BYTES);
        let table = open();
        assert_eq!(table.all(true).len(), 1);
        let process = table.get("old").unwrap();
        assert_eq!(process.info().status, ProcessStatus::Completed);
        assert!(!dir.join("old.json").exists() && !dir.join("cut").exists());
        let log = process.log();
        let logs = read_logs(log, Since::default(), true);
        assert_eq!(
            (logs.stdout.text.as_str(), logs.stdout.end),
            ("€ 2\n3\n", 18)
        );
        assert_eq!((logs.stdout.skipped, logs.stderr.text.as_str()), (10, "e"));
        assert!(logs.truncated && log.ended());
        // Read again as this daemon's own form, after another restart.
        drop((process, table));
        let again = open().get("old").unwrap();
        assert_eq!(again.info().command, "seq 3");
        let logs = read_logs(
            again.log(),
            Since {
                stdout: 14,
                stderr: 1,
            },
            true,
        );
        assert_eq!(
            (logs.stdout.text.as_str(), logs.stderr.text.as_str()),
            ("2\n3\n", "")
        );
    }
}
