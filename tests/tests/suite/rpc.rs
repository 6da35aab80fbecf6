//! `/rpc`: the Sandbox object's control plane over capnweb. The SandboxAPI through
//! capnweb's own client in Node (`tests/clients/rpc.mjs`), and the protocol held against a
//! hostile peer: malformed frames, unknown ids, releases of what was never exported, a
//! flood of calls, a call that never resolves, a client that vanishes mid-stream.

use std::time::Duration;

use fsd_tests::Daemon;
use fsd_tests::ws::WsClient;
use serde_json::{Value, json};

/// Every call `rpc.mjs` makes, in order.
const RPC_CALLS: &[&str] = &[
    "utils.ping",
    "utils.getVersion",
    "utils.getCommands",
    "utils.createSession",
    "utils.listSessions",
    "commands.execute",
    "commands.executeStream",
    "files.mkdir",
    "files.writeFile",
    "files.readFile",
    "files.writeFileStream",
    "files.readFile none",
    "files.readFileStream",
    "files.exists",
    "files.listFiles",
    "files.renameFile",
    "files.moveFile",
    "files.deleteFile",
    "processes.startProcess",
    "processes.listProcesses",
    "processes.getProcess",
    "processes.getProcessLogs",
    "processes.killProcess",
    "processes.streamProcessLogs",
    "processes.killAllProcesses",
    "ports.watchPort",
    "watch.watch and checkChanges",
    "git.checkout",
    "interpreter",
    "backup",
    "tunnels",
    "unknown method",
    "utils.deleteSession",
];

#[tokio::test]
async fn capnwebs_own_client_drives_every_sandbox_api_method() {
    if !fsd_tests::available_or_skip(
        fsd_tests::node::installed("capnweb") && fsd_tests::is_root(),
        "capnwebs_own_client_drives_every_sandbox_api_method",
        "node, `npm ci --prefix tests/clients` and root (for the backup restore)",
    ) {
        return;
    }
    // Tunnels run the cloudflared stand-in (`tests/src/bin`), which answers as cloudflared.
    let stand_in = fsd_tests::binary("cloudflared-stand-in");
    let daemon = Daemon::start_with(fsd_tests::Options {
        extra_args: vec!["--cloudflared".into(), stand_in.display().to_string()],
        env: vec![("FSD_STAND_IN".into(), "ok".into())],
        ..fsd_tests::Options::default()
    });
    let limit = Duration::from_secs(180);
    every_check_passes("rpc.mjs", &daemon, &[], limit, RPC_CALLS).await;
}

/// Large files through the next line's `files.writeFileStream`, each 16 MiB starting with
/// a burst of 600 writes of 128 B (more writes in flight than were once allowed to queue
/// on one pipe, which ended the socket), ten times each beside the suite's other tests
/// (no core spun for it: three minutes of that starved them): capnweb's
/// window of bytes pushes back, no number of writes ends the socket, and other calls on
/// the socket go on meanwhile. Each file is what was sent (its SHA-256).
#[tokio::test]
async fn large_streams_of_small_writes_push_back_and_keep_the_socket() {
    if !fsd_tests::available_or_skip(
        fsd_tests::node::installed("capnweb"),
        "large_streams_of_small_writes_push_back_and_keep_the_socket",
        "node and `npm ci --prefix tests/clients`",
    ) {
        return;
    }
    const ROUNDS: usize = 10;
    const SIZES_MIB: [u64; 2] = [40, 400];
    let daemon = Daemon::start();
    let sizes = SIZES_MIB.map(|mib| mib.to_string()).join(",");
    let args = [
        daemon.url.clone(),
        daemon.root().display().to_string(),
        ROUNDS.to_string(),
        sizes,
    ];
    let reported =
        fsd_tests::node::run_script("stream-writes.mjs", &args, &[], Duration::from_secs(1200))
            .await;
    let failed: Vec<String> = reported
        .iter()
        .filter(|write| !write.ok)
        .map(|write| format!("{}: {}", write.method, write.detail))
        .collect();
    assert!(failed.is_empty(), "failed:\n{}", failed.join("\n"));
    assert_eq!(reported.len(), ROUNDS * SIZES_MIB.len(), "{reported:?}");
    for write in &reported {
        println!("  {}: {}", write.method, write.detail);
    }
    // The last round's files are what it sent.
    for (mib, write) in SIZES_MIB
        .iter()
        .zip(&reported[reported.len() - SIZES_MIB.len()..])
    {
        let path = daemon.path(&format!("streamed/{mib}.bin"));
        let summed = std::process::Command::new("sha256sum")
            .arg(&path)
            .output()
            .expect("sha256sum");
        let summed = String::from_utf8_lossy(&summed.stdout);
        let sum = summed.split_whitespace().next().unwrap_or("");
        assert!(
            write.detail.ends_with(&format!("sha256 {sum}")),
            "{}: {sum}, sent {}",
            path.display(),
            write.detail
        );
    }
}

/// Runs a Node client against `daemon` and asserts it reported exactly `expected`, in
/// order, every one passed.
async fn every_check_passes(
    script: &str,
    daemon: &Daemon,
    env: &[(&str, &str)],
    limit: Duration,
    expected: &[&str],
) {
    let args = [daemon.url.clone(), daemon.root().display().to_string()];
    let reported = fsd_tests::node::run_script(script, &args, env, limit).await;
    let failed: Vec<String> = reported
        .iter()
        .filter(|call| !call.ok)
        .map(|call| format!("{}: {}", call.method, call.detail))
        .collect();
    assert!(
        failed.is_empty(),
        "{script}: failed:\n{}",
        failed.join("\n")
    );
    let seen: Vec<&str> = reported.iter().map(|call| call.method.as_str()).collect();
    assert_eq!(seen, expected, "{script}: every check ran");
}

/// Every check `next.mjs` makes, in order.
const NEXT_CHECKS: &[&str] = &[
    "utils.getRuntimeMetadata",
    "gate",
    "files",
    "processes.start and its exit",
    "processes env, cwd and the base environment",
    "processes.openLogs since, replay and follow",
    "processes.openLogs truncated at the kept limit",
    "processes.kill, timeout and the whole tree",
    "processes refusals",
    "subscription protocol",
    "ports.openWatch",
    "watch.watch and checkChanges",
    "terminals",
    "/ws/terminal",
    "tunnels",
    "workspace archives",
    "backup",
    "mounts",
    "extensions: the interpreter",
    "extensions: any package, run as a sidecar",
    "extensions: refusals",
    "processes retention",
];

/// The SDK's next line through capnweb's own client (`tests/clients/next.mjs`): the
/// handshake, then each served domain, subscriptions as the object uses them, each family
/// leaving nothing exported or pending.
#[tokio::test]
async fn capnwebs_own_client_drives_the_next_lines_methods() {
    if !fsd_tests::available_or_skip(
        fsd_tests::node::installed("capnweb") && fsd_tests::node::installed("bun"),
        "capnwebs_own_client_drives_the_next_lines_methods",
        "node and `npm ci --prefix tests/clients`",
    ) {
        return;
    }
    // Tunnels run the cloudflared stand-in (`tests/src/bin`), which answers as cloudflared;
    // extension sidecars run on the clients' Bun (the image has its own).
    let stand_in = fsd_tests::binary("cloudflared-stand-in");
    let bun = fsd_tests::node::clients_dir().join("node_modules/.bin/bun");
    // At the reference's retention (1 MiB of output a process), as its suite expects.
    let daemon = Daemon::start_with(fsd_tests::Options {
        extra_args: vec![
            "--cloudflared".into(),
            stand_in.display().to_string(),
            "--bun".into(),
            bun.display().to_string(),
            "--process-log-bytes".into(),
            "1048576".into(),
        ],
        env: vec![("FSD_STAND_IN".into(), "ok".into())],
        ..fsd_tests::Options::default()
    });
    // Bucket mounts need FUSE and the privilege to mount; the store is the embedded one.
    let test = "capnwebs_own_client_drives_the_next_lines_methods";
    let fuse = fsd_tests::require_mount_privilege(test)
        && fsd_tests::available_or_skip(
            std::path::Path::new("/dev/fuse").exists(),
            test,
            "/dev/fuse",
        );
    let store = fuse.then(fsd_tests::s3::Store::start);
    let env: Vec<(&str, &str)> = match &store {
        Some(store) => vec![
            ("NEXT_S3_URL", store.url.as_str()),
            ("NEXT_S3_KEY", fsd_tests::s3::ACCESS_KEY),
            ("NEXT_S3_SECRET", fsd_tests::s3::SECRET_KEY),
            ("NEXT_S3_BUCKET", fsd_tests::s3::BUCKET),
        ],
        None => Vec::new(),
    };
    let limit = Duration::from_secs(120);
    every_check_passes("next.mjs", &daemon, &env, limit, NEXT_CHECKS).await;
}

/// A next-line socket activated on `daemon`.
async fn activated(daemon: &Daemon) -> Peer {
    let mut peer = Peer::connect(daemon).await;
    let metadata = peer.call(1, "utils", "getRuntimeMetadata", json!([])).await;
    let incarnation = metadata[2]["runtimeIncarnationID"].clone();
    let active = peer
        .call(2, "utils", "activateControlSession", json!([incarnation]))
        .await;
    assert_eq!(active[0], "resolve", "{active}");
    peer
}

/// The objects the daemon exports on a next socket, against a hostile peer: a release of
/// what it never gave breaks the protocol, a call on a released one is refused, a reader
/// that never acknowledges holds a bounded window, and a dropped socket loses no process.
#[tokio::test]
async fn the_next_lines_exports_hold_against_a_hostile_peer() {
    let daemon = Daemon::start();
    let mut peer = activated(&daemon).await;
    // A process that writes without end, and a subscription to it whose writes are never
    // acknowledged: what is in flight stays within the window.
    let started = peer
        .call(3, "processes", "start", json!([[["yes", "fsd"]], {}]))
        .await;
    let id = started[2]["id"].as_str().expect("a process id").to_string();
    let logs = peer
        .call(4, "processes", "openLogs", json!([id, {"follow": true}]))
        .await;
    assert_eq!(logs[2], json!(["export", -1]), "{logs}");
    peer.send(json!(["push", ["pipeline", -1, ["stream"], []]]))
        .await;
    peer.send(json!(["pull", 5])).await;
    let mut written = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while tokio::time::Instant::now() < deadline {
        let Some(message) = peer.socket.next(Duration::from_millis(200)).await else {
            continue;
        };
        if message[0] == "stream" {
            written += message.to_string().len();
        }
    }
    assert!(written > 0, "the subscription writes");
    // The window is 1 MiB of events; one more may be on its way as it fills.
    assert!(
        written <= (1 << 20) + 100_000,
        "{written} bytes of unacknowledged writes"
    );
    // Cancelled and released: the pipe closes and the export is gone.
    peer.send(json!(["push", ["pipeline", -1, ["cancel"], []]]))
        .await;
    peer.send(json!(["release", -1, 1])).await;
    let call = json!(["push", ["pipeline", -1, ["stream"], []]]);
    peer.send(call).await;
    peer.send(json!(["pull", 7])).await;
    let refused = loop {
        let message = peer.next().await.expect("an answer");
        if message[1] == 7 && message[0] == "reject" {
            break message;
        }
    };
    assert_eq!(refused[2][1], "RangeError", "{refused}");
    // A socket that goes loses no process: another one of this runtime sees it running,
    // and stops it.
    drop(peer);
    let mut other = activated(&daemon).await;
    let seen = other.call(3, "processes", "get", json!([id])).await;
    assert_eq!(seen[2]["state"], "running", "{seen}");
    let killed = other.call(4, "processes", "kill", json!([id, 9])).await;
    assert_eq!(killed[0], "resolve", "{killed}");
    // `/ws/terminal` refuses in plain text before the upgrade.
    let upgrade = |query: &str| {
        reqwest::Client::new()
            .get(daemon.url(&format!("/ws/terminal{query}")))
            .header("connection", "Upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
    };
    let missing = upgrade("").send().await.expect("an answer");
    assert_eq!(missing.status(), 400);
    assert_eq!(
        missing.text().await.unwrap(),
        "terminalId query parameter required"
    );
    let foreign = upgrade("?terminalId=t&runtimeIncarnationID=another")
        .send()
        .await
        .expect("an answer");
    assert_eq!(foreign.status(), 409);
    assert_eq!(
        foreign.text().await.unwrap(),
        "Runtime incarnation mismatch"
    );
    // A release of an export never given breaks the protocol: the session ends.
    other.send(json!(["release", -40, 1])).await;
    let mut aborted = false;
    while let Some(message) = other.next().await {
        if message[0] == "abort" {
            aborted = true;
            break;
        }
    }
    assert!(aborted, "an abort for the release of an unknown export");
}

/// A raw capnweb peer.
struct Peer {
    socket: WsClient,
}

impl Peer {
    async fn connect(daemon: &Daemon) -> Peer {
        Peer {
            socket: WsClient::connect(daemon, "/rpc").await,
        }
    }

    async fn send(&mut self, message: Value) {
        self.socket.send_json(&message).await;
    }

    async fn next(&mut self) -> Option<Value> {
        self.socket.next(Duration::from_secs(10)).await
    }

    /// Calls `domain.method(args)` as export `id` and returns what settles it.
    async fn call(&mut self, id: i64, domain: &str, method: &str, args: Value) -> Value {
        self.send(json!(["push", ["pipeline", 0, [domain, method], args]]))
            .await;
        self.send(json!(["pull", id])).await;
        loop {
            let message = self.next().await.expect("an answer");
            if message[1] == id && (message[0] == "resolve" || message[0] == "reject") {
                self.send(json!(["release", id, 1])).await;
                return message;
            }
        }
    }
}

/// The 0.12 `/rpc` and the routes are codecs over the same operations: a call refused
/// over one is refused over the other with the same code, message and details, and what
/// one answers the other answers.
#[tokio::test]
async fn the_rpc_and_the_routes_answer_and_refuse_alike() {
    let daemon = Daemon::start();
    let mut peer = Peer::connect(&daemon).await;
    let dir = daemon.path("alike");
    std::fs::create_dir_all(dir.join("made")).unwrap();
    std::fs::write(dir.join("there.txt"), "there").unwrap();
    let d = dir.display();
    let cases = [
        // (domain, method, rpc arguments, route, the route's body)
        (
            "files",
            "readFile",
            json!([format!("{d}/missing.txt"), "s"]),
            "POST /api/read",
            json!({"path": format!("{d}/missing.txt"), "sessionId": "s"}),
        ),
        (
            "files",
            "readFile",
            json!([format!("{d}/there.txt")]),
            "POST /api/read",
            json!({"path": format!("{d}/there.txt")}),
        ),
        (
            "files",
            "writeFile",
            json!([format!("{d}/b.bin"), "not base64!", null, {"encoding": "base64"}]),
            "POST /api/write",
            json!({"path": format!("{d}/b.bin"), "content": "not base64!", "encoding": "base64"}),
        ),
        (
            "files",
            "writeFile",
            json!([format!("{d}/made"), "x"]),
            "POST /api/write",
            json!({"path": format!("{d}/made"), "content": "x"}),
        ),
        (
            "files",
            "writeFile",
            json!([format!("{d}/m.sh"), "x", null, {"mode": "9z"}]),
            "POST /api/write",
            json!({"path": format!("{d}/m.sh"), "content": "x", "mode": "9z"}),
        ),
        (
            "files",
            "mkdir",
            json!([format!("{d}/made"), null]),
            "POST /api/mkdir",
            json!({"path": format!("{d}/made")}),
        ),
        (
            "files",
            "mkdir",
            json!([format!("{d}/a/b/c"), null, {"recursive": "yes"}]),
            "POST /api/mkdir",
            json!({"path": format!("{d}/a/b/c"), "recursive": "yes"}),
        ),
        (
            "files",
            "renameFile",
            json!([format!("{d}/gone"), format!("{d}/new")]),
            "POST /api/rename",
            json!({"oldPath": format!("{d}/gone"), "newPath": format!("{d}/new")}),
        ),
        (
            "files",
            "moveFile",
            json!([format!("{d}/gone"), format!("{d}/new")]),
            "POST /api/move",
            json!({"sourcePath": format!("{d}/gone"), "destinationPath": format!("{d}/new")}),
        ),
        (
            "files",
            "deleteFile",
            json!([format!("{d}/made")]),
            "POST /api/delete",
            json!({"path": format!("{d}/made")}),
        ),
        (
            "files",
            "listFiles",
            json!([format!("{d}/missing")]),
            "POST /api/list-files",
            json!({"path": format!("{d}/missing"), "options": {}}),
        ),
        (
            "files",
            "listFiles",
            json!([format!("{d}/made"), null, {"recursive": 3}]),
            "POST /api/list-files",
            json!({"path": format!("{d}/made"), "options": {"recursive": 3}}),
        ),
        (
            "files",
            "exists",
            json!([format!("{d}/there.txt")]),
            "POST /api/exists",
            json!({"path": format!("{d}/there.txt")}),
        ),
        (
            "commands",
            "execute",
            json!(["true", "   "]),
            "POST /api/execute",
            json!({"command": "true", "sessionId": "   "}),
        ),
        (
            "commands",
            "execute",
            json!(["cat", null, {"stdinPipe": true}]),
            "POST /api/execute",
            json!({"command": "cat", "stdinPipe": true}),
        ),
        (
            "commands",
            "execute",
            json!(["true", null, {"timeoutMs": "soon"}]),
            "POST /api/execute",
            json!({"command": "true", "timeoutMs": "soon"}),
        ),
        (
            "commands",
            "execute",
            json!(["printf 'a\\377'", "alike"]),
            "POST /api/execute",
            json!({"command": "printf 'a\\377'", "sessionId": "alike"}),
        ),
        (
            "utils",
            "createSession",
            json!([{"id": "   "}]),
            "POST /api/session/create",
            json!({"id": "   "}),
        ),
        (
            "utils",
            "createSession",
            json!([{"id": "alike-1", "cwd": "/definitely/missing"}]),
            "POST /api/session/create",
            json!({"id": "alike-2", "cwd": "/definitely/missing"}),
        ),
        (
            "utils",
            "createSession",
            json!([{"id": "alike-1", "env": {"A": 1}}]),
            "POST /api/session/create",
            json!({"id": "alike-2", "env": {"A": 1}}),
        ),
        (
            "utils",
            "deleteSession",
            json!(["nobody"]),
            "POST /api/session/delete",
            json!({"sessionId": "nobody"}),
        ),
        (
            "utils",
            "deleteSession",
            json!(["   "]),
            "POST /api/session/delete",
            json!({"sessionId": "   "}),
        ),
        (
            "backup",
            "createArchive",
            json!([format!("{d}/missing"), "/var/backups/alike-none.sqsh"]),
            "POST /api/backup/create",
            json!({"dir": format!("{d}/missing"), "archivePath": "/var/backups/alike-none.sqsh"}),
        ),
        (
            "backup",
            "createArchive",
            json!([d.to_string(), "alike.sqsh"]),
            "POST /api/backup/create",
            json!({"dir": d.to_string(), "archivePath": "alike.sqsh"}),
        ),
        (
            "backup",
            "restoreArchive",
            json!([d.to_string(), "/var/backups/alike-none.sqsh"]),
            "POST /api/backup/restore",
            json!({"dir": d.to_string(), "archivePath": "/var/backups/alike-none.sqsh"}),
        ),
        // An array among capnweb's arguments is escaped: `[[]]` is `[]`.
        (
            "backup",
            "uploadParts",
            json!([{"archivePath": "/var/backups/alike-none.sqsh", "parts": [[]]}]),
            "POST /api/backup/upload-parts",
            json!({"archivePath": "/var/backups/alike-none.sqsh", "parts": []}),
        ),
        (
            "backup",
            "uploadParts",
            json!([{"archivePath": 5}]),
            "POST /api/backup/upload-parts",
            json!({"archivePath": 5}),
        ),
        (
            "watch",
            "checkChanges",
            json!([{"path": d.to_string(), "since": "garbage"}]),
            "POST /api/watch/check",
            json!({"path": d.to_string(), "since": "garbage"}),
        ),
        (
            "watch",
            "checkChanges",
            json!([{"path": format!("{d}/missing")}]),
            "POST /api/watch/check",
            json!({"path": format!("{d}/missing")}),
        ),
        (
            "watch",
            "checkChanges",
            json!([{"path": d.to_string(), "recursive": "yes"}]),
            "POST /api/watch/check",
            json!({"path": d.to_string(), "recursive": "yes"}),
        ),
        (
            "git",
            "checkout",
            json!(["not a url", null]),
            "POST /api/git/checkout",
            json!({"repoUrl": "not a url"}),
        ),
        (
            "git",
            "checkout",
            json!(["file:///definitely/missing", null, {"depth": "deep"}]),
            "POST /api/git/checkout",
            json!({"repoUrl": "file:///definitely/missing", "depth": "deep"}),
        ),
        (
            "interpreter",
            "createCodeContext",
            json!([{"language": "cobol"}]),
            "POST /api/contexts",
            json!({"language": "cobol"}),
        ),
        (
            "interpreter",
            "createCodeContext",
            json!([{"cwd": "/definitely/missing"}]),
            "POST /api/contexts",
            json!({"cwd": "/definitely/missing"}),
        ),
        (
            "interpreter",
            "deleteCodeContext",
            json!(["nobody"]),
            "DELETE /api/contexts/nobody",
            json!(null),
        ),
        (
            "tunnels",
            "ensureTunnelRun",
            json!([{"mode": "weird", "port": 8080}]),
            "POST /api/tunnels",
            json!({"mode": "weird", "port": 8080}),
        ),
        (
            "tunnels",
            "ensureTunnelRun",
            json!([{"mode": "quick", "port": "x"}]),
            "POST /api/tunnels",
            json!({"mode": "quick", "port": "x"}),
        ),
        (
            "tunnels",
            "stopTunnelRun",
            json!([{"tunnelId": "nobody", "runId": "nobody"}]),
            "POST /api/tunnels/stop",
            json!({"tunnelId": "nobody", "runId": "nobody"}),
        ),
        (
            "files",
            "readFileStream",
            json!([format!("{d}/missing.txt")]),
            "POST /api/read/stream",
            json!({"path": format!("{d}/missing.txt")}),
        ),
        (
            "files",
            "readFile",
            json!([format!("{d}/missing.txt"), null, {"encoding": "none"}]),
            &*format!("GET /api/files/raw?path={d}/missing.txt"),
            json!(null),
        ),
        (
            "interpreter",
            "streamCode",
            json!(["nobody", "1 + 1", "python"]),
            "POST /api/execute/code",
            json!({"context_id": "nobody", "code": "1 + 1", "language": "python"}),
        ),
        (
            "interpreter",
            "runCodeStream",
            json!(["nobody", "1 + 1", "python", {}]),
            "POST /api/execute/code",
            json!({"context_id": "nobody", "code": "1 + 1", "language": "python"}),
        ),
        (
            "interpreter",
            "streamCode",
            json!([null, "1 + 1"]),
            "POST /api/execute/code",
            json!({"context_id": null, "code": "1 + 1"}),
        ),
        (
            "processes",
            "streamProcessLogs",
            json!(["nobody"]),
            "GET /api/process/nobody/stream",
            json!(null),
        ),
        (
            "watch",
            "watch",
            json!([{"path": format!("{d}/missing")}]),
            "POST /api/watch",
            json!({"path": format!("{d}/missing")}),
        ),
        (
            "watch",
            "watch",
            json!([{"path": d.to_string(), "include": "*.rs"}]),
            "POST /api/watch",
            json!({"path": d.to_string(), "include": "*.rs"}),
        ),
        (
            "ports",
            "watchPort",
            json!([{"port": "x"}]),
            "POST /api/port-watch",
            json!({"port": "x"}),
        ),
        (
            "ports",
            "watchPort",
            json!([{"port": 0}]),
            "POST /api/port-watch",
            json!({"port": 0}),
        ),
        (
            "processes",
            "startProcess",
            json!(["", null]),
            "POST /api/process/start",
            json!({"command": ""}),
        ),
        (
            "processes",
            "startProcess",
            json!(["sleep 30", null, {"processId": "alike-1"}]),
            "POST /api/process/start",
            json!({"command": "sleep 30", "processId": "alike-2"}),
        ),
        (
            "processes",
            "startProcess",
            json!(["true", null, {"processId": "alike-1"}]),
            "POST /api/process/start",
            json!({"command": "true", "processId": "alike-2"}),
        ),
        (
            "processes",
            "getProcess",
            json!(["nobody"]),
            "GET /api/process/nobody",
            json!(null),
        ),
        (
            "processes",
            "getProcess",
            json!(["alike-1"]),
            "GET /api/process/alike-2",
            json!(null),
        ),
        (
            "processes",
            "getProcessLogs",
            json!(["nobody"]),
            "GET /api/process/nobody/logs",
            json!(null),
        ),
        (
            "processes",
            "killProcess",
            json!(["nobody"]),
            "DELETE /api/process/nobody",
            json!(null),
        ),
        (
            "processes",
            "killProcess",
            json!(["alike-1"]),
            "DELETE /api/process/alike-2",
            json!(null),
        ),
    ];
    for (index, (domain, method, args, route, body)) in cases.into_iter().enumerate() {
        let id = index as i64 + 1;
        // The same process is started over each, under its own id.
        let over_rpc = peer.call(id, domain, method, args).await.to_string();
        let over_rpc: Value =
            serde_json::from_str(&over_rpc.replace("alike-1", "alike-2")).unwrap();
        let (status, over_http) = match route.split_once(' ') {
            Some(("GET", route)) => daemon.get(route).await,
            Some(("DELETE", route)) => daemon.delete(route).await,
            Some((_, route)) => daemon.post(route, body).await,
            None => unreachable!("{route}"),
        };
        let case = format!("{domain}.{method} and {route}: {over_rpc} / {over_http}");
        if status.is_success() {
            assert_eq!(over_rpc[0], "resolve", "{case}");
            for field in [
                "success",
                "path",
                "content",
                "exists",
                "exitCode",
                "stdout",
                "stdoutBase64",
                "command",
                "processId",
                "stopped",
            ] {
                assert_eq!(over_rpc[2][field], over_http[field], "{field}: {case}");
            }
        } else {
            assert_eq!(over_rpc[0], "reject", "{case}");
            let error = &over_rpc[2];
            assert_eq!(error[4]["code"], over_http["code"], "{case}");
            // The code route answers the reference's own body: `error` and `details`.
            let message = over_http.get("message").or(over_http.get("error"));
            let context = over_http.get("context").or(over_http.get("details"));
            assert_eq!(Some(&error[2]), message, "{case}");
            assert_eq!(Some(&plain(&error[4]["details"])), context, "{case}");
        }
    }
}

/// A value as capnweb carried it, back as JSON: capnweb sends an array `[a, b]` as
/// `[[a, b]]` (its escape), and everything else as it is.
fn plain(value: &Value) -> Value {
    match value {
        Value::Array(escaped) => match escaped.as_slice() {
            [Value::Array(items)] => Value::Array(items.iter().map(plain).collect()),
            _ => value.clone(),
        },
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(name, field)| (name.clone(), plain(field)))
                .collect(),
        ),
        _ => value.clone(),
    }
}

#[tokio::test]
async fn calls_settle_as_the_object_expects_and_mistakes_are_per_call() {
    let daemon = Daemon::start();
    let mut peer = Peer::connect(&daemon).await;
    let ping = peer.call(1, "utils", "ping", json!([])).await;
    assert_eq!(ping, json!(["resolve", 1, "healthy"]));
    let unknown = peer.call(2, "commands", "nope", json!([])).await;
    assert_eq!(unknown[0], "reject");
    assert_eq!(unknown[2][1], "TypeError", "{unknown}");
    let missing = peer
        .call(
            3,
            "files",
            "readFile",
            json!(["/definitely/missing", "s", ["undefined"]]),
        )
        .await;
    assert_eq!(missing[0], "reject");
    assert_eq!(missing[2][0], "error");
    assert_eq!(missing[2][4]["code"], "FILE_NOT_FOUND", "{missing}");
    let bad_argument = peer.call(4, "files", "exists", json!([42, "s"])).await;
    assert_eq!(
        bad_argument[2][4]["code"], "VALIDATION_FAILED",
        "{bad_argument}"
    );
    // Releasing what was never exported and pulling an unknown id are answered, not fatal.
    peer.send(json!(["release", 99, 1])).await;
    peer.send(json!(["pull", 77])).await;
    let answer = peer.next().await.expect("the unknown pull is answered");
    assert_eq!(answer[0], "reject", "{answer}");
    assert_eq!(peer.call(5, "utils", "ping", json!([])).await[2], "healthy");
    // An array result is wrapped as capnweb wraps every array.
    let commands = peer.call(6, "utils", "getCommands", json!([])).await;
    assert_eq!(commands, json!(["resolve", 6, [[]]]));
}

/// The SDK's next line on its own sockets (docs/api.md, RPC: the SDK's next line): a socket
/// that asks for the runtime's metadata is the next line's, gated until `activateControlSession`
/// names this daemon's incarnation, the same on every socket and new after a restart; a
/// 0.12 socket beside it is served as before.
#[tokio::test]
async fn the_next_lines_handshake_gates_its_own_sockets_only() {
    let mut daemon = Daemon::start();
    let mut current = Peer::connect(&daemon).await;
    let mut next = Peer::connect(&daemon).await;
    let metadata = next.call(1, "utils", "getRuntimeMetadata", json!([])).await;
    assert_eq!(metadata[0], "resolve", "{metadata}");
    let incarnation = metadata[2]["runtimeIncarnationID"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(incarnation.len(), 36, "a UUID: {incarnation}");
    assert_eq!(metadata[2]["controlProtocolVersion"], 1);
    assert!(metadata[2]["sandboxVersion"].is_string());
    let gated = next.call(2, "files", "exists", json!(["/tmp"])).await;
    assert_eq!(
        gated,
        json!(["reject", 2, ["error", "Error", "Control session is not activated", null, {"code": "CONTROL_PROTOCOL_INCOMPATIBLE"}]])
    );
    let wrong = next
        .call(
            3,
            "utils",
            "activateControlSession",
            json!(["not-this-runtime"]),
        )
        .await;
    assert_eq!(wrong[2][2], "Runtime incarnation does not match", "{wrong}");
    assert_eq!(wrong[2][4]["code"], "CONTROL_PROTOCOL_INCOMPATIBLE");
    let active = next
        .call(4, "utils", "activateControlSession", json!([incarnation]))
        .await;
    assert_eq!(
        active[2]["runtimeIncarnationID"],
        incarnation.as_str(),
        "{active}"
    );
    // Activated: the next line's `files` methods, relative paths from the workspace, no
    // `sessionId`; one not served yet says so.
    let made = next
        .call(
            5,
            "files",
            "mkdir",
            json!(["next-dir/sub", {"recursive": true}]),
        )
        .await;
    assert_eq!(made[2]["recursive"], true, "{made}");
    assert!(daemon.path("next-dir/sub").is_dir());
    std::fs::write(daemon.path("next-dir/a.txt"), "a").unwrap();
    let exists = next
        .call(6, "files", "exists", json!(["next-dir/a.txt"]))
        .await;
    assert_eq!(exists[2]["exists"], true, "{exists}");
    let listed = next
        .call(
            7,
            "files",
            "listFiles",
            json!(["next-dir", {"recursive": true}]),
        )
        .await;
    assert_eq!(listed[2]["count"], 2, "{listed}");
    let deleted = next
        .call(8, "files", "deleteFile", json!(["next-dir/a.txt"]))
        .await;
    assert_eq!(deleted[0], "resolve", "{deleted}");
    assert!(!daemon.path("next-dir/a.txt").exists());
    let missing = next
        .call(9, "files", "deleteFile", json!(["next-dir/a.txt"]))
        .await;
    assert_eq!(missing[2][4]["code"], "FILE_NOT_FOUND", "{missing}");
    let unnamed = next.call(10, "files", "exists", json!([42])).await;
    assert_eq!(unnamed[2][4]["code"], "VALIDATION_FAILED", "{unnamed}");
    let later = next.call(11, "commands", "execute", json!(["true"])).await;
    assert_eq!(later[2][1], "TypeError", "{later}");
    // The 0.12 socket beside it: no handshake, no gate.
    let exists = current
        .call(1, "files", "exists", json!([daemon.root(), "s"]))
        .await;
    assert_eq!(exists[2]["exists"], true, "{exists}");
    // Every socket of this daemon sees the same incarnation; a restart is a new one.
    let mut other = Peer::connect(&daemon).await;
    let same = other
        .call(1, "utils", "getRuntimeMetadata", json!([]))
        .await;
    assert_eq!(same[2]["runtimeIncarnationID"], incarnation.as_str());
    drop((current, next, other));
    daemon.restart();
    let mut after = Peer::connect(&daemon).await;
    let renewed = after
        .call(1, "utils", "getRuntimeMetadata", json!([]))
        .await;
    assert_ne!(renewed[2]["runtimeIncarnationID"], incarnation.as_str());
}

#[tokio::test]
async fn a_malformed_frame_aborts_the_session_and_only_it() {
    let daemon = Daemon::start();
    for frame in [
        "not json",
        "{}",
        "[\"push\"]",
        "[\"stream\",[\"pipeline\",1,[\"write\"],[[\"bytes\",\"AA\"]]],1]",
        "[\"push\",[\"pipeline\",0,[\"utils\",\"ping\"],[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    ] {
        let mut peer = Peer::connect(&daemon).await;
        let mut other = Peer::connect(&daemon).await;
        peer.socket.send_text(frame).await;
        let answer = peer.next().await;
        if let Some(answer) = &answer {
            assert_eq!(answer[0], "abort", "{frame}: {answer}");
            assert!(peer.next().await.is_none(), "{frame}: the socket closes");
        }
        // The other connection is untouched.
        assert_eq!(
            other.call(1, "utils", "ping", json!([])).await[2],
            "healthy"
        );
    }
    // An argument nested past capnweb's depth is that call's mistake.
    let mut peer = Peer::connect(&daemon).await;
    let mut deep = json!(1);
    for _ in 0..70 {
        deep = json!({ "a": deep });
    }
    let answer = peer.call(1, "files", "exists", json!([deep, "s"])).await;
    assert_eq!(answer[0], "reject", "{answer}");
    assert_eq!(peer.call(2, "utils", "ping", json!([])).await[2], "healthy");
}

#[tokio::test]
async fn a_flood_of_calls_is_bounded_and_a_vanished_client_holds_nothing() {
    let daemon = Daemon::start();
    let mut peer = Peer::connect(&daemon).await;
    // Calls that never finish on their own (one session runs one command at a time), far
    // more than one connection may hold.
    for n in 1..=1100 {
        let command = format!("sleep 600 # fsd-rpc-flood-{n}");
        let push = json!([
            "push",
            [
                "pipeline",
                0,
                ["commands", "execute"],
                [command, "flood", ["undefined"]]
            ]
        ]);
        // The daemon may abort the session and close the socket before the flood is all
        // sent (on a busy machine it reads faster than this loop writes): its abort is
        // still there to read.
        if peer.socket.try_send_text(&push.to_string()).await.is_err() {
            break;
        }
    }
    let mut aborted = false;
    while let Some(message) = peer.next().await {
        if message[0] == "abort" {
            aborted = true;
            break;
        }
    }
    assert!(aborted, "a flood past the limit ends the session");
    drop(peer);
    // A client that vanishes mid-stream: the stream's process runs on (as a background
    // process, as with the reference), and the daemon serves on.
    let mut streaming = Peer::connect(&daemon).await;
    let command = "while :; do echo fsd-rpc-vanish; sleep 0.05; done";
    streaming
        .send(json!([
            "push",
            [
                "pipeline",
                0,
                ["commands", "executeStream"],
                [command, "vanish", ["undefined"]]
            ]
        ]))
        .await;
    streaming.send(json!(["pull", 1])).await;
    let mut saw_pipe = false;
    for _ in 0..10 {
        match streaming.next().await {
            Some(message) if message[0] == "pipe" => saw_pipe = true,
            Some(message) if message[0] == "stream" => break,
            _ => {}
        }
    }
    assert!(saw_pipe, "the stream came as a pipe");
    drop(streaming);
    let mut again = Peer::connect(&daemon).await;
    let listed = again.call(1, "processes", "listProcesses", json!([])).await;
    let processes = listed[2]["processes"][0]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        processes
            .iter()
            .any(|p| p["command"] == command && p["status"] == "running"),
        "{listed}"
    );
    let killed = again
        .call(2, "processes", "killAllProcesses", json!([]))
        .await;
    assert_eq!(killed[0], "resolve", "{killed}");
    // The flood's session exists if one of its calls got as far as starting it before
    // the session was aborted; either way, deleting it leaves none of its commands.
    let deleted = again
        .call(3, "utils", "deleteSession", json!(["flood"]))
        .await;
    assert!(
        deleted[0] == "resolve" || deleted[2][4]["code"] == "SESSION_NOT_FOUND",
        "{deleted}"
    );
    let left = fsd_tests::host_processes_gone("fsd-rpc-flood-", Duration::from_secs(10)).await;
    assert!(left.is_empty(), "the flood's command still runs: {left:?}");
}

#[tokio::test]
async fn streams_nobody_reads_are_bounded_per_connection_and_end_with_it() {
    let daemon = Daemon::start();
    let mut peer = Peer::connect(&daemon).await;
    let root = daemon.root().display().to_string();
    let mut refused = None;
    for id in 1..=300 {
        let answer = peer
            .call(id, "watch", "watch", json!([{ "path": root }]))
            .await;
        if answer[0] == "reject" {
            refused = Some((id, answer));
            break;
        }
    }
    let (id, answer) = refused.expect("a connection's open streams are bounded");
    assert_eq!(id, 257, "{answer}");
    assert_eq!(answer[2][1], "RangeError", "{answer}");
    drop(peer);
    // Everything that connection held went with it: a new one opens as many again.
    let mut again = Peer::connect(&daemon).await;
    let answer = again
        .call(1, "watch", "watch", json!([{ "path": root }]))
        .await;
    assert_eq!(answer[0], "resolve", "{answer}");
}

/// fsd's workspace forks on the next line's `backup`: a fork, the branches listed, a
/// merge back (dry and made), a discard, and a refusal by name, answering as `/api/fork`'s
/// routes answer.
#[tokio::test]
async fn the_next_lines_backup_forks_lists_merges_and_discards() {
    if !fsd_tests::require_mount_privilege("the_next_lines_backup_forks_lists_merges_and_discards")
    {
        return;
    }
    let daemon = Daemon::start();
    let dir = daemon.path("rpc-fork");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/main.rs"), b"fn main() {}\n").unwrap();
    let mut peer = activated(&daemon).await;
    let forked = peer
        .call(
            3,
            "backup",
            "fork",
            json!([{"dir": dir, "names": [["try"]]}]),
        )
        .await;
    assert_eq!(forked[0], "resolve", "{forked}");
    let branch = format!("{}@try", dir.display());
    assert_eq!(forked[2]["branches"][0][0]["path"], branch, "{forked}");
    std::fs::write(format!("{branch}/src/main.rs"), b"fn main() { tried(); }\n").unwrap();
    let listed = peer.call(4, "backup", "branches", json!([])).await;
    assert_eq!(listed[2]["branches"][0][0]["changed"], 1, "{listed}");
    let dry = peer
        .call(
            5,
            "backup",
            "mergeBranch",
            json!([{"branch": branch, "dryRun": true}]),
        )
        .await;
    assert_eq!(dry[2]["changes"][0][0]["path"], "src/main.rs", "{dry}");
    assert_eq!(
        std::fs::read(dir.join("src/main.rs")).unwrap(),
        b"fn main() {}\n",
        "a dry run changes nothing"
    );
    let merged = peer
        .call(6, "backup", "mergeBranch", json!([{"branch": branch}]))
        .await;
    assert_eq!(merged[2]["success"], true, "{merged}");
    assert_eq!(
        std::fs::read(dir.join("src/main.rs")).unwrap(),
        b"fn main() { tried(); }\n"
    );
    let refused = peer
        .call(
            7,
            "backup",
            "mergeBranch",
            json!([{"branch": branch, "mode": "sideways"}]),
        )
        .await;
    assert_eq!(refused[0], "reject", "{refused}");
    assert!(refused.to_string().contains("mode"), "{refused}");
    let discarded = peer
        .call(8, "backup", "discardBranch", json!([{"path": branch}]))
        .await;
    assert_eq!(discarded[2]["path"], branch, "{discarded}");
    let listed = peer.call(9, "backup", "branches", json!([])).await;
    assert_eq!(listed[2]["branches"], json!([[]]), "{listed}");
    super::fork::unmount_all(&daemon);
}
