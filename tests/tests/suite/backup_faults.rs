//! Backups under faults: a proxy between the daemon and the store fails, cuts and stalls
//! part uploads; the daemon is killed mid-backup; the daemon restarts under live restores.
//! An upload completes intact after retries or fails cleanly, leaving no meta.json and no
//! multipart upload behind.

use std::path::Path;
use std::sync::atomic::Ordering;

use fsctl::trusted::{BackupOptions, Backups};
use fsd_tests::s3::{FaultProxy, Faults, Store};
use fsd_tests::{Daemon, Options, require_mount_privilege, sha256_hex};
use serde_json::json;

/// A daemon whose transfers give up on a silent request after 2 s.
fn daemon() -> Daemon {
    Daemon::start_with(Options {
        extra_args: vec!["--transfer-timeout-secs".into(), "2".into()],
        ..Default::default()
    })
}

fn source(daemon: &Daemon, megabytes: usize) -> std::path::PathBuf {
    let dir = daemon.path("data");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("blob.bin"), fsd_tests::noise(megabytes << 20, 7)).unwrap();
    std::fs::write(dir.join("small.txt"), b"small\n").unwrap();
    dir
}

fn file_sha(path: &Path) -> String {
    sha256_hex(&std::fs::read(path).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_survive_500s_cut_connections_and_a_stalled_part() {
    if !require_mount_privilege("uploads_survive_500s_cut_connections_and_a_stalled_part") {
        return;
    }
    let daemon = daemon();
    let store = Store::start();
    let proxy = FaultProxy::start(&store.url).await;
    let backups = Backups::new(store.object_store(Some(&proxy.url)));
    let sandbox = daemon.sandbox();
    let dir = source(&daemon, 40);
    proxy.set(Faults {
        fail: 2,
        drop: 1,
        stall: 1,
        ..Default::default()
    });
    let backup = backups
        .create_backup(&sandbox, dir.to_str().unwrap(), BackupOptions::default())
        .await
        .expect("create after retries");
    assert!(
        proxy.part_puts.load(Ordering::SeqCst) >= 5 + 4,
        "5 parts of 8 MiB plus 4 retried"
    );
    let left = proxy.faults.lock().unwrap().clone();
    assert_eq!(
        (left.fail, left.drop, left.stall),
        (0, 0, 0),
        "every fault was injected"
    );
    std::fs::remove_file(format!("/var/backups/{}.sqsh", backup.id)).unwrap();
    let target = daemon.path("restored");
    backups
        .restore_backup(&sandbox, &backup.id, target.to_str().unwrap(), None)
        .await
        .expect("restore");
    assert_eq!(
        file_sha(&target.join("blob.bin")),
        file_sha(&dir.join("blob.bin"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_that_keeps_failing_leaves_nothing_behind() {
    if !require_mount_privilege("an_upload_that_keeps_failing_leaves_nothing_behind") {
        return;
    }
    let daemon = daemon();
    let store = Store::start();
    let proxy = FaultProxy::start(&store.url).await;
    let backups = Backups::new(store.object_store(Some(&proxy.url)));
    let dir = source(&daemon, 12);
    proxy.set(Faults {
        fail_always: true,
        ..Default::default()
    });
    let err = backups
        .create_backup(
            &daemon.sandbox(),
            dir.to_str().unwrap(),
            BackupOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.code().map(|c| c.to_string()).as_deref(),
        Some("BACKUP_CREATE_FAILED"),
        "{err}"
    );
    assert!(
        store.keys("backups/").is_empty(),
        "no meta.json, no object: {:?}",
        store.keys("")
    );
    let uploads = store
        .object_store(None)
        .client()
        .list_multipart_uploads()
        .bucket("fsd")
        .send()
        .await;
    if let Ok(uploads) = uploads {
        assert!(
            uploads.uploads().is_empty(),
            "the multipart upload was aborted"
        );
    }
    assert!(backups.list_backups().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_daemon_mid_backup_leaves_nothing_restorable() {
    if !require_mount_privilege("killing_the_daemon_mid_backup_leaves_nothing_restorable") {
        return;
    }
    let mut daemon = daemon();
    let store = Store::start();
    let proxy = FaultProxy::start(&store.url).await;
    let backups = Backups::new(store.object_store(Some(&proxy.url)));
    let dir = source(&daemon, 40);
    // Parts stall, so the daemon is surely mid-upload when it dies.
    proxy.set(Faults {
        stall: 100,
        ..Default::default()
    });
    let sandbox = daemon.sandbox();
    let pending = tokio::spawn({
        let dir = dir.clone();
        async move {
            backups
                .create_backup(&sandbox, dir.to_str().unwrap(), BackupOptions::default())
                .await
        }
    });
    while proxy.part_puts.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &daemon.pid().to_string()])
        .status();
    let result = pending.await.unwrap();
    assert!(result.is_err(), "the backup cannot succeed");
    assert!(
        store
            .keys("backups/")
            .iter()
            .all(|k| !k.ends_with("meta.json")),
        "{:?}",
        store.keys("")
    );
    let backups = Backups::new(store.object_store(None));
    assert!(backups.list_backups().await.unwrap().is_empty());
    // The archive was complete before the upload began, so a restarted daemon can serve
    // it; what the store holds is what matters, and it holds no backup.
    daemon.resume();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restores_survive_a_crash_and_a_graceful_stop() {
    if !require_mount_privilege("restores_survive_a_crash_and_a_graceful_stop") {
        return;
    }
    let mut daemon = daemon();
    let dir = daemon.path("w");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("f.txt"), b"from the backup\n").unwrap();
    let archive = format!("/var/backups/restart-{}.sqsh", std::process::id());
    let (status, body) = daemon
        .post(
            "/api/backup/create",
            json!({"dir": dir, "archivePath": archive}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    daemon
        .post(
            "/api/backup/restore",
            json!({"dir": dir, "archivePath": archive}),
        )
        .await;
    std::fs::write(dir.join("written.txt"), b"after restore\n").unwrap();

    // A crash: the overlay stays mounted, and the next daemon adopts it.
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &daemon.pid().to_string()])
        .status();
    daemon.resume();
    let (_, mounts) = daemon.get("/api/backup/mounts").await;
    assert_eq!(
        mounts["mounts"][0]["dir"],
        dir.to_str().unwrap(),
        "{mounts}"
    );
    assert!(
        dir.join("written.txt").is_file(),
        "writes since the restore are kept"
    );
    let (status, _) = daemon
        .post(
            "/api/backup/restore",
            json!({"dir": dir, "archivePath": archive}),
        )
        .await;
    assert_eq!(status, 200);
    assert!(!dir.join("written.txt").exists());

    // A graceful stop takes it down (the directory shows what it held before, nothing
    // stays mounted) and keeps its writes; the next start mounts it again with them.
    std::fs::remove_file(dir.join("f.txt")).unwrap();
    daemon.stop();
    assert!(
        dir.join("f.txt").is_file(),
        "the original file under the overlay"
    );
    assert!(!fsd_tests::mount_table().contains(dir.to_str().unwrap()));
    daemon.resume();
    let (_, mounts) = daemon.get("/api/backup/mounts").await;
    assert_eq!(
        mounts["mounts"][0]["dir"],
        dir.to_str().unwrap(),
        "{mounts}"
    );
    assert!(!dir.join("f.txt").exists(), "the deletion was kept");
    let (status, _) = daemon
        .post("/api/backup/unmount", json!({"dir": dir}))
        .await;
    assert_eq!(status, 200);
    fsd_tests::remove_archive(&archive);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archives_read_back_through_unsquashfs_squashfuse_and_the_kernel() {
    if !require_mount_privilege("archives_read_back_through_unsquashfs_squashfuse_and_the_kernel") {
        return;
    }
    let daemon = daemon();
    let dir = source(&daemon, 3);
    std::fs::write(dir.join("ünï côdé.txt"), b"u\n").unwrap();
    for format in ["zstd", "lz4", "gzip"] {
        let archive = format!("/var/backups/readback-{format}-{}.sqsh", std::process::id());
        let (status, body) = daemon
            .post("/api/backup/create", json!({"dir": dir, "archivePath": archive, "compression": {"format": format, "threads": 2}}))
            .await;
        assert_eq!(status, 200, "{body}");
        let out = tempfile::tempdir().unwrap();
        let extracted = out.path().join("x");
        fsd_tests::unsquashfs(&archive, &extracted);
        assert_eq!(
            file_sha(&extracted.join("blob.bin")),
            file_sha(&dir.join("blob.bin")),
            "{format}"
        );
        let mountpoint = out.path().join("m");
        std::fs::create_dir_all(&mountpoint).unwrap();
        let status = std::process::Command::new("squashfuse")
            .arg(&archive)
            .arg(&mountpoint)
            .status()
            .expect("squashfuse");
        assert!(status.success(), "squashfuse {format}");
        let same = file_sha(&mountpoint.join("blob.bin")) == file_sha(&dir.join("blob.bin"));
        let _ = std::process::Command::new("fusermount3")
            .arg("-u")
            .arg(&mountpoint)
            .status();
        assert!(same, "squashfuse reads {format}");
        let target = daemon.path(&format!("k-{format}"));
        let (status, _) = daemon
            .post(
                "/api/backup/restore",
                json!({"dir": target, "archivePath": archive}),
            )
            .await;
        assert_eq!(status, 200, "kernel mount of {format}");
        assert_eq!(std::fs::read(target.join("ünï côdé.txt")).unwrap(), b"u\n");
        daemon
            .post("/api/backup/unmount", json!({"dir": target}))
            .await;
        fsd_tests::remove_archive(&archive);
    }
}
