//! What the exec domain works with.

use std::sync::Arc;

use fsd_process::{ProcessService, SessionManager};

use crate::paths::Paths;
use crate::terminal::SessionTerminals;

/// Sessions, the background processes a streamed command runs as, the terminals a deleted
/// session closes, and the paths a command's `cwd` is checked against: what an exec handler
/// or operation takes.
#[derive(Clone)]
pub struct ExecState {
    pub sessions: Arc<SessionManager>,
    pub processes: Arc<ProcessService>,
    pub terminals: Arc<SessionTerminals>,
    pub paths: Paths,
    /// An API token is configured, so `Authorization: Bearer` is never a session id.
    pub auth_enabled: bool,
}
