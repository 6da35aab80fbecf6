//! delete, rename, move, mkdir, list-files, exists and stat.

use std::os::unix::fs::symlink;

use fsd_tests::{Daemon, assert_error};
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn delete_files_and_symlinks_but_not_directories() {
    let daemon = Daemon::start();
    std::fs::write(daemon.path("a.txt"), "x").unwrap();
    let (status, body) = daemon.post("/api/delete", json!({"path": "a.txt"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"success": true, "path": "a.txt", "timestamp": body["timestamp"]})
    );
    assert!(!daemon.path("a.txt").exists());

    std::fs::write(daemon.path("target"), "keep").unwrap();
    symlink("target", daemon.path("link")).unwrap();
    let (status, _) = daemon.post("/api/delete", json!({"path": "link"})).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        daemon.path("target").exists(),
        "the link's target must survive"
    );

    let (status, body) = daemon.post("/api/delete", json!({"path": "a.txt"})).await;
    assert_error(status, &body, 404, "FILE_NOT_FOUND");
    assert_eq!(body["operation"], "file.delete");

    std::fs::create_dir(daemon.path("dir")).unwrap();
    let (status, body) = daemon.post("/api/delete", json!({"path": "dir"})).await;
    assert_error(status, &body, 400, "IS_DIRECTORY");
    assert_eq!(
        body["message"],
        "Cannot delete directory with deleteFile() at 'dir'. Use exec('rm -rf dir') instead."
    );
    assert!(daemon.path("dir").is_dir());
}

#[tokio::test]
async fn rename_and_move_shapes() {
    let daemon = Daemon::start();
    std::fs::write(daemon.path("a.txt"), "A").unwrap();
    let (status, body) = daemon
        .post(
            "/api/rename",
            json!({"oldPath": "a.txt", "newPath": "b.txt"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["path"], "a.txt");
    assert_eq!(body["newPath"], "b.txt");
    assert_eq!(std::fs::read_to_string(daemon.path("b.txt")).unwrap(), "A");
    assert!(!daemon.path("a.txt").exists());

    std::fs::create_dir(daemon.path("dest")).unwrap();
    let (status, body) = daemon
        .post(
            "/api/move",
            json!({"sourcePath": "b.txt", "destinationPath": "dest/c.txt"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["path"], "b.txt");
    assert_eq!(body["newPath"], "dest/c.txt");
    assert_eq!(
        std::fs::read_to_string(daemon.path("dest/c.txt")).unwrap(),
        "A"
    );
}

#[tokio::test]
async fn move_follows_mv_rules() {
    let daemon = Daemon::start();
    std::fs::create_dir_all(daemon.path("src/inner")).unwrap();
    std::fs::write(daemon.path("src/inner/f"), "deep").unwrap();
    std::fs::create_dir(daemon.path("into")).unwrap();
    // Into an existing directory.
    let (status, body) = daemon
        .post(
            "/api/move",
            json!({"sourcePath": "src", "destinationPath": "into"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        std::fs::read_to_string(daemon.path("into/src/inner/f")).unwrap(),
        "deep"
    );
    // Replacing an existing file.
    std::fs::write(daemon.path("one"), "1").unwrap();
    std::fs::write(daemon.path("two"), "2").unwrap();
    let (status, _) = daemon
        .post("/api/rename", json!({"oldPath": "one", "newPath": "two"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(std::fs::read_to_string(daemon.path("two")).unwrap(), "1");
}

#[tokio::test]
async fn move_across_filesystems_copies() {
    let daemon = Daemon::start();
    // /dev/shm is tmpfs, the workspace is on the main disk.
    let outside = tempfile::tempdir_in("/dev/shm").unwrap();
    let same_fs = nix_like_same_device(&daemon.root(), outside.path());
    std::fs::create_dir_all(daemon.path("tree/sub")).unwrap();
    std::fs::write(daemon.path("tree/sub/f.txt"), "payload").unwrap();
    let destination = outside.path().join("moved");
    let (status, body) = daemon
        .post(
            "/api/move",
            json!({"sourcePath": "tree", "destinationPath": destination}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{body} (same filesystem: {same_fs})"
    );
    assert_eq!(
        std::fs::read_to_string(destination.join("sub/f.txt")).unwrap(),
        "payload"
    );
    assert!(!daemon.path("tree").exists());
}

fn nix_like_same_device(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(a).unwrap().dev() == std::fs::metadata(b).unwrap().dev()
}

#[tokio::test]
async fn rename_errors() {
    let daemon = Daemon::start();
    let (status, body) = daemon
        .post("/api/rename", json!({"oldPath": "ghost", "newPath": "b"}))
        .await;
    assert_error(status, &body, 404, "FILE_NOT_FOUND");
    assert_eq!(body["message"], "Source file not found: ghost");
    assert_eq!(body["operation"], "file.rename");

    std::fs::write(daemon.path("a"), "x").unwrap();
    let (status, body) = daemon
        .post(
            "/api/move",
            json!({"sourcePath": "a", "destinationPath": "no/such/dir/a"}),
        )
        .await;
    assert_error(status, &body, 404, "FILE_NOT_FOUND");
    assert_eq!(body["operation"], "file.move");
    assert!(daemon.path("a").exists());

    std::fs::create_dir(daemon.path("d")).unwrap();
    let (status, body) = daemon
        .post(
            "/api/move",
            json!({"sourcePath": "d", "destinationPath": "d/inside"}),
        )
        .await;
    assert_error(status, &body, 400, "VALIDATION_FAILED");
    assert!(daemon.path("d").is_dir());
}

#[tokio::test]
async fn mkdir_plain_recursive_and_errors() {
    let daemon = Daemon::start();
    let (status, body) = daemon.post("/api/mkdir", json!({"path": "one"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["recursive"], false);
    assert!(daemon.path("one").is_dir());

    let (status, body) = daemon
        .post("/api/mkdir", json!({"path": "a/b/c", "recursive": true}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["recursive"], true);
    assert!(daemon.path("a/b/c").is_dir());
    let (status, _) = daemon
        .post("/api/mkdir", json!({"path": "a/b/c", "recursive": true}))
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "recursive mkdir of an existing dir succeeds"
    );

    let (status, body) = daemon.post("/api/mkdir", json!({"path": "one"})).await;
    assert_error(status, &body, 409, "FILE_EXISTS");
    assert_eq!(body["operation"], "directory.create");

    let (status, body) = daemon.post("/api/mkdir", json!({"path": "x/y"})).await;
    assert_error(status, &body, 404, "FILE_NOT_FOUND");

    std::fs::write(daemon.path("file"), "x").unwrap();
    let (status, body) = daemon
        .post("/api/mkdir", json!({"path": "file", "recursive": true}))
        .await;
    assert_error(status, &body, 409, "FILE_EXISTS");
}

#[tokio::test]
async fn list_files_shape_and_hidden_counts() {
    let daemon = Daemon::start();
    for name in ["a.txt", "b.txt", ".hidden"] {
        std::fs::write(daemon.path(name), "12345").unwrap();
    }
    std::fs::create_dir(daemon.path("sub")).unwrap();
    std::fs::create_dir(daemon.path(".git")).unwrap();
    std::fs::write(daemon.path(".git/HEAD"), "ref").unwrap();
    std::fs::write(daemon.path("sub/c.txt"), "c").unwrap();

    let (status, body) = daemon.post("/api/list-files", json!({"path": "."})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["count"], 3);
    let files = body["files"].as_array().unwrap();
    let names: Vec<&str> = files.iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a.txt", "b.txt", "sub"]);
    let a = &files[0];
    assert_eq!(
        a["absolutePath"],
        daemon.path("a.txt").display().to_string()
    );
    assert_eq!(a["relativePath"], "a.txt");
    assert_eq!(a["type"], "file");
    assert_eq!(a["size"], 5);
    assert_eq!(a["mode"], "rw-r--r--");
    assert_eq!(
        a["permissions"],
        json!({"readable": true, "writable": true, "executable": false})
    );
    assert!(a["modifiedAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(files[2]["type"], "directory");

    let (_, body) = daemon
        .post(
            "/api/list-files",
            json!({"path": ".", "options": {"includeHidden": true}}),
        )
        .await;
    assert_eq!(body["count"], 5);

    let (_, body) = daemon
        .post(
            "/api/list-files",
            json!({"path": ".", "options": {"recursive": true}}),
        )
        .await;
    let relative: Vec<&str> = body["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["relativePath"].as_str().unwrap())
        .collect();
    assert_eq!(relative, ["a.txt", "b.txt", "sub", "sub/c.txt"]);

    let (_, body) = daemon
        .post(
            "/api/list-files",
            json!({"path": ".", "options": {"recursive": true, "includeHidden": true}}),
        )
        .await;
    assert_eq!(body["count"], 7);
}

#[tokio::test]
async fn list_files_reports_symlinks_without_following() {
    let daemon = Daemon::start();
    std::fs::create_dir(daemon.path("real")).unwrap();
    std::fs::write(daemon.path("real/f"), "x").unwrap();
    symlink("real", daemon.path("link")).unwrap();
    let (_, body) = daemon
        .post(
            "/api/list-files",
            json!({"path": ".", "options": {"recursive": true}}),
        )
        .await;
    let entries: Vec<(String, String)> = body["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["relativePath"].as_str().unwrap().into(),
                f["type"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("link".to_string(), "symlink".to_string()),
            ("real".into(), "directory".into()),
            ("real/f".into(), "file".into())
        ]
    );
}

#[tokio::test]
async fn list_files_errors() {
    let daemon = Daemon::start();
    let (status, body) = daemon
        .post("/api/list-files", json!({"path": "missing"}))
        .await;
    assert_error(status, &body, 404, "FILE_NOT_FOUND");
    assert_eq!(body["operation"], "directory.list");
    std::fs::write(daemon.path("file"), "x").unwrap();
    let (status, body) = daemon
        .post("/api/list-files", json!({"path": "file"}))
        .await;
    assert_error(status, &body, 400, "NOT_DIRECTORY");
}

#[tokio::test]
async fn exists_follows_symlinks() {
    let daemon = Daemon::start();
    std::fs::write(daemon.path("f"), "x").unwrap();
    std::fs::create_dir(daemon.path("d")).unwrap();
    symlink("nowhere", daemon.path("dangling")).unwrap();
    for (path, expected) in [
        ("f", true),
        ("d", true),
        ("missing", false),
        ("dangling", false),
    ] {
        let (status, body) = daemon.post("/api/exists", json!({"path": path})).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["exists"], expected, "{path}");
        assert_eq!(body["path"], path);
    }
}

#[tokio::test]
async fn stat_files_directories_and_links() {
    let daemon = Daemon::start();
    std::fs::write(daemon.path("f"), "hello").unwrap();
    symlink("f", daemon.path("l")).unwrap();
    let (status, body) = daemon.post("/api/stat", json!({"path": "f"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let stat = &body["stat"];
    assert_eq!(stat["type"], "file");
    assert_eq!(stat["size"], 5);
    assert_eq!(stat["modeOctal"], "0644");
    assert_eq!(stat["mode"], "rw-r--r--");
    assert!(stat["inode"].as_u64().unwrap() > 0);
    assert_eq!(stat["nlink"], 1);
    for field in ["modifiedAt", "accessedAt", "changedAt"] {
        assert!(stat[field].as_str().unwrap().ends_with('Z'), "{field}");
    }

    let (_, body) = daemon.post("/api/stat", json!({"path": "l"})).await;
    assert_eq!(body["stat"]["type"], "symlink");
    assert_eq!(body["stat"]["symlinkTarget"], "f");
    let (_, body) = daemon
        .post("/api/stat", json!({"path": "l", "followSymlinks": true}))
        .await;
    assert_eq!(body["stat"]["type"], "file");
    assert!(body["stat"].get("symlinkTarget").is_none());

    let (_, body) = daemon.post("/api/stat", json!({"path": "."})).await;
    assert_eq!(body["stat"]["type"], "directory");

    let (status, body) = daemon.post("/api/stat", json!({"path": "missing"})).await;
    assert_error(status, &body, 404, "FILE_NOT_FOUND");
    assert_eq!(body["operation"], "file.stat");
}

/// A manifest: every entry below a directory with its hash or target, computed in the
/// sandbox (two-way sync compares both sides with it), excludes applied, links never
/// followed, a FIFO listed without being opened, a changed file hashed again; and one of
/// chosen paths only.
#[tokio::test]
async fn a_manifest_lists_hashes_links_and_modes_and_follows_changes() {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::PermissionsExt;
    let daemon = Daemon::start();
    let root = daemon.path("m");
    std::fs::create_dir_all(root.join("src/empty")).unwrap();
    std::fs::create_dir_all(root.join("node_modules/x")).unwrap();
    std::fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(root.join("build.log"), "noise").unwrap();
    std::fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    symlink("/etc", root.join("src/out")).unwrap();
    nix::unistd::mkfifo(&root.join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let sha = |text: &str| format!("{:x}", Sha256::digest(text.as_bytes()));
    let request = json!({"path": "m", "exclude": ["node_modules", "*.log"]});
    let (status, body) = daemon.post("/api/files/manifest", request.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let entries = body["entries"].as_array().unwrap();
    let paths: Vec<&str> = entries
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "pipe",
            "run.sh",
            "src",
            "src/empty",
            "src/main.rs",
            "src/out"
        ]
    );
    let entry = |path: &str| entries.iter().find(|e| e["path"] == path).unwrap().clone();
    assert_eq!(entry("run.sh")["mode"], 0o750);
    assert_eq!(entry("run.sh")["sha256"], sha("#!/bin/sh\n"));
    assert_eq!(entry("src/main.rs")["type"], "file");
    assert_eq!(entry("src/main.rs")["size"], 13);
    assert_eq!(entry("src/out")["type"], "symlink");
    assert_eq!(entry("src/out")["target"], "/etc");
    assert!(
        entry("src/out").get("sha256").is_none(),
        "a link is not followed"
    );
    assert_eq!(entry("pipe")["type"], "other");
    assert_eq!(entry("src")["type"], "directory");
    // A write is seen by the next manifest, whatever was kept.
    std::fs::write(root.join("src/main.rs"), "fn main() { println!() }\n").unwrap();
    let (_, body) = daemon.post("/api/files/manifest", request).await;
    let changed = body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "src/main.rs")
        .unwrap()
        .clone();
    assert_eq!(changed["sha256"], sha("fn main() { println!() }\n"));
    // Refusals: a bad pattern names the field, a file is not a directory, outside refused.
    let (status, body) = daemon
        .post(
            "/api/files/manifest",
            json!({"path": "m", "exclude": ["[z-a]"]}),
        )
        .await;
    assert_error(status, &body, 400, "VALIDATION_FAILED");
    assert_eq!(
        body["context"]["validationErrors"][0]["field"], "exclude",
        "{body}"
    );
    assert_eq!(
        body["context"]["validationErrors"][0]["code"],
        "INVALID_PATTERN"
    );
    let (status, body) = daemon
        .post("/api/files/manifest", json!({"path": "m/run.sh"}))
        .await;
    assert_error(status, &body, 400, "NOT_DIRECTORY");
    let (status, body) = daemon
        .post("/api/files/manifest", json!({"path": "missing"}))
        .await;
    assert_error(status, &body, 404, "FILE_NOT_FOUND");

    // Chosen paths only (what a sync reads again where a change list named something):
    // each with what is below it, one not there or under a link or a file left out.
    let chosen = json!({
        "path": "m",
        "exclude": ["*.log"],
        "paths": ["src", "src/main.rs", "run.sh", "gone", "src/out/passwd", "run.sh/x", "build.log"],
    });
    let (status, body) = daemon.post("/api/files/manifest", chosen).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let paths: Vec<&str> = body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["run.sh", "src", "src/empty", "src/main.rs", "src/out"]
    );
    for (index, bad) in ["../m", "/etc", "src//main.rs"].iter().enumerate() {
        let mut paths = vec!["src"; index];
        paths.push(bad);
        let (status, body) = daemon
            .post("/api/files/manifest", json!({"path": "m", "paths": paths}))
            .await;
        assert_error(status, &body, 400, "VALIDATION_FAILED");
        assert_eq!(
            body["context"]["validationErrors"][0]["field"],
            format!("paths[{index}]"),
            "{body}"
        );
    }
}
