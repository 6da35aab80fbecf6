//! `POST /api/port-watch`: wait until a port answers, as an SSE stream.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeMode {
    /// Ready when `GET http://localhost:<port><path>` answers with a status in range.
    Http,
    /// Ready when a TCP connection to `localhost:<port>` succeeds.
    Tcp,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortWatchRequest {
    pub port: u32,
    pub mode: ProbeMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_min: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_max: Option<u16>,
    /// Stop with `process_exited` if this process ends first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_id: Option<String>,
    /// Milliseconds between probes, clamped to 100..=10000 (default 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PortWatchEvent {
    Watching {
        port: u32,
    },
    #[serde(rename_all = "camelCase")]
    Ready {
        port: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status_code: Option<u16>,
    },
    #[serde(rename_all = "camelCase")]
    ProcessExited {
        port: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
    },
    Error {
        port: u32,
        error: String,
    },
}
