//! The image's own command: `fsd serve -- CMD ARGS…`, as the reference runs the command of
//! an image built on its own. It starts once the API is listening, in the workspace, with
//! the daemon's whole environment and its output on the daemon's (the container's log). If
//! it ends with a non-zero code or on a signal, the daemon stops and exits with that code
//! (128 + N for signal N), so the container ends as the command did; a command that exits
//! 0 leaves the daemon serving. At shutdown its process group gets SIGTERM, then SIGKILL
//! after a grace.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::sync::watch;

/// How long the command has after SIGTERM before SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);

pub struct UserCommand {
    group: Pid,
    exited: watch::Receiver<Option<i32>>,
}

impl UserCommand {
    /// Starts `argv` in `workspace`, in a process group of its own.
    pub fn start(argv: &[String], workspace: &Path) -> std::io::Result<UserCommand> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| std::io::Error::other("no command after --"))?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .current_dir(workspace)
            .process_group(0)
            .spawn()?;
        let group = Pid::from_raw(
            child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .ok_or_else(|| std::io::Error::other("the command exited at once"))?,
        );
        let (tell, exited) = watch::channel(None);
        tokio::spawn(async move {
            use std::os::unix::process::ExitStatusExt;
            let code = match child.wait().await {
                Ok(status) => status
                    .code()
                    .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
                Err(_) => 1,
            };
            tracing::info!(code, "the image's command exited");
            let _ = tell.send(Some(code));
        });
        tracing::info!(command = ?argv, "started the image's command");
        Ok(UserCommand { group, exited })
    }

    /// Resolves with the command's exit code if it ends with one other than 0; never
    /// resolves otherwise.
    pub async fn failed(&self) -> i32 {
        let mut exited = self.exited.clone();
        match exited.wait_for(Option::is_some).await.map(|code| *code) {
            Ok(Some(code)) if code != 0 => code,
            _ => std::future::pending().await,
        }
    }

    /// Ends the command if it still runs: SIGTERM to its group, SIGKILL after `GRACE`.
    pub async fn stop(&self) {
        if self.exited.borrow().is_some() {
            return;
        }
        let _ = killpg(self.group, Signal::SIGTERM);
        let mut exited = self.exited.clone();
        if tokio::time::timeout(GRACE, exited.wait_for(Option::is_some))
            .await
            .is_err()
        {
            let _ = killpg(self.group, Signal::SIGKILL);
            let _ = exited.wait_for(Option::is_some).await;
        }
    }
}
