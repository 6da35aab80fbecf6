//! Starting a program under a supervisor that reports on a pipe (`supervise --status-fd`),
//! forked by the world's resident spawner: the daemon waits for the supervisor's first
//! line, so a caller knows at once whether the program runs (and its pid in the sandbox)
//! or why it could not start, and reads how it ended from the lines after. The next
//! line's processes and terminals start this way.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::net::unix::pipe::Receiver;

use crate::spawner::SpawnRequest;
use crate::world::World;

/// How long a supervisor may take to say it started the program.
const START_LIMIT: Duration = Duration::from_secs(10);

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
    /// Its stdout and stderr, unless it runs on a terminal.
    pub output: Option<(Receiver, Receiver)>,
    /// The supervisor's further reports (`exit CODE SIGNAL`); their end is the supervisor's.
    pub reports: Lines<BufReader<Receiver>>,
}

/// Starts `request`'s program through the world's resident spawner, on `terminal` (a
/// PTY's slave as its stdin, stdout and stderr) or with stdin from `/dev/null` and stdout
/// and stderr on pipes, and waits for the supervisor's first report.
pub async fn spawn_reporting(
    world: &Arc<World>,
    request: SpawnRequest,
    terminal: Option<OwnedFd>,
) -> Result<Spawned, NotStarted> {
    let failed = |error: std::io::Error| NotStarted::Failed(error.to_string());
    let (status_read, status_write) = std::io::pipe().map_err(failed)?;
    let (stdio, output): ([OwnedFd; 3], _) = match terminal {
        Some(slave) => (
            [
                slave.try_clone().map_err(failed)?,
                slave.try_clone().map_err(failed)?,
                slave,
            ],
            None,
        ),
        None => {
            let (stdout_read, stdout_write) = std::io::pipe().map_err(failed)?;
            let (stderr_read, stderr_write) = std::io::pipe().map_err(failed)?;
            let null = std::fs::File::open("/dev/null").map_err(failed)?;
            (
                [null.into(), stdout_write.into(), stderr_write.into()],
                Some((stdout_read, stderr_read)),
            )
        }
    };
    let spawner = Arc::clone(world);
    // A task of its own: a request to the spawner is answered whole even if this call is
    // dropped (the next request would read its answer otherwise).
    let supervisor = tokio::spawn(async move {
        let [stdin, stdout, stderr] = &stdio;
        let fds = [
            stdin.as_fd(),
            stdout.as_fd(),
            stderr.as_fd(),
            status_write.as_fd(),
        ];
        spawner.spawn(&request, fds).await
    })
    .await
    .map_err(|error| NotStarted::Failed(error.to_string()))?
    .map_err(failed)?;
    let receiver =
        |read: std::io::PipeReader| Receiver::from_owned_fd(OwnedFd::from(read)).map_err(failed);
    let mut reports = BufReader::new(receiver(status_read)?).lines();
    let output = match output {
        Some((stdout, stderr)) => Some((receiver(stdout)?, receiver(stderr)?)),
        None => None,
    };
    let pid = first_report(&mut reports).await?;
    Ok(Spawned {
        pid,
        supervisor,
        output,
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
        _ => Err(NotStarted::Failed("the supervisor did not start it".into())),
    }
}

/// The program's exit from the supervisor's reports after its first, read to their end
/// (the supervisor's): `(code, signal)`, the code 128+n and the signal n when a signal
/// ended it, else 0; `None` if the supervisor ended without saying (it was killed).
pub async fn exit_report(reports: &mut Lines<BufReader<Receiver>>) -> Option<(i32, i32)> {
    let mut exit = None;
    while let Ok(Some(line)) = reports.next_line().await {
        if let Some(rest) = line.strip_prefix("exit ") {
            let mut parts = rest.split(' ').map(|part| part.parse::<i32>().ok());
            if let (Some(Some(code)), Some(Some(signal))) = (parts.next(), parts.next()) {
                exit = Some((code, signal));
            }
        }
    }
    exit
}
