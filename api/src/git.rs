//! `POST /api/git/checkout`: clone a repository into the sandbox.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitCheckoutRequest {
    pub repo_url: String,
    /// A branch or tag; the repository's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Default `<workspace>/<repository name>`; relative paths resolve in the session's cwd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<serde_json::Value>,
    /// Default 600,000 (10 minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitCheckoutResponse {
    pub success: bool,
    /// The repository URL with any credentials in it redacted.
    pub repo_url: String,
    /// The branch checked out (the requested one for a detached HEAD such as a tag).
    pub branch: String,
    pub target_dir: String,
    pub timestamp: String,
}

/// One event of `POST /api/git/checkout` with `Accept: text/event-stream`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum GitCheckoutEvent {
    /// A line of git's progress (credentials redacted).
    Progress {
        line: String,
    },
    Complete(GitCheckoutResponse),
    Error(crate::ErrorBody),
}
