//! What the process domain works with.

use std::sync::Arc;

use fsd_process::ProcessService;

use crate::paths::Paths;

/// Background processes (the table of both lines') and the paths a start's `cwd` is
/// checked against: what a process handler or operation takes.
#[derive(Clone)]
pub struct ProcessState {
    pub processes: Arc<ProcessService>,
    pub paths: Paths,
}
