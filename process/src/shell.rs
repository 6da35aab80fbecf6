//! One persistent bash and its control channel.
//!
//! The shell runs the driver script under a supervisor in the sandbox's process world (see
//! `world`), with a clean environment. It reads command lines from one FIFO and reports on
//! another, both in the session directory and held open read-write by the daemon (so
//! neither end ever sees end-of-file). A reader task routes each report to the job waiting
//! for it; a watcher task records the exit.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

use super::{proctree, script, stop};
use crate::error::ExecError;
use crate::supervisor::OnExit;
use crate::world::{Isolation, World};

/// How long a new shell may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A report from the shell about one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// A foreground command finished with this status.
    Done(i32),
    /// A background command started with this pid.
    Pid(u32),
    /// A background command exited with this status (128+N after signal N).
    Exit(i32),
    /// The CPU time, in microseconds, of what a background command's supervisor waited
    /// for; sent just before its `Exit`.
    Cpu(u64),
    /// Confined: the command's directory was found outside the roots once entered (a link
    /// swapped in since the daemon looked); the command did not run.
    Outside,
}

type Routes = Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Report>>>>;

/// Whether a job holds the session (foreground) or runs beside it (background).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    Foreground,
    Background,
}

/// The files of one job, inside the session directory.
pub struct Job {
    pub id: u64,
    pub kind: JobKind,
    /// Every foreground command of a session shares one script file, written over in place:
    /// bash reads a sourced file whole before it runs any of it and foreground commands
    /// are serialized, so no reader sees the next one being written, and no command pays
    /// for making and removing a file. A background command's shell reads its script
    /// later, so each has its own.
    pub script: PathBuf,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// The session state a background job's shell loads.
    pub state: PathBuf,
    /// Where the job's stdin comes from when it has one (content or a FIFO); made only then.
    pub stdin: PathBuf,
}

impl Job {
    /// The job's files; `piped` when its stdin file was made.
    pub fn files(&self, piped: bool) -> script::JobFiles<'_> {
        script::JobFiles {
            script: &self.script,
            stdout: &self.stdout,
            stderr: &self.stderr,
            stdin: piped.then_some(self.stdin.as_path()),
        }
    }

    /// Removes a background job's files (its output files may live elsewhere). A
    /// foreground job's are the session's (see `Shell::retire_foreground_output`).
    pub fn remove_files(&self) {
        debug_assert_eq!(self.kind, JobKind::Background);
        for path in [
            &self.script,
            &self.stdout,
            &self.stderr,
            &self.state,
            &script::signal_flag(&self.state),
            &self.stdin,
        ] {
            let _ = std::fs::remove_file(path);
        }
    }
}

pub struct Shell {
    /// The bash process (host pid).
    pid: u32,
    /// Bash's pid as commands in the sandbox see it.
    sandbox_pid: u32,
    /// The session's supervisor (host pid): the subreaper everything of the session is below.
    root: u32,
    isolation: Isolation,
    /// The fsd binary, which background jobs run as their supervisor.
    exe: PathBuf,
    /// The roots commands' directories are confined to (see [`World::within`]).
    within: Vec<PathBuf>,
    commands: tokio::sync::Mutex<tokio::net::unix::pipe::Sender>,
    dir: PathBuf,
    /// The control FIFO, which supervisors of background jobs report to by path.
    control: PathBuf,
    routes: Routes,
    exit: watch::Receiver<Option<i32>>,
    next_job: AtomicU64,
    /// Which stdout and stderr files foreground commands write (see `output`); each moves
    /// on when a command leaves its file written or open for writing.
    foreground_output: [AtomicU64; 2],
    reader: tokio::task::JoinHandle<()>,
}

impl Shell {
    /// Starts bash in `dir` (created, owned by this shell) with `env` as its whole
    /// environment, and waits until it reports ready.
    pub async fn spawn(
        dir: PathBuf,
        start_dir: &Path,
        env: &[(String, String)],
        world: &World,
    ) -> Result<Self, ExecError> {
        std::fs::create_dir_all(&dir)?;
        let control = dir.join("control");
        let commands = dir.join("commands");
        for fifo in [&control, &commands] {
            let _ = std::fs::remove_file(fifo);
            nix::unistd::mkfifo(
                fifo.as_path(),
                nix::sys::stat::Mode::from_bits_truncate(0o600),
            )
            .map_err(|err| ExecError::Spawn(format!("mkfifo {}: {err}", fifo.display())))?;
        }
        // Both ends are opened read-write so neither side ever blocks or sees end-of-file.
        let receiver = tokio::net::unix::pipe::OpenOptions::new()
            .read_write(true)
            .open_receiver(&control)?;
        let sender = tokio::net::unix::pipe::OpenOptions::new()
            .read_write(true)
            .open_sender(&commands)?;
        let driver = dir.join("driver.sh");
        // Confined, the shell's supervisor enters the start directory by a descriptor
        // opened beneath the roots, and the driver does not `cd` there by its path again
        // (bash takes its PWD from where it is); a start refused fails the spawn.
        let (supervised_in, driver_cd) = match world.within().is_empty() {
            true => (dir.as_path(), Some(start_dir)),
            false => (start_dir, None),
        };
        std::fs::write(&driver, script::driver(&control, &commands, driver_cd))?;
        let bash = [
            OsStr::new("bash"),
            OsStr::new("--norc"),
            OsStr::new("--noprofile"),
            driver.as_os_str(),
        ];
        let mut child = world
            .command(OnExit::Kill, supervised_in, &bash)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| ExecError::Spawn(format!("bash: {err}")))?;
        let leader = child
            .id()
            .ok_or_else(|| ExecError::Spawn("bash exited at once".into()))?;

        let routes: Routes = Arc::default();
        let (ready_tx, mut ready_rx) = mpsc::unbounded_channel();
        routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(0, ready_tx);
        let reader = tokio::spawn(read_reports(receiver, routes.clone()));
        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            let code = match child.wait().await {
                Ok(status) => status
                    .code()
                    .unwrap_or_else(|| 128 + status_signal(&status)),
                Err(_) => -1,
            };
            let _ = exit_tx.send(Some(code));
        });

        let mut shell = Self {
            pid: leader,
            sandbox_pid: 0,
            root: leader,
            isolation: world.isolation(),
            exe: world.exe().to_path_buf(),
            within: world.within().to_vec(),
            commands: tokio::sync::Mutex::new(sender),
            control: control.clone(),
            dir,
            routes,
            exit,
            next_job: AtomicU64::new(1),
            foreground_output: [AtomicU64::new(0), AtomicU64::new(0)],
            reader,
        };
        tokio::select! {
            Some(Report::Done(0)) = ready_rx.recv() => {}
            code = shell.wait_exit() => return Err(ExecError::Spawn(format!("bash exited with {code} while starting"))),
            () = tokio::time::sleep(READY_TIMEOUT) => return Err(ExecError::Spawn("bash did not become ready".into())),
        }
        shell.unsubscribe(0);
        // Bash reported ready, so its supervisor and bash itself both exist.
        let vanished = || ExecError::Spawn("the session's shell vanished".into());
        shell.root = world.supervisor_of(leader).ok_or_else(vanished)?;
        shell.pid = proctree::children(shell.root)
            .first()
            .copied()
            .ok_or_else(vanished)?;
        shell.sandbox_pid = proctree::innermost_pid(shell.pid).ok_or_else(vanished)?;
        Ok(shell)
    }

    /// Bash's pid as the sandbox sees it.
    pub fn sandbox_pid(&self) -> u32 {
        self.sandbox_pid
    }

    /// Bash's host pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The session's supervisor (host pid), which everything the session started is below.
    pub fn root(&self) -> u32 {
        self.root
    }

    /// The shell's current directory.
    pub fn cwd(&self) -> Option<PathBuf> {
        std::fs::read_link(format!("/proc/{}/cwd", self.pid)).ok()
    }

    /// Where a background job's supervisor comes from and reports to.
    /// How a command's `cwd` is entered: as given, or under `--confine` by its real path
    /// with the shell's check of where it landed. A `cwd` whose real path is outside every
    /// root (changed since the daemon looked) is refused here.
    pub fn workdir(&self, cwd: &Path) -> Result<script::Workdir, ExecError> {
        if self.within.is_empty() {
            return Ok(script::Workdir {
                dir: cwd.to_path_buf(),
                beneath: None,
            });
        }
        let outside = || ExecError::Outside {
            cwd: cwd.display().to_string(),
        };
        let (real, root) = crate::world::beneath(&self.within, cwd).ok_or_else(outside)?;
        let depth = real
            .strip_prefix(root)
            .map_or(0, |rest| rest.components().count());
        let root = root.to_path_buf();
        Ok(script::Workdir {
            dir: real,
            beneath: Some((root, depth)),
        })
    }

    pub fn supervision<'a>(&'a self, job: &'a Job) -> script::Supervision<'a> {
        script::Supervision {
            exe: &self.exe,
            control: &self.control,
            state: &job.state,
        }
    }

    /// A fresh job id with its file paths, and a receiver for its reports. Subscribing
    /// before the command is sent means no report can be missed.
    pub fn new_job(&self, kind: JobKind) -> (Job, mpsc::UnboundedReceiver<Report>) {
        let id = self.next_job.fetch_add(1, Ordering::Relaxed);
        let [out, err] = &self.foreground_output;
        let (script, out, err) = match kind {
            JobKind::Foreground => (
                self.dir.join("command.sh"),
                format!("f{}", out.load(Ordering::Relaxed)),
                format!("f{}", err.load(Ordering::Relaxed)),
            ),
            JobKind::Background => (
                self.dir.join(format!("cmd-{id}.sh")),
                id.to_string(),
                id.to_string(),
            ),
        };
        let job = Job {
            id,
            kind,
            script,
            stdout: self.dir.join(format!("out-{out}")),
            stderr: self.dir.join(format!("err-{err}")),
            state: self.dir.join(format!("state-{id}")),
            stdin: self.dir.join(format!("in-{id}")),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        self.routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        (job, rx)
    }

    /// Removes a foreground job's output files that are not kept (`keep`: stdout,
    /// stderr); the next command writes fresh ones in their place.
    pub fn retire_foreground_output(&self, job: &Job, keep: [bool; 2]) {
        let paths = [&job.stdout, &job.stderr];
        for ((path, generation), keep) in paths.into_iter().zip(&self.foreground_output).zip(keep) {
            if !keep {
                let _ = std::fs::remove_file(path);
                generation.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub fn unsubscribe(&self, job: u64) {
        self.routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&job);
    }

    /// Writes one command line to the shell, framed by its length (one write, so a line
    /// under the pipe's 4 KiB atomic size reaches bash whole).
    pub async fn send(&self, line: &str) -> Result<(), ExecError> {
        debug_assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let framed = script::frame(line);
        let mut commands = self.commands.lock().await;
        commands.write_all(framed.as_bytes()).await?;
        Ok(())
    }

    /// The exit status, once the shell has exited.
    pub fn exited(&self) -> Option<i32> {
        *self.exit.borrow()
    }

    /// Resolves when the shell exits, with its status (128+N after signal N).
    pub async fn wait_exit(&self) -> i32 {
        let mut exit = self.exit.clone();
        match exit.wait_for(Option::is_some).await {
            Ok(code) => code.unwrap_or(-1),
            Err(_) => -1,
        }
    }

    /// Sends SIGINT to the shell alone: its trap ends a command running inside it.
    pub fn interrupt(&self) {
        if let Ok(pid) = i32::try_from(self.pid) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGINT);
        }
    }

    /// Kills the shell and everything the session started, however it forked or detached:
    /// all of it is below the session's supervisor.
    pub fn kill(&self) {
        stop::kill_supervised(self.root);
    }

    /// The host pid of a process of this session that the sandbox knows as `pid`.
    pub fn host_pid(&self, pid: u32) -> Option<u32> {
        match self.isolation {
            Isolation::None => proctree::alive(pid).then_some(pid),
            Isolation::PidNamespace => proctree::host_pid(pid, self.root),
        }
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        self.kill();
        self.reader.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn status_signal(status: &std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.signal().unwrap_or(0)
}

/// Reads `ready`, `done J S`, `pid J P`, `exit J S` lines and routes them by job.
async fn read_reports(receiver: tokio::net::unix::pipe::Receiver, routes: Routes) {
    let mut lines = BufReader::new(receiver).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Some((job, report)) = parse_report(&line) else {
            tracing::warn!(%line, "unexpected line on a session control pipe");
            continue;
        };
        let sender = routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&job)
            .cloned();
        if let Some(sender) = sender {
            let _ = sender.send(report);
        }
    }
}

fn parse_report(line: &str) -> Option<(u64, Report)> {
    if line == "ready" {
        return Some((0, Report::Done(0)));
    }
    let mut parts = line.split(' ');
    let kind = parts.next()?;
    let job = parts.next()?.parse().ok()?;
    let value = parts.next()?;
    let report = match kind {
        "done" => Report::Done(value.parse().ok()?),
        "pid" => Report::Pid(value.parse().ok()?),
        "exit" => Report::Exit(value.parse().ok()?),
        "cpu" => Report::Cpu(value.parse().ok()?),
        "outside" => Report::Outside,
        _ => return None,
    };
    Some((job, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_reports() {
        assert_eq!(parse_report("ready"), Some((0, Report::Done(0))));
        assert_eq!(parse_report("done 4 127"), Some((4, Report::Done(127))));
        assert_eq!(parse_report("pid 5 4242"), Some((5, Report::Pid(4242))));
        assert_eq!(parse_report("exit 5 143"), Some((5, Report::Exit(143))));
        assert_eq!(parse_report("cpu 5 1500"), Some((5, Report::Cpu(1500))));
        assert_eq!(parse_report("done x 1"), None);
        assert_eq!(parse_report("hello"), None);
    }
}
