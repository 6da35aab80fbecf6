//! The retention policy (`fsd_control::retention`) against restic's own `forget` on the same
//! synthetic timeline: restic (the distribution's, which `.ci/run` installs) makes a snapshot
//! at each time of the timeline, and for each policy `restic forget --dry-run` and fsd must
//! keep the same snapshots.
//!
//! The timelines give every calendar rule at least as many periods as it asks for: the
//! distribution's restic (0.14) predates restic's "keep the oldest too when periods are
//! short" rule (0.17), which fsd follows and its unit tests cover.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use chrono::{DateTime, Duration, TimeZone, Utc};
use fsd_control::retention::{SnapshotInfo, SnapshotPolicy, apply};

fn restic(repo: &Path, args: &[&str]) -> std::process::Output {
    Command::new("restic")
        .args(["--repo"])
        .arg(repo)
        .args(["--no-cache", "--quiet"])
        .args(args)
        .env("RESTIC_PASSWORD", "fsd-test")
        .env("TZ", "UTC")
        .output()
        .expect("restic runs")
}

/// Every 5 to 200 minutes over about ten weeks, with bursts in some hours.
fn timeline() -> Vec<DateTime<Utc>> {
    let mut times = Vec::new();
    let mut t = Utc.with_ymd_and_hms(2026, 1, 3, 7, 12, 0).unwrap();
    let mut step: i64 = 17;
    for i in 0..60 {
        times.push(t);
        step = (step * 37 + 11) % 1700 + 5;
        if i % 9 == 0 {
            t += Duration::minutes(3);
        } else {
            t += Duration::minutes(step);
        }
    }
    times
}

#[test]
fn policies_keep_what_restic_keeps() {
    let have_restic = Command::new("restic")
        .arg("version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !fsd_tests::available_or_skip(
        have_restic,
        "retention::policies_keep_what_restic_keeps",
        "restic",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("f"), "x").unwrap();
    let init = restic(&repo, &["init"]);
    assert!(init.status.success(), "{init:?}");
    let times = timeline();
    for time in &times {
        let made = restic(
            &repo,
            &[
                "backup",
                "--host",
                "h",
                "--time",
                &time.format("%Y-%m-%d %H:%M:%S").to_string(),
                data.to_str().unwrap(),
            ],
        );
        assert!(made.status.success(), "{made:?}");
    }
    let snapshots: Vec<SnapshotInfo> = times
        .iter()
        .map(|time| SnapshotInfo {
            id: time.to_rfc3339(),
            time: *time,
            parent: None,
        })
        .collect();
    let now = *times.last().unwrap() + Duration::days(1);
    let policies: Vec<(Vec<&str>, SnapshotPolicy)> = vec![
        (
            vec!["--keep-last", "5"],
            SnapshotPolicy {
                keep_last: 5,
                ..Default::default()
            },
        ),
        (
            vec!["--keep-hourly", "10"],
            SnapshotPolicy {
                keep_hourly: 10,
                ..Default::default()
            },
        ),
        (
            vec!["--keep-daily", "7"],
            SnapshotPolicy {
                keep_daily: 7,
                ..Default::default()
            },
        ),
        (
            vec!["--keep-weekly", "4"],
            SnapshotPolicy {
                keep_weekly: 4,
                ..Default::default()
            },
        ),
        (
            vec!["--keep-monthly", "2"],
            SnapshotPolicy {
                keep_monthly: 2,
                ..Default::default()
            },
        ),
        (
            vec![
                "--keep-last",
                "2",
                "--keep-hourly",
                "6",
                "--keep-daily",
                "5",
                "--keep-weekly",
                "3",
            ],
            SnapshotPolicy {
                keep_last: 2,
                keep_hourly: 6,
                keep_daily: 5,
                keep_weekly: 3,
                ..Default::default()
            },
        ),
        (
            vec!["--keep-within", "3d", "--keep-weekly", "2"],
            SnapshotPolicy {
                keep_within_secs: Some(3 * 86_400),
                keep_weekly: 2,
                ..Default::default()
            },
        ),
    ];
    for (flags, policy) in policies {
        let mut args = vec!["forget", "--dry-run", "--json", "--group-by", "host"];
        args.extend(&flags);
        let out = restic(&repo, &args);
        assert!(out.status.success(), "{flags:?}: {out:?}");
        let groups: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{flags:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)));
        let restic_kept: BTreeSet<DateTime<Utc>> = groups[0]["keep"]
            .as_array()
            .expect("keep")
            .iter()
            .map(|s| {
                DateTime::parse_from_rfc3339(s["time"].as_str().unwrap())
                    .unwrap()
                    .with_timezone(&Utc)
            })
            .collect();
        let decision = apply(&policy, &snapshots, now);
        let ours: BTreeSet<DateTime<Utc>> = decision
            .keep
            .iter()
            .map(|k| {
                DateTime::parse_from_rfc3339(&k.id)
                    .unwrap()
                    .with_timezone(&Utc)
            })
            .collect();
        assert_eq!(
            ours, restic_kept,
            "{flags:?}: fsd and restic keep different snapshots"
        );
        assert_eq!(decision.keep.len() + decision.remove.len(), times.len());
        assert!(
            !decision.remove.is_empty(),
            "{flags:?} removes something on this timeline"
        );
    }
}
