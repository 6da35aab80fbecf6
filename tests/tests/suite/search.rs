//! `/api/search` and `/api/search/stream` against the real binary: what `rg` would find in
//! a tree with a git ignore, hidden and binary files, bounds that stop and say so, and bad
//! input named by its field.

use fsd_tests::Daemon;
use serde_json::{Value, json};

/// A small project: ignored `node_modules`, a hidden file, a binary file, sources.
fn project(daemon: &Daemon) -> String {
    let root = daemon.path("project");
    for dir in [".git", "node_modules/lib", "src"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(root.join(".gitignore"), "node_modules/\n").unwrap();
    std::fs::write(root.join("node_modules/lib/i.js"), "const needle = 1;\n").unwrap();
    std::fs::write(root.join(".env"), "NEEDLE=secret\n").unwrap();
    std::fs::write(root.join("blob.bin"), b"needle\0\x01").unwrap();
    std::fs::write(
        root.join("src/main.rs"),
        "fn main() {\n    let needle = 1;\n}\n",
    )
    .unwrap();
    std::fs::write(root.join("src/lib.rs"), "// Needle here\npub fn f() {}\n").unwrap();
    root.display().to_string()
}

fn lines(answer: &Value) -> Vec<(String, u64, u64)> {
    answer["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let path = m["path"].as_str().unwrap();
            let name = path.rsplit_once("/project/").map_or(path, |(_, rest)| rest);
            (
                name.to_string(),
                m["lineNumber"].as_u64().unwrap(),
                m["column"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn search_finds_what_rg_finds() {
    let daemon = Daemon::start();
    let root = project(&daemon);
    let (status, answer) = daemon
        .post("/api/search", json!({"path": root, "pattern": "needle"}))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        lines(&answer),
        [("src/main.rs".to_string(), 2, 9)],
        "{answer}"
    );
    assert_eq!(answer["matches"][0]["line"], "    let needle = 1;");
    assert_eq!(answer["truncated"], false);
    let (_, answer) = daemon
        .post(
            "/api/search",
            json!({"path": root, "pattern": "needle", "caseInsensitive": true, "context": 1}),
        )
        .await;
    assert_eq!(lines(&answer).len(), 2, "{answer}");
    let main = &answer["matches"][1];
    assert_eq!(
        (main["before"].clone(), main["after"].clone()),
        (json!(["fn main() {"]), json!(["}"]))
    );
    let (_, answer) = daemon
        .post("/api/search", json!({"path": root, "pattern": "needle", "hidden": true, "noIgnore": true, "caseInsensitive": true}))
        .await;
    let found: Vec<String> = lines(&answer).into_iter().map(|(path, ..)| path).collect();
    assert_eq!(
        found,
        [".env", "node_modules/lib/i.js", "src/lib.rs", "src/main.rs"],
        "the binary is skipped"
    );
    let (_, answer) = daemon
        .post(
            "/api/search",
            json!({"path": root, "pattern": "n.edle", "literal": true}),
        )
        .await;
    assert_eq!(lines(&answer).len(), 0, "{answer}");
    // Names by glob, as `rg --files -g`.
    let (_, answer) = daemon
        .post("/api/search", json!({"path": root, "globs": ["*.rs"]}))
        .await;
    let files: Vec<&str> = answer["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        [format!("{root}/src/lib.rs"), format!("{root}/src/main.rs")],
        "{answer}"
    );
    // A relative path means the session's directory.
    let (status, _) = daemon
        .post(
            "/api/session/create",
            json!({"id": "in-src", "cwd": format!("{root}/src")}),
        )
        .await;
    assert_eq!(status, 200);
    let (_, answer) = daemon
        .post(
            "/api/search",
            json!({"path": ".", "pattern": "needle", "sessionId": "in-src"}),
        )
        .await;
    assert_eq!(
        lines(&answer),
        [("src/main.rs".to_string(), 2, 9)],
        "{answer}"
    );
}

#[tokio::test]
async fn a_search_stops_at_its_bounds_and_says_so() {
    let daemon = Daemon::start();
    let dir = daemon.path("many");
    std::fs::create_dir_all(&dir).unwrap();
    let text = "match me\n".repeat(5000) + &format!("{}\n", "x".repeat(2000));
    std::fs::write(dir.join("big.txt"), text).unwrap();
    let root = dir.display().to_string();
    let (status, answer) = daemon
        .post(
            "/api/search",
            json!({"path": root, "pattern": "match", "maxResults": 100}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["matches"].as_array().unwrap().len(), 100);
    assert_eq!(
        (answer["truncated"].clone(), answer["stopped"].clone()),
        (json!(true), json!("max_results"))
    );
    let (_, answer) = daemon
        .post(
            "/api/search",
            json!({"path": root, "pattern": "^x+$", "maxLineBytes": 10}),
        )
        .await;
    let line = &answer["matches"][0];
    assert_eq!(
        (line["line"].clone(), line["truncated"].clone()),
        (json!("xxxxxxxxxx"), json!(true))
    );
}

#[tokio::test]
async fn the_stream_sends_results_as_found_then_complete() {
    let daemon = Daemon::start();
    let root = project(&daemon);
    let response = daemon
        .request(reqwest::Method::POST, "/api/search/stream")
        .json(&json!({"path": root, "pattern": "fn "}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    let events: Vec<Value> = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["match", "match", "complete"], "{body}");
    assert_eq!(events[2]["results"], 2);
    assert_eq!(events[2]["truncated"], false);
}

#[tokio::test]
async fn bad_searches_name_their_field() {
    let daemon = Daemon::start();
    let root = project(&daemon);
    for (route, body, code, field) in [
        (
            "/api/search",
            json!({"path": root, "pattern": "("}),
            "VALIDATION_FAILED",
            "pattern",
        ),
        (
            "/api/search/stream",
            json!({"path": root, "pattern": "("}),
            "VALIDATION_FAILED",
            "pattern",
        ),
        (
            "/api/search",
            json!({"path": root, "pattern": ""}),
            "VALIDATION_FAILED",
            "pattern",
        ),
        (
            "/api/search",
            json!({"path": root, "globs": ["["]}),
            "VALIDATION_FAILED",
            "globs",
        ),
        (
            "/api/search",
            json!({"path": root, "pattern": "a", "maxResults": 0}),
            "VALIDATION_FAILED",
            "maxResults",
        ),
        (
            "/api/search",
            json!({"path": root, "pattern": "a", "context": 1000}),
            "VALIDATION_FAILED",
            "context",
        ),
        (
            "/api/search",
            json!({"path": root, "pattern": "a", "timeoutMs": 0}),
            "VALIDATION_FAILED",
            "timeoutMs",
        ),
        (
            "/api/search",
            json!({"path": "", "pattern": "a"}),
            "VALIDATION_FAILED",
            "path",
        ),
        (
            "/api/search",
            json!({"pattern": "a"}),
            "VALIDATION_FAILED",
            "path",
        ),
        (
            "/api/search",
            json!({"path": format!("{root}/missing"), "pattern": "a"}),
            "FILE_NOT_FOUND",
            "",
        ),
    ] {
        let (status, answer) = daemon.post(route, body.clone()).await;
        assert_eq!(answer["code"], code, "{route} {body}: {answer}");
        assert!(status == 400 || status == 404, "{route} {body}: {status}");
        if !field.is_empty() {
            assert_eq!(
                answer["context"]["validationErrors"][0]["field"], field,
                "{body}: {answer}"
            );
        }
    }
}

#[tokio::test]
async fn the_sdk_and_fsctl_search_as_the_routes_do() {
    let daemon = Daemon::start();
    let root = project(&daemon);
    let sandbox = fsd_sdk::Sandbox::connect(&daemon.url, daemon.token.as_deref()).unwrap();
    let request = fsd_sdk::api::search::SearchRequest {
        path: root.clone(),
        pattern: Some("needle".into()),
        ..Default::default()
    };
    let answer = sandbox.search(&request).await.unwrap();
    assert_eq!(answer.matches.len(), 1);
    assert_eq!(answer.matches[0].line_number, 2);
    let events: Vec<_> =
        futures_util::StreamExt::collect::<Vec<_>>(sandbox.search_stream(&request).await.unwrap())
            .await;
    assert!(matches!(
        events.last(),
        Some(Ok(fsd_sdk::api::search::SearchEvent::Complete {
            results: 1,
            ..
        }))
    ));
    let bad = fsd_sdk::api::search::SearchRequest {
        pattern: Some("(".into()),
        ..request.clone()
    };
    let error = sandbox.search(&bad).await.unwrap_err();
    assert_eq!(
        error.code(),
        Some(&fsd_sdk::ErrorCode::ValidationFailed),
        "{error}"
    );

    let fsctl = |args: &[&str]| fsd_tests::fsctl(&daemon, args);
    let grep = fsctl(&["grep", "needle", &root]);
    assert!(grep.status.success(), "{grep:?}");
    assert_eq!(
        String::from_utf8_lossy(&grep.stdout),
        format!("{root}/src/main.rs:2:9:    let needle = 1;\n")
    );
    let nothing = fsctl(&["grep", "-F", "absent text", &root]);
    assert_eq!(
        nothing.status.code(),
        Some(1),
        "nothing found exits 1, as rg"
    );
    // An error is not "nothing found": 2, as rg (1 before).
    let bad = fsctl(&["grep", "(", &root]);
    assert_eq!(bad.status.code(), Some(2), "a bad regex exits 2: {bad:?}");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("fsctl:"),
        "{bad:?}"
    );
    let find = fsctl(&["find", &root, "-g", "*.rs"]);
    assert_eq!(
        String::from_utf8_lossy(&find.stdout).lines().count(),
        2,
        "{find:?}"
    );
}

#[tokio::test]
async fn replace_rewrites_what_the_search_finds_and_a_dry_run_shows_the_diff() {
    use std::os::unix::fs::PermissionsExt;
    let daemon = Daemon::start();
    let root = project(&daemon);
    let main = daemon.path("project/src/main.rs");
    std::fs::set_permissions(&main, std::fs::Permissions::from_mode(0o751)).unwrap();
    let body = json!({"path": root, "pattern": r"let (\w+) = 1", "replacement": "let ${1}_v2 = 2", "dryRun": true});
    let (status, answer) = daemon.post("/api/replace", body.clone()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["replacements"], 1, "{answer}");
    let diff = answer["files"][0]["diff"].as_str().unwrap();
    assert!(
        diff.ends_with("@@ -2,1 +2,1 @@\n-    let needle = 1;\n+    let needle_v2 = 2;\n"),
        "{diff}"
    );
    assert!(
        std::fs::read_to_string(&main)
            .unwrap()
            .contains("let needle = 1;"),
        "a dry run changes nothing"
    );
    let mut body = body;
    body["dryRun"] = json!(false);
    let (status, answer) = daemon.post("/api/replace", body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["files"][0]["path"], format!("{root}/src/main.rs"));
    assert_eq!(
        std::fs::read_to_string(&main).unwrap(),
        "fn main() {\n    let needle_v2 = 2;\n}\n"
    );
    let mode = std::fs::metadata(&main).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o751, "the rewrite keeps the file's mode");
    let ignored = std::fs::read_to_string(daemon.path("project/node_modules/lib/i.js")).unwrap();
    assert_eq!(
        ignored, "const needle = 1;\n",
        "what the search skips is left alone"
    );
    for (body, field) in [
        (
            json!({"path": root, "pattern": "(", "replacement": "x"}),
            "pattern",
        ),
        (json!({"path": root, "pattern": "x"}), "replacement"),
        (
            json!({"path": root, "pattern": "x", "replacement": "y", "maxFiles": 0}),
            "maxFiles",
        ),
    ] {
        let (status, answer) = daemon.post("/api/replace", body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(
            answer["context"]["validationErrors"][0]["field"], field,
            "{body}: {answer}"
        );
    }
}
