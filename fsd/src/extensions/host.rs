//! The daemon's extensions: one slot per package hash, its sidecar started once for every
//! socket that asks.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::package::ConnectOptions;
use super::sidecar::Sidecar;
use super::{ExtensionError, package};

use crate::capnweb::session::Session;

/// How long a health check waits for `__ping__`.
const PING_LIMIT: Duration = Duration::from_secs(5);

/// Where packages live and what installs and runs them.
pub struct ExtensionConfig {
    /// One directory per package hash, and `.sockets` (0700) for the sidecars' sockets.
    pub dir: PathBuf,
    /// The Bun program (found on `PATH` when it has no `/`).
    pub bun: PathBuf,
}

/// What `health` answers.
pub struct Health {
    pub id: String,
    pub version: String,
    pub provisioned: bool,
    pub running: bool,
    pub pid: Option<u32>,
    pub responsive: bool,
}

/// The extensions of this daemon: one slot per package hash, taken by one `connect` at a
/// time (provisioning and starting happen once, whoever asks at the same moment).
pub struct ExtensionHost {
    config: ExtensionConfig,
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Sidecar>>>>>,
}

impl ExtensionHost {
    pub fn new(config: ExtensionConfig) -> Self {
        Self {
            config,
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn slot(&self, hash: &str) -> Arc<tokio::sync::Mutex<Option<Sidecar>>> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(slots.entry(hash.to_string()).or_default())
    }

    fn package_dir(&self, hash: &str) -> PathBuf {
        self.config.dir.join(hash)
    }

    /// The session with the sidecar of package `hash`: the running one, or one started
    /// (provisioned first from `options.tarball` when the package is not yet).
    pub async fn connect(
        &self,
        hash: &str,
        options: ConnectOptions,
    ) -> Result<Arc<Session>, ExtensionError> {
        if !package::valid_hash(hash) {
            return Err(ExtensionError::BadHash);
        }
        let slot = self.slot(hash);
        let mut running = slot.lock().await;
        if let Some(sidecar) = running.as_mut() {
            if sidecar.alive() {
                return Ok(Arc::clone(&sidecar.link));
            }
            // A dead one restarts.
            if let Some(mut dead) = running.take() {
                dead.kill();
            }
        }
        let dir = self.package_dir(hash);
        let manifest = match (package::load(&dir), &options.tarball) {
            (Some(manifest), _) => manifest,
            (None, Some(tarball)) => {
                let path_env = std::env::var("PATH").unwrap_or_default();
                package::provision(&dir, hash, &options, tarball, &self.config.bun, &path_env)
                    .await?
            }
            (None, None) => return Err(ExtensionError::NotProvisioned(hash.to_string())),
        };
        let sockets = self.config.dir.join(".sockets");
        let sidecar = Sidecar::start(
            &dir,
            &sockets,
            manifest,
            &self.config.bun,
            options.readiness_timeout_ms,
        )
        .await?;
        let link = Arc::clone(&sidecar.link);
        *running = Some(sidecar);
        Ok(link)
    }

    /// What is known of package `hash`; a running sidecar is asked `__ping__()`.
    pub async fn health(&self, hash: &str) -> Health {
        let manifest = package::valid_hash(hash)
            .then(|| package::load(&self.package_dir(hash)))
            .flatten();
        let mut health = Health {
            id: manifest.as_ref().map(|m| m.id.clone()).unwrap_or_default(),
            version: manifest
                .as_ref()
                .map(|m| m.version.clone())
                .unwrap_or_default(),
            provisioned: manifest.is_some(),
            running: false,
            pid: None,
            responsive: false,
        };
        if !package::valid_hash(hash) {
            return health;
        }
        let slot = self.slot(hash);
        let link = {
            let mut running = slot.lock().await;
            match running.as_mut() {
                Some(sidecar) => sidecar.alive().then(|| {
                    health.running = true;
                    health.pid = sidecar.pid();
                    Arc::clone(&sidecar.link)
                }),
                None => None,
            }
        };
        if let Some(link) = link {
            let ping = link.call_peer(0, vec!["__ping__".into()], Vec::new());
            health.responsive = matches!(
                tokio::time::timeout(PING_LIMIT, ping).await,
                Ok(Ok(Value::String(pong))) if pong == "pong"
            );
        }
        health
    }

    /// Stops the sidecar of package `hash` (SIGTERM, 500 ms, SIGKILL); unknown: nothing.
    pub async fn stop(&self, hash: &str) {
        let slot = self.slot(hash);
        let sidecar = slot.lock().await.take();
        if let Some(sidecar) = sidecar {
            sidecar.stop().await;
        }
    }

    /// Ends every sidecar at once (the daemon stops).
    pub fn shutdown(&self) {
        let slots: Vec<_> = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for slot in slots {
            if let Ok(mut running) = slot.try_lock()
                && let Some(sidecar) = running.as_mut()
            {
                sidecar.kill();
            }
        }
    }
}
