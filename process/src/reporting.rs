//! Starting a program under a supervisor that reports on a pipe (`fsd supervise
//! --status-fd`): the daemon waits for its first line, so a caller knows at once whether
//! the program runs (and its pid in the sandbox) or why it could not start. The next
//! line's processes and terminals start this way.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::net::unix::pipe::Receiver;

use crate::world::World;

/// How long a supervisor may take to say it started the program.
const START_LIMIT: Duration = Duration::from_secs(10);

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

/// Spawns the command `make` builds for the status pipe's descriptor (a
/// `World::reporting_command` or `reporting_terminal_command`, configured), and waits for
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
    let first = tokio::time::timeout(START_LIMIT, reports.next_line()).await;
    let pid = match first {
        Ok(Ok(Some(line))) => match line.split_once(' ') {
            Some(("pid", pid)) => pid.parse::<u32>().unwrap_or(0),
            Some((kind, reason)) => {
                let _ = child.wait().await;
                let reason = reason.to_string();
                return Err(if kind == "cwd" {
                    NotStarted::Cwd(reason)
                } else {
                    NotStarted::Failed(reason)
                });
            }
            None => 0,
        },
        _ => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(NotStarted::Failed("the supervisor did not start it".into()));
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
