//! Restores through the FUSE driver (squashfuse + fuse-overlayfs), the fallback for hosts
//! where the daemon may not mount kernel filesystems, forced here with
//! `--restore-driver fuse`.

use fsd_tests::{Daemon, Options, available_or_skip, require_mount_privilege};
use serde_json::json;

fn fuse_mounts_of(dir: &std::path::Path) -> usize {
    let info = fsd_tests::mount_table();
    info.lines()
        .filter(|l| l.contains(dir.to_str().unwrap()) && l.contains("fuse"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuse_restores_are_copy_on_write_and_released() {
    if !require_mount_privilege("fuse_restores_are_copy_on_write_and_released") {
        return;
    }
    let tools = fsd_backup::mount::fuse_available();
    if !available_or_skip(
        tools,
        "fuse_restores_are_copy_on_write_and_released",
        "squashfuse, fuse-overlayfs, fusermount3",
    ) {
        return;
    }
    let daemon = Daemon::start_with(Options {
        extra_args: vec!["--restore-driver".into(), "fuse".into()],
        ..Default::default()
    });
    let (_, caps) = daemon.get("/api/capabilities").await;
    assert_eq!(caps["capabilities"]["restoreDriver"], "fuse", "{caps}");
    let source = daemon.path("src");
    std::fs::create_dir_all(source.join("sub")).unwrap();
    std::fs::write(source.join("sub/a.txt"), b"original\n").unwrap();
    let pid = std::process::id();
    let archive = format!("/var/backups/fuse-{pid}.sqsh");
    let (status, body) = daemon
        .post(
            "/api/backup/create",
            json!({"dir": source, "archivePath": archive}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let target = daemon.path("target");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("before.txt"), b"before\n").unwrap();
    let (status, body) = daemon
        .post(
            "/api/backup/restore",
            json!({"dir": target, "archivePath": archive}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["driver"], "fuse");
    assert_eq!(
        std::fs::read(target.join("sub/a.txt")).unwrap(),
        b"original\n"
    );
    assert!(
        !target.join("before.txt").exists(),
        "earlier contents are shadowed"
    );
    std::fs::write(target.join("sub/a.txt"), b"changed\n").unwrap();
    std::fs::write(target.join("new.txt"), b"new\n").unwrap();

    let (status, _) = daemon
        .post(
            "/api/backup/restore",
            json!({"dir": target, "archivePath": archive}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        std::fs::read(target.join("sub/a.txt")).unwrap(),
        b"original\n",
        "writes discarded"
    );
    assert!(!target.join("new.txt").exists());
    assert_eq!(
        fuse_mounts_of(&target),
        1,
        "the first restore's overlay is gone"
    );

    let (status, _) = daemon
        .post("/api/backup/unmount", json!({"dir": target}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        std::fs::read(target.join("before.txt")).unwrap(),
        b"before\n"
    );
    assert_eq!(fuse_mounts_of(&target), 0);
    let leftover = fsd_tests::mount_table()
        .lines()
        .filter(|l| l.contains(&format!("fuse-{pid}")))
        .count();
    assert_eq!(leftover, 0, "squashfuse mounts released");
    fsd_tests::remove_archive(&archive);
}
