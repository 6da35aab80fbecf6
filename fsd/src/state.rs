//! The state the server holds: one service per domain. A handler takes only the services
//! it uses (`State<Arc<FileService>>`, …: each field below is its own substate), so no
//! domain depends on this file; the server and the transports, which call every domain,
//! hold the whole.

use std::sync::Arc;

use axum::extract::FromRef;

use fsd_api::system::Capabilities;

use crate::backup::BackupService;
use crate::files::FileService;
use crate::interpreter::InterpreterService;
use crate::metrics::MetricsService;
use crate::mounts::MountService;
use crate::paths::Paths;
use crate::terminal::SessionTerminals;
use crate::terminal::table::TerminalTable;
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
    /// The terminals of both SDK lines, by id.
    pub terminals: Arc<TerminalTable>,
    /// 0.12's terminals, one per session.
    pub session_terminals: Arc<SessionTerminals>,
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

/// Each field a substate a handler can take by itself.
macro_rules! substates {
    ($($field:ident: $type:ty),* $(,)?) => {
        $(impl FromRef<AppState> for $type {
            fn from_ref(state: &AppState) -> Self {
                state.$field.clone()
            }
        })*
    };
}

substates! {
    paths: Paths,
    files: Arc<FileService>,
    sessions: Arc<SessionManager>,
    processes: Arc<ProcessService>,
    argv_processes: Arc<fsd_process::argv::ArgvProcesses>,
    terminals: Arc<TerminalTable>,
    session_terminals: Arc<SessionTerminals>,
    tunnels: Arc<fsd_tunnels::Runs>,
    watches: Arc<WatchService>,
    backups: Arc<BackupService>,
    mounts: Arc<MountService>,
    interpreters: Arc<InterpreterService>,
    extensions: Arc<crate::extensions::ExtensionHost>,
    capabilities: Arc<Capabilities>,
    metrics: Arc<MetricsService>,
}

impl FromRef<AppState> for crate::backup::BackupState {
    fn from_ref(state: &AppState) -> Self {
        crate::backup::BackupState {
            service: state.backups.clone(),
            paths: state.paths.clone(),
            watches: state.watches.clone(),
            capabilities: state.capabilities.clone(),
            files: state.files.clone(),
            sessions: state.sessions.clone(),
            interpreters: state.interpreters.clone(),
        }
    }
}

impl FromRef<AppState> for crate::process::ProcessState {
    fn from_ref(state: &AppState) -> Self {
        crate::process::ProcessState {
            processes: state.processes.clone(),
            paths: state.paths.clone(),
        }
    }
}

impl FromRef<AppState> for crate::exec::ExecState {
    fn from_ref(state: &AppState) -> Self {
        crate::exec::ExecState {
            sessions: state.sessions.clone(),
            processes: state.processes.clone(),
            terminals: state.session_terminals.clone(),
            paths: state.paths.clone(),
            auth_enabled: state.auth_enabled,
        }
    }
}
