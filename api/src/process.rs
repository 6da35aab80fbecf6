//! Background processes: `/api/process/*`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessStatus {
    Starting,
    Running,
    Completed,
    Failed,
    Killed,
    Error,
}

impl ProcessStatus {
    /// The status as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Killed => "killed",
            Self::Error => "error",
        }
    }

    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Starting | Self::Running)
    }

    /// The status a process that exited with `code` ends in (the reference's rule).
    pub fn from_exit(code: i32, killed_by_request: bool) -> Self {
        match code {
            0 => Self::Completed,
            _ if killed_by_request => Self::Killed,
            137 | 143 => Self::Killed,
            _ => Self::Failed,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartProcessRequest {
    pub command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, Option<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// fsd's own: `"pipe"` keeps a pipe to the process's stdin for
    /// `POST /api/process/{id}/stdin`; `"null"` (the default) is `/dev/null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartProcessResponse {
    pub success: bool,
    pub process_id: String,
    pub pid: u32,
    pub command: String,
    pub timestamp: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessInfo {
    pub id: String,
    pub pid: u32,
    pub command: String,
    pub status: ProcessStatus,
    pub start_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    pub exit_code: Option<i32>,
    pub session_id: String,
    /// fsd's own: CPU time of the process and everything it started, in seconds (for a
    /// finished one, what it and what it waited for used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// fsd's own: resident memory of the process's tree now, while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListProcessesResponse {
    pub success: bool,
    pub processes: Vec<ProcessInfo>,
    pub timestamp: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetProcessResponse {
    pub success: bool,
    pub process: ProcessInfo,
    pub timestamp: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KillProcessResponse {
    pub success: bool,
    pub process_id: String,
    pub timestamp: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KillAllResponse {
    pub success: bool,
    /// Processes that were running and were killed.
    pub cleaned_count: usize,
    pub timestamp: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessLogsResponse {
    pub success: bool,
    pub process_id: String,
    pub stdout: String,
    pub stderr: String,
    /// Output beyond the stored cap was dropped (the oldest goes first); the cap is
    /// `outputCapBytes` per stream.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    pub output_cap_bytes: u64,
    /// fsd's own: the absolute byte offset after the returned stdout; ask again with
    /// `?stdoutSince=` it to continue where this answer stopped.
    #[serde(default)]
    pub stdout_offset: u64,
    #[serde(default)]
    pub stderr_offset: u64,
    /// fsd's own: bytes after the asked offset no longer kept (dropped by the cap).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stdout_skipped: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stderr_skipped: u64,
    pub timestamp: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One SSE frame of `/api/process/{id}/stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ProcessEvent {
    #[serde(rename_all = "camelCase")]
    ProcessInfo {
        process_id: String,
        command: String,
        status: ProcessStatus,
        timestamp: String,
    },
    /// `offset` (fsd's own): the stream's absolute byte offset after `data`, for
    /// `?stdoutSince=` on a reconnect.
    #[serde(rename_all = "camelCase")]
    Stdout {
        data: String,
        process_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        offset: Option<u64>,
        timestamp: String,
    },
    #[serde(rename_all = "camelCase")]
    Stderr {
        data: String,
        process_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        offset: Option<u64>,
        timestamp: String,
    },
    #[serde(rename_all = "camelCase")]
    Exit {
        process_id: String,
        exit_code: i32,
        data: String,
        timestamp: String,
    },
}

#[cfg(test)]
mod tests {
    use super::ProcessStatus;

    #[test]
    fn as_str_matches_the_serde_names() {
        for status in [
            ProcessStatus::Starting,
            ProcessStatus::Running,
            ProcessStatus::Completed,
            ProcessStatus::Failed,
            ProcessStatus::Killed,
            ProcessStatus::Error,
        ] {
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
    }
}

/// `POST /api/process/{id}/signal`: `signal` by name (`SIGUSR1`, `USR1`, any case) or number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignalRequest {
    pub signal: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignalResponse {
    pub success: bool,
    pub process_id: String,
    /// The signal's name, as `SIGUSR1`.
    pub signal: String,
    /// Processes of the tree it reached.
    pub signalled: u64,
    pub timestamp: String,
}

/// `POST /api/process/{id}/stdin`: bytes for a process started with `stdin: "pipe"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StdinRequest {
    /// The bytes, as text or base64 (`encoding`); may be empty (to close alone).
    #[serde(default)]
    pub data: String,
    /// `utf8` (the default) or `base64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// Close stdin after the bytes: the process reads end of file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub close: bool,
    /// How long to wait for the pipe to have room while the process does not read
    /// (default 10 000, at most 300 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StdinResponse {
    pub success: bool,
    pub process_id: String,
    /// Bytes written.
    pub written: u64,
    /// Whether stdin is now closed.
    pub closed: bool,
    pub timestamp: String,
}
