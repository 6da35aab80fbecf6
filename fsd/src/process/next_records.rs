//! The next line's processes as the 0.12 routes show them: one started over the next
//! line's `/rpc`, by this daemon or (ended) by one before it, is read by id through
//! `GET /api/process/{id}` and `GET /api/process/{id}/logs` as a 0.12 process.

use fsd_api::process::{ProcessInfo, ProcessStatus};
use fsd_process::argv::{ArgvProcess, Outcome};
use fsd_process::background::read_logs;
use fsd_process::{Logs, Since};

/// The process as a 0.12 record (no session: the next line has none).
pub fn info(process: &ArgvProcess) -> ProcessInfo {
    let status = process.status();
    let (status_now, exit_code) = match &status.outcome {
        Outcome::Running => (ProcessStatus::Running, None),
        Outcome::Exited(exit) => {
            let killed = exit.signal.is_some() || exit.timed_out;
            (ProcessStatus::from_exit(exit.code, killed), Some(exit.code))
        }
        Outcome::Failed(_) => (ProcessStatus::Error, None),
    };
    ProcessInfo {
        id: status.id,
        pid: status.pid,
        command: status.command.join(" "),
        status: status_now,
        start_time: status.started_at,
        end_time: status.ended_at,
        exit_code,
        session_id: String::new(),
        cpu_seconds: None,
        rss_bytes: None,
    }
}

/// Its output as 0.12's logs answer it, from `since`: each stream's bytes at their
/// absolute offsets, as the log counts them across what it dropped. Blocking file reads.
pub fn logs(process: &ArgvProcess, since: Since) -> Logs {
    let whole = process.status().outcome != Outcome::Running;
    read_logs(process.log(), since, whole)
}
