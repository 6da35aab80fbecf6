//! A forced kernel queue overflow is reported. Its own test binary: it lowers the global
//! `max_queued_events` for a moment, which must not touch other tests' inotify instances.

use std::time::Duration;

use fsd_watch::{EngineKind, Event, EventKind, Filter, Watcher};
use tokio::sync::mpsc::UnboundedReceiver;

async fn drain(events: &mut UnboundedReceiver<Event>, quiet: Duration) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout(quiet, events.recv()).await {
        out.push(event);
    }
    out
}

fn root() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    (dir, root)
}

#[tokio::test]
async fn a_kernel_queue_overflow_is_reported() {
    let is_root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if !is_root {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true needs root to lower max_queued_events"
        );
        eprintln!("skipping a_kernel_queue_overflow_is_reported: needs root");
        return;
    }
    const KNOB: &str = "/proc/sys/fs/inotify/max_queued_events";
    let original = std::fs::read_to_string(KNOB).unwrap();
    // The limit applies to inotify instances created after the change.
    std::fs::write(KNOB, "4").unwrap();
    let (_dir, root) = root();
    // The engine under test: `FSD_WATCH_ENGINE`, else the default.
    let engine: EngineKind = std::env::var("FSD_WATCH_ENGINE")
        .map(|name| name.parse().unwrap())
        .unwrap_or_default();
    let started = Watcher::start_with(engine, &root, Filter::new(&[], &[]).unwrap(), true);
    std::fs::write(KNOB, original.trim()).unwrap();
    let (_watcher, mut events) = started.unwrap();
    // Flood from two threads: a queue of 4 events cannot absorb it.
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let root = root.clone();
            std::thread::spawn(move || {
                for i in 0..2000 {
                    std::fs::write(root.join(format!("x{t}-{i}")), "data").unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let seen = drain(&mut events, Duration::from_millis(500)).await;
    assert!(
        seen.iter().any(|e| e.kind == EventKind::Overflow),
        "no overflow among {} events",
        seen.len()
    );
}
