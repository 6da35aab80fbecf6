//! /api/read and /api/write: encodings, MIME, sizes, atomicity, and bad input.

use std::os::unix::fs::PermissionsExt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use fsd_tests::{Daemon, assert_error, assert_validation, reply};
use reqwest::StatusCode;
use serde_json::json;

/// A valid 1x1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

#[tokio::test]
async fn text_round_trip_keeps_exact_bytes() {
    let daemon = Daemon::start();
    let content = "line one\nline two, ünïcödé ✓\n\n";
    let (status, body) = daemon
        .post(
            "/api/write",
            json!({"path": "notes/a.txt", "content": content}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], true);
    assert_eq!(body["path"], "notes/a.txt");
    assert_eq!(body["bytesWritten"], content.len());
    assert_eq!(
        std::fs::read_to_string(daemon.path("notes/a.txt")).unwrap(),
        content
    );

    let (status, body) = daemon
        .post("/api/read", json!({"path": "notes/a.txt"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["content"], content);
    assert_eq!(body["encoding"], "utf-8");
    assert_eq!(body["isBinary"], false);
    assert_eq!(body["mimeType"], "text/plain");
    assert_eq!(body["size"], content.len());
    assert_eq!(body["path"], "notes/a.txt");
}

#[tokio::test]
async fn png_base64_round_trip_with_mime() {
    let daemon = Daemon::start();
    let encoded = BASE64.encode(PNG);
    let (status, body) = daemon
        .post(
            "/api/write",
            json!({"path": "img/dot.png", "content": encoded, "encoding": "base64"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(std::fs::read(daemon.path("img/dot.png")).unwrap(), PNG);

    let (status, body) = daemon
        .post("/api/read", json!({"path": "img/dot.png"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["mimeType"], "image/png");
    assert_eq!(body["encoding"], "base64");
    assert_eq!(body["isBinary"], true);
    assert_eq!(body["size"], PNG.len());
    assert_eq!(
        BASE64.decode(body["content"].as_str().unwrap()).unwrap(),
        PNG
    );

    // Without an extension, the content decides.
    std::fs::write(daemon.path("img/noext"), PNG).unwrap();
    let (_, body) = daemon.post("/api/read", json!({"path": "img/noext"})).await;
    assert_eq!(body["mimeType"], "image/png");
    assert_eq!(body["isBinary"], true);
}

#[tokio::test]
async fn explicit_encoding_wins() {
    let daemon = Daemon::start();
    std::fs::write(daemon.path("a.txt"), "hi").unwrap();
    let (_, body) = daemon
        .post("/api/read", json!({"path": "a.txt", "encoding": "base64"}))
        .await;
    assert_eq!(body["encoding"], "base64");
    assert_eq!(body["isBinary"], true);
    assert_eq!(body["content"], "aGk=");
    let (_, body) = daemon
        .post("/api/read", json!({"path": "a.txt", "encoding": "utf8"}))
        .await;
    assert_eq!(body["encoding"], "utf-8");
    assert_eq!(body["content"], "hi");
    let (status, body) = daemon
        .post("/api/read", json!({"path": "a.txt", "encoding": "latin1"}))
        .await;
    assert_validation(status, &body, "encoding");
}

#[tokio::test]
async fn text_that_is_not_utf8_travels_as_base64_not_mangled() {
    let daemon = Daemon::start();
    let latin1 = b"caf\xe9\n";
    std::fs::write(daemon.path("legacy.txt"), latin1).unwrap();
    let (_, body) = daemon
        .post("/api/read", json!({"path": "legacy.txt"}))
        .await;
    assert_eq!(body["encoding"], "base64");
    assert_eq!(
        BASE64.decode(body["content"].as_str().unwrap()).unwrap(),
        latin1
    );
}

#[tokio::test]
async fn empty_files_read_as_empty_text() {
    let daemon = Daemon::start();
    std::fs::write(daemon.path("empty"), "").unwrap();
    let (status, body) = daemon.post("/api/read", json!({"path": "empty"})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["content"], "");
    assert_eq!(body["size"], 0);
    assert_eq!(body["isBinary"], false);
}

#[tokio::test]
async fn absolute_paths_work_and_relative_ones_resolve_in_the_workspace() {
    let daemon = Daemon::start();
    let absolute = daemon.path("abs.txt").display().to_string();
    let (status, _) = daemon
        .post("/api/write", json!({"path": absolute, "content": "x"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, body) = daemon.post("/api/read", json!({"path": "./abs.txt"})).await;
    assert_eq!(body["content"], "x");
}

#[tokio::test]
async fn overwrite_keeps_mode_and_leaves_no_temp_files() {
    let daemon = Daemon::start();
    std::fs::write(daemon.path("run.sh"), "#!/bin/sh\necho old\n").unwrap();
    std::fs::set_permissions(
        daemon.path("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let (status, _) = daemon
        .post(
            "/api/write",
            json!({"path": "run.sh", "content": "#!/bin/sh\necho new\n"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let meta = std::fs::metadata(daemon.path("run.sh")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o755);
    assert_eq!(
        std::fs::read_to_string(daemon.path("run.sh")).unwrap(),
        "#!/bin/sh\necho new\n"
    );
    let names: Vec<_> = std::fs::read_dir(daemon.root())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["run.sh"]);
}

#[tokio::test]
async fn concurrent_writers_never_tear_a_file() {
    let daemon = std::sync::Arc::new(Daemon::start());
    let contents: Vec<String> = (0..16).map(|i| format!("{i:02}").repeat(200_000)).collect();
    let mut tasks = Vec::new();
    for content in contents.clone() {
        let daemon = daemon.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..3 {
                let (status, body) = daemon
                    .post(
                        "/api/write",
                        json!({"path": "shared.txt", "content": content}),
                    )
                    .await;
                assert_eq!(status, StatusCode::OK, "{body}");
            }
        }));
    }
    let reader = {
        let daemon = daemon.clone();
        let contents = contents.clone();
        tokio::spawn(async move {
            for _ in 0..30 {
                let (status, body) = daemon
                    .post("/api/read", json!({"path": "shared.txt"}))
                    .await;
                if status == StatusCode::OK {
                    let seen = body["content"].as_str().unwrap();
                    assert!(
                        contents.iter().any(|c| c == seen),
                        "torn read of {} bytes",
                        seen.len()
                    );
                }
            }
        })
    };
    for task in tasks {
        task.await.unwrap();
    }
    reader.await.unwrap();
    let last = std::fs::read_to_string(daemon.path("shared.txt")).unwrap();
    assert!(contents.contains(&last), "final file is torn");
    assert_eq!(
        std::fs::read_dir(daemon.root()).unwrap().count(),
        1,
        "temp files left"
    );
}

#[tokio::test]
async fn read_errors() {
    let daemon = Daemon::start();
    let (status, body) = daemon.post("/api/read", json!({"path": "nope.txt"})).await;
    assert_error(status, &body, 404, "FILE_NOT_FOUND");
    assert_eq!(body["message"], "File not found: nope.txt");
    assert_eq!(body["operation"], "file.read");

    std::fs::create_dir(daemon.path("dir")).unwrap();
    let (status, body) = daemon.post("/api/read", json!({"path": "dir"})).await;
    assert_error(status, &body, 400, "IS_DIRECTORY");

    let big = std::fs::File::create(daemon.path("big.bin")).unwrap();
    big.set_len(32 * 1024 * 1024 + 1).unwrap();
    let (status, body) = daemon.post("/api/read", json!({"path": "big.bin"})).await;
    assert_error(status, &body, 413, "FILE_TOO_LARGE");
    assert_eq!(body["context"]["actualSize"], 32 * 1024 * 1024 + 1);
    assert_eq!(body["context"]["maxSize"], 32 * 1024 * 1024);
    assert_eq!(body["context"]["path"], "big.bin");
}

#[tokio::test]
async fn write_errors() {
    let daemon = Daemon::start();
    let (status, body) = daemon
        .post(
            "/api/write",
            json!({"path": "x.bin", "content": "not*base64!", "encoding": "base64"}),
        )
        .await;
    assert_validation(status, &body, "content");
    assert_eq!(
        body["context"]["validationErrors"][0]["code"],
        "INVALID_BASE64"
    );
    assert!(!daemon.path("x.bin").exists());

    std::fs::create_dir(daemon.path("dir")).unwrap();
    let (status, body) = daemon
        .post("/api/write", json!({"path": "dir", "content": "x"}))
        .await;
    assert_error(status, &body, 400, "IS_DIRECTORY");

    std::fs::write(daemon.path("file"), "x").unwrap();
    let (status, body) = daemon
        .post("/api/write", json!({"path": "file/child", "content": "x"}))
        .await;
    assert_error(status, &body, 400, "NOT_DIRECTORY");
    assert_eq!(body["operation"], "file.write");
}

#[tokio::test]
async fn bad_input_is_400_with_the_field_named() {
    let daemon = Daemon::start();
    let client = reqwest::Client::new();
    for raw in ["{", "not json", "", "[1,2]", "{\"path\": \"a\"} trailing"] {
        let (status, body) = reply(client.post(daemon.url("/api/read")).body(raw)).await;
        assert_validation(status, &body, "body");
    }
    let cases = [
        ("/api/read", json!({}), "path"),
        ("/api/read", json!({"path": 7}), "path"),
        ("/api/read", json!({"path": ""}), "path"),
        ("/api/read", json!({"path": "a\u{0}b"}), "path"),
        ("/api/read", json!({"path": "a".repeat(4097)}), "path"),
        ("/api/write", json!({"path": "a"}), "content"),
        ("/api/write", json!({"path": "a", "content": 5}), "content"),
        ("/api/rename", json!({"oldPath": "a"}), "newPath"),
        (
            "/api/rename",
            json!({"oldPath": "", "newPath": "b"}),
            "oldPath",
        ),
        (
            "/api/move",
            json!({"sourcePath": "a", "destinationPath": ""}),
            "destinationPath",
        ),
        (
            "/api/mkdir",
            json!({"path": "d", "recursive": "yes"}),
            "recursive",
        ),
        (
            "/api/list-files",
            json!({"path": ".", "options": {"includeHidden": 1}}),
            "options.includeHidden",
        ),
        ("/api/exists", json!({"path": null}), "path"),
        ("/api/delete", json!({"path": "\u{0}"}), "path"),
        (
            "/api/stat",
            json!({"path": "a", "followSymlinks": "no"}),
            "followSymlinks",
        ),
        ("/api/read/stream", json!({}), "path"),
    ];
    for (route, request, field) in cases {
        let (status, body) = daemon.post(route, request.clone()).await;
        assert_validation(status, &body, field);
        assert!(
            !body["message"].as_str().unwrap().contains("line "),
            "{route} {request}: {body}"
        );
    }
}

#[tokio::test]
async fn json_bodies_over_the_limit_are_413() {
    let daemon = Daemon::start();
    let huge = vec![b'a'; 65 * 1024 * 1024];
    let (status, body) = reply(
        reqwest::Client::new()
            .post(daemon.url("/api/write"))
            .body(huge),
    )
    .await;
    assert_error(status, &body, 413, "FILE_TOO_LARGE");
}
