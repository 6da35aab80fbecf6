//! Starting a program under a supervisor that reports on a pipe (`fsd supervise
//! --status-fd`): the daemon waits for its first line, so a caller knows at once whether
//! the program runs (and its pid in the sandbox) or why it could not start. The next
//! line's terminals start this way, and its processes through the resident spawner
//! (`spawn_reporting`), which forks the supervisor instead of executing it.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::net::unix::pipe::Receiver;

use crate::spawner::SpawnRequest;
use crate::world::World;

/// How long a supervisor may take to say it started the program.
const START_LIMIT: Duration = Duration::from_secs(10);
/// Why a start failed when the supervisor said nothing in time.
const NOT_STARTED: &str = "the supervisor did not start it";

/// A program that runs.
pub struct Reporting {
    pub child: tokio::process::Child,
    /// The program's pid as the sandbox sees it.
    pub pid: u32,
    /// Its supervisor as the daemon sees it: what the program started is below it.
    pub supervisor: u32,
    /// The supervisor's further reports (`exit CODE SIGNAL`).
    pub reports: Lines<BufReader<Receiver>>,
}

/// Why a program did not start.
#[derive(Debug, thiserror::Error)]
pub enum NotStarted {
    /// The working directory was refused (`--confine`).
    #[error("{0}")]
    Cwd(String),
    #[error("{0}")]
    Failed(String),
}

/// A program started through the resident spawner, running.
pub struct Spawned {
    /// The program's pid as the sandbox sees it.
    pub pid: u32,
    /// Its supervisor as the daemon sees it (0 if it has already gone): what the program
    /// started is below it.
    pub supervisor: u32,
    pub stdout: Receiver,
    pub stderr: Receiver,
    /// The supervisor's further reports (`exit CODE SIGNAL`); their end is the supervisor's.
    pub reports: Lines<BufReader<Receiver>>,
}

/// Starts `request`'s program through the world's resident spawner (stdin from
/// `/dev/null`, stdout and stderr on pipes), and waits for the supervisor's first report.
pub async fn spawn_reporting(
    world: &Arc<World>,
    request: SpawnRequest,
) -> Result<Spawned, NotStarted> {
    let failed = |error: std::io::Error| NotStarted::Failed(error.to_string());
    let (status_read, status_write) = std::io::pipe().map_err(failed)?;
    let (stdout_read, stdout_write) = std::io::pipe().map_err(failed)?;
    let (stderr_read, stderr_write) = std::io::pipe().map_err(failed)?;
    let null = std::fs::File::open("/dev/null").map_err(failed)?;
    let spawner = Arc::clone(world);
    let supervisor = tokio::task::spawn_blocking(move || {
        spawner.spawn(
            &request,
            [
                null.as_fd(),
                stdout_write.as_fd(),
                stderr_write.as_fd(),
                status_write.as_fd(),
            ],
        )
    })
    .await
    .map_err(|error| NotStarted::Failed(error.to_string()))?
    .map_err(failed)?;
    let receiver =
        |read: std::io::PipeReader| Receiver::from_owned_fd(OwnedFd::from(read)).map_err(failed);
    let mut reports = BufReader::new(receiver(status_read)?).lines();
    let (stdout, stderr) = (receiver(stdout_read)?, receiver(stderr_read)?);
    let pid = first_report(&mut reports).await?;
    Ok(Spawned {
        pid,
        supervisor,
        stdout,
        stderr,
        reports,
    })
}

/// The program's pid from the supervisor's first report, or why it did not start.
async fn first_report(reports: &mut Lines<BufReader<Receiver>>) -> Result<u32, NotStarted> {
    match tokio::time::timeout(START_LIMIT, reports.next_line()).await {
        Ok(Ok(Some(line))) => match line.split_once(' ') {
            Some(("pid", pid)) => Ok(pid.parse::<u32>().unwrap_or(0)),
            Some(("cwd", reason)) => Err(NotStarted::Cwd(reason.to_string())),
            Some((_, reason)) => Err(NotStarted::Failed(reason.to_string())),
            None => Ok(0),
        },
        _ => Err(NotStarted::Failed(NOT_STARTED.into())),
    }
}

/// Spawns the command `make` builds for the status pipe's descriptor (a
/// `World::reporting_terminal_command`, configured), and waits for
/// the supervisor's first report.
pub async fn start_reporting(
    world: &World,
    make: impl FnOnce(i32) -> std::io::Result<tokio::process::Command>,
) -> Result<Reporting, NotStarted> {
    let failed = |error: std::io::Error| NotStarted::Failed(error.to_string());
    let (status_read, status_write) = std::io::pipe().map_err(failed)?;
    let status_fd = status_write.as_raw_fd();
    let mut command = make(status_fd).map_err(failed)?;
    // SAFETY: fcntl is async-signal-safe; the status pipe's write end is kept across the
    // exec of the supervisor, which marks it close-on-exec for its program.
    unsafe {
        command.pre_exec(move || {
            if nix::libc::fcntl(status_fd, nix::libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(failed)?;
    drop(status_write);
    let status_pipe = Receiver::from_owned_fd(OwnedFd::from(status_read)).map_err(failed)?;
    let mut reports = BufReader::new(status_pipe).lines();
    let pid = match first_report(&mut reports).await {
        Ok(pid) => pid,
        Err(refused) => {
            // A supervisor that said why ends by itself; one that said nothing is ended.
            if matches!(&refused, NotStarted::Failed(reason) if reason == NOT_STARTED) {
                let _ = child.start_kill();
            }
            let _ = child.wait().await;
            return Err(refused);
        }
    };
    let supervisor = world.supervisor_of(child.id().unwrap_or(0)).unwrap_or(0);
    Ok(Reporting {
        child,
        pid,
        supervisor,
        reports,
    })
}
