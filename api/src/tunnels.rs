//! Tunnels (fsd's own routes; the reference serves them over RPC only): a public URL for a
//! sandbox port through cloudflared.

use serde::{Deserialize, Serialize};

/// `POST /api/tunnels`: ensure a tunnel run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnsureTunnelRequest {
    /// `quick` (a random trycloudflare.com URL) or `named` (the token's tunnel).
    pub mode: String,
    pub port: u32,
    /// The named tunnel's token (required for `named`, refused for `quick`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Default: `quick-<port>` or `named-<port>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel_id: Option<String>,
    /// Default: the tunnel id. The same run id and parameters share one start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// How long cloudflared may take to become ready, in ms (default 90,000); part of the
    /// run's identity, as the next line's reference makes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_timeout_ms: Option<u64>,
    /// Between SIGTERM and SIGKILL when the run stops, in ms (default 3,000); part of the
    /// run's identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_grace_ms: Option<u64>,
}

/// A tunnel run, as answers show it (never with its token).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TunnelRun {
    pub tunnel_id: String,
    pub run_id: String,
    pub mode: String,
    pub port: u16,
    /// The public URL of a quick tunnel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    pub started_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnsureTunnelResponse {
    pub success: bool,
    pub run: TunnelRun,
    /// False when this call joined a run already started with the same parameters.
    pub started: bool,
    pub timestamp: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTunnelsResponse {
    pub success: bool,
    pub tunnels: Vec<TunnelRun>,
    pub timestamp: String,
}

/// `POST /api/tunnels/stop`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopTunnelRequest {
    pub tunnel_id: String,
    pub run_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopTunnelResponse {
    pub success: bool,
    /// False (still a success) when no run matched.
    pub stopped: bool,
    pub timestamp: String,
}

/// An event of `GET /api/tunnels/events` (SSE): a tunnel's cloudflared exited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TunnelEvent {
    #[serde(rename_all = "camelCase")]
    Exited {
        tunnel_id: String,
        run_id: String,
        port: u16,
        /// `null` when a signal ended it.
        exit_code: Option<i32>,
        timestamp: String,
    },
}
