//! What the backup domain works with.

use std::sync::Arc;

use fsd_api::system::Capabilities;

use super::BackupService;
use crate::files::FileService;
use crate::paths::Paths;
use crate::watch::WatchService;

/// The backup service, and the paths, watches and workspace its calls are checked and
/// tokened against: what a backup handler or operation takes (the server's state gives it).
#[derive(Clone)]
pub struct BackupState {
    pub service: Arc<BackupService>,
    pub paths: Paths,
    pub watches: Arc<WatchService>,
    pub capabilities: Arc<Capabilities>,
    /// A merged branch's changes are made through the files domain's checked apply.
    pub files: Arc<FileService>,
    /// The programs that follow their directory by name, which a restore does not name
    /// as left behind.
    pub sessions: Arc<fsd_process::SessionManager>,
    pub interpreters: Arc<crate::interpreter::InterpreterService>,
}

impl BackupState {
    /// The supervisors whose child follows its directory by name: sessions' shells and
    /// code contexts' interpreters.
    pub async fn following(&self) -> std::collections::HashSet<u32> {
        let mut supervisors: std::collections::HashSet<u32> =
            self.sessions.supervisors().await.into_iter().collect();
        supervisors.extend(self.interpreters.supervisors());
        supervisors
    }
}
