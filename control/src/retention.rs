//! Which snapshots a retention policy keeps, with restic's `forget` meaning, and never a
//! snapshot that a kept one stacks on. Plain Rust (no store, no clock of its own), so
//! `fsctl` and the Durable Object's alarm apply the same rules.
//!
//! Restic's rules, as its documentation states them:
//! - `keep_last n`: the `n` most recent snapshots.
//! - `keep_hourly`/`daily`/`weekly`/`monthly`/`yearly n`: for the last `n` hours (days, …)
//!   that have snapshots, the most recent snapshot of each. Periods are calendar periods
//!   (here in UTC); weeks are ISO weeks, Monday to Sunday. `u32::MAX` is `unlimited`.
//! - `keep_within d`: every snapshot within `d` of the most recent one.
//! - A snapshot is kept when any rule keeps it. When a calendar rule finds fewer periods
//!   than it may keep, the oldest snapshot is kept as well (`oldest daily snapshot`).
//! - Snapshots dated in the future (after `now`) are never removed. A policy with no rule
//!   removes nothing (restic refuses it).
//!
//! fsd's addition: a snapshot that a kept one depends on (its parent, transitively) is kept
//! too, with the reason saying which, so a chain of layers is never broken.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Datelike, Duration, Timelike, Utc};
use serde::{Deserialize, Serialize};

/// `unlimited` for a count.
pub const UNLIMITED: u32 = u32::MAX;

/// What to keep; zero (or `None`) turns a rule off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotPolicy {
    #[serde(default)]
    pub keep_last: u32,
    #[serde(default)]
    pub keep_hourly: u32,
    #[serde(default)]
    pub keep_daily: u32,
    #[serde(default)]
    pub keep_weekly: u32,
    #[serde(default)]
    pub keep_monthly: u32,
    #[serde(default)]
    pub keep_yearly: u32,
    /// Seconds before the most recent snapshot.
    #[serde(default)]
    pub keep_within_secs: Option<u64>,
}

impl SnapshotPolicy {
    /// Whether no rule is set (such a policy removes nothing).
    pub fn is_empty(&self) -> bool {
        self.keep_last == 0
            && self.keep_hourly == 0
            && self.keep_daily == 0
            && self.keep_weekly == 0
            && self.keep_monthly == 0
            && self.keep_yearly == 0
            && self.keep_within_secs.is_none_or(|secs| secs == 0)
    }
}

/// A `keep_within` duration in restic's syntax (`2y5m7d3h`: years of 365 days, months of
/// 30 days, days, hours), as seconds.
pub fn parse_within(text: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit: u64 = match c {
            'y' => 365 * 86_400,
            'm' => 30 * 86_400,
            'd' => 86_400,
            'h' => 3_600,
            _ => return None,
        };
        let value: u64 = number.parse().ok()?;
        total = total.checked_add(value.checked_mul(unit)?)?;
        number.clear();
    }
    (number.is_empty() && total > 0).then_some(total)
}

/// One snapshot, as the policy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub id: String,
    pub time: DateTime<Utc>,
    /// The snapshot this one stacks on (a layer's parent).
    pub parent: Option<String>,
}

/// The snapshots of `dir` among `metas`, as the policy sees them (a meta whose time cannot
/// be read is left out, so never removed).
pub fn snapshots_of(metas: &[crate::backup::BackupMeta], dir: &str) -> Vec<SnapshotInfo> {
    metas
        .iter()
        .filter(|meta| meta.dir == dir)
        .filter_map(|meta| {
            let time = DateTime::parse_from_rfc3339(&meta.created_at).ok()?;
            Some(SnapshotInfo {
                id: meta.id.clone(),
                time: time.with_timezone(&Utc),
                parent: meta.parent.clone(),
            })
        })
        .collect()
}

/// The policy's answer: every snapshot is in exactly one of the two lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// Kept snapshots, newest first, each with why.
    pub keep: Vec<Kept>,
    /// Removed snapshots, newest first.
    pub remove: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    pub id: String,
    pub reasons: Vec<String>,
}

/// A calendar rule: its name, count, and the period a time falls in.
struct Bucket {
    name: &'static str,
    left: u32,
    period: fn(&DateTime<Utc>) -> i64,
    last: Option<i64>,
}

fn hour(t: &DateTime<Utc>) -> i64 {
    day(t) * 100 + i64::from(t.hour())
}
fn day(t: &DateTime<Utc>) -> i64 {
    month(t) * 100 + i64::from(t.day())
}
fn week(t: &DateTime<Utc>) -> i64 {
    let week = t.iso_week();
    i64::from(week.year()) * 100 + i64::from(week.week())
}
fn month(t: &DateTime<Utc>) -> i64 {
    year(t) * 100 + i64::from(t.month())
}
fn year(t: &DateTime<Utc>) -> i64 {
    i64::from(t.year())
}

/// Applies `policy` to `snapshots` at time `now`.
pub fn apply(policy: &SnapshotPolicy, snapshots: &[SnapshotInfo], now: DateTime<Utc>) -> Decision {
    let mut order: Vec<&SnapshotInfo> = snapshots.iter().collect();
    order.sort_by(|a, b| b.time.cmp(&a.time).then_with(|| b.id.cmp(&a.id)));
    let mut reasons: HashMap<String, Vec<String>> = HashMap::new();
    let mut keep = |snapshot: &SnapshotInfo, why: String| {
        reasons.entry(snapshot.id.clone()).or_default().push(why);
    };
    let (future, dated): (Vec<&SnapshotInfo>, Vec<&SnapshotInfo>) =
        order.iter().partition(|s| s.time > now);
    for snapshot in &future {
        keep(snapshot, "dated in the future".into());
    }
    if policy.is_empty() {
        for snapshot in &dated {
            keep(snapshot, "no policy".into());
        }
    } else {
        let mut last_left = policy.keep_last;
        let mut buckets = [
            (
                "hourly",
                policy.keep_hourly,
                hour as fn(&DateTime<Utc>) -> i64,
            ),
            ("daily", policy.keep_daily, day),
            ("weekly", policy.keep_weekly, week),
            ("monthly", policy.keep_monthly, month),
            ("yearly", policy.keep_yearly, year),
        ]
        .map(|(name, left, period)| Bucket {
            name,
            left,
            period,
            last: None,
        });
        let within = policy
            .keep_within_secs
            .filter(|secs| *secs > 0)
            .and_then(|secs| i64::try_from(secs).ok())
            .zip(dated.first())
            .map(|(secs, newest)| newest.time - Duration::seconds(secs));
        for snapshot in &dated {
            if last_left > 0 {
                keep(snapshot, "last snapshot".into());
                if last_left != UNLIMITED {
                    last_left -= 1;
                }
            }
            for bucket in &mut buckets {
                if bucket.left == 0 {
                    continue;
                }
                let period = (bucket.period)(&snapshot.time);
                if bucket.last != Some(period) {
                    bucket.last = Some(period);
                    keep(snapshot, format!("{} snapshot", bucket.name));
                    if bucket.left != UNLIMITED {
                        bucket.left -= 1;
                    }
                }
            }
            if within.is_some_and(|since| snapshot.time >= since) {
                keep(snapshot, "within the kept duration".into());
            }
        }
        if let Some(oldest) = dated.last() {
            for bucket in &buckets {
                if bucket.left > 0 && bucket.left != UNLIMITED {
                    keep(oldest, format!("oldest {} snapshot", bucket.name));
                }
            }
        }
    }
    // What a kept snapshot stacks on is kept, transitively.
    let parents: HashMap<&str, &str> = snapshots
        .iter()
        .filter_map(|s| Some((s.id.as_str(), s.parent.as_deref()?)))
        .collect();
    let known: HashSet<&str> = snapshots.iter().map(|s| s.id.as_str()).collect();
    let mut pending: Vec<String> = reasons.keys().cloned().collect();
    while let Some(id) = pending.pop() {
        let Some(&parent) = parents.get(id.as_str()) else {
            continue;
        };
        if !known.contains(parent) {
            continue;
        }
        let entry = reasons.entry(parent.to_string()).or_default();
        let first = entry.is_empty();
        entry.push(format!("parent of kept snapshot {id}"));
        if first {
            pending.push(parent.to_string());
        }
    }
    let mut decision = Decision::default();
    for snapshot in order {
        match reasons.remove(snapshot.id.as_str()) {
            Some(why) => decision.keep.push(Kept {
                id: snapshot.id.clone(),
                reasons: why,
            }),
            None => decision.remove.push(snapshot.id.clone()),
        }
    }
    decision
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    fn snap(id: &str, time: &str) -> SnapshotInfo {
        SnapshotInfo {
            id: id.into(),
            time: at(time),
            parent: None,
        }
    }

    fn kept(decision: &Decision) -> Vec<&str> {
        decision.keep.iter().map(|k| k.id.as_str()).collect()
    }

    /// Restic's own example: a backup every Sunday for 12 weeks, `--keep-daily 4`.
    fn sundays() -> Vec<SnapshotInfo> {
        [
            "2019-09-01",
            "2019-09-08",
            "2019-09-15",
            "2019-09-22",
            "2019-09-29",
            "2019-10-06",
            "2019-10-13",
            "2019-10-20",
            "2019-10-27",
            "2019-11-03",
            "2019-11-10",
            "2019-11-17",
        ]
        .iter()
        .map(|day| snap(day, &format!("{day}T11:00:00Z")))
        .collect()
    }

    #[test]
    fn restics_sunday_example() {
        let now = at("2019-11-18T00:00:00Z");
        let policy = SnapshotPolicy {
            keep_daily: 4,
            ..SnapshotPolicy::default()
        };
        let decision = apply(&policy, &sundays(), now);
        assert_eq!(
            kept(&decision),
            ["2019-11-17", "2019-11-10", "2019-11-03", "2019-10-27"]
        );
        assert_eq!(decision.remove.len(), 8);
        assert_eq!(decision.keep[0].reasons, ["daily snapshot"]);
        // Weekly and monthly together: the ORed rules.
        let policy = SnapshotPolicy {
            keep_weekly: 2,
            keep_monthly: 3,
            ..SnapshotPolicy::default()
        };
        let decision = apply(&policy, &sundays(), now);
        assert_eq!(
            kept(&decision),
            ["2019-11-17", "2019-11-10", "2019-10-27", "2019-09-29"]
        );
    }

    #[test]
    fn periods_keep_the_most_recent_of_each_and_the_oldest_when_short() {
        let snapshots = vec![
            snap("a", "2026-01-05T10:05:00Z"),
            snap("b", "2026-01-05T10:55:00Z"),
            snap("c", "2026-01-05T11:10:00Z"),
            snap("d", "2026-01-05T13:00:00Z"),
        ];
        let now = at("2026-01-06T00:00:00Z");
        let hourly = |n| SnapshotPolicy {
            keep_hourly: n,
            ..SnapshotPolicy::default()
        };
        assert_eq!(kept(&apply(&hourly(2), &snapshots, now)), ["d", "c"]);
        // Three hours with snapshots, five asked: the oldest snapshot is kept as well.
        let decision = apply(&hourly(5), &snapshots, now);
        assert_eq!(kept(&decision), ["d", "c", "b", "a"]);
        assert_eq!(decision.keep[3].reasons, ["oldest hourly snapshot"]);
        // Unlimited: one per hour, and no extra oldest.
        assert_eq!(
            kept(&apply(&hourly(UNLIMITED), &snapshots, now)),
            ["d", "c", "b"]
        );
        let last = SnapshotPolicy {
            keep_last: 3,
            ..SnapshotPolicy::default()
        };
        assert_eq!(apply(&last, &snapshots, now).remove, ["a"]);
    }

    #[test]
    fn within_is_relative_to_the_newest_and_the_future_is_kept() {
        let snapshots = vec![
            snap("old", "2026-01-01T00:00:00Z"),
            snap("mid", "2026-01-09T00:00:00Z"),
            snap("new", "2026-01-10T00:00:00Z"),
            snap("later", "2026-03-01T00:00:00Z"),
        ];
        let policy = SnapshotPolicy {
            keep_within_secs: Some(2 * 86_400),
            ..SnapshotPolicy::default()
        };
        let decision = apply(&policy, &snapshots, at("2026-02-01T00:00:00Z"));
        assert_eq!(kept(&decision), ["later", "new", "mid"]);
        assert_eq!(decision.keep[0].reasons, ["dated in the future"]);
        assert_eq!(decision.remove, ["old"]);
        // No rule: nothing is removed.
        let all = apply(
            &SnapshotPolicy::default(),
            &snapshots,
            at("2026-02-01T00:00:00Z"),
        );
        assert!(all.remove.is_empty());
    }

    #[test]
    fn weeks_are_iso_weeks() {
        // Sunday 2026-01-04 and Monday 2026-01-05 are in different ISO weeks.
        let snapshots = vec![
            snap("sun", "2026-01-04T23:00:00Z"),
            snap("mon", "2026-01-05T01:00:00Z"),
            snap("tue", "2026-01-06T01:00:00Z"),
        ];
        let policy = SnapshotPolicy {
            keep_weekly: 2,
            ..SnapshotPolicy::default()
        };
        assert_eq!(
            kept(&apply(&policy, &snapshots, at("2026-02-01T00:00:00Z"))),
            ["tue", "sun"]
        );
    }

    #[test]
    fn within_durations_read_as_restic_writes_them() {
        assert_eq!(parse_within("3d"), Some(3 * 86_400));
        assert_eq!(
            parse_within("1y2m3d4h"),
            Some((365 + 60 + 3) * 86_400 + 4 * 3_600)
        );
        for bad in ["", "3", "d", "3w", "-1d", "0d"] {
            assert_eq!(parse_within(bad), None, "{bad}");
        }
    }

    #[test]
    fn chains_are_never_broken() {
        let mut snapshots = vec![
            snap("full", "2026-01-01T00:00:00Z"),
            snap("l1", "2026-01-02T00:00:00Z"),
            snap("l2", "2026-01-03T00:00:00Z"),
            snap("other", "2026-01-04T00:00:00Z"),
        ];
        snapshots[1].parent = Some("full".into());
        snapshots[2].parent = Some("l1".into());
        let policy = SnapshotPolicy {
            keep_last: 1,
            ..SnapshotPolicy::default()
        };
        let decision = apply(&policy, &snapshots, at("2026-02-01T00:00:00Z"));
        assert_eq!(kept(&decision), ["other"]);
        snapshots[3].parent = Some("l2".into());
        let decision = apply(&policy, &snapshots, at("2026-02-01T00:00:00Z"));
        assert_eq!(kept(&decision), ["other", "l2", "l1", "full"]);
        assert_eq!(decision.keep[1].reasons, ["parent of kept snapshot other"]);
        assert!(decision.remove.is_empty());
    }
}
