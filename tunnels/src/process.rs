//! One cloudflared process: started with the reference's argv, watched until it is ready
//! (its metrics server reports a connection, and a quick tunnel has printed its URL), and
//! stopped with SIGTERM, then SIGKILL after the grace period.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, watch};

use crate::error::TunnelError;
use crate::output::{self, Seen};

/// How fsd runs cloudflared.
#[derive(Debug, Clone)]
pub struct Config {
    /// The program (found on `PATH` when it has no `/`).
    pub binary: PathBuf,
    /// How long a tunnel may take to become ready.
    pub start_timeout: Duration,
    /// Between SIGTERM and SIGKILL.
    pub stop_grace: Duration,
    /// More environment for cloudflared (proxy settings, an origin certificate's path).
    pub env: Vec<(String, String)>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            binary: PathBuf::from("cloudflared"),
            start_timeout: Duration::from_secs(90),
            stop_grace: Duration::from_secs(3),
            env: Vec::new(),
        }
    }
}

/// A quick tunnel (a random `trycloudflare.com` URL) or a named one (the token's tunnel).
#[derive(Clone, PartialEq, Eq)]
pub enum Mode {
    Quick,
    Named { token: String },
}

impl std::fmt::Debug for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Quick => f.write_str("Quick"),
            Mode::Named { token } => write!(f, "Named({})", output::masked(token)),
        }
    }
}

/// The arguments after the program name, as the reference passes them.
pub fn argv(mode: &Mode, port: u16) -> Vec<String> {
    let mut args: Vec<String> = ["tunnel", "--metrics", "127.0.0.1:0", "--no-autoupdate"]
        .map(String::from)
        .to_vec();
    match mode {
        Mode::Quick => args.extend(["--output".into(), "json".into()]),
        Mode::Named { token } => args.extend(["run".into(), "--token".into(), token.clone()]),
    }
    args.extend(["--url".into(), format!("http://localhost:{port}")]);
    args
}

/// A cloudflared that became ready.
pub struct Process {
    pid: u32,
    pub url: Option<String>,
    /// Set once the process has exited: its exit code (`None` after a signal).
    pub exit: watch::Receiver<Option<Option<i32>>>,
    stop_grace: Duration,
}

impl Process {
    /// Starts cloudflared for `port` and returns once it is ready.
    pub async fn start(config: &Config, mode: &Mode, port: u16) -> Result<Process, TunnelError> {
        let mut child = tokio::process::Command::new(&config.binary)
            .args(argv(mode, port))
            .envs(config.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound => TunnelError::NotFound {
                    binary: config.binary.display().to_string(),
                },
                _ => TunnelError::Start(error.to_string()),
            })?;
        let pid = child
            .id()
            .ok_or_else(|| TunnelError::Start("exited at once".into()))?;
        let (seen_tx, mut seen) = mpsc::unbounded_channel::<Seen>();
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        ]
        .into_iter()
        .flatten()
        {
            let seen_tx = seen_tx.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stream).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(target: "cloudflared", "{line}");
                    let _ = seen_tx.send(output::read_line(&line));
                }
            });
        }
        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            let code = child.wait().await.ok().and_then(|status| status.code());
            let _ = exit_tx.send(Some(code));
        });
        let process = Process {
            pid,
            url: None,
            exit,
            stop_grace: config.stop_grace,
        };
        match tokio::time::timeout(config.start_timeout, process.ready(mode, &mut seen)).await {
            Ok(Ok(url)) => Ok(Process { url, ..process }),
            Ok(Err(error)) => {
                process.stop().await;
                Err(error)
            }
            Err(_) => {
                process.stop().await;
                Err(TunnelError::Start(format!(
                    "Timed out waiting for cloudflared to become ready after {}ms",
                    config.start_timeout.as_millis()
                )))
            }
        }
    }

    /// Waits until the metrics server reports a connection (and, for a quick tunnel, the
    /// URL was printed); returns the URL.
    async fn ready(
        &self,
        mode: &Mode,
        seen: &mut mpsc::UnboundedReceiver<Seen>,
    ) -> Result<Option<String>, TunnelError> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(1))
            .build()
            .map_err(|error| TunnelError::Start(error.to_string()))?;
        let (mut metrics, mut url) = (None, None);
        let mut exit = self.exit.clone();
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            tokio::select! {
                Some(line) = seen.recv() => {
                    metrics = metrics.or(line.metrics);
                    url = url.or(line.url);
                    continue;
                }
                changed = async { exit.wait_for(Option::is_some).await.map(|code| *code) } => {
                    let code = changed.ok().flatten().flatten();
                    let code = code.map_or("null".to_string(), |c| c.to_string());
                    return Err(TunnelError::Start(format!(
                        "cloudflared exited before becoming ready (code={code})"
                    )));
                }
                _ = tick.tick() => {}
            }
            let Some(address) = &metrics else { continue };
            let connections = client
                .get(format!("http://{address}/ready"))
                .send()
                .await
                .ok()
                .filter(|response| response.status().is_success());
            let Some(response) = connections else {
                continue;
            };
            let ready = response
                .json::<serde_json::Value>()
                .await
                .ok()
                .and_then(|body| body.get("readyConnections")?.as_u64())
                .unwrap_or(0);
            if ready >= 1 && (*mode != Mode::Quick || url.is_some()) {
                return Ok(url);
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// SIGTERM to the process group, then SIGKILL after the grace period; returns once
    /// it has exited.
    pub async fn stop(&self) {
        let group = Pid::from_raw(self.pid as i32);
        let mut exit = self.exit.clone();
        if self.exit.borrow().is_some() {
            return;
        }
        let _ = killpg(group, Signal::SIGTERM);
        let timed_out = tokio::time::timeout(self.stop_grace, exit.wait_for(Option::is_some))
            .await
            .is_err();
        if timed_out {
            let _ = killpg(group, Signal::SIGKILL);
            let _ = exit.wait_for(Option::is_some).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_is_the_references() {
        assert_eq!(
            argv(&Mode::Quick, 8080).join(" "),
            "tunnel --metrics 127.0.0.1:0 --no-autoupdate --output json --url http://localhost:8080"
        );
        let named = Mode::Named {
            token: "eyJsecret".into(),
        };
        assert_eq!(
            argv(&named, 5173).join(" "),
            "tunnel --metrics 127.0.0.1:0 --no-autoupdate run --token eyJsecret --url http://localhost:5173"
        );
        assert_eq!(format!("{named:?}"), "Named(eyJse***)");
    }
}
