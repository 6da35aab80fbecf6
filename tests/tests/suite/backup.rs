//! Backups against the real daemon and a real S3-compatible store on loopback (s3s-fs, which
//! checks presigned signatures): round trips, copy-on-write, re-restore, other targets,
//! excludes, gitignore, layer chains, TTL and the reference's validation.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use fsctl::trusted::{BackupOptions, Backups};
use fsd_control::retention::SnapshotPolicy;
use fsd_sdk::ErrorCode;
use fsd_tests::s3::Store;
use fsd_tests::{Daemon, assert_error, require_mount_privilege, sha256_hex};
use serde_json::json;

/// Every entry under `dir`: kind, mode and content hash (or link target).
pub(crate) fn digest(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).expect("read_dir") {
            let path = entry.expect("entry").path();
            let relative = path
                .strip_prefix(dir)
                .expect("relative")
                .to_string_lossy()
                .into_owned();
            let meta = std::fs::symlink_metadata(&path).expect("metadata");
            let mode = meta.mode() & 0o7777;
            let value = if meta.file_type().is_symlink() {
                format!(
                    "link {}",
                    std::fs::read_link(&path).expect("link").display()
                )
            } else if meta.is_dir() {
                stack.push(path.clone());
                format!("dir {mode:o}")
            } else {
                format!(
                    "file {mode:o} {}",
                    sha256_hex(&std::fs::read(&path).expect("read"))
                )
            };
            out.insert(relative, value);
        }
    }
    out
}

/// A small workspace with the awkward cases: unicode and spaces, empty dir and file, a
/// symlink, modes, a file over one block, nesting.
pub(crate) fn fixture(dir: &Path) {
    let write = |relative: &str, bytes: &[u8]| {
        let path = dir.join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, bytes).expect("write");
    };
    write("README.md", b"# project\n");
    write("src/main.rs", b"fn main() {}\n");
    write(
        "dir with spaces/naïve façade ✓.txt",
        "unicode ✓\n".as_bytes(),
    );
    write("empty-file", b"");
    write("deep/a/b/c/d.txt", b"deep\n");
    let big: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    write("data/big.bin", &big);
    // Duplicate data: the writer stores it once and writes over what it wrote twice.
    write("data/big-copy.bin", &big);
    std::fs::create_dir_all(dir.join("empty-dir")).expect("mkdir");
    std::os::unix::fs::symlink("src/main.rs", dir.join("link-to-main")).expect("symlink");
    std::fs::set_permissions(
        dir.join("src/main.rs"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
}

fn backups(store: &Store) -> Backups {
    Backups::new(store.object_store(None))
}

fn archive_of(id: &str) -> String {
    format!("/var/backups/{id}.sqsh")
}

/// Removes the local copy, so a restore has to download it.
pub(crate) fn forget_local(id: &str) {
    for suffix in ["", ".sha256"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", archive_of(id)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_through_the_store_into_another_dir() {
    if !require_mount_privilege("round_trip_through_the_store_into_another_dir") {
        return;
    }
    let daemon = Daemon::start();
    let store = Store::start();
    let source = daemon.path("project");
    fixture(&source);
    let sandbox = daemon.sandbox();
    let backups = backups(&store);
    let backup = backups
        .create_backup(
            &sandbox,
            source.to_str().unwrap(),
            BackupOptions {
                name: Some("first".into()),
                ..Default::default()
            },
        )
        .await
        .expect("create");
    let keys = store.keys("backups/");
    assert_eq!(
        keys,
        vec![
            format!("backups/{}/data.sqsh", backup.id),
            format!("backups/{}/index.zst", backup.id),
            format!("backups/{}/meta.json", backup.id)
        ]
    );
    let meta = backups.meta(&backup.id).await.expect("meta");
    assert_eq!(meta.size_bytes, backup.size_bytes);
    assert_eq!(meta.ttl, 259_200);
    assert_eq!(meta.name.as_deref(), Some("first"));
    assert_eq!(meta.dir, source.to_str().unwrap());

    forget_local(&backup.id);
    let target = daemon.path("elsewhere/restored");
    backups
        .restore_backup(&sandbox, &backup.id, target.to_str().unwrap(), None)
        .await
        .expect("restore");
    assert_eq!(digest(&target), digest(&source));
    assert!(
        Path::new(&archive_of(&backup.id)).is_file(),
        "archive downloaded and kept"
    );

    let listed = backups.list_backups().await.expect("list");
    assert_eq!(listed.len(), 1);
    backups.delete_backup(&backup.id).await.expect("delete");
    assert!(store.keys("backups/").is_empty());
    let err = backups
        .restore_backup(&sandbox, &backup.id, target.to_str().unwrap(), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::BackupNotFound));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restores_are_copy_on_write_and_restoring_again_discards_writes() {
    if !require_mount_privilege("restores_are_copy_on_write_and_restoring_again_discards_writes") {
        return;
    }
    let daemon = Daemon::start();
    let source = daemon.path("project");
    fixture(&source);
    let before = digest(&source);
    let archive = format!("/var/backups/cow-{}.sqsh", std::process::id());
    let (status, body) = daemon
        .post(
            "/api/backup/create",
            json!({"dir": source, "archivePath": archive}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["success"], true);
    assert_eq!(body["archivePath"], archive);
    let size = std::fs::metadata(&archive).expect("archive").len();
    assert_eq!(body["sizeBytes"], size);

    let (status, body) = daemon
        .post(
            "/api/backup/restore",
            json!({"dir": source, "archivePath": archive}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["dir"], source.to_str().unwrap());
    assert_eq!(digest(&source), before);

    // Writes, deletes and a rename of a directory that comes from the backup.
    std::fs::write(source.join("README.md"), b"changed\n").expect("modify");
    std::fs::write(source.join("new.txt"), b"new\n").expect("create");
    std::fs::remove_file(source.join("empty-file")).expect("delete");
    std::fs::rename(source.join("dir with spaces"), source.join("renamed dir"))
        .expect("rename a restored directory");
    assert!(source.join("renamed dir/naïve façade ✓.txt").is_file());
    assert_eq!(
        std::fs::metadata(&archive).expect("archive").len(),
        size,
        "the archive is never written"
    );

    // A session that existed before the restore sees it too.
    let (status, out) = daemon
        .post(
            "/api/execute",
            json!({"command": format!("cat '{}'", source.join("new.txt").display())}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(out["stdout"], "new\n");

    let (status, _) = daemon
        .post(
            "/api/backup/restore",
            json!({"dir": source, "archivePath": archive}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        digest(&source),
        before,
        "restoring again discards every write"
    );

    let (_, mounts) = daemon.get("/api/backup/mounts").await;
    assert_eq!(
        mounts["mounts"].as_array().map(Vec::len),
        Some(1),
        "{mounts}"
    );
    assert_eq!(mounts["mounts"][0]["archivePaths"], json!([archive]));
    let (status, _) = daemon
        .post("/api/backup/unmount", json!({"dir": source}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        digest(&source),
        before,
        "releasing shows what the directory held before"
    );
    let (status, body) = daemon
        .post("/api/backup/unmount", json!({"dir": source}))
        .await;
    assert_error(status, &body, 404, "BACKUP_NOT_FOUND");
    fsd_tests::remove_archive(&archive);
}

/// A restore's writes survive a stop and start of the daemon: the stop takes the restore
/// down (nothing of it stays mounted while the daemon is down) and keeps its upper layer; the
/// start mounts it again with everything written to it. Only a release discards them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restores_writes_survive_a_stop_and_start_of_the_daemon() {
    if !require_mount_privilege("a_restores_writes_survive_a_stop_and_start_of_the_daemon") {
        return;
    }
    let mut daemon = Daemon::start();
    let source = daemon.path("project");
    fixture(&source);
    let archive = format!("/var/backups/survives-{}.sqsh", std::process::id());
    let (status, body) = daemon
        .post(
            "/api/backup/create",
            json!({"dir": source, "archivePath": archive}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let restored = daemon.path("restored");
    std::fs::create_dir_all(&restored).unwrap();
    std::fs::write(restored.join("underneath.txt"), b"before the restore\n").unwrap();
    let underneath = digest(&restored);
    let (status, body) = daemon
        .post(
            "/api/backup/restore",
            json!({"dir": restored, "archivePath": archive}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    std::fs::write(restored.join("README.md"), b"edited after the restore\n").unwrap();
    std::fs::write(restored.join("new.txt"), b"new\n").unwrap();
    std::fs::remove_file(restored.join("empty-file")).unwrap();
    let edited = digest(&restored);

    daemon.stop();
    assert_eq!(
        fsd_tests::mounts_under(&restored),
        Vec::<String>::new(),
        "the stop took the restore down"
    );
    assert_eq!(digest(&restored), underneath);
    // The archive removed while the daemon is down (a cleanup of /var/backups): the restore
    // keeps its own link to it.
    std::fs::remove_file(&archive).unwrap();

    daemon.resume();
    assert_eq!(
        digest(&restored),
        edited,
        "the start mounted it again with the edits, its archive's name gone"
    );
    let (_, mounts) = daemon.get("/api/backup/mounts").await;
    assert_eq!(
        mounts["mounts"][0]["dir"],
        restored.to_str().unwrap(),
        "{mounts}"
    );
    // Writes after the start land in the same restore, and survive a second stop and start.
    std::fs::write(restored.join("later.txt"), b"later\n").unwrap();
    let later = digest(&restored);
    daemon.restart();
    assert_eq!(digest(&restored), later);
    // Another archive made at the name: the restore is still the snapshot it was made of.
    std::fs::create_dir_all(daemon.path("other")).unwrap();
    std::fs::write(daemon.path("other/else.txt"), b"another tree\n").unwrap();
    let (status, body) = daemon
        .post(
            "/api/backup/create",
            json!({"dir": daemon.path("other"), "archivePath": archive}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    daemon.restart();
    assert_eq!(
        digest(&restored),
        later,
        "the start mounted the archive the restore was made of"
    );

    let (status, body) = daemon
        .post("/api/backup/unmount", json!({"dir": restored}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        digest(&restored),
        underneath,
        "a release discards the writes"
    );
    daemon.restart();
    assert_eq!(
        digest(&restored),
        underneath,
        "and nothing comes back after it"
    );
    let (_, mounts) = daemon.get("/api/backup/mounts").await;
    assert_eq!(mounts["mounts"], json!([]), "{mounts}");
    fsd_tests::remove_archive(&archive);
}

/// Loop devices backed by `archive`, by any of its names (a restore mounts its own link to
/// it): `losetup -a` names the backing file's device and inode, `[DEV]:INO`.
fn loops_of(archive: &str) -> usize {
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(archive).unwrap());
    let out = std::process::Command::new("losetup")
        .arg("-a")
        .output()
        .expect("losetup");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&format!("]:{inode} ")))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restoring_b_over_a_releases_a_and_a_failed_restore_changes_nothing() {
    if !require_mount_privilege(
        "restoring_b_over_a_releases_a_and_a_failed_restore_changes_nothing",
    ) {
        return;
    }
    let daemon = Daemon::start();
    let (a, b) = (daemon.path("a"), daemon.path("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::write(a.join("from-a"), b"a").unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(b.join("from-b"), b"b").unwrap();
    let pid = std::process::id();
    let (archive_a, archive_b) = (
        format!("/var/backups/ab-a-{pid}.sqsh"),
        format!("/var/backups/ab-b-{pid}.sqsh"),
    );
    for (dir, archive) in [(&a, &archive_a), (&b, &archive_b)] {
        let (status, body) = daemon
            .post(
                "/api/backup/create",
                json!({"dir": dir, "archivePath": archive}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let target = daemon.path("target");
    daemon
        .post(
            "/api/backup/restore",
            json!({"dir": target, "archivePath": archive_a}),
        )
        .await;
    assert!(target.join("from-a").is_file());
    assert_eq!(loops_of(&archive_a), 1);
    let (status, _) = daemon
        .post(
            "/api/backup/restore",
            json!({"dir": target, "archivePath": archive_b}),
        )
        .await;
    assert_eq!(status, 200);
    assert!(target.join("from-b").is_file() && !target.join("from-a").exists());
    assert_eq!(loops_of(&archive_a), 0, "A's archive mount is released");

    // A restore that cannot mount (not a squashfs image) leaves B exactly in place.
    std::fs::write(target.join("kept-write"), b"x").unwrap();
    let bogus = format!("/var/backups/ab-bogus-{pid}.sqsh");
    std::fs::write(&bogus, vec![7u8; 8192]).unwrap();
    let (status, body) = daemon
        .post(
            "/api/backup/restore",
            json!({"dir": target, "archivePath": bogus}),
        )
        .await;
    assert_error(status, &body, 500, "BACKUP_RESTORE_FAILED");
    assert!(target.join("from-b").is_file() && target.join("kept-write").is_file());
    let (_, mounts) = daemon.get("/api/backup/mounts").await;
    assert_eq!(mounts["mounts"][0]["archivePaths"], json!([archive_b]));
    daemon
        .post("/api/backup/unmount", json!({"dir": target}))
        .await;
    for archive in [archive_a, archive_b, bogus] {
        fsd_tests::remove_archive(archive);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excludes_gitignore_and_an_empty_dir() {
    if !require_mount_privilege("excludes_gitignore_and_an_empty_dir") {
        return;
    }
    let daemon = Daemon::start();
    let store = Store::start();
    let sandbox = daemon.sandbox();
    let backups = backups(&store);
    let source = daemon.path("repo");
    for (path, body) in [
        ("keep.rs", "k"),
        ("node_modules/x/index.js", "n"),
        ("src/node_modules/y.js", "n"),
        ("logs/a.log", "l"),
        ("b.log", "l"),
        ("target/debug/bin", "t"),
        ("notes.txt", "n"),
        (".gitignore", "target/\n*.tmp\n"),
        ("scratch.tmp", "t"),
    ] {
        let p = source.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    std::fs::create_dir_all(source.join(".git")).unwrap();
    let options = BackupOptions {
        excludes: vec!["**/node_modules/**".into(), "*.log".into()],
        gitignore: true,
        ..Default::default()
    };
    let backup = backups
        .create_backup(&sandbox, source.to_str().unwrap(), options)
        .await
        .expect("create");
    let target = daemon.path("restored");
    backups
        .restore_backup(&sandbox, &backup.id, target.to_str().unwrap(), None)
        .await
        .expect("restore");
    let names: Vec<String> = digest(&target).into_keys().collect();
    assert_eq!(
        names,
        vec![".git", ".gitignore", "keep.rs", "logs", "notes.txt", "src"],
        "{names:?}"
    );

    // Without a .git the gitignore rules do not apply, as `git ls-files` would not.
    std::fs::remove_dir(source.join(".git")).unwrap();
    let backup = backups
        .create_backup(
            &sandbox,
            source.to_str().unwrap(),
            BackupOptions {
                gitignore: true,
                ..Default::default()
            },
        )
        .await
        .expect("create");
    let target = daemon.path("restored-2");
    backups
        .restore_backup(&sandbox, &backup.id, target.to_str().unwrap(), None)
        .await
        .expect("restore");
    assert!(target.join("target/debug/bin").is_file() && target.join("scratch.tmp").is_file());

    let empty = daemon.path("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let backup = backups
        .create_backup(&sandbox, empty.to_str().unwrap(), BackupOptions::default())
        .await
        .expect("empty");
    let target = daemon.path("restored-empty");
    backups
        .restore_backup(&sandbox, &backup.id, target.to_str().unwrap(), None)
        .await
        .expect("restore empty");
    assert!(digest(&target).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_deep_layer_chain_restores_byte_identical() {
    if !require_mount_privilege("a_three_deep_layer_chain_restores_byte_identical") {
        return;
    }
    let daemon = Daemon::start();
    let store = Store::start();
    let sandbox = daemon.sandbox();
    let backups = backups(&store);
    let live = daemon.path("live");
    fixture(&live);
    let base = backups
        .create_backup(&sandbox, live.to_str().unwrap(), BackupOptions::default())
        .await
        .expect("base");
    backups
        .restore_backup(&sandbox, &base.id, live.to_str().unwrap(), None)
        .await
        .expect("restore base");
    let layer = || BackupOptions {
        layer: true,
        ..Default::default()
    };

    // Layer 1: edits, a new file, a deletion, a renamed directory.
    std::fs::write(live.join("README.md"), b"v1\n").unwrap();
    std::fs::write(live.join("added.txt"), b"added\n").unwrap();
    std::fs::remove_file(live.join("empty-file")).unwrap();
    std::fs::rename(live.join("dir with spaces"), live.join("moved dir")).unwrap();
    let l1 = backups
        .create_backup(&sandbox, live.to_str().unwrap(), layer())
        .await
        .expect("layer 1");
    assert_eq!(l1.parent.as_deref(), Some(base.id.as_str()));
    assert!(
        l1.size_bytes < base.size_bytes,
        "a layer holds only the changes"
    );
    backups
        .restore_backup(&sandbox, &l1.id, live.to_str().unwrap(), None)
        .await
        .expect("restore l1");

    // Layer 2: a directory removed and recreated with other contents (opaque in the upper).
    std::fs::remove_dir_all(live.join("deep")).unwrap();
    std::fs::create_dir_all(live.join("deep/z")).unwrap();
    std::fs::write(live.join("deep/z/new.txt"), b"z\n").unwrap();
    std::fs::remove_file(live.join("added.txt")).unwrap();
    let l2 = backups
        .create_backup(&sandbox, live.to_str().unwrap(), layer())
        .await
        .expect("layer 2");
    backups
        .restore_backup(&sandbox, &l2.id, live.to_str().unwrap(), None)
        .await
        .expect("restore l2");

    // Layer 3: one more change on top.
    std::fs::write(live.join("data/big.bin"), b"now small\n").unwrap();
    std::fs::create_dir_all(live.join("empty-dir/inside")).unwrap();
    let expected = digest(&live);
    let l3 = backups
        .create_backup(&sandbox, live.to_str().unwrap(), layer())
        .await
        .expect("layer 3");
    assert_eq!(l3.parent.as_deref(), Some(l2.id.as_str()));

    for id in [&base.id, &l1.id, &l2.id, &l3.id] {
        forget_local(id);
    }
    let target = daemon.path("from-chain");
    let chain = backups
        .restore_backup(&sandbox, &l3.id, target.to_str().unwrap(), None)
        .await
        .expect("restore chain")
        .chain;
    assert_eq!(chain.len(), 4);
    assert_eq!(digest(&target), expected);
    assert!(!target.join("deep/a").exists() && !target.join("added.txt").exists());

    // Retention never breaks a chain: keeping the last one keeps what it stacks on.
    let dir = live.to_str().unwrap();
    let keep_last = |n| SnapshotPolicy {
        keep_last: n,
        ..SnapshotPolicy::default()
    };
    let decision = backups.forget(dir, &keep_last(1), false).await.unwrap();
    let kept: Vec<&str> = decision.keep.iter().map(|k| k.id.as_str()).collect();
    assert_eq!(kept, [&l3.id, &l2.id, &l1.id, &base.id]);
    assert_eq!(
        decision.keep[1].reasons,
        [format!("parent of kept snapshot {}", l3.id)]
    );
    assert!(decision.remove.is_empty());
    // A newer full backup of the same directory: the whole chain can go.
    let full = backups
        .create_backup(&sandbox, dir, BackupOptions::default())
        .await
        .expect("a full backup");
    assert_eq!(full.parent, None);
    let dry = backups.forget(dir, &keep_last(1), true).await.unwrap();
    assert_eq!(dry.remove.len(), 4);
    assert_eq!(
        backups.list_backups().await.unwrap().len(),
        5,
        "a dry run removes nothing"
    );
    let done = backups.forget(dir, &keep_last(1), false).await.unwrap();
    assert_eq!(
        done.keep.iter().map(|k| k.id.as_str()).collect::<Vec<_>>(),
        [&full.id]
    );
    let left: Vec<String> = backups
        .list_backups()
        .await
        .unwrap()
        .into_iter()
        .map(|meta| meta.id)
        .collect();
    assert_eq!(left, std::slice::from_ref(&full.id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_and_unknown_backups_are_refused() {
    if !require_mount_privilege("expired_and_unknown_backups_are_refused") {
        return;
    }
    let daemon = Daemon::start();
    let store = Store::start();
    let sandbox = daemon.sandbox();
    let backups = backups(&store);
    let source = daemon.path("p");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::write(source.join("f"), b"f").unwrap();
    // 30 s of life is inside the 60 s buffer: expired at once.
    let short = BackupOptions {
        ttl: Some(30),
        ..Default::default()
    };
    let backup = backups
        .create_backup(&sandbox, source.to_str().unwrap(), short)
        .await
        .expect("create");
    let err = backups
        .restore_backup(&sandbox, &backup.id, source.to_str().unwrap(), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::BackupExpired), "{err}");
    assert_eq!(err.status(), Some(400));
    let long = BackupOptions {
        ttl: Some(120),
        ..Default::default()
    };
    let backup = backups
        .create_backup(&sandbox, source.to_str().unwrap(), long)
        .await
        .expect("create");
    backups
        .restore_backup(
            &sandbox,
            &backup.id,
            daemon.path("r").to_str().unwrap(),
            None,
        )
        .await
        .expect("restorable");

    let unknown = "6f1d0c8e-3b1a-4c47-9d7e-1f0a2b3c4d5e";
    let err = backups
        .restore_backup(&sandbox, unknown, source.to_str().unwrap(), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::BackupNotFound));
    assert_eq!(err.status(), Some(404));
    let err = backups
        .restore_backup(&sandbox, "not-a-uuid", source.to_str().unwrap(), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::InvalidBackupConfig));
    let zero = BackupOptions {
        ttl: Some(0),
        ..Default::default()
    };
    let err = backups
        .create_backup(&sandbox, source.to_str().unwrap(), zero)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::InvalidBackupConfig));
}

#[tokio::test]
async fn invalid_backup_config_as_the_reference_answers_it() {
    let daemon = Daemon::start();
    let dir = daemon.root();
    let cases = [
        (
            "/api/backup/create",
            json!({"archivePath": "/var/backups/x.sqsh"}),
            "dir",
        ),
        (
            "/api/backup/create",
            json!({"dir": "relative", "archivePath": "/var/backups/x.sqsh"}),
            "dir",
        ),
        (
            "/api/backup/create",
            json!({"dir": "/etc", "archivePath": "/var/backups/x.sqsh"}),
            "dir",
        ),
        (
            "/api/backup/create",
            json!({"dir": "/workspace/a..b", "archivePath": "/var/backups/x.sqsh"}),
            "dir",
        ),
        (
            "/api/backup/create",
            json!({"dir": "/tmp/a\u{0}b", "archivePath": "/var/backups/x.sqsh"}),
            "dir",
        ),
        (
            "/api/backup/create",
            json!({"dir": format!("/tmp/{}", "a".repeat(4100)), "archivePath": "/var/backups/x.sqsh"}),
            "dir",
        ),
        (
            "/api/backup/create",
            json!({"dir": dir, "archivePath": "/tmp/x.sqsh"}),
            "archivePath",
        ),
        (
            "/api/backup/create",
            json!({"dir": dir, "archivePath": "/var/backups/../etc/x"}),
            "archivePath",
        ),
        (
            "/api/backup/create",
            json!({"dir": dir, "archivePath": "/var/backups/x.sqsh", "gitignore": "yes"}),
            "gitignore",
        ),
        (
            "/api/backup/create",
            json!({"dir": dir, "archivePath": "/var/backups/x.sqsh", "excludes": "*.log"}),
            "excludes",
        ),
        (
            "/api/backup/create",
            json!({"dir": dir, "archivePath": "/var/backups/x.sqsh", "compression": {"format": "xz"}}),
            "compression.format",
        ),
        (
            "/api/backup/create",
            json!({"dir": dir, "archivePath": "/var/backups/x.sqsh", "compression": {"threads": 0}}),
            "compression.threads",
        ),
        ("/api/backup/restore", json!({"dir": dir}), "archivePath"),
        (
            "/api/backup/restore",
            json!({"dir": "/root", "archivePath": "/var/backups/x.sqsh"}),
            "dir",
        ),
        (
            "/api/backup/upload-parts",
            json!({"archivePath": "/var/backups/x.sqsh", "parts": []}),
            "parts",
        ),
        (
            "/api/backup/upload-parts",
            json!({"archivePath": "/var/backups/x.sqsh", "parts": [{"partNumber": 1, "url": "http://example.com/x", "offset": 0, "size": 1}]}),
            "parts[0].url",
        ),
        (
            "/api/backup/upload-parts",
            json!({"archivePath": "/var/backups/x.sqsh", "parts": [{"partNumber": 0, "url": "https://example.com/x", "offset": 0, "size": 1}]}),
            "parts[0].partNumber",
        ),
    ];
    for (route, body, field) in cases {
        let (status, reply) = daemon.post(route, body.clone()).await;
        assert_error(status, &reply, 400, "INVALID_BACKUP_CONFIG");
        let named = reply["context"]["validationErrors"][0]["field"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            named == field || named.starts_with(field),
            "{route} {body}: field {named:?}, wanted {field:?}: {reply}"
        );
        let op = if route.ends_with("restore") {
            "backup.restore"
        } else {
            "backup.create"
        };
        assert_eq!(reply["operation"], op, "{reply}");
    }
    // A source directory that does not exist is the caller's mistake, not a 500.
    let (status, reply) = daemon
        .post("/api/backup/create", json!({"dir": dir.join("missing"), "archivePath": format!("/var/backups/missing-{}.sqsh", std::process::id())}))
        .await;
    assert_error(status, &reply, 400, "INVALID_BACKUP_CONFIG");
    let (status, reply) = daemon
        .post(
            "/api/backup/restore",
            json!({"dir": dir, "archivePath": "/var/backups/never-created.sqsh"}),
        )
        .await;
    assert_error(status, &reply, 404, "BACKUP_NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_of_one_archive_leave_a_whole_archive() {
    if !fsd_tests::available_or_skip(
        fsd_tests::is_root(),
        "concurrent_creates_of_one_archive_leave_a_whole_archive",
        "root to write /var/backups",
    ) {
        return;
    }
    let daemon = Daemon::start();
    let (a, b) = (daemon.path("a"), daemon.path("b"));
    // Incompressible and large enough that the two writes overlap.
    let (data_a, data_b) = (
        fsd_tests::noise(40_000_000, 1),
        fsd_tests::noise(40_000_000, 2),
    );
    for (dir, data) in [(&a, &data_a), (&b, &data_b)] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("data.bin"), data).unwrap();
    }
    let archive = format!("/var/backups/race-{}.sqsh", std::process::id());
    let (first, second) = tokio::join!(
        daemon.post(
            "/api/backup/create",
            json!({"dir": a, "archivePath": archive})
        ),
        daemon.post(
            "/api/backup/create",
            json!({"dir": b, "archivePath": archive})
        )
    );
    assert_eq!(first.0, 200, "{}", first.1);
    assert_eq!(second.0, 200, "{}", second.1);
    let out = tempfile::tempdir().unwrap();
    let extracted = out.path().join("x");
    fsd_tests::unsquashfs(&archive, &extracted);
    let data = std::fs::read(extracted.join("data.bin")).unwrap();
    assert!(
        data == data_a || data == data_b,
        "one create's archive, not a mix"
    );
    let leftovers = std::fs::read_dir("/var/backups")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("race-{}.sqsh.partial", std::process::id()))
        })
        .count();
    assert_eq!(leftovers, 0);
    fsd_tests::remove_archive(&archive);
}

#[tokio::test]
async fn temp_files_left_by_a_crashed_create_are_removed_at_start() {
    if !fsd_tests::available_or_skip(
        fsd_tests::is_root(),
        "temp_files_left_by_a_crashed_create_are_removed_at_start",
        "root to write /var/backups",
    ) {
        return;
    }
    std::fs::create_dir_all("/var/backups").unwrap();
    let me = std::process::id();
    // No process has pid 4,194,304 or above (the kernel's ceiling).
    let dead = format!("/var/backups/.crash-{me}.sqsh.fsd-4194305-0.part.tmp");
    let live = format!("/var/backups/.crash-{me}.sqsh.fsd-{me}-0.part.tmp");
    // What a crash while a snapshot's index is written leaves (its scratch name, as
    // `write_index` makes it; the index's old `<archive>.index.tmp` outlived every restart).
    let index = format!("/var/backups/.crash-{me}.sqsh.index.fsd-4194305-1.new.tmp");
    std::fs::write(&dead, b"half an archive").unwrap();
    std::fs::write(&live, b"being written").unwrap();
    std::fs::write(&index, b"half an index").unwrap();
    let daemon = Daemon::start();
    assert!(
        !Path::new(&dead).exists(),
        "a dead writer's temp file is removed"
    );
    assert!(
        !Path::new(&index).exists(),
        "a dead writer's index temp file is removed"
    );
    assert!(
        Path::new(&live).exists(),
        "a live writer's temp file is kept"
    );
    drop(daemon);
    let _ = std::fs::remove_file(&live);
}
