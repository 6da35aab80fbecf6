//! Scheduled snapshots from the object's alarm: one directory every interval while the
//! container runs (a stopped container's workspace is gone, so there is nothing to take),
//! then the retention policy applied to that directory's snapshots, as `fsctl`'s schedule
//! does (`fsd_control::retention`). The object has one alarm, which the sleep timer and the
//! schedule share: it is set to whichever is due first.
//!
//! `PUT /schedule {dir, every, policy?}` (`every` as `sleepAfter` is written: `"30s"`,
//! `"10m"`, `"1h"` or seconds), `GET /schedule` (with the last round's outcome),
//! `DELETE /schedule`.

use fsd_control::retention::SnapshotPolicy;
use fsd_control::sandbox::parse_sleep_after;
use serde::{Deserialize, Serialize};
use worker::{Request, Response, Result, State};

use crate::wire::error;

/// Storage key of the schedule.
const KEY: &str = "schedule";

/// What to snapshot, how often, what to keep, and how the last round went.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    pub dir: String,
    pub every_secs: u64,
    #[serde(default)]
    pub policy: SnapshotPolicy,
    /// When the next round is due (ms since the epoch).
    pub next: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<Round>,
}

/// One round's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Round {
    /// RFC 3339.
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    /// Why no snapshot was taken or the policy not applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Schedule {
    /// The round after the one due at `next`, skipping the ones missed by `now`.
    pub fn advance(&mut self, now: i64) {
        let every = i64::try_from(self.every_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        while self.next <= now {
            self.next = self.next.saturating_add(every.max(1000));
        }
    }
}

pub async fn load(state: &State) -> Result<Option<Schedule>> {
    state.storage().get(KEY).await
}

pub async fn save(state: &State, schedule: &Schedule) -> Result<()> {
    state.storage().put(KEY, schedule).await
}

/// `PUT /schedule`: the schedule, its first round one interval from `now`.
pub async fn set(state: &State, mut request: Request, now: i64) -> Result<Response> {
    #[derive(Deserialize)]
    struct Asked {
        dir: String,
        every: serde_json::Value,
        #[serde(default)]
        policy: SnapshotPolicy,
    }
    let Ok(asked) = request.json::<Asked>().await else {
        return error(
            400,
            "INVALID_BACKUP_CONFIG",
            "body: needs dir and every (\"30s\", \"10m\", \"1h\" or seconds)",
        );
    };
    let every = match &asked.every {
        serde_json::Value::Number(secs) => secs.as_u64().map(std::time::Duration::from_secs),
        serde_json::Value::String(text) => parse_sleep_after(text).ok(),
        _ => None,
    };
    let Some(every) = every.filter(|every| every.as_secs() >= 1) else {
        return error(
            400,
            "INVALID_BACKUP_CONFIG",
            "every: \"30s\", \"10m\", \"1h\" or seconds, at least 1 s",
        );
    };
    let schedule = Schedule {
        dir: asked.dir,
        every_secs: every.as_secs(),
        policy: asked.policy,
        next: now.saturating_add(i64::try_from(every.as_millis()).unwrap_or(i64::MAX)),
        last: None,
    };
    save(state, &schedule).await?;
    Response::from_json(&schedule)
}

/// `GET /schedule` → the schedule, or `null`.
pub async fn get(state: &State) -> Result<Response> {
    Response::from_json(&serde_json::json!({ "schedule": load(state).await? }))
}

/// `DELETE /schedule`.
pub async fn clear(state: &State) -> Result<Response> {
    state.storage().delete(KEY).await?;
    Response::from_json(&serde_json::json!({ "success": true }))
}
