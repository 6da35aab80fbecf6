//! Ping, version, capabilities, unknown routes, CORS, tokens, start-up checks and shutdown,
//! and fsd driven by the official `@cloudflare/sandbox` route clients.

use fsd_tests::{Daemon, Options, assert_error, binary};
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn ping_reports_healthy_with_message() {
    let daemon = Daemon::start();
    let (status, body) = daemon.get("/api/ping").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["success"], true);
    assert_eq!(body["status"], "healthy");
    assert_eq!(body["message"], "healthy");
    let timestamp = body["timestamp"].as_str().unwrap();
    assert_eq!(timestamp.len(), 24, "{timestamp}");
    assert!(timestamp.ends_with('Z'));
}

#[tokio::test]
async fn version_and_root() {
    let daemon = Daemon::start();
    let (status, body) = daemon.get("/api/version").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["success"], true);
    // The SDK version fsd stands in for, the one of the official clients the suite runs,
    // so their version check sees no mismatch; fsd's own beside it.
    assert_eq!(body["version"], fsd_api::system::COMPATIBLE_SDK_VERSION);
    let lock: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fsd_tests::repo_root().join("tests/clients/package-lock.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        lock["packages"]["node_modules/@cloudflare/sandbox"]["version"],
        fsd_api::system::COMPATIBLE_SDK_VERSION
    );
    assert!(body["fsdVersion"].as_str().is_some_and(|v| !v.is_empty()));
    let root = reqwest::get(daemon.url("/")).await.unwrap();
    assert_eq!(root.status(), StatusCode::OK);
    assert!(root.text().await.unwrap().contains("fsd"));
}

#[tokio::test]
async fn capabilities_describe_this_host() {
    let mut daemon = Daemon::start();
    let (status, body) = daemon.get("/api/capabilities").await;
    assert_eq!(status, StatusCode::OK);
    let caps = &body["capabilities"];
    for flag in [
        "root",
        "canMount",
        "overlayfs",
        "squashfs",
        "loopDevices",
        "fuse",
        "pidNamespaces",
        "confined",
    ] {
        assert!(caps[flag].is_boolean(), "{flag} in {body}");
    }
    assert!(
        caps["inotify"]["maxUserWatches"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{body}"
    );
    assert_eq!(caps["workspace"], daemon.root().display().to_string());
    assert_eq!(caps["confined"], false);
    assert_eq!(caps["root"], fsd_tests::is_root());
    // Each run of the daemon has its own id (preview URLs of an earlier run are stale).
    let first = caps["runtimeId"].as_str().unwrap().to_string();
    assert_eq!(first.len(), 16, "{first}");
    assert!(first.bytes().all(|b| b.is_ascii_hexdigit()));
    daemon.restart();
    let (_, again) = daemon.get("/api/capabilities").await;
    assert_ne!(again["capabilities"]["runtimeId"], first.as_str());
}

#[tokio::test]
async fn unknown_routes_and_methods_get_the_404_envelope() {
    let daemon = Daemon::start();
    for (method, route) in [
        (Method::GET, "/api/nope"),
        (Method::POST, "/api/nope"),
        (Method::GET, "/api/read"),
        (Method::DELETE, "/api/write"),
    ] {
        let response = daemon.request(method.clone(), route).send().await.unwrap();
        let status = response.status();
        assert_eq!(response.headers()["access-control-allow-origin"], "*");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {route}");
        assert_eq!(body["code"], "UNKNOWN_ERROR");
        assert_eq!(body["httpStatus"], 404);
        assert_eq!(body["message"], "The requested endpoint was not found");
    }
}

#[tokio::test]
async fn cors_headers_on_success_errors_and_preflight() {
    let daemon = Daemon::start_with(Options {
        token: Some("secret".into()),
        ..Options::default()
    });
    let ok = daemon
        .request(Method::GET, "/api/ping")
        .header("Origin", "https://a.example")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.headers()["access-control-allow-origin"], "*");
    let err = daemon
        .request(Method::POST, "/api/read")
        .header("Origin", "https://a.example")
        .json(&json!({"path": "missing"}))
        .send()
        .await
        .unwrap();
    assert_eq!(err.status(), StatusCode::NOT_FOUND);
    assert_eq!(err.headers()["access-control-allow-origin"], "*");
    // A preflight carries no token, and is answered all the same.
    let preflight = reqwest::Client::new()
        .request(Method::OPTIONS, daemon.url("/api/read"))
        .header("Origin", "https://a.example")
        .header("Access-Control-Request-Method", "POST")
        .header(
            "Access-Control-Request-Headers",
            "content-type,x-session-id,authorization",
        )
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let headers = preflight.headers();
    assert_eq!(headers["access-control-allow-origin"], "*");
    let methods = headers["access-control-allow-methods"].to_str().unwrap();
    for method in ["GET", "POST", "PUT", "DELETE", "OPTIONS"] {
        assert!(methods.contains(method), "{methods}");
    }
    let allowed = headers["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    for header in [
        "content-type",
        "authorization",
        "x-session-id",
        "x-sandbox-id",
        "x-trace-id",
    ] {
        assert!(allowed.contains(header), "{allowed}");
    }
}

#[tokio::test]
async fn token_is_enforced_on_every_route_but_ping() {
    let daemon = Daemon::start_with(Options {
        token: Some("s3cret-token".into()),
        ..Options::default()
    });
    let anonymous = reqwest::Client::new();
    let ping = anonymous.get(daemon.url("/api/ping")).send().await.unwrap();
    assert_eq!(ping.status(), StatusCode::OK);
    for request in [
        anonymous.get(daemon.url("/api/version")),
        anonymous
            .post(daemon.url("/api/read"))
            .json(&json!({"path": "x"})),
        anonymous.get(daemon.url("/api/files/raw?path=x")),
        anonymous
            .get(daemon.url("/api/version"))
            .bearer_auth("wrong"),
        anonymous
            .get(daemon.url("/api/version"))
            .header("X-Fsd-Token", "s3cret-tokeN"),
        anonymous
            .get(daemon.url("/api/version"))
            .header("Authorization", "Basic s3cret-token"),
    ] {
        let response = request.send().await.unwrap();
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        let status = response.status();
        let body: serde_json::Value = response.json().await.unwrap();
        assert_error(status, &body, 401, "UNAUTHORIZED");
    }
    let bearer = anonymous
        .get(daemon.url("/api/version"))
        .bearer_auth("s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), StatusCode::OK);
    let header = anonymous
        .get(daemon.url("/api/version"))
        .header("X-Fsd-Token", "s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(header.status(), StatusCode::OK);
}

#[test]
fn refuses_a_public_address_without_a_token() {
    let workspace = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(binary("fsd"))
        .args(["serve", "--listen", "0.0.0.0:0", "--workspace"])
        .arg(workspace.path())
        .env_remove("FSD_TOKEN")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--no-auth") && stderr.contains("--token"),
        "{stderr}"
    );
}

/// An address another server holds is named, with the flag that changes it (the error
/// said only "Address already in use").
#[test]
fn a_busy_address_is_named_with_the_flag_that_changes_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let workspace = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(binary("fsd"))
        .args(["serve", "--no-auth", "--listen", &address, "--workspace"])
        .arg(workspace.path())
        .arg("--state-dir")
        .arg(state.path())
        .output()
        .unwrap();
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on {address}")) && stderr.contains("--listen"),
        "{stderr}"
    );
}

#[test]
fn serves_a_public_address_with_no_auth_when_asked() {
    let workspace = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(binary("fsd"))
        .args(["serve", "--listen", "0.0.0.0:0", "--no-auth", "--workspace"])
        .arg(workspace.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let url = fsd_tests::read_listen_line(&mut child);
    assert!(url.starts_with("http://0.0.0.0:"), "{url}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn sigterm_shuts_down_cleanly() {
    let mut daemon = Daemon::start();
    let (status, _) = daemon.get("/api/ping").await;
    assert_eq!(status, StatusCode::OK);
    let exit = daemon.terminate();
    assert!(exit.success(), "{exit:?}");
}

/// Every method of the official route clients (`@cloudflare/sandbox` 0.12.7, pinned in
/// `tests/clients`), each driven by `tests/clients/official.mjs`. Three reject by design, as
/// they do against the reference: `utils.getCommands` (the reference's route always fails),
/// `utils.listSessions` and `files.writeFileStream` (RPC transport only).
const OFFICIAL_CLIENT_METHODS: &[&str] = &[
    "utils.ping",
    "utils.getVersion",
    "utils.createSession",
    "utils.getCommands",
    "utils.listSessions",
    "files.mkdir",
    "files.writeFile",
    "files.readFile",
    "files.readFileStream",
    "files.exists",
    "files.renameFile",
    "files.moveFile",
    "files.listFiles",
    "files.deleteFile",
    "files.writeFileStream",
    "commands.execute",
    "commands.executeStream",
    "processes.startProcess",
    "processes.listProcesses",
    "processes.getProcess",
    "processes.getProcessLogs",
    "processes.streamProcessLogs",
    "processes.killProcess",
    "processes.killAllProcesses",
    "ports.watchPort",
    "watch.watch",
    "watch.checkChanges",
    "backup.createArchive",
    "backup.restoreArchive",
    "backup.uploadParts",
    "interpreter.createCodeContext",
    "interpreter.runCodeStream",
    "interpreter.streamCode",
    "interpreter.listCodeContexts",
    "interpreter.deleteCodeContext",
    "git.checkout",
    "utils.deleteSession",
];

#[tokio::test]
async fn the_official_route_clients_drive_fsd() {
    official_clients_drive_fsd("http").await;
}

/// The same methods through the clients' WebSocket transport (`/ws`), as a Durable Object
/// configured with `transport: "websocket"` sends them.
#[tokio::test]
async fn the_official_clients_websocket_transport_drives_fsd() {
    official_clients_drive_fsd("websocket").await;
}

async fn official_clients_drive_fsd(transport: &str) {
    if !fsd_tests::available_or_skip(
        fsd_tests::node::installed("@cloudflare/sandbox") && fsd_tests::is_root(),
        "the_official_route_clients_drive_fsd",
        "node, `npm ci --prefix tests/clients` and root (for the backup restore)",
    ) {
        return;
    }
    let daemon = Daemon::start();
    // Archives live under /var/backups, as in the reference; this run's own directory.
    let archives =
        std::path::PathBuf::from(format!("/var/backups/fsd-clients-{}", std::process::id()));
    std::fs::create_dir_all(&archives).unwrap();
    let args = [
        daemon.url.clone(),
        daemon.root().display().to_string(),
        archives.display().to_string(),
    ];
    let env = [("FSD_CLIENT_TRANSPORT", transport)];
    let limit = std::time::Duration::from_secs(120);
    let reported = fsd_tests::node::run_script("official.mjs", &args, &env, limit).await;
    let _ = std::fs::remove_dir_all(&archives);
    let failed: Vec<String> = reported
        .iter()
        .filter(|call| !call.ok)
        .map(|call| format!("{}: {}", call.method, call.detail))
        .collect();
    assert!(
        failed.is_empty(),
        "client methods failed:\n{}",
        failed.join("\n")
    );
    let seen: Vec<&str> = reported.iter().map(|call| call.method.as_str()).collect();
    assert_eq!(seen, OFFICIAL_CLIENT_METHODS, "every client method ran");
}

/// `fsd serve 2>&1 | tee log`, then Ctrl-C, which takes `tee` too: the daemon's stderr is a
/// pipe whose reader has gone. It logs its stop and exits as with a terminal, without a
/// panic (exit 101 before).
#[test]
fn serve_stops_cleanly_when_its_stderr_reader_has_gone() {
    let workspace = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(binary("fsd"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--log-level",
            "info",
            "--workspace",
        ])
        .arg(workspace.path())
        .arg("--state-dir")
        .arg(state.path())
        .env_remove("FSD_TOKEN")
        .env("FSD_INTERPRETER_POOL", "0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    fsd_tests::read_listen_line(&mut child);
    drop(child.stderr.take());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(
        matches!(status.code(), Some(0) | Some(130)),
        "fsd serve ended with {status:?}"
    );
}
