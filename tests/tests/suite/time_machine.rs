//! The time machine: incremental snapshots of any directory (the tree compared with the
//! parent snapshot's index, only what differs archived), through the embedded S3 store and
//! real restores, checked byte for byte at every point of a chain.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use fsctl::trusted::{BackupOptions, Backups, Difference, DirectoryBackup, EntryKind};
use fsd_sdk::ErrorCode;
use fsd_tests::s3::Store;
use fsd_tests::{Daemon, Options, require_mount_privilege};

use super::backup::{digest, fixture, forget_local};

/// The changes between snapshots: every kind a chain must carry.
fn change(step: usize, live: &Path) {
    let write = |relative: &str, bytes: &[u8]| {
        let path = live.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    };
    match step {
        1 => {
            write("README.md", b"# edited\n");
            write("new/file.txt", b"new\n");
            std::fs::set_permissions(live.join("README.md"), PermissionsExt::from_mode(0o600))
                .unwrap();
        }
        2 => {
            std::fs::remove_file(live.join("empty-file")).unwrap();
            write("a/b/c/deeper.txt", b"deeper\n");
            write(".config/settings", b"dotfiles too\n");
        }
        3 => std::fs::rename(live.join("src/main.rs"), live.join("src/lib.rs")).unwrap(),
        4 => std::fs::rename(live.join("deep"), live.join("shallow")).unwrap(),
        // A file replaced by a directory, then the directory by a file.
        5 => {
            std::fs::remove_file(live.join("new/file.txt")).unwrap();
            write("new/file.txt/inside", b"a directory now\n");
        }
        6 => {
            std::fs::remove_dir_all(live.join("new/file.txt")).unwrap();
            write("new/file.txt", b"a file again\n");
        }
        // A directory deleted and made again: one name comes back with the same bytes.
        7 => {
            std::fs::remove_dir_all(live.join("a")).unwrap();
            write("a/b/c/deeper.txt", b"deeper\n");
            write("a/other.txt", b"other\n");
        }
        8 => {
            std::fs::remove_file(live.join("link-to-main")).unwrap();
            std::os::unix::fs::symlink("src/lib.rs", live.join("link-to-main")).unwrap();
            std::os::unix::fs::symlink("nowhere", live.join("dangling")).unwrap();
            std::fs::create_dir_all(live.join("empty-dir-2")).unwrap();
        }
        // The big file rewritten in place, the same size.
        9 => {
            let mut big = std::fs::read(live.join("data/big.bin")).unwrap();
            big[1_500_000] ^= 0xff;
            std::fs::write(live.join("data/big.bin"), big).unwrap();
        }
        // Nothing changed: an empty layer.
        _ => {}
    }
}

/// Snapshots 0 (full) to 10 of `live` after each change, each restored from the store alone
/// into a directory of its own and compared with the tree as it was. Returns the snapshots
/// and the trees recorded.
async fn chain_restored_at_every_point(
    daemon: &Daemon,
    backups: &Backups,
    live: &Path,
) -> Vec<(DirectoryBackup, BTreeMap<String, String>, usize)> {
    let sandbox = daemon.sandbox();
    let dir = live.to_str().unwrap();
    let mut snapshots: Vec<(DirectoryBackup, BTreeMap<String, String>, usize)> = Vec::new();
    for step in 0..=10 {
        change(step, live);
        let snapshot = backups
            .create_backup(&sandbox, dir, BackupOptions::default())
            .await
            .unwrap_or_else(|err| panic!("snapshot {step}: {err}"));
        match snapshots.last() {
            None => assert_eq!(snapshot.parent, None, "the first snapshot is full"),
            Some((previous, _, _)) => {
                assert_eq!(snapshot.parent.as_ref(), Some(&previous.id), "step {step}");
                assert_eq!(snapshot.depth, Some(step as u8), "step {step}");
            }
        }
        snapshots.push((snapshot, digest(live), step));
    }
    for (snapshot, _, _) in &snapshots {
        forget_local(&snapshot.id);
    }
    for (snapshot, expected, step) in &snapshots {
        let target = daemon.path(&format!("at-{step}"));
        let chain = backups
            .restore_backup(&sandbox, &snapshot.id, target.to_str().unwrap(), None)
            .await
            .unwrap_or_else(|err| panic!("restore {step}: {err}"))
            .chain;
        assert_eq!(chain.len(), step + 1, "the chain of snapshot {step}");
        assert_eq!(&digest(&target), expected, "the tree at snapshot {step}");
    }
    snapshots
}

/// The same chain when the change tokens cannot say what changed (every change list is
/// over the daemon's limit of one line): each layer comes from comparing the tree with the
/// parent's index, and every point restores the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chain_is_the_same_when_the_change_token_says_resync() {
    if !require_mount_privilege("the_chain_is_the_same_when_the_change_token_says_resync") {
        return;
    }
    let daemon = Daemon::start_with(Options {
        extra_args: vec!["--change-list-limit".into(), "1".into()],
        ..Options::default()
    });
    let store = Store::start();
    let backups = Backups::new(store.object_store(None));
    let live = daemon.path("live");
    fixture(&live);
    let snapshots = chain_restored_at_every_point(&daemon, &backups, &live).await;
    // Steps that changed more than one path were compared by index.
    for step in [1, 2, 4, 5, 6, 7, 8] {
        assert_eq!(
            snapshots[step].0.compared_by.as_deref(),
            Some("index"),
            "step {step}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_incremental_snapshots_restore_byte_identical_at_every_point() {
    if !require_mount_privilege("ten_incremental_snapshots_restore_byte_identical_at_every_point") {
        return;
    }
    let daemon = Daemon::start();
    let store = Store::start();
    let sandbox = daemon.sandbox();
    let backups = Backups::new(store.object_store(None));
    let live = daemon.path("live");
    fixture(&live);
    // Incompressible, so the archive is large and a path restore reads little of it.
    std::fs::write(live.join("data/noise.bin"), fsd_tests::noise(8 << 20, 7)).unwrap();
    let dir = live.to_str().unwrap();

    let snapshots = chain_restored_at_every_point(&daemon, &backups, &live).await;
    for (snapshot, _, step) in &snapshots[1..] {
        assert_eq!(
            snapshot.compared_by.as_deref(),
            Some("changeToken"),
            "snapshot {step}: what changed came from the parent's change token"
        );
    }
    let full_size = snapshots[0].0.size_bytes;
    let edited = &snapshots[1].0;
    assert!(
        edited.size_bytes * 4 < full_size,
        "a snapshot holds what changed: {} of {full_size} bytes",
        edited.size_bytes
    );
    let changes = edited.changes.expect("counted");
    assert_eq!(
        (changes.created, changes.modified),
        (2, 1),
        "new/ and new/file.txt created, README.md modified: {changes:?}"
    );
    assert_eq!(
        snapshots[10].0.changes.map(|c| c.modified + c.created),
        Some(0)
    );

    // History, from the store: the timeline, each snapshot's tree, differences.
    let log = backups.log(Some(dir)).await.unwrap();
    assert_eq!(
        log.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        snapshots
            .iter()
            .rev()
            .map(|(s, _, _)| s.id.as_str())
            .collect::<Vec<_>>(),
        "newest first"
    );
    for (snapshot, expected, step) in &snapshots {
        let listed = backups.list_snapshot(&snapshot.id, None).await.unwrap();
        let tree: BTreeMap<String, String> = listed
            .iter()
            .map(|entry| {
                let kind = match entry.kind {
                    EntryKind::Dir => format!("dir {:o}", entry.mode),
                    EntryKind::File => format!("file {:o}", entry.mode),
                    _ => "link".to_string(),
                };
                (entry.path.display().to_string(), kind)
            })
            .collect();
        let recorded: BTreeMap<String, String> = expected
            .iter()
            .map(|(path, value)| {
                // `file MODE HASH`, `dir MODE`, `link TARGET`: the kind and mode.
                let words: Vec<&str> = value.split(' ').collect();
                let kind = match words[0] {
                    "link" => "link".to_string(),
                    _ => format!("{} {}", words[0], words[1]),
                };
                (path.clone(), kind)
            })
            .collect();
        assert_eq!(tree, recorded, "the listing of snapshot {step}");
    }
    let under = backups
        .list_snapshot(&snapshots[2].0.id, Some("a/b"))
        .await
        .unwrap();
    assert_eq!(
        under
            .iter()
            .map(|e| e.path.display().to_string())
            .collect::<Vec<_>>(),
        ["a/b", "a/b/c", "a/b/c/deeper.txt"]
    );
    let renamed = backups
        .diff(&snapshots[2].0.id, Some(&snapshots[3].0.id), &sandbox)
        .await
        .unwrap();
    assert_eq!(
        renamed,
        [Difference::Renamed {
            from: "src/main.rs".into(),
            to: "src/lib.rs".into()
        }]
    );
    let edited = backups
        .diff(&snapshots[8].0.id, Some(&snapshots[9].0.id), &sandbox)
        .await
        .unwrap();
    assert_eq!(edited, [Difference::Modified("data/big.bin".into())]);
    std::fs::write(live.join("since.txt"), b"after the last snapshot").unwrap();
    let live_changes = backups
        .diff(&snapshots[10].0.id, None, &sandbox)
        .await
        .unwrap();
    assert_eq!(live_changes, [Difference::Created("since.txt".into())]);

    // One file, read from the archive that holds it, without the daemon.
    let readme = |step: usize| backups.read_file(&snapshots[step].0.id, "README.md");
    assert_eq!(
        readme(0).await.unwrap(),
        b"# project
"
    );
    assert_eq!(
        readme(10).await.unwrap(),
        b"# edited
",
        "held by snapshot 1"
    );
    let big = std::fs::read(live.join("data/big.bin")).unwrap();
    assert_eq!(
        backups
            .read_file(&snapshots[10].0.id, "data/big.bin")
            .await
            .unwrap(),
        big
    );
    let missing = backups
        .read_file(&snapshots[0].0.id, "src/lib.rs")
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Some(&ErrorCode::FileNotFound), "{missing}");

    // Paths brought back into the live directory: a file (its old bytes and mode) and a
    // directory renamed away since, with everything it held; the rest is left alone.
    let restored = backups
        .restore_paths(
            &sandbox,
            &snapshots[0].0.id,
            dir,
            &["README.md".into(), "deep".into(), "link-to-main".into()],
        )
        .await
        .unwrap();
    assert_eq!(
        (restored.files, restored.directories, restored.symlinks),
        (2, 4, 1),
        "{restored:?}"
    );
    assert_eq!(
        std::fs::read_link(live.join("link-to-main")).unwrap(),
        Path::new("src/main.rs"),
        "the symlink itself brought back, not written through"
    );
    assert_eq!(
        std::fs::read(live.join("README.md")).unwrap(),
        b"# project
"
    );
    let mode = std::fs::metadata(live.join("README.md"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o644);
    assert_eq!(
        std::fs::read(live.join("deep/a/b/c/d.txt")).unwrap(),
        b"deep
"
    );
    assert!(live.join("shallow/a/b/c/d.txt").exists() && live.join("since.txt").exists());
    assert!(
        restored.fetched_bytes * 8 < snapshots[0].0.size_bytes,
        "only parts of the archive were read: {restored:?} of {} bytes",
        snapshots[0].0.size_bytes
    );
    let err = backups
        .restore_paths(&sandbox, &snapshots[0].0.id, dir, &["no/such".into()])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::FileNotFound), "{err}");
    let err = backups
        .restore_paths(&sandbox, &snapshots[0].0.id, dir, &["../escape".into()])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::InvalidBackupConfig), "{err}");

    // `--full` takes a full snapshot whatever the store holds.
    let full = backups
        .create_backup(
            &sandbox,
            dir,
            BackupOptions {
                full: true,
                ..BackupOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!((full.parent, full.depth), (None, None));
}
