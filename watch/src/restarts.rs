//! Restarts by hand: a watch stopped after its first crawl, the tree changed while
//! nothing watches, and a watch started again from the old one's record tells what
//! changed meanwhile (the simulation makes such restarts at random; these name the cases).

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;

use crate::inotify::Session;
use crate::report::Reporter;
use crate::{Event, EventKind, Filter};

fn kind(kind: EventKind) -> String {
    format!("{kind:?}")
}

/// A time well before now: a file written with it is not recorded as racy.
fn long_ago() -> SystemTime {
    SystemTime::now() - Duration::from_secs(3600)
}

fn write(path: &Path, content: &[u8], mtime: Option<SystemTime>) {
    std::fs::write(path, content).unwrap();
    if let Some(mtime) = mtime {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(mtime).unwrap();
    }
}

/// What a watch of a tree `before` made, stopped after its first crawl and started
/// again from its record once `down` has changed the tree, tells at its start: each
/// event's kind, path and origin, relative.
fn told_across_a_restart(
    before: impl FnOnce(&Path),
    down: impl FnOnce(&Path),
) -> BTreeSet<(String, String, Option<String>)> {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    before(&root);
    let (sender, mut receiver) = mpsc::unbounded_channel::<Event>();
    let reporter = || Reporter::new(root.clone(), Filter::new(&[], &[]).unwrap(), sender.clone());
    let session = Session::start(&root, true, reporter(), None).unwrap();
    let recorded = session.reconciler.recorded();
    drop(session);
    assert!(receiver.try_recv().is_err(), "a first crawl tells nothing");
    down(&root);
    let _session = Session::start(&root, true, reporter(), Some(&recorded)).unwrap();
    let relative = |path: &Path| path.strip_prefix(&root).unwrap().display().to_string();
    let mut told = BTreeSet::new();
    while let Ok(event) = receiver.try_recv() {
        told.insert((
            format!("{:?}", event.kind),
            relative(&event.path),
            event.from.as_deref().map(relative),
        ));
    }
    told
}

/// The changes made while no watch ran are told as one batch of the reconciler's:
/// a directory moved is one rename (a file written in it a modify at its new path),
/// a file gone a delete, a mode set an attribute change, a new file a create. (The
/// restart's differ before this one told a file changed in a renamed directory as
/// made and then deleted.)
#[test]
fn a_restart_tells_what_changed_meanwhile_with_moves_as_moves() {
    let told = told_across_a_restart(
        |root| {
            std::fs::create_dir(root.join("a")).unwrap();
            write(&root.join("a/f"), b"one", Some(long_ago()));
            write(&root.join("g"), b"gone", Some(long_ago()));
            write(&root.join("h"), b"kept", Some(long_ago()));
        },
        |root| {
            write(&root.join("n"), b"new", None);
            std::fs::rename(root.join("a"), root.join("b")).unwrap();
            write(&root.join("b/f"), b"one and two", None);
            std::fs::remove_file(root.join("g")).unwrap();
            std::fs::set_permissions(root.join("h"), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        },
    );
    let expected: BTreeSet<_> = [
        (
            kind(EventKind::Rename),
            "b".to_string(),
            Some("a".to_string()),
        ),
        (kind(EventKind::Modify), "b/f".to_string(), None),
        (kind(EventKind::Delete), "g".to_string(), None),
        (kind(EventKind::Attrib), "h".to_string(), None),
        // A file made with content is told made and written, as the kernel tells it.
        (kind(EventKind::Create), "n".to_string(), None),
        (kind(EventKind::Modify), "n".to_string(), None),
    ]
    .into_iter()
    .collect();
    assert_eq!(told, expected);
}

/// A tree that did not change is told nothing.
#[test]
fn a_restart_over_an_unchanged_tree_tells_nothing() {
    let told = told_across_a_restart(
        |root| {
            std::fs::create_dir_all(root.join("a/b")).unwrap();
            write(&root.join("a/b/f"), b"one", Some(long_ago()));
            std::os::unix::fs::symlink("a/b/f", root.join("l")).unwrap();
            let then = nix::sys::time::TimeSpec::from_duration(
                long_ago().duration_since(SystemTime::UNIX_EPOCH).unwrap(),
            );
            nix::sys::stat::utimensat(
                nix::fcntl::AT_FDCWD,
                &root.join("l"),
                &then,
                &then,
                nix::sys::stat::UtimensatFlags::NoFollowSymlink,
            )
            .unwrap();
        },
        |_| {},
    );
    assert!(told.is_empty(), "{told:?}");
}

/// A file recorded in the clock tick of its last write may be written again in that
/// tick with its size and mtime kept: the record carries that, and the restart takes
/// it as modified rather than trusting them.
#[test]
fn a_file_recorded_in_its_writes_tick_is_taken_as_modified() {
    let mtime = std::sync::OnceLock::new();
    let told = told_across_a_restart(
        |root| {
            write(&root.join("f"), b"one", None);
            let _ = mtime.set(
                std::fs::metadata(root.join("f"))
                    .unwrap()
                    .modified()
                    .unwrap(),
            );
        },
        |root| write(&root.join("f"), b"two", mtime.get().copied()),
    );
    let expected: BTreeSet<_> = [(kind(EventKind::Modify), "f".to_string(), None)]
        .into_iter()
        .collect();
    assert_eq!(told, expected);
}
