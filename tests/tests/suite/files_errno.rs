//! Filesystem errors map to specific wire codes by errno, on real mounts.

use fsd_tests::{Daemon, Mount, assert_error, require_mount_privilege};
use serde_json::json;

#[tokio::test]
async fn read_only_filesystem_is_403_read_only() {
    if !require_mount_privilege("read_only_filesystem_is_403_read_only") {
        return;
    }
    let daemon = Daemon::start();
    let _mount = Mount::tmpfs(&daemon.path("ro"), "ro,size=1m");
    let (status, body) = daemon
        .post("/api/write", json!({"path": "ro/f.txt", "content": "x"}))
        .await;
    assert_error(status, &body, 403, "READ_ONLY");
    assert_eq!(body["context"]["errno"], 30, "EROFS: {body}");
    let (status, body) = daemon.post("/api/mkdir", json!({"path": "ro/d"})).await;
    assert_error(status, &body, 403, "READ_ONLY");
}

#[tokio::test]
async fn full_filesystem_is_no_space_and_keeps_the_old_file() {
    if !require_mount_privilege("full_filesystem_is_no_space_and_keeps_the_old_file") {
        return;
    }
    let daemon = Daemon::start();
    let _mount = Mount::tmpfs(&daemon.path("small"), "size=64k");
    std::fs::write(daemon.path("small/keep.txt"), "original").unwrap();
    let big = "x".repeat(1024 * 1024);
    let (status, body) = daemon
        .post(
            "/api/write",
            json!({"path": "small/keep.txt", "content": big}),
        )
        .await;
    assert_error(status, &body, 500, "NO_SPACE");
    assert_eq!(
        std::fs::read_to_string(daemon.path("small/keep.txt")).unwrap(),
        "original"
    );
    let names: Vec<_> = std::fs::read_dir(daemon.path("small"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["keep.txt"], "temp file left on a full disk");

    let response = daemon
        .request(reqwest::Method::PUT, "/api/files/raw?path=small/keep.txt")
        .body(vec![7u8; 1024 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 500);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["code"], "NO_SPACE");
    assert_eq!(
        std::fs::read_to_string(daemon.path("small/keep.txt")).unwrap(),
        "original"
    );
}
