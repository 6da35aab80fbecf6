//! File watching: `POST /api/watch` (SSE) and `POST /api/watch/check` (change tokens).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchRequest {
    pub path: String,
    /// Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<String>>,
    /// Default: create, modify, delete, move_from, move_to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckChangesRequest {
    // The fields of [`WatchRequest`], spelled out: `#[serde(flatten)]` would lose the field
    // name in type errors.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// A `version` from an earlier answer; absent: take a baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// fsd extension: also list what changed since `since`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<bool>,
    /// fsd extension: also list every path an event named since `since`, in path order:
    /// with those a coalesced list leaves out (made and gone again, changed and changed
    /// back), for a client that read the tree meanwhile and may have seen them. Events are
    /// what the watch saw: a file made and gone before its directory was read again is in
    /// neither list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub touched: Option<bool>,
}

/// One coalesced change since a token (fsd extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathChange {
    /// `created`, `modified`, `deleted` or `renamed`.
    #[serde(rename = "type")]
    pub change: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub is_directory: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckChangesResponse {
    pub success: bool,
    /// `unchanged`, `changed` or `resync`.
    pub status: String,
    /// With `resync`: `expired`, `restarted`, or (fsd) `overflow` when events were lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<PathChange>>,
    /// With `touched`: every path an event named since the token (absolute, as `changes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub touched: Option<Vec<String>>,
    pub timestamp: String,
}

/// One SSE frame of `/api/watch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WatchEvent {
    #[serde(rename_all = "camelCase")]
    Watching {
        path: String,
        watch_id: String,
    },
    #[serde(rename_all = "camelCase")]
    Event {
        event_type: String,
        path: String,
        is_directory: bool,
        timestamp: String,
        /// fsd extension: the old path, on the `move_to` half of a rename.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
    },
    /// fsd extension: events were lost (kernel overflow); rescan.
    Resync {
        reason: String,
    },
    Error {
        error: String,
    },
    Stopped {
        reason: String,
    },
}

impl CheckChangesRequest {
    /// The watch this request names.
    pub fn watch(&self) -> WatchRequest {
        WatchRequest {
            path: self.path.clone(),
            recursive: self.recursive,
            include: self.include.clone(),
            exclude: self.exclude.clone(),
            events: self.events.clone(),
            session_id: self.session_id.clone(),
        }
    }
}
