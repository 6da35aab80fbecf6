//! The typed client's watch and check_changes, and `fsctl watch`.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use fsd_sdk::api::watch::{WatchEvent, WatchRequest};
use fsd_tests::{Daemon, binary};
use futures_util::StreamExt;

#[tokio::test]
async fn watch_stream_and_change_tokens() {
    let daemon = Daemon::start();
    let sandbox = daemon.client().await;
    let mut events = sandbox
        .watch(&WatchRequest {
            path: ".".into(),
            ..WatchRequest::default()
        })
        .await
        .unwrap();
    assert!(matches!(
        events.next().await,
        Some(Ok(WatchEvent::Watching { .. }))
    ));
    std::fs::write(daemon.path("seen.txt"), "x").unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match event {
        WatchEvent::Event {
            event_type, path, ..
        } => {
            assert_eq!(event_type, "create");
            assert_eq!(path, daemon.path("seen.txt").display().to_string());
        }
        other => panic!("{other:?}"),
    }

    let baseline = sandbox.check_changes(".", None, true).await.unwrap();
    assert_eq!(baseline.status, "unchanged");
    std::fs::write(daemon.path("later.txt"), "x").unwrap();
    let mut answer = baseline.clone();
    for _ in 0..100 {
        answer = sandbox
            .check_changes(".", Some(&baseline.version), true)
            .await
            .unwrap();
        if answer.status != "unchanged" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(answer.status, "changed");
    let changes = answer.changes.unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].change, "created");
}

#[test]
fn fsctl_watch_prints_changes() {
    let daemon = Daemon::start();
    let mut child = std::process::Command::new(binary("fsctl"))
        .args(["--url", &daemon.url, "watch", "."])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.starts_with("watching "), "{line}");
    std::fs::write(daemon.path("hello.txt"), "x").unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        ["create", daemon.path("hello.txt").to_str().unwrap()]
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn fsctl_sync_mirrors_and_then_applies_changes() {
    let daemon = Daemon::start();
    std::fs::create_dir(daemon.path("proj")).unwrap();
    std::fs::write(daemon.path("proj/a.txt"), "a").unwrap();
    let local = tempfile::tempdir().unwrap();
    let mirror = local.path().join("mirror");
    let sync = || {
        let output = std::process::Command::new(binary("fsctl"))
            .args(["--url", &daemon.url, "sync", "proj"])
            .arg(&mirror)
            .output()
            .unwrap();
        fsd_tests::succeeded(&output)
    };
    assert!(sync().starts_with("full: 1 downloaded"));
    assert_eq!(std::fs::read_to_string(mirror.join("a.txt")).unwrap(), "a");
    assert!(
        local.path().join("mirror.fsd-sync").exists(),
        "the token is kept beside the mirror"
    );
    std::fs::write(daemon.path("proj/b.txt"), "b").unwrap();
    std::fs::remove_file(daemon.path("proj/a.txt")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        sync().trim(),
        "incremental: 1 downloaded, 1 deleted, 0 renamed, 0 links"
    );
    assert!(!mirror.join("a.txt").exists());
    assert_eq!(std::fs::read_to_string(mirror.join("b.txt")).unwrap(), "b");
    assert_eq!(
        sync().trim(),
        "unchanged: 0 downloaded, 0 deleted, 0 renamed, 0 links"
    );
}

/// A mirror of a sandbox that lost its files: a new daemon (a container woken without its
/// disk: its change list gone too) whose directory holds nothing. The mirror's full copy
/// halts (exit 1, `SYNC_HALTED`) and removes nothing, where it emptied the mirror, the
/// only copy of the work left; `--accept-emptied` empties it. A directory that holds
/// something is mirrored as before, what the mirror holds beyond it removed.
#[test]
fn a_mirror_of_a_sandbox_that_lost_its_files_keeps_them() {
    let local = tempfile::tempdir().unwrap();
    let mirror = local.path().join("mirror");
    let sync = |daemon: &Daemon, more: &[&str]| {
        std::process::Command::new(binary("fsctl"))
            .args(["--url", &daemon.url, "sync", "proj"])
            .arg(&mirror)
            .args(more)
            .output()
            .unwrap()
    };
    let first = Daemon::start();
    std::fs::create_dir(first.path("proj")).unwrap();
    std::fs::write(first.path("proj/work.txt"), "work").unwrap();
    fsd_tests::succeeded(&sync(&first, &[]));
    drop(first);

    let woken = Daemon::start();
    std::fs::create_dir(woken.path("proj")).unwrap();
    let halted = sync(&woken, &[]);
    let stderr = String::from_utf8_lossy(&halted.stderr);
    assert_eq!(halted.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("SYNC_HALTED") && stderr.contains("--accept-emptied"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(mirror.join("work.txt")).unwrap(),
        "work"
    );

    std::fs::write(woken.path("proj/other.txt"), "other").unwrap();
    let copied = fsd_tests::succeeded(&sync(&woken, &[]));
    assert!(
        copied.starts_with("full: 1 downloaded, 1 deleted"),
        "{copied}"
    );
    std::fs::remove_file(woken.path("proj/other.txt")).unwrap();
    std::fs::write(mirror.join("stray.txt"), "stray").unwrap();
    let restarted = Daemon::start();
    std::fs::create_dir(restarted.path("proj")).unwrap();
    fsd_tests::succeeded(&sync(&restarted, &["--accept-emptied"]));
    assert_eq!(
        std::fs::read_dir(&mirror).unwrap().count(),
        0,
        "asked for: emptied"
    );
}
