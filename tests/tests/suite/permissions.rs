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
    let script = daemon.path("tool/run.sh").display().to_string();
    let reply = sandbox
        .write_file_with(&fsd_sdk::api::files::WriteRequest {
            path: script.clone(),
            content: "#!/bin/sh\n".into(),
            mode: Some("755".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(reply.mode.as_deref(), Some("0755"));
    let reply = sandbox
        .mkdir_with(&fsd_sdk::api::files::MkdirRequest {
            path: daemon.path("private").display().to_string(),
            mode: Some("go-rwx".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(reply.mode.as_deref(), Some("0700"));
}

#[tokio::test]
async fn writes_and_mkdir_take_a_mode() {
    use base64::Engine;
    let daemon = Daemon::start();
    let script = daemon.path("bin/run.sh");
    let path = script.display().to_string();
    let (status, answer) = daemon
        .post(
            "/api/write",
            json!({"path": path, "content": "#!/bin/sh\necho hi\n", "mode": "755"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["mode"], "0755", "{answer}");
    assert_eq!(mode(&script), 0o755);
    // Symbolic modes apply to the mode the file would have had: the previous file's...
    let (_, answer) = daemon
        .post(
            "/api/write",
            json!({"path": path, "content": "v2", "mode": "g+w"}),
        )
        .await;
    assert_eq!(answer["mode"], "0775", "{answer}");
    // ...and a write without one keeps it, as before.
    let (_, answer) = daemon
        .post("/api/write", json!({"path": path, "content": "v3"}))
        .await;
    assert!(answer.get("mode").is_none(), "{answer}");
    assert_eq!(mode(&script), 0o775);
    // A new file's is 0644.
    let fresh = daemon.path("fresh.txt");
    let (_, answer) = daemon
        .post(
            "/api/write",
            json!({"path": fresh.display().to_string(), "content": "x", "mode": "u+x"}),
        )
        .await;
    assert_eq!(answer["mode"], "0744", "{answer}");
    // A large base64 body is written while it arrives; its mode, after the content, holds.
    let big = daemon.path("big.bin");
    let content = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 300_000]);
    let (status, answer) = daemon
        .post(
            "/api/write",
            json!({"path": big.display().to_string(), "content": content, "encoding": "base64", "mode": "600"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!((answer["mode"].as_str(), mode(&big)), (Some("0600"), 0o600));
    // The raw upload takes it as a query parameter.
    let raw = daemon.path("raw.bin");
    let response = daemon
        .request(
            reqwest::Method::PUT,
            &format!("/api/files/raw?path={}&mode=700", raw.display()),
        )
        .body(vec![1u8; 1000])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer: serde_json::Value = response.json().await.unwrap();
    assert_eq!((answer["mode"].as_str(), mode(&raw)), (Some("0700"), 0o700));

    // mkdir: the directory made gets the mode, its new parents and an existing one keep theirs.
    let (status, answer) = daemon
        .post(
            "/api/mkdir",
            json!({"path": daemon.path("p/q").display().to_string(), "recursive": true, "mode": "700"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["mode"], "0700", "{answer}");
    assert_eq!(mode(&daemon.path("p/q")), 0o700);
    assert_ne!(mode(&daemon.path("p")), 0o700);
    let (_, answer) = daemon
        .post(
            "/api/mkdir",
            json!({"path": daemon.path("p/q").display().to_string(), "recursive": true, "mode": "755"}),
        )
        .await;
    assert!(answer.get("mode").is_none(), "{answer}");
    assert_eq!(mode(&daemon.path("p/q")), 0o700);

    // A mode that does not parse names the field, and nothing is written or made.
    let (status, answer) = daemon
        .post(
            "/api/write",
            json!({"path": daemon.path("no.txt").display().to_string(), "content": "x", "mode": "9z"}),
        )
        .await;
    fsd_tests::assert_validation(status, &answer, "mode");
    assert!(!daemon.path("no.txt").exists());
    let (status, answer) = daemon
        .post(
            "/api/mkdir",
            json!({"path": daemon.path("nodir").display().to_string(), "mode": "u+q"}),
        )
        .await;
    fsd_tests::assert_validation(status, &answer, "mode");
    assert!(!daemon.path("nodir").exists());
    let response = daemon
        .request(
            reqwest::Method::PUT,
            &format!(
                "/api/files/raw?path={}&mode=88888",
                daemon.path("no.bin").display()
            ),
        )
        .body("x")
        .send()
        .await
        .unwrap();
    let status = response.status();
    let answer: serde_json::Value = response.json().await.unwrap();
    fsd_tests::assert_validation(status, &answer, "mode");
    assert!(!daemon.path("no.bin").exists());
}
