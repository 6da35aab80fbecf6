//! What the process domain works with.

use std::sync::Arc;

use fsd_process::ProcessService;
use fsd_process::argv::ArgvProcesses;

use crate::paths::Paths;

/// Background processes, the next line's (whose ids `get` and the logs also find), and the
/// paths a start's `cwd` is checked against: what a process handler or operation takes.
#[derive(Clone)]
pub struct ProcessState {
    pub processes: Arc<ProcessService>,
    pub argv_processes: Arc<ArgvProcesses>,
    pub paths: Paths,
}
