//! A forced kernel queue overflow is a recrawl: the events still tell every change. Its own test binary: it lowers the global
//! `max_queued_events` for a moment, which must not touch other tests' inotify instances.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
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
async fn a_kernel_queue_overflow_loses_nothing() {
    let is_root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if !is_root {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true needs root to lower max_queued_events"
        );
        eprintln!("skipping a_kernel_queue_overflow_loses_nothing: needs root");
        return;
    }
    const KNOB: &str = "/proc/sys/fs/inotify/max_queued_events";
    let original = std::fs::read_to_string(KNOB).unwrap();
    // The limit applies to inotify instances created after the change.
    std::fs::write(KNOB, "4").unwrap();
    let (_dir, root) = root();
    // A tree to move and delete in while the queue overflows.
    for d in 0..20 {
        std::fs::create_dir_all(root.join(format!("d{d}/sub"))).unwrap();
        std::fs::write(root.join(format!("d{d}/sub/f")), "x").unwrap();
    }
    // The engine under test: `FSD_WATCH_ENGINE`, else the default.
    let engine: EngineKind = std::env::var("FSD_WATCH_ENGINE")
        .map(|name| name.parse().unwrap())
        .unwrap_or_default();
    let started = Watcher::start_with(engine, &root, Filter::new(&[], &[]).unwrap(), true);
    std::fs::write(KNOB, original.trim()).unwrap();
    let (watcher, mut events) = started.unwrap();
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
    for d in 0..20 {
        match d % 3 {
            0 => std::fs::rename(root.join(format!("d{d}")), root.join(format!("m{d}"))).unwrap(),
            1 => std::fs::remove_dir_all(root.join(format!("d{d}"))).unwrap(),
            _ => std::fs::rename(
                root.join(format!("d{d}/sub")),
                root.join(format!("d{}/moved{d}", d - 1)),
            )
            .unwrap_or_else(|_| std::fs::remove_dir_all(root.join(format!("d{d}/sub"))).unwrap()),
        }
    }
    for writer in writers {
        writer.join().unwrap();
    }
    watcher.caught_up().await;
    let seen = drain(&mut events, Duration::from_millis(500)).await;
    assert!(
        seen.iter().all(|e| e.kind != EventKind::Overflow),
        "an overflow is recrawled, not told"
    );
    // The events, replayed on the paths there were, give the paths there are.
    let mut paths = BTreeSet::new();
    for d in 0..20 {
        for path in [format!("d{d}"), format!("d{d}/sub"), format!("d{d}/sub/f")] {
            paths.insert(root.join(path));
        }
    }
    for event in &seen {
        let under = |paths: &BTreeSet<PathBuf>, top: &Path| -> Vec<PathBuf> {
            paths
                .iter()
                .filter(|p| p.starts_with(top))
                .cloned()
                .collect()
        };
        match event.kind {
            EventKind::Create | EventKind::MoveIn => {
                paths.insert(event.path.clone());
            }
            EventKind::Delete => {
                for path in under(&paths, &event.path) {
                    paths.remove(&path);
                }
            }
            EventKind::Rename => {
                let from = event.from.clone().unwrap();
                for path in under(&paths, &from) {
                    paths.remove(&path);
                    paths.insert(event.path.join(path.strip_prefix(&from).unwrap()));
                }
                paths.insert(event.path.clone());
            }
            _ => {}
        }
    }
    let now: BTreeSet<PathBuf> = walk(&root);
    assert_eq!(paths, now);
}

fn walk(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.insert(path);
    }
    out
}
