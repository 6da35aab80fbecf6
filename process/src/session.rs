//! A session: one shell, commands serialized through a FIFO-fair lock, and the policy for
//! stopping a command that runs past its timeout without losing the session.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::sync::mpsc;

use crate::error::{ExecError, StdinError};
use crate::output::{self, Output, read_capped};
use crate::proctree;
use crate::script;
use crate::script_names::ScriptNames;
use crate::shell::{Job, JobKind, Report, Shell};
use crate::stdin::{self, Stdin, StdinPipe, Written};
use crate::stop::{Escalation, Target};
use crate::tail::{self, OutputTail, Stream};
use crate::wake::{OutputWakes, Woken, written};

/// Output kept per stream of a foreground command; beyond it the result says `truncated`.
pub const MAX_OUTPUT_BYTES: u64 = 32 * 1024 * 1024;
/// How long a background command may take to report its pid.
const PID_TIMEOUT: Duration = Duration::from_secs(10);

/// A finished foreground command.
#[derive(Debug)]
pub struct Finished {
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub truncated: bool,
    pub duration: Duration,
}

/// What a command runs with.
#[derive(Debug, Clone, Default)]
pub struct CommandSpec {
    pub command: String,
    /// Checked to be an existing directory before the command is sent.
    pub cwd: Option<PathBuf>,
    /// Validated names.
    pub env: Vec<(String, String)>,
    pub stdin: Stdin,
}

/// What a streamed foreground command tells its listener as it runs.
#[derive(Debug)]
pub enum Streamed {
    /// The command has its turn in the shell (commands queued before it have run); `job`
    /// addresses it for [`Session::signal_streamed`].
    Started { job: u64 },
    /// Output, whole characters only, in the order it was read.
    Output(Stream, String),
}

/// A streamed foreground command while it runs: signals sent to it reach what appeared
/// below the session since it started (`before` is what was there already).
struct Running {
    job: u64,
    before: HashSet<u32>,
    stdin: Option<StreamedStdin>,
}

/// A streamed command's stdin pipe, when it was given one ([`Stdin::Pipe`]), and what
/// tells a write waiting on it that the command has ended (its sender gone).
type StreamedStdin = (Arc<StdinPipe>, tokio::sync::watch::Receiver<()>);

/// A background command that has started.
pub struct Started {
    pub job: Job,
    /// The pid commands in the sandbox see (its PID namespace's numbering).
    pub pid: u32,
    /// The same process as the daemon sees it, for signals and /proc; 0 once it is gone.
    pub host_pid: u32,
    /// Its supervisor (host pid): everything the command started stays below it.
    pub supervisor: u32,
    pub reports: mpsc::UnboundedReceiver<Report>,
    /// The writing end of its stdin, when it was started with [`Stdin::Pipe`].
    pub stdin: Option<stdin::OpenPipe>,
}

pub struct Session {
    pub id: String,
    shell: Shell,
    lock: tokio::sync::Mutex<()>,
    pub command_timeout: Option<Duration>,
    pub created_at: String,
    /// Supervisors (host pids) of running background commands, so a foreground kill
    /// spares them.
    background: Mutex<HashSet<u32>>,
    /// The streamed foreground command that runs now, if any.
    streamed: Mutex<Option<Running>>,
    deleted: AtomicBool,
}

impl Session {
    pub fn new(
        id: String,
        shell: Shell,
        command_timeout: Option<Duration>,
        created_at: String,
    ) -> Self {
        Self {
            id,
            shell,
            lock: tokio::sync::Mutex::new(()),
            command_timeout,
            created_at,
            background: Mutex::default(),
            streamed: Mutex::default(),
            deleted: AtomicBool::new(false),
        }
    }

    /// The shell's pid as commands see it.
    pub fn shell_pid(&self) -> u32 {
        self.shell.sandbox_pid()
    }

    /// The supervisor the shell runs under (host pid).
    pub fn supervisor(&self) -> u32 {
        self.shell.root()
    }

    pub fn cwd(&self) -> Option<PathBuf> {
        self.shell.cwd()
    }

    /// Whether the session was deleted (its processes were killed with it).
    pub fn destroyed(&self) -> bool {
        self.deleted.load(Ordering::SeqCst)
    }

    pub fn is_dead(&self) -> bool {
        self.shell.exited().is_some()
    }

    /// Marks the session deleted and kills its shell and everything it started, background
    /// processes and whatever detached from them included. Blocks for the few milliseconds
    /// the kill takes.
    pub fn destroy(&self) {
        self.deleted.store(true, Ordering::SeqCst);
        self.shell.kill();
    }

    /// Runs a foreground command in the shell, after every command queued before it. Its
    /// output files are kept for the next command when nothing can write to them.
    pub async fn exec(
        &self,
        spec: &CommandSpec,
        timeout: Option<Duration>,
    ) -> Result<Finished, ExecError> {
        let _turn = self.lock.lock().await;
        self.check_alive()?;
        let (job, mut reports) = self.shell.new_job(JobKind::Foreground);
        let result = self.run_foreground(&job, &mut reports, spec, timeout).await;
        let (result, keep) = match result {
            Ok((finished, keep)) => (Ok(finished), keep),
            Err(err) => (Err(err), [false, false]),
        };
        self.end_foreground(&job, spec, keep);
        result
    }

    /// What a foreground command leaves once it has ended: its reports unsubscribed, its
    /// stdin content removed, its output files kept for the next command (`keep`: stdout,
    /// stderr) or removed.
    fn end_foreground(&self, job: &Job, spec: &CommandSpec, keep: [bool; 2]) {
        self.shell.unsubscribe(job.id);
        if matches!(spec.stdin, Stdin::Content(_) | Stdin::Pipe) {
            let _ = std::fs::remove_file(&job.stdin);
        }
        self.shell.retire_foreground_output(job, keep);
    }

    /// Runs a foreground command in the shell, as [`Session::exec`] does (so `cd` and
    /// `export` persist), telling `sink` when it starts and what it prints as it prints
    /// it; returns its exit status. A listener that goes away before the end (its receiver
    /// dropped) stops the command as a timeout does, so an abandoned command never holds
    /// the session.
    pub async fn exec_streamed(
        &self,
        spec: &CommandSpec,
        timeout: Option<Duration>,
        wakes: &OutputWakes,
        sink: &mpsc::Sender<Streamed>,
    ) -> Result<i32, ExecError> {
        let _turn = tokio::select! {
            turn = self.lock.lock() => turn,
            () = sink.closed() => return Err(ExecError::Abandoned),
        };
        self.check_alive()?;
        let (job, mut reports) = self.shell.new_job(JobKind::Foreground);
        let result = self
            .run_streamed(&job, &mut reports, spec, timeout, wakes, sink)
            .await;
        *self.streamed.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let keep = match result {
            Ok(_) => [&job.stdout, &job.stderr]
                .map(|path| Output::open(path).as_ref().is_some_and(Output::reusable)),
            Err(_) => [false, false],
        };
        self.end_foreground(&job, spec, keep);
        result
    }

    async fn run_streamed(
        &self,
        job: &Job,
        reports: &mut mpsc::UnboundedReceiver<Report>,
        spec: &CommandSpec,
        timeout: Option<Duration>,
        wakes: &OutputWakes,
        sink: &mpsc::Sender<Streamed>,
    ) -> Result<i32, ExecError> {
        let mut piped = write_inputs(job, spec).await?;
        // A pipe the caller writes while the command runs ([`Session::write_streamed_stdin`]).
        // `_running` goes when this returns, which tells a write waiting on it that the
        // command has ended.
        let (_running, ended) = tokio::sync::watch::channel(());
        let stdin = match spec.stdin {
            Stdin::Pipe => {
                piped = true;
                let pipe = StdinPipe::new(Some(stdin::open_pipe(&job.stdin)?));
                Some((Arc::new(pipe), ended))
            }
            _ => None,
        };
        // The output files exist before the command opens them, so they can be watched.
        for path in [&job.stdout, &job.stderr] {
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)?;
        }
        let mut output = StreamedOutput::new(job, wakes);
        let before = self.direct_processes();
        *self.streamed.lock().unwrap_or_else(|p| p.into_inner()) = Some(Running {
            job: job.id,
            before: before.clone(),
            stdin,
        });
        let started = self.send_foreground(job, spec, piped).await?;
        let _ = sink.send(Streamed::Started { job: job.id }).await;
        let deadline = timeout.map(|t| tokio::time::Instant::from_std(started + t));
        let mut ticker = tokio::time::interval(tail::POLL);
        let done = loop {
            tokio::select! {
                code = wait_done(reports) => break code,
                code = self.shell.wait_exit() => {
                    output.drain(sink).await;
                    return Err(self.exit_error(code));
                }
                () = sleep_until(deadline) => {
                    let kept = self.stop_foreground(reports, &before).await;
                    output.drain(sink).await;
                    return Err(timeout_error(timeout, &job.stdout, &job.stderr, kept));
                }
                () = sink.closed() => {
                    self.stop_foreground(reports, &before).await;
                    return Err(ExecError::Abandoned);
                }
                () = written(output.woken.as_ref()) => { output.pump(sink).await; }
                _ = ticker.tick() => { output.pump(sink).await; }
            }
        };
        output.drain(sink).await;
        if self.destroyed() {
            return Err(ExecError::SessionDestroyed {
                id: self.id.clone(),
            });
        }
        match done {
            Some(Ok(code)) => Ok(code),
            Some(Err(())) => Err(outside(spec)),
            None => Err(self.exit_error(self.shell.wait_exit().await)),
        }
    }

    /// Sends `signal` to the streamed foreground command `job` while it runs: to every
    /// process it started (background processes and what ran before it are spared), and
    /// an interrupt to the shell too, as Ctrl-C in a terminal reaches both: the shell
    /// ends the command line once the program it waits for has ended, so a loop stops
    /// while a program that handles the signal runs on. Says whether `job` was running.
    pub fn signal_streamed(&self, job: u64, signal: Signal) -> bool {
        let before = match &*self.streamed.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(running) if running.job == job => running.before.clone(),
            _ => return false,
        };
        proctree::signal_all(&self.started_since(&before), signal);
        if signal == Signal::SIGINT {
            self.shell.interrupt();
        }
        true
    }

    /// Writes `bytes` to the stdin pipe of the streamed foreground command `job` (one run
    /// with [`Stdin::Pipe`]), then closes it when `close` says so; as a background
    /// process's stdin is written ([`StdinPipe::write`]). A command that is not running
    /// (ended, or never started here) is [`StdinError::Exited`].
    pub async fn write_streamed_stdin(
        &self,
        job: u64,
        bytes: &[u8],
        close: bool,
        wait: Duration,
    ) -> Result<Written, StdinError> {
        let (pipe, mut ended) = match &*self.streamed.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(Running {
                job: running,
                stdin,
                ..
            }) if *running == job => match stdin {
                Some((pipe, ended)) => (pipe.clone(), ended.clone()),
                None => return Err(StdinError::NotPiped),
            },
            _ => return Err(StdinError::Exited { written: 0 }),
        };
        let ended = async move {
            let _ = ended.changed().await;
        };
        pipe.write(bytes, close, wait, ended).await
    }

    /// The command's result, and whether its stdout and stderr files may serve the next
    /// command.
    async fn run_foreground(
        &self,
        job: &Job,
        reports: &mut mpsc::UnboundedReceiver<Report>,
        spec: &CommandSpec,
        timeout: Option<Duration>,
    ) -> Result<(Finished, [bool; 2]), ExecError> {
        let piped = write_inputs(job, spec).await?;
        // What already runs below the session (detached leftovers of earlier commands) is
        // not this command's to stop on a timeout (without one, nothing is stopped).
        let before = match timeout {
            Some(_) => self.direct_processes(),
            None => HashSet::new(),
        };
        let started = self.send_foreground(job, spec, piped).await?;
        let deadline = timeout.map(|t| tokio::time::Instant::from_std(started + t));
        let done = tokio::select! {
            code = wait_done(reports) => code,
            code = self.shell.wait_exit() => return Err(self.exit_error(code)),
            () = sleep_until(deadline) => {
                let kept = self.stop_foreground(reports, &before).await;
                return Err(timeout_error(timeout, &job.stdout, &job.stderr, kept));
            }
        };
        let duration = started.elapsed();
        // A deletion kills the command before the shell: the shell can still report the
        // command's death (137) before it dies itself. That is the deletion's doing.
        if self.destroyed() {
            return Err(ExecError::SessionDestroyed {
                id: self.id.clone(),
            });
        }
        let exit_code = match done {
            Some(Ok(code)) => code,
            Some(Err(())) => return Err(outside(spec)),
            None => return Err(self.exit_error(self.shell.wait_exit().await)),
        };
        let (stdout, stderr) = (Output::open(&job.stdout), Output::open(&job.stderr));
        let keep = [&stdout, &stderr].map(|output| output.as_ref().is_some_and(Output::reusable));
        let mut finished = Finished::from_outputs(exit_code, stdout, stderr, duration).await?;
        finished.stderr = ScriptNames::rewrite_read(&job.stderr, finished.stderr);
        Ok((finished, keep))
    }

    /// The processes directly below the shell and directly below the session's supervisor
    /// (where orphans land), the shell itself left out.
    fn direct_processes(&self) -> HashSet<u32> {
        let shell = self.shell.pid();
        proctree::children(shell)
            .into_iter()
            .chain(proctree::children(self.shell.root()))
            .filter(|&pid| pid != shell)
            .collect()
    }

    /// Sends a foreground command's line to the shell (its files written); returns when.
    async fn send_foreground(
        &self,
        job: &Job,
        spec: &CommandSpec,
        piped: bool,
    ) -> Result<Instant, ExecError> {
        let cwd = spec
            .cwd
            .as_deref()
            .map(|cwd| self.shell.workdir(cwd))
            .transpose()?;
        let started = Instant::now();
        self.shell
            .send(&script::foreground(
                job.id,
                &spec.command,
                &job.files(piped),
                cwd.as_ref(),
                &spec.env,
            ))
            .await?;
        Ok(started)
    }

    /// The living processes a foreground command started: what appeared below the shell
    /// or the session's supervisor since `before` was taken, with all they started,
    /// background processes left out.
    fn started_since(&self, before: &HashSet<u32>) -> Vec<u32> {
        let spared = self
            .background
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let direct: Vec<u32> = self
            .direct_processes()
            .into_iter()
            .filter(|pid| !spared.contains(pid) && !before.contains(pid))
            .collect();
        direct
            .into_iter()
            .flat_map(proctree::tree)
            .filter(|&pid| proctree::alive(pid))
            .collect()
    }

    /// Stops a foreground command that ran past its deadline with
    /// [`Escalation::TIMEOUT`]: each signal goes to the command's processes and SIGINT
    /// to the shell too (bash runs its INT trap, which ends the command, both for builtin
    /// loops and for children that die of SIGINT); the shell itself is killed only if
    /// all that fails. Returns whether the session survived.
    async fn stop_foreground(
        &self,
        reports: &mut mpsc::UnboundedReceiver<Report>,
        before: &HashSet<u32>,
    ) -> bool {
        let mut command = Foreground {
            session: self,
            reports,
            before,
            done: false,
        };
        let stopped = Escalation::TIMEOUT.stop(&mut command).await;
        if command.done {
            return true;
        }
        tracing::warn!(session = %self.id, ?stopped, "a timed-out command survived SIGINT, SIGTERM and SIGKILL; killing the session");
        self.shell.kill();
        false
    }

    /// Starts a background command and returns once its pid is known. The session lock is
    /// held only until then, so background commands never block the session.
    pub async fn start_background(&self, spec: &CommandSpec) -> Result<Started, ExecError> {
        let _turn = self.lock.lock().await;
        self.check_alive()?;
        let cwd = spec
            .cwd
            .as_deref()
            .map(|cwd| self.shell.workdir(cwd))
            .transpose()?;
        let (job, mut reports) = self.shell.new_job(JobKind::Background);
        write_script(&job.script, &spec.command).await?;
        let mut pipe = None;
        match &spec.stdin {
            Stdin::Null => {}
            Stdin::Content(bytes) => stdin::write_content(&job.stdin, bytes).await?,
            Stdin::Pipe => pipe = Some(stdin::open_pipe(&job.stdin)?),
        }
        self.shell
            .send(&script::background(
                job.id,
                &job.files(spec.stdin != Stdin::Null),
                cwd.as_ref(),
                &spec.env,
                &self.shell.supervision(&job),
            ))
            .await?;
        let reported = tokio::select! {
            report = reports.recv() => match report {
                Some(Report::Pid(pid)) => Ok(pid),
                Some(Report::Exit(code)) => Err(ExecError::Spawn(format!("the command exited with {code} before starting"))),
                Some(Report::Outside) => Err(outside(spec)),
                _ => Err(ExecError::Spawn("no pid reported".into())),
            },
            code = self.shell.wait_exit() => Err(self.exit_error(code)),
            () = tokio::time::sleep(PID_TIMEOUT) => Err(ExecError::Spawn("no pid reported within 10 s".into())),
        };
        let pid = match reported {
            Ok(pid) => pid,
            Err(err) => {
                self.shell.unsubscribe(job.id);
                job.remove_files();
                return Err(err);
            }
        };
        // The pid is reported after the fork, so one scan finds a live process; a miss means it
        // has already exited (a retry or two covers a slow /proc).
        let mut host_pid = self.shell.host_pid(pid);
        for _ in 0..2 {
            if host_pid.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            host_pid = self.shell.host_pid(pid);
        }
        // Not found: the command already exited (its exit report is on its way). 0 stands for
        // "gone"; nothing signals pid 0 (see proctree::signal_all).
        let host_pid = host_pid.unwrap_or(0);
        let supervisor = proctree::parent(host_pid)
            .filter(|_| host_pid != 0)
            .unwrap_or(0);
        if supervisor != 0 {
            self.background
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(supervisor);
        }
        Ok(Started {
            job,
            pid,
            host_pid,
            supervisor,
            reports,
            stdin: pipe,
        })
    }

    /// Forgets a background command that has ended.
    pub fn background_ended(&self, started: &Started) {
        self.background
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&started.supervisor);
        self.shell.unsubscribe(started.job.id);
    }

    fn check_alive(&self) -> Result<(), ExecError> {
        match self.shell.exited() {
            Some(code) => Err(self.exit_error(code)),
            None => Ok(()),
        }
    }

    fn exit_error(&self, code: i32) -> ExecError {
        if self.deleted.load(Ordering::SeqCst) {
            ExecError::SessionDestroyed {
                id: self.id.clone(),
            }
        } else {
            ExecError::ShellExited {
                id: self.id.clone(),
                code,
            }
        }
    }
}

/// A foreground command being stopped: its processes are what appeared below the shell or
/// the session's supervisor since it started (so what it detached is found too), with all
/// they started; background processes and what ran before (`before`) are spared. It has
/// ended once the shell reported it done and nothing it started is left (what it detached
/// may ignore the signal that ended the command).
struct Foreground<'a> {
    session: &'a Session,
    reports: &'a mut mpsc::UnboundedReceiver<Report>,
    before: &'a HashSet<u32>,
    /// Whether the shell has reported the command done.
    done: bool,
}

impl Target for Foreground<'_> {
    fn living(&mut self) -> Vec<u32> {
        self.session.started_since(self.before)
    }

    fn signalling(&mut self, _signal: Signal) {
        if !self.done {
            self.session.shell.interrupt();
        }
    }

    async fn ended(&mut self, poll: Duration) -> bool {
        if self.done {
            tokio::time::sleep(poll).await;
        } else {
            let wait = tokio::time::timeout(poll, wait_done(self.reports));
            self.done = matches!(wait.await, Ok(Some(_)));
        }
        self.done && self.living().is_empty()
    }
}

/// A streamed foreground command's two output files, read as they grow: when inotify says
/// they were written, and every tick for what it cannot say.
struct StreamedOutput<'a> {
    tails: [(Stream, OutputTail); 2],
    woken: Option<Woken<'a>>,
}

impl<'a> StreamedOutput<'a> {
    fn new(job: &Job, wakes: &'a OutputWakes) -> Self {
        Self {
            tails: [
                (Stream::Stdout, OutputTail::new(&job.stdout, Stream::Stdout)),
                (Stream::Stderr, OutputTail::new(&job.stderr, Stream::Stderr)),
            ],
            woken: wakes.watch(&[&job.stdout, &job.stderr]),
        }
    }

    /// Sends what was appended since the last read (up to 4 MiB a stream); says whether
    /// there was any.
    async fn pump(&mut self, sink: &mpsc::Sender<Streamed>) -> bool {
        let mut any = false;
        for (stream, tail) in &mut self.tails {
            if let Some(appended) = tail.read() {
                any = true;
                if !appended.text.is_empty() {
                    let _ = sink.send(Streamed::Output(*stream, appended.text)).await;
                }
            }
        }
        any
    }

    /// Sends everything that is left, once the command has ended.
    async fn drain(&mut self, sink: &mpsc::Sender<Streamed>) {
        while self.pump(sink).await {}
        for (stream, tail) in &mut self.tails {
            let (_, text) = tail.finish();
            if !text.is_empty() {
                let _ = sink.send(Streamed::Output(*stream, text)).await;
            }
        }
    }
}

/// The next `Done` report; `None` if the channel closed.
fn outside(spec: &CommandSpec) -> ExecError {
    ExecError::Outside {
        cwd: spec
            .cwd
            .as_deref()
            .map(|cwd| cwd.display().to_string())
            .unwrap_or_default(),
    }
}

/// A foreground command's end: its status, or its directory refused (`Err`); `None` when
/// the shell went away first.
async fn wait_done(reports: &mut mpsc::UnboundedReceiver<Report>) -> Option<Result<i32, ()>> {
    while let Some(report) = reports.recv().await {
        match report {
            Report::Done(code) => return Some(Ok(code)),
            Report::Outside => return Some(Err(())),
            _ => {}
        }
    }
    None
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Writes a foreground command's script and its stdin content, if any; says whether it
/// reads that content.
async fn write_inputs(job: &Job, spec: &CommandSpec) -> Result<bool, ExecError> {
    write_script(&job.script, &spec.command).await?;
    match &spec.stdin {
        Stdin::Content(bytes) => {
            stdin::write_content(&job.stdin, bytes).await?;
            Ok(true)
        }
        Stdin::Null | Stdin::Pipe => Ok(false),
    }
}

/// Writes a command's script file, on the blocking pool only when it is large.
async fn write_script(path: &Path, command: &str) -> Result<(), ExecError> {
    if command.len() as u64 <= output::INLINE_BYTES {
        write_over(path, command.as_bytes())?;
    } else {
        let (path, command) = (path.to_path_buf(), command.as_bytes().to_vec());
        tokio::task::spawn_blocking(move || write_over(&path, &command))
            .await
            .map_err(|err| ExecError::Io(std::io::Error::other(err)))??;
    }
    Ok(())
}

/// Writes `bytes` over a file in place and cuts it to their length, never truncating it to
/// empty first: ext4 and XFS flush a file truncated to empty and written when it is closed
/// (their guard for files replaced that way), 180 µs per command on this machine; a
/// command's text is never empty.
fn write_over(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    file.write_all_at(bytes, 0)?;
    file.set_len(bytes.len() as u64)
}

impl Finished {
    /// A result whose output is in two files (read up to the cap of 32 MiB per stream; on
    /// the blocking pool when there is much of it).
    pub async fn from_files(
        exit_code: i32,
        stdout: &Path,
        stderr: &Path,
        duration: Duration,
    ) -> Result<Self, ExecError> {
        Self::from_outputs(
            exit_code,
            Output::open(stdout),
            Output::open(stderr),
            duration,
        )
        .await
    }

    /// A result from two opened output files.
    pub async fn from_outputs(
        exit_code: i32,
        stdout: Option<Output>,
        stderr: Option<Output>,
        duration: Duration,
    ) -> Result<Self, ExecError> {
        let ((stdout, out_cut), (stderr, err_cut)) =
            output::read_both(stdout, stderr, MAX_OUTPUT_BYTES).await?;
        Ok(Self {
            exit_code,
            stdout,
            stderr,
            truncated: out_cut || err_cut,
            duration,
        })
    }
}

/// The timeout error, with the first 64 KiB of what the command printed before it.
fn timeout_error(
    timeout: Option<Duration>,
    stdout: &Path,
    stderr: &Path,
    session_kept: bool,
) -> ExecError {
    let (stdout, _) = read_capped(stdout, 64 * 1024);
    let stderr = ScriptNames::rewrite_read(stderr, read_capped(stderr, 64 * 1024).0);
    ExecError::Timeout {
        timeout_ms: timeout.map_or(0, |t| t.as_millis() as u64),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        session_kept,
    }
}
