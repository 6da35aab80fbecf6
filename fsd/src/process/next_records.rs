//! The next line's processes as the 0.12 routes show them: one started over the next
//! line's `/rpc`, by this daemon or (ended) by one before it, is read by id through
//! `GET /api/process/{id}` and `GET /api/process/{id}/logs` as a 0.12 process.

use fsd_api::process::{ProcessInfo, ProcessStatus};
use fsd_process::argv::{ArgvProcess, Outcome};
use fsd_process::log::OutputLog;
use fsd_process::seqlog::{Entry, Kind};
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

/// Its output as 0.12's logs answer it, from `since`. The log keeps the latest events of
/// both streams together and drops whole old ones, so the offsets count from the first byte
/// kept of each stream (exact when nothing was dropped, which `truncated` tells).
pub fn logs(process: &ArgvProcess, since: Since) -> Logs {
    let log = process.log();
    let (mut stdout, mut stderr, mut truncated) = (Vec::new(), Vec::new(), false);
    let mut next = 1;
    loop {
        let entries = log.read_from(next);
        if entries.is_empty() {
            break;
        }
        for entry in entries {
            match entry {
                Entry::Truncated => truncated = true,
                Entry::Record(record) => {
                    next = record.seq + 1;
                    match record.kind {
                        Kind::Stdout => stdout.extend_from_slice(&record.data),
                        Kind::Stderr => stderr.extend_from_slice(&record.data),
                        Kind::Terminal => {}
                    }
                }
            }
        }
        if next > log.end() {
            break;
        }
    }
    let whole = process.status().outcome != Outcome::Running;
    Logs {
        stdout: OutputLog::restored(stdout, 0).since(since.stdout, whole),
        stderr: OutputLog::restored(stderr, 0).since(since.stderr, whole),
        truncated,
    }
}
