//! `/api/chmod` and `/api/chown` against the real binary: modes as `chmod` takes them,
//! owners by name or id, recursion that leaves symlinks alone, and mistakes named by field.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use fsd_tests::Daemon;
use serde_json::json;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[tokio::test]
async fn chmod_takes_octal_and_symbolic_modes_and_recurses() {
    let daemon = Daemon::start();
    let tree = daemon.path("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("sub/run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::write(tree.join("notes.txt"), "n\n").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", tree.join("link")).unwrap();
    let file = tree.join("notes.txt").display().to_string();
    let (status, answer) = daemon
        .post("/api/chmod", json!({"path": file, "mode": "640"}))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (answer["mode"].clone(), answer["changed"].clone()),
        (json!("0640"), json!(1))
    );
    let (_, answer) = daemon
        .post("/api/chmod", json!({"path": file, "mode": "u+x,o+r"}))
        .await;
    assert_eq!(answer["mode"], "0744", "{answer}");
    let etc_mode = mode(std::path::Path::new("/etc/hostname"));
    let (status, answer) = daemon
        .post(
            "/api/chmod",
            json!({"path": tree.display().to_string(), "mode": "go-rwx", "recursive": true}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(mode(&tree.join("sub/run.sh")) & 0o077, 0);
    assert_eq!(mode(&tree.join("sub")) & 0o077, 0);
    assert_eq!(
        mode(std::path::Path::new("/etc/hostname")),
        etc_mode,
        "a symlink's target is left alone"
    );
    for (body, status, code, field) in [
        (
            json!({"path": file, "mode": "u+q"}),
            400,
            "VALIDATION_FAILED",
            "mode",
        ),
        (
            json!({"path": file, "mode": "99999"}),
            400,
            "VALIDATION_FAILED",
            "mode",
        ),
        (json!({"path": file}), 400, "VALIDATION_FAILED", "mode"),
        (
            json!({"path": daemon.path("missing").display().to_string(), "mode": "644"}),
            404,
            "FILE_NOT_FOUND",
            "",
        ),
    ] {
        let (got, answer) = daemon.post("/api/chmod", body.clone()).await;
        assert_eq!(
            (got.as_u16(), answer["code"].as_str().unwrap()),
            (status, code),
            "{body}: {answer}"
        );
        if !field.is_empty() {
            assert_eq!(
                answer["context"]["validationErrors"][0]["field"], field,
                "{answer}"
            );
        }
    }
}

#[tokio::test]
async fn chown_takes_names_and_ids() {
    let daemon = Daemon::start();
    if !fsd_tests::available_or_skip(
        fsd_tests::is_root(),
        "chown_takes_names_and_ids",
        "root (to give files away)",
    ) {
        return;
    }
    let file = daemon.path("given.txt");
    std::fs::write(&file, "g\n").unwrap();
    let path = file.display().to_string();
    let (status, answer) = daemon
        .post("/api/chown", json!({"path": path, "owner": "nobody"}))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(std::fs::metadata(&file).unwrap().uid(), 65534);
    assert_eq!(answer["uid"], 65534);
    let (_, answer) = daemon
        .post(
            "/api/chown",
            json!({"path": path, "owner": "0", "group": "65534"}),
        )
        .await;
    assert_eq!(
        (answer["uid"].clone(), answer["gid"].clone()),
        (json!(0), json!(65534)),
        "{answer}"
    );
    for (body, field) in [
        (json!({"path": path, "owner": "no-such-user-fsd"}), "owner"),
        (json!({"path": path, "group": "no-such-group-fsd"}), "group"),
        (json!({"path": path}), "owner"),
    ] {
        let (status, answer) = daemon.post("/api/chown", body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(
            answer["context"]["validationErrors"][0]["field"], field,
            "{answer}"
        );
    }
}

#[tokio::test]
async fn the_sdk_and_fsctl_chmod() {
    let daemon = Daemon::start();
    let file = daemon.path("sdk.txt");
    std::fs::write(&file, "s\n").unwrap();
    let path = file.display().to_string();
    let sandbox = fsd_sdk::Sandbox::connect(&daemon.url, daemon.token.as_deref()).unwrap();
    let reply = sandbox.chmod(&path, "600", false).await.unwrap();
    assert_eq!(reply.mode, "0600");
    let output = fsd_tests::fsctl(&daemon, &["chmod", "a+r", &path]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("{path}: 0644\n")
    );
    assert_eq!(mode(&file), 0o644);
}
