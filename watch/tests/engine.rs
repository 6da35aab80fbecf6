//! The engines against the real kernel: inotify, or the `notify` crate when
//! `FSD_WATCH_ENGINE=notify` (CI runs these tests both ways).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fsd_watch::{EngineKind, Event, EventKind, Filter, WatchError, Watcher};
use tokio::sync::mpsc::UnboundedReceiver;

/// The engine under test: `FSD_WATCH_ENGINE`, else the default.
fn engine() -> EngineKind {
    std::env::var("FSD_WATCH_ENGINE")
        .map(|name| name.parse().unwrap())
        .unwrap_or_default()
}

fn start(root: &Path) -> (Watcher, UnboundedReceiver<Event>) {
    Watcher::start_with(engine(), root, Filter::new(&[], &[]).unwrap(), true).unwrap()
}

/// Asserts how many directories the inotify engine watches (the notify engine does not
/// count them).
fn assert_watched(watcher: &Watcher, dirs: usize, why: &str) {
    if engine() != EngineKind::Notify {
        assert_eq!(watcher.watched_dirs(), Some(dirs), "{why}");
    }
}

/// Collects events until none arrive for `quiet` (and the second an engine that
/// reconciles when asked lets what it read wait, where no one asks).
async fn drain(events: &mut UnboundedReceiver<Event>, quiet: Duration) -> Vec<Event> {
    let quiet = match engine() {
        EngineKind::InotifyWhenAsked => quiet + Duration::from_millis(1200),
        _ => quiet,
    };
    let mut out = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout(quiet, events.recv()).await {
        out.push(event);
    }
    out
}

fn has(events: &[Event], kind: EventKind, path: &Path) -> bool {
    events.iter().any(|e| e.kind == kind && e.path == path)
}

/// The change list `events` make, as (path under `root`, change) lines.
fn listed(events: &[Event], root: &Path) -> Vec<(String, String)> {
    let listed = fsd_watch::changes::list(events, 1000).expect("an exact list");
    listed
        .iter()
        .map(|l| {
            let path = l.path.strip_prefix(root).unwrap().display().to_string();
            (path, format!("{:?}", l.change))
        })
        .collect()
}

/// Asserts each (path, change) is in the list `events` make.
fn assert_listed(events: &[Event], root: &Path, expected: &[(&str, &str)]) {
    let lines = listed(events, root);
    for (path, change) in expected {
        assert!(
            lines.contains(&(path.to_string(), change.to_string())),
            "{path} {change}: {lines:?} from {events:?}"
        );
    }
}

fn root() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    (dir, root)
}

#[tokio::test]
async fn create_modify_attrib_delete() {
    let (_dir, root) = root();
    let (watcher, mut events) = start(&root);
    let file = root.join("a.txt");
    // Each step caught up with: changes that undo each other within one reconciliation
    // (a file made and removed before the engine looks) are not reported, as their net
    // effect is nothing.
    std::fs::write(&file, "one").unwrap();
    watcher.caught_up().await;
    std::fs::write(&file, "two").unwrap();
    watcher.caught_up().await;
    std::process::Command::new("chmod")
        .arg("600")
        .arg(&file)
        .status()
        .unwrap();
    watcher.caught_up().await;
    std::fs::remove_file(&file).unwrap();
    let seen = drain(&mut events, Duration::from_millis(300)).await;
    for kind in [
        EventKind::Create,
        EventKind::Modify,
        EventKind::Attrib,
        EventKind::Delete,
    ] {
        assert!(has(&seen, kind, &file), "{kind:?} missing in {seen:?}");
    }
    assert!(seen.iter().all(|e| !e.is_dir));
}

#[tokio::test]
async fn a_burst_of_nested_directories_is_fully_reported() {
    let (_dir, root) = root();
    let (watcher, mut events) = start(&root);
    let deep: PathBuf = (0..10).fold(root.clone(), |p, i| p.join(format!("d{i}")));
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("f"), "x").unwrap();
    let seen = drain(&mut events, Duration::from_millis(400)).await;
    let mut dir = root.clone();
    for i in 0..10 {
        dir = dir.join(format!("d{i}"));
        assert!(
            has(&seen, EventKind::Create, &dir),
            "{} missing",
            dir.display()
        );
    }
    assert!(
        has(&seen, EventKind::Create, &deep.join("f")),
        "the file at the bottom is missing"
    );
    assert_watched(&watcher, 11, "every level is watched");
}

#[tokio::test]
async fn renames_are_paired_and_directories_repathed() {
    let (_dir, root) = root();
    std::fs::create_dir(root.join("old")).unwrap();
    std::fs::write(root.join("f1"), "x").unwrap();
    let (_watcher, mut events) = start(&root);
    std::fs::rename(root.join("f1"), root.join("f2")).unwrap();
    std::fs::rename(root.join("old"), root.join("new")).unwrap();
    std::fs::write(root.join("new/inside"), "y").unwrap();
    let seen = drain(&mut events, Duration::from_millis(300)).await;
    let renames: Vec<(PathBuf, PathBuf)> = seen
        .iter()
        .filter(|e| e.kind == EventKind::Rename)
        .map(|e| (e.from.clone().unwrap(), e.path.clone()))
        .collect();
    assert_eq!(
        renames,
        [
            (root.join("f1"), root.join("f2")),
            (root.join("old"), root.join("new"))
        ]
    );
    assert!(
        has(&seen, EventKind::Create, &root.join("new/inside")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn moves_out_and_in_are_deletes_and_creates() {
    let (_dir, root) = root();
    let (_outside_dir, outside) = self::root();
    std::fs::create_dir(root.join("leaving")).unwrap();
    std::fs::create_dir_all(outside.join("arriving/sub")).unwrap();
    std::fs::write(outside.join("arriving/sub/f"), "x").unwrap();
    let (watcher, mut events) = start(&root);
    std::fs::rename(root.join("leaving"), outside.join("left")).unwrap();
    std::fs::rename(outside.join("arriving"), root.join("arrived")).unwrap();
    let seen = drain(&mut events, Duration::from_millis(400)).await;
    assert!(
        has(&seen, EventKind::Delete, &root.join("leaving")),
        "{seen:?}"
    );
    assert!(
        has(&seen, EventKind::Create, &root.join("arrived")),
        "what moves in from outside is new here: {seen:?}"
    );
    assert!(
        has(&seen, EventKind::Create, &root.join("arrived/sub/f")),
        "contents of a moved-in dir: {seen:?}"
    );
    // Changes in the moved-out directory are no longer reported.
    std::fs::write(outside.join("left/late"), "x").unwrap();
    let late = drain(&mut events, Duration::from_millis(300)).await;
    assert!(late.is_empty(), "{late:?}");
    assert_watched(&watcher, 3, "the moved-out directory is no longer watched");
}

#[tokio::test]
async fn filters_apply_and_excluded_directories_are_not_watched() {
    let (_dir, root) = root();
    std::fs::create_dir_all(root.join("node_modules/pkg")).unwrap();
    let (watcher, mut events) = start(&root);
    assert_watched(&watcher, 1, "node_modules must not be watched");
    std::fs::write(root.join("node_modules/pkg/index.js"), "x").unwrap();
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::write(root.join("kept.txt"), "x").unwrap();
    let seen = drain(&mut events, Duration::from_millis(300)).await;
    // Its write may be reconciled with its creation or after it.
    let paths: HashSet<&Path> = seen.iter().map(|e| e.path.as_path()).collect();
    assert_eq!(
        paths,
        HashSet::from([root.join("kept.txt").as_path()]),
        "{seen:?}"
    );
    assert!(
        has(&seen, EventKind::Create, &root.join("kept.txt")),
        "{seen:?}"
    );

    let only_rs = Filter::new(&["*.rs".to_string()], &[]).unwrap();
    let (_watcher, mut events) = Watcher::start_with(engine(), &root, only_rs, true).unwrap();
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "x").unwrap();
    std::fs::write(root.join("src/notes.md"), "x").unwrap();
    let seen = drain(&mut events, Duration::from_millis(300)).await;
    assert!(
        seen.iter()
            .all(|e| e.path.extension().is_some_and(|x| x == "rs")),
        "{seen:?}"
    );
    assert!(has(&seen, EventKind::Create, &root.join("src/lib.rs")));
}

#[tokio::test]
async fn ten_thousand_files_are_all_reported() {
    let (_dir, root) = root();
    let (watcher, mut events) = start(&root);
    for i in 0..10_000 {
        std::fs::write(root.join(format!("f{i:05}")), "").unwrap();
    }
    // Caught up first: a quiet gap alone can end the drain early on a loaded machine.
    watcher.caught_up().await;
    let seen = drain(&mut events, Duration::from_millis(500)).await;
    let created: HashSet<&Path> = seen
        .iter()
        .filter(|e| e.kind == EventKind::Create)
        .map(|e| e.path.as_path())
        .collect();
    // A queue that overflows is a recrawl: still every file, and no overflow told.
    assert!(
        seen.iter().all(|e| e.kind != EventKind::Overflow),
        "{seen:?}"
    );
    assert_eq!(created.len(), 10_000);
}

#[test]
fn missing_and_non_directory_roots_are_errors() {
    let (_dir, root) = root();
    let filter = || Filter::new(&[], &[]).unwrap();
    assert!(matches!(
        Watcher::start(&root.join("nope"), filter(), true),
        Err(WatchError::NotFound(_))
    ));
    std::fs::write(root.join("file"), "").unwrap();
    assert!(matches!(
        Watcher::start(&root.join("file"), filter(), true),
        Err(WatchError::NotDirectory(_))
    ));
}

/// What is on the channel now, without waiting.
fn on_channel(events: &mut UnboundedReceiver<Event>) -> Vec<Event> {
    std::iter::from_fn(|| events.try_recv().ok()).collect()
}

#[tokio::test]
async fn caught_up_means_every_earlier_change_is_on_the_channel() {
    let (_dir, root) = root();
    let (watcher, mut events) = start(&root);
    for i in 0..20 {
        std::fs::write(root.join(format!("f0-{i}")), "x").unwrap();
    }
    watcher.caught_up().await;
    on_channel(&mut events);
    for round in 1..50 {
        std::fs::create_dir(root.join(format!("d{round}"))).unwrap();
        for i in 0..20 {
            std::fs::write(root.join(format!("f{round}-{i}")), "x").unwrap();
        }
        let last = root.join(format!("f{}-0", round - 1));
        std::fs::remove_file(&last).unwrap();
        watcher.caught_up().await;
        let seen = on_channel(&mut events);
        assert!(
            has(&seen, EventKind::Delete, &last),
            "round {round}: the last change is on the channel: {seen:?}"
        );
    }

    // The root replaced: caught up, the watch has reported that it lost its root.
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::create_dir(&root).unwrap();
    watcher.caught_up().await;
    let seen = on_channel(&mut events);
    assert!(
        seen.last().is_some_and(|e| e.kind == EventKind::Overflow),
        "{seen:?}"
    );
    // An ended watch answers at once.
    tokio::time::timeout(Duration::from_secs(1), watcher.caught_up())
        .await
        .expect("an ended watch is caught up");
}

/// Once a known limit: a directory excluded by the globs, filled, then renamed into view,
/// came as one `create` without what it holds. The reconciler lists it where it arrives.
#[tokio::test]
async fn a_directory_renamed_out_of_an_exclude_brings_its_contents() {
    let (_dir, root) = root();
    let filter = Filter::new(&[], &["build".to_string()]).unwrap();
    let (watcher, mut events) = Watcher::start_with(engine(), &root, filter, true).unwrap();
    std::fs::create_dir_all(root.join("build/out/deep")).unwrap();
    std::fs::write(root.join("build/out/deep/app.js"), "x").unwrap();
    watcher.caught_up().await;
    std::fs::rename(root.join("build/out"), root.join("dist")).unwrap();
    let seen = drain(&mut events, Duration::from_millis(400)).await;
    // Nothing under an excluded directory is recorded, so what comes out is new here.
    for path in ["dist", "dist/deep", "dist/deep/app.js"] {
        assert!(
            has(&seen, EventKind::Create, &root.join(path)),
            "{path}: {seen:?}"
        );
    }
    assert!(
        seen.iter().all(|e| !e.path.starts_with(root.join("build"))),
        "nothing of the excluded directory: {seen:?}"
    );
}

/// Once a known limit: `mv d p` and at once a directory moved into the same `p` from an
/// unwatched place (inotify merges the two MOVED_TO events) lost the second move. The
/// reconciler finds `p` holding the newcomer and `d` gone.
#[tokio::test]
async fn a_rename_then_a_move_in_to_the_same_name_are_both_told() {
    let (_dir, root) = root();
    let (_outside_dir, outside) = self::root();
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::write(root.join("d/old"), "old").unwrap();
    std::fs::create_dir_all(outside.join("n")).unwrap();
    std::fs::write(outside.join("n/new"), "new").unwrap();
    let (_watcher, mut events) = start(&root);
    std::fs::rename(root.join("d"), root.join("p")).unwrap();
    std::fs::rename(root.join("p"), outside.join("gone")).unwrap();
    std::fs::rename(outside.join("n"), root.join("p")).unwrap();
    let seen = drain(&mut events, Duration::from_millis(400)).await;
    // Replayed on the tree there was, the events give the tree there is.
    let lines = listed(&seen, &root);
    assert!(
        lines.contains(&("d".into(), "Deleted".into())),
        "{lines:?} from {seen:?}"
    );
    assert!(
        lines.contains(&("p".into(), "Created".into())),
        "{lines:?} from {seen:?}"
    );
    assert!(
        lines.contains(&("p/new".into(), "Created".into())),
        "{lines:?} from {seen:?}"
    );
}

/// A dependency directory the default filter hides, written to while hidden, then renamed
/// into view: everything in it comes out, though the `notify` crate told of its writes.
#[tokio::test]
async fn a_hidden_directory_written_then_renamed_into_view_brings_everything() {
    let (_dir, root) = root();
    let (watcher, mut events) = start(&root);
    std::fs::create_dir_all(root.join("node_modules/pkg/lib")).unwrap();
    std::fs::write(root.join("node_modules/pkg/lib/index.js"), "1").unwrap();
    watcher.caught_up().await;
    std::fs::write(root.join("node_modules/pkg/lib/index.js"), "22").unwrap();
    std::fs::write(root.join("node_modules/pkg/package.json"), "{}").unwrap();
    watcher.caught_up().await;
    std::fs::rename(root.join("node_modules"), root.join("vendor")).unwrap();
    watcher.caught_up().await;
    let seen = drain(&mut events, Duration::from_millis(200)).await;
    assert_listed(
        &seen,
        &root,
        &[
            ("vendor", "Created"),
            ("vendor/pkg", "Created"),
            ("vendor/pkg/lib", "Created"),
            ("vendor/pkg/lib/index.js", "Created"),
            ("vendor/pkg/package.json", "Created"),
        ],
    );
    assert!(
        seen.iter()
            .all(|e| !e.path.starts_with(root.join("node_modules"))),
        "nothing of the hidden directory: {seen:?}"
    );
}

/// A watched directory moved under a hidden name, changed there, and moved out again: it
/// is deleted, then made again with what it holds now, nothing of its stay told.
#[tokio::test]
async fn a_directory_hidden_changed_and_shown_again_is_told_as_it_is() {
    let (_dir, root) = root();
    std::fs::create_dir_all(root.join("src/a")).unwrap();
    std::fs::write(root.join("src/a/f"), "f").unwrap();
    let (watcher, mut events) = start(&root);
    std::fs::rename(root.join("src"), root.join("node_modules")).unwrap();
    watcher.caught_up().await;
    std::fs::write(root.join("node_modules/a/g"), "g").unwrap();
    std::fs::remove_file(root.join("node_modules/a/f")).unwrap();
    watcher.caught_up().await;
    std::fs::rename(root.join("node_modules"), root.join("lib")).unwrap();
    watcher.caught_up().await;
    let seen = drain(&mut events, Duration::from_millis(200)).await;
    assert_listed(
        &seen,
        &root,
        &[
            ("src", "Deleted"),
            ("lib", "Created"),
            ("lib/a", "Created"),
            ("lib/a/g", "Created"),
        ],
    );
    let lines = listed(&seen, &root);
    assert!(
        !lines.iter().any(|(path, _)| path == "lib/a/f"),
        "{lines:?}"
    );
}

/// With an include, a directory the filter does not report holds files it does: moved,
/// they are told at their new names and gone from their old ones.
#[tokio::test]
async fn an_unreported_directory_moved_carries_its_reported_files() {
    let (_dir, root) = root();
    std::fs::create_dir_all(root.join("src/deep")).unwrap();
    std::fs::write(root.join("src/deep/lib.rs"), "fn main() {}").unwrap();
    std::fs::write(root.join("src/notes.txt"), "n").unwrap();
    let filter = Filter::new(&["*.rs".to_string()], &[]).unwrap();
    let (watcher, mut events) = Watcher::start_with(engine(), &root, filter, true).unwrap();
    std::fs::rename(root.join("src"), root.join("crate")).unwrap();
    watcher.caught_up().await;
    let seen = drain(&mut events, Duration::from_millis(200)).await;
    assert_listed(
        &seen,
        &root,
        &[
            ("src/deep/lib.rs", "Deleted"),
            ("crate/deep/lib.rs", "Created"),
        ],
    );
    assert!(
        seen.iter().all(|e| !e.path.ends_with("notes.txt")),
        "{seen:?}"
    );
}

/// A directory moved out of another into a third, which is then renamed over the first
/// (emptied by the move), is told: the mirror that replays the list has it at its new
/// place, not lost with the directory replaced. Found by three loaded mirrors in CI
/// (`mv c/c e.rs/d.txt; mv e.rs c`).
#[tokio::test]
async fn a_directory_moved_out_of_one_replaced_by_its_new_parent_is_told() {
    let (_dir, root) = root();
    std::fs::create_dir_all(root.join("c/c")).unwrap();
    std::fs::write(root.join("c/c/a"), "a").unwrap();
    std::fs::write(root.join("c/c/b"), "b").unwrap();
    std::fs::create_dir_all(root.join("e/g")).unwrap();
    let (_watcher, mut events) = start(&root);
    std::fs::rename(root.join("c/c"), root.join("e/d")).unwrap();
    std::fs::rename(root.join("e"), root.join("c")).unwrap();
    let seen = drain(&mut events, Duration::from_millis(400)).await;
    let lines = listed(&seen, &root);
    // Replayed in order on the tree there was, the events give the tree there is.
    let mut mirror: HashSet<String> = ["c", "c/c", "c/c/a", "c/c/b", "e", "e/g"]
        .map(String::from)
        .into();
    for event in &seen {
        let path = event
            .path
            .strip_prefix(&root)
            .unwrap()
            .display()
            .to_string();
        let under = |p: &String, top: &str| p == top || p.starts_with(&format!("{top}/"));
        match (event.kind, &event.from) {
            (EventKind::Delete, _) => mirror.retain(|p| !under(p, &path)),
            (EventKind::Create, _) => {
                mirror.insert(path);
            }
            (EventKind::Rename, Some(from)) => {
                let from = from.strip_prefix(&root).unwrap().display().to_string();
                mirror.retain(|p| !under(p, &path));
                let moved: Vec<String> =
                    mirror.iter().filter(|p| under(p, &from)).cloned().collect();
                for p in moved {
                    mirror.remove(&p);
                    mirror.insert(format!("{path}{}", &p[from.len()..]));
                }
            }
            _ => {}
        }
    }
    let mut mirror: Vec<String> = mirror.into_iter().collect();
    mirror.sort();
    assert_eq!(
        mirror,
        ["c", "c/d", "c/d/a", "c/d/b", "c/g"],
        "{lines:?} from {seen:?}"
    );
}
