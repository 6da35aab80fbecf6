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
