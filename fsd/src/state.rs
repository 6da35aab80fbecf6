//! The state every handler shares: one service per domain.

use std::sync::Arc;

use fsd_api::system::Capabilities;

use crate::backup::BackupService;
use crate::files::FileService;
use crate::interpreter::InterpreterService;
use crate::metrics::MetricsService;
use crate::mounts::MountService;
use crate::paths::Paths;
use crate::terminal::TerminalService;
use crate::watch::WatchService;
use fsd_process::ProcessService;
use fsd_process::SessionManager;

#[derive(Clone)]
pub struct AppState {
    /// What a path in a request means, for every route.
    pub paths: Paths,
    pub files: Arc<FileService>,
    pub sessions: Arc<SessionManager>,
    pub processes: Arc<ProcessService>,
    /// The next line's processes (argv, sequenced logs).
    pub argv_processes: Arc<fsd_process::argv::ArgvProcesses>,
    pub terminals: Arc<TerminalService>,
    /// The next line's terminals, by id.
    pub next_terminals: Arc<crate::terminal::table::TerminalTable>,
    pub tunnels: Arc<fsd_tunnels::Runs>,
    pub watches: Arc<WatchService>,
    pub backups: Arc<BackupService>,
    pub mounts: Arc<MountService>,
    pub interpreters: Arc<InterpreterService>,
    /// The next line's extension sidecars, by package hash.
    pub extensions: Arc<crate::extensions::ExtensionHost>,
    pub capabilities: Arc<Capabilities>,
    /// Resource figures and request statistics.
    pub metrics: Arc<MetricsService>,
    /// An API token is configured, so `Authorization: Bearer` is never a session id.
    pub auth_enabled: bool,
}
