//! Scheduled snapshots: a backup of one directory every interval, then the retention
//! policy applied to that directory's backups (what a kept layer stacks on stays). Runs
//! until its handle is dropped; a failed round is reported and the next one still runs.

use std::sync::Arc;
use std::time::Duration;

use fsd_control::retention::SnapshotPolicy;
use fsd_sdk::Sandbox;
use tokio_util::task::AbortOnDropHandle;

use super::backups::{BackupOptions, Backups};

/// What to snapshot, how often, and what to keep.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub dir: String,
    pub every: Duration,
    pub policy: SnapshotPolicy,
}

/// What one round did.
#[derive(Debug, Clone)]
pub enum Round {
    /// A backup `id` was made, and `removed` backups were pruned.
    Done {
        id: String,
        removed: Vec<String>,
    },
    Failed(String),
}

/// A running schedule; stops when dropped.
pub struct Scheduled {
    _task: AbortOnDropHandle<()>,
}

/// Starts `schedule`: the first snapshot after one interval. `report` hears each round.
pub fn start(
    sandbox: Sandbox,
    backups: Arc<Backups>,
    schedule: Schedule,
    report: impl Fn(&Round) + Send + Sync + 'static,
) -> Scheduled {
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(schedule.every);
        // A round that ran long is not followed by a burst of catch-up rounds.
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            report(&round(&sandbox, &backups, &schedule).await);
        }
    });
    Scheduled {
        _task: AbortOnDropHandle::new(task),
    }
}

async fn round(sandbox: &Sandbox, backups: &Backups, schedule: &Schedule) -> Round {
    let made = match backups
        .create_backup(sandbox, &schedule.dir, BackupOptions::default())
        .await
    {
        Ok(made) => made,
        Err(error) => return Round::Failed(format!("snapshot of {}: {error}", schedule.dir)),
    };
    if schedule.policy.is_empty() {
        return Round::Done {
            id: made.id,
            removed: Vec::new(),
        };
    }
    match backups.forget(&schedule.dir, &schedule.policy, false).await {
        Ok(decision) => Round::Done {
            id: made.id,
            removed: decision.remove,
        },
        Err(error) => Round::Failed(format!("retention of {}: {error}", schedule.dir)),
    }
}
