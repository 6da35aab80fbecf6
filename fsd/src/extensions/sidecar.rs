//! One extension's sidecar: `bun <entry>` in the package's directory with nothing of the
//! daemon's environment but `PATH`, listening on a private unix socket, and the capnweb
//! link the daemon keeps to it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UnixStream;

use super::ExtensionError;
use super::package::Manifest;
use crate::capnweb::link;
use crate::capnweb::session::Session;

/// How often the socket is tried while the sidecar starts.
const RETRY: Duration = Duration::from_millis(50);
/// How long a stopped sidecar has between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_millis(500);

/// A running sidecar and the daemon's session with it.
pub struct Sidecar {
    pub link: Arc<Session>,
    child: tokio::process::Child,
}

impl Sidecar {
    /// Starts the sidecar of `manifest` (provisioned in `dir`) and connects to it.
    pub async fn start(
        dir: &Path,
        sockets: &Path,
        manifest: Manifest,
        bun: &Path,
        readiness_ms: Option<u64>,
    ) -> Result<Self, ExtensionError> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(sockets)?;
        std::fs::set_permissions(sockets, std::fs::Permissions::from_mode(0o700))?;
        let hash_start: String = manifest.package_hash.chars().take(12).collect();
        let socket: PathBuf = sockets.join(format!("{hash_start}.sock"));
        let _ = std::fs::remove_file(&socket);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("sidecar.log"))?;
        let id = manifest.id.clone();
        let spawn_failed = |reason: String| ExtensionError::Spawn {
            id: id.clone(),
            reason,
        };
        let mut child = tokio::process::Command::new(bun)
            .arg(dir.join(&manifest.entry))
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("EXT_SOCKET", &socket)
            .env("EXT_DIR", dir)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| spawn_failed(format!("{}: {error}", bun.display())))?;
        let limit = readiness_ms.unwrap_or(manifest.readiness_timeout_ms);
        let deadline = Instant::now() + Duration::from_millis(limit);
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(ExtensionError::ExitedBeforeReady {
                    id: manifest.id.clone(),
                    code: status.code().unwrap_or(-1),
                });
            }
            if let Ok(stream) = UnixStream::connect(&socket).await {
                let link = link::connect(stream);
                return Ok(Self { link, child });
            }
            if Instant::now() >= deadline {
                let _ = child.start_kill();
                return Err(ExtensionError::NotReady {
                    id: manifest.id.clone(),
                    ms: limit,
                });
            }
            tokio::time::sleep(RETRY).await;
        }
    }

    /// Whether the process runs and the link is up.
    pub fn alive(&mut self) -> bool {
        !self.link.is_closed() && matches!(self.child.try_wait(), Ok(None))
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// SIGTERM, then SIGKILL after a grace, to the sidecar's process group (what it
    /// started goes with it); the link ends with it.
    pub async fn stop(mut self) {
        self.signal(nix::sys::signal::Signal::SIGTERM);
        if tokio::time::timeout(STOP_GRACE, self.child.wait())
            .await
            .is_err()
        {
            self.kill();
            let _ = self.child.wait().await;
        }
        self.signal(nix::sys::signal::Signal::SIGKILL);
        self.link.close();
    }

    /// Ends the process group at once (the daemon stops, or the sidecar died).
    pub fn kill(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.start_kill();
        self.link.close();
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), signal);
        }
    }
}
