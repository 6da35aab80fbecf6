//! The WebSocket transport (`/ws`, `/api/ws`) with a real WebSocket client: the same
//! answers as HTTP for every route family, streams, cancel, close, concurrency, bad frames
//! and auth.

use std::time::Duration;

use fsd_tests::ws::WsClient;
use fsd_tests::{Daemon, Options};
use futures_util::SinkExt;
use reqwest::Method;
use serde_json::{Value, json};

/// One call of the shared table: method, path, body.
type Call = (&'static str, &'static str, Option<Value>);

/// A sequence touching every route family, errors included, run over HTTP on one daemon
/// and over the socket on another; the answers must match.
fn table() -> Vec<Call> {
    vec![
        ("GET", "/api/ping", None),
        ("GET", "/api/version", None),
        (
            "POST",
            "/api/mkdir",
            Some(json!({"path": "d", "recursive": true})),
        ),
        (
            "POST",
            "/api/write",
            Some(json!({"path": "d/a.txt", "content": "hello"})),
        ),
        ("POST", "/api/read", Some(json!({"path": "d/a.txt"}))),
        ("POST", "/api/read", Some(json!({"path": "d/missing"}))),
        ("POST", "/api/exists", Some(json!({"path": "d/a.txt"}))),
        (
            "POST",
            "/api/rename",
            Some(json!({"oldPath": "d/a.txt", "newPath": "d/b.txt"})),
        ),
        ("POST", "/api/list-files", Some(json!({"path": "d"}))),
        ("POST", "/api/delete", Some(json!({"path": "d/b.txt"}))),
        ("POST", "/api/write", Some(json!({"content": "no path"}))),
        ("POST", "/api/session/create", Some(json!({"id": "s1"}))),
        (
            "POST",
            "/api/execute",
            Some(json!({"command": "echo hi; echo err >&2; exit 3", "sessionId": "s1"})),
        ),
        ("POST", "/api/execute", Some(json!({"command": ""}))),
        ("GET", "/api/session/list", None),
        ("GET", "/api/process/list", None),
        ("GET", "/api/process/nope", None),
        ("DELETE", "/api/process/nope", None),
        ("GET", "/api/mounts", None),
        ("GET", "/api/backup/mounts", None),
        (
            "POST",
            "/api/backup/create",
            Some(json!({"dir": "relative", "archivePath": "/tmp/x"})),
        ),
        (
            "POST",
            "/api/watch/check",
            Some(json!({"path": "missing-dir"})),
        ),
        ("POST", "/api/port-watch", Some(json!({"port": 0}))),
        ("GET", "/api/nowhere", None),
        (
            "POST",
            "/api/session/delete",
            Some(json!({"sessionId": "s1"})),
        ),
    ]
}

/// Fields that differ between two runs of the same call (times, generated ids), and the
/// workspace root, which differs between daemons.
fn normalized(value: &Value, root: &str) -> Value {
    const VOLATILE: [&str; 10] = [
        "timestamp",
        "duration",
        "durationMs",
        "createdAt",
        "modifiedAt",
        "mtime",
        "startTime",
        "endTime",
        "pid",
        "version",
    ];
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| {
                    let value = if VOLATILE.contains(&key.as_str()) {
                        Value::String("<volatile>".into())
                    } else {
                        normalized(value, root)
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| normalized(v, root)).collect()),
        Value::String(text) => Value::String(text.replace(root, "<root>")),
        other => other.clone(),
    }
}

async fn over_http(daemon: &Daemon, (method, path, body): &Call) -> (u16, Value) {
    let method: Method = method.parse().unwrap();
    let mut request = daemon.request(method, path);
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn every_route_family_answers_over_the_socket_as_over_http() {
    let http = Daemon::start();
    let ws = Daemon::start();
    let mut client = WsClient::connect(&ws, "/ws").await;
    for (index, call) in table().iter().enumerate() {
        let (status, body) = over_http(&http, call).await;
        let id = format!("r{index}");
        let answer = client.call(&id, call.0, call.1, call.2.clone()).await;
        let last = answer.last;
        assert_eq!(last["type"], "response", "{call:?}: {last}");
        assert_eq!(last["done"], true, "{call:?}");
        assert_eq!(last["status"], status, "{call:?}: {last}");
        let got = last.get("body").cloned().unwrap_or(Value::Null);
        let root_http = http.root().display().to_string();
        let root_ws = ws.root().display().to_string();
        assert_eq!(
            normalized(&got, &root_ws),
            normalized(&body, &root_http),
            "{call:?}"
        );
    }
}

#[tokio::test]
async fn streams_carry_each_event_then_the_response() {
    let daemon = Daemon::start();
    let mut client = WsClient::connect(&daemon, "/api/ws").await;
    let body = json!({"command": "echo one; echo two >&2; exit 4"});
    let answer = client
        .call("s", "POST", "/api/execute/stream", Some(body.clone()))
        .await;
    assert_eq!(answer.last["type"], "response");
    assert_eq!(answer.last["status"], 200);
    assert!(answer.last.get("body").is_none(), "{}", answer.last);
    let mut kinds: Vec<&str> = answer
        .events
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    // The same events as the HTTP route's SSE: `start` first, `complete` last. Output of
    // two pipes has no order between them (stdout and stderr written within one read
    // round may be read either way), so the events between are compared as a set.
    let text = daemon.post_text("/api/execute/stream", &body).await;
    let http_events: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let mut http_kinds: Vec<&str> = http_events
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    for kinds in [&kinds, &http_kinds] {
        assert_eq!(
            (kinds.first(), kinds.last()),
            (Some(&"start"), Some(&"complete")),
            "{kinds:?}"
        );
    }
    kinds.sort_unstable();
    http_kinds.sort_unstable();
    assert_eq!(kinds, http_kinds);
    let complete = answer.events.last().unwrap();
    assert_eq!(complete["type"], "complete");
    assert_eq!(complete["exitCode"], 4);
    assert!(
        answer
            .events
            .iter()
            .any(|e| e["type"] == "stdout" && e["data"] == "one\n"),
        "{:?}",
        answer.events
    );
    // A streaming route that refuses the request answers with a plain response.
    let refused = client
        .call(
            "e",
            "POST",
            "/api/execute/stream",
            Some(json!({"command": ""})),
        )
        .await;
    assert_eq!(refused.last["status"], 400, "{}", refused.last);
    assert!(refused.events.is_empty());
}

/// How many inotify instances the daemon holds (one per watched tree).
fn inotify_instances(daemon: &Daemon) -> usize {
    let pid = daemon.pid();
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| target.to_string_lossy().contains("inotify"))
        })
        .count()
}

/// Waits (up to 10 s) for the daemon to hold `count` inotify instances.
async fn wait_for_instances(daemon: &Daemon, count: usize) {
    for _ in 0..200 {
        if inotify_instances(daemon) == count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(inotify_instances(daemon), count, "inotify instances");
}

#[tokio::test]
async fn cancel_and_close_stop_only_their_own_streams_and_release_the_watch() {
    let daemon = Daemon::start();
    std::fs::create_dir(daemon.root().join("a")).unwrap();
    std::fs::create_dir(daemon.root().join("b")).unwrap();
    let before = inotify_instances(&daemon);
    let mut first = WsClient::connect(&daemon, "/ws").await;
    let mut second = WsClient::connect(&daemon, "/ws").await;
    first
        .request("w", "POST", "/api/watch", Some(json!({"path": "a"})))
        .await;
    second
        .request("w", "POST", "/api/watch", Some(json!({"path": "b"})))
        .await;
    for client in [&mut first, &mut second] {
        let watching = client.next(Duration::from_secs(10)).await.unwrap();
        assert_eq!(watching["type"], "stream", "{watching}");
        let data: Value = serde_json::from_str(watching["data"].as_str().unwrap()).unwrap();
        assert_eq!(data["type"], "watching");
    }
    wait_for_instances(&daemon, before + 2).await;

    // Cancelling the first socket's stream ends it and releases its watch; the second,
    // with the same request id on another socket, goes on.
    first.send_json(&json!({"type": "cancel", "id": "w"})).await;
    wait_for_instances(&daemon, before + 1).await;
    std::fs::write(daemon.root().join("a/x"), "x").unwrap();
    std::fs::write(daemon.root().join("b/y"), "y").unwrap();
    let event = second.next(Duration::from_secs(10)).await.unwrap();
    assert_eq!(event["id"], "w");
    assert!(event["data"].as_str().unwrap().contains("/b/y"), "{event}");
    assert_eq!(first.next(Duration::from_millis(500)).await, None);

    // The first socket still serves requests.
    let answer = first.call("p", "GET", "/api/ping", None).await;
    assert_eq!(answer.last["status"], 200);

    // Closing the second socket releases its watch too.
    second.socket.close(None).await.unwrap();
    drop(second);
    wait_for_instances(&daemon, before).await;
}

#[tokio::test]
async fn requests_on_one_socket_run_concurrently() {
    let daemon = Daemon::start();
    let mut client = WsClient::connect(&daemon, "/ws").await;
    client
        .request(
            "slow",
            "POST",
            "/api/execute/stream",
            Some(json!({"command": "sleep 2; echo late", "sessionId": "slow"})),
        )
        .await;
    for index in 0..20 {
        client
            .request(&format!("q{index}"), "GET", "/api/ping", None)
            .await;
    }
    // Every quick request is answered while the slow stream still runs.
    let mut answered = 0;
    while answered < 20 {
        let message = client.next(Duration::from_secs(10)).await.unwrap();
        let id = message["id"].as_str().unwrap_or_default().to_string();
        if id.starts_with('q') {
            assert_eq!(message["status"], 200);
            answered += 1;
        } else {
            assert_eq!(id, "slow");
            assert_eq!(message["type"], "stream", "the slow stream ended first");
        }
    }
    let rest = client.answer("slow").await;
    assert_eq!(rest.last["status"], 200);
}

#[tokio::test]
async fn bad_frames_get_adapter_errors_and_the_socket_stays_usable() {
    let daemon = Daemon::start();
    let mut client = WsClient::connect(&daemon, "/ws").await;
    client.send_text("not json").await;
    let error = client.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["code"], "PARSE_ERROR");
    assert_eq!(error["status"], 400);
    assert!(error.get("id").is_none());

    client.send_json(&json!({"type": "hello"})).await;
    let error = client.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!(error["code"], "INVALID_REQUEST");

    client
        .send_json(&json!({"type": "request", "id": "m", "method": "PATCH", "path": "/api/ping"}))
        .await;
    let error = client.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["id"], "m");
    assert_eq!(error["code"], "INVALID_REQUEST");
    assert!(error["message"].as_str().unwrap().starts_with("method:"));

    client.request("p", "GET", "api/ping", None).await;
    let error = client.next(Duration::from_secs(5)).await.unwrap();
    assert!(
        error["message"].as_str().unwrap().starts_with("path:"),
        "{error}"
    );

    // A binary frame holding a request is served like a text one.
    let request = json!({"type": "request", "id": "b", "method": "get", "path": "/api/ping"});
    client
        .socket
        .send(tokio_tungstenite::tungstenite::Message::Binary(
            request.to_string().into_bytes().into(),
        ))
        .await
        .unwrap();
    let answer = client.answer("b").await;
    assert_eq!(answer.last["status"], 200);
    assert_eq!(answer.last["body"]["status"], "healthy");

    // A cancel for an id nobody uses is ignored.
    client
        .send_json(&json!({"type": "cancel", "id": "nobody"}))
        .await;
    let answer = client.call("after", "GET", "/api/ping", None).await;
    assert_eq!(answer.last["status"], 200);
}

#[tokio::test]
async fn tokens_come_with_the_upgrade_or_with_each_request() {
    let daemon = Daemon::start_with(Options {
        token: Some("sekret".into()),
        ..Options::default()
    });
    // A token on the upgrade serves every request on the socket.
    let mut trusted = WsClient::connect(&daemon, "/ws").await;
    let answer = trusted.call("a", "GET", "/api/session/list", None).await;
    assert_eq!(answer.last["status"], 200, "{}", answer.last);

    // Without one, each request must bring its own.
    let mut bare = WsClient::connect_with(&daemon, "/ws", None).await.unwrap();
    let answer = bare.call("a", "GET", "/api/session/list", None).await;
    assert_eq!(answer.last["status"], 401, "{}", answer.last);
    bare.send_json(&json!({
        "type": "request", "id": "b", "method": "GET", "path": "/api/session/list",
        "headers": {"authorization": "Bearer sekret"}
    }))
    .await;
    let answer = bare.answer("b").await;
    assert_eq!(answer.last["status"], 200, "{}", answer.last);

    // A wrong token on the upgrade is refused before the upgrade.
    let refused = WsClient::connect_with(&daemon, "/ws", Some("wrong")).await;
    assert!(refused.is_err());
}

#[tokio::test]
async fn a_plain_get_of_the_socket_paths_is_an_unknown_route() {
    let daemon = Daemon::start();
    for path in ["/ws", "/api/ws"] {
        let (status, body) = daemon.get(path).await;
        assert_eq!(status, 404, "{path}");
        assert_eq!(body["code"], "UNKNOWN_ERROR");
    }
    // A handshake without its key is refused with the header named.
    let response = daemon
        .request(Method::GET, "/ws")
        .header("upgrade", "websocket")
        .header("connection", "upgrade")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "VALIDATION_FAILED", "{body}");
}

#[tokio::test]
async fn a_client_that_stops_reading_is_disconnected_not_buffered() {
    let daemon = Daemon::start_with(Options {
        extra_args: vec!["--ws-stall-secs".into(), "2".into()],
        ..Options::default()
    });
    // 512 MiB of zeros (sparse): far more than the socket, the kernel's buffers and the
    // 16 MiB outbox hold.
    let big = std::fs::File::create(daemon.root().join("big")).unwrap();
    big.set_len(512 * 1024 * 1024).unwrap();
    let mut stalled = WsClient::connect(&daemon, "/ws").await;
    stalled
        .request(
            "r",
            "POST",
            "/api/read/stream",
            Some(json!({"path": "big"})),
        )
        .await;
    // Not reading for longer than the stall limit.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let peak = fsd_tests::rss_kib(daemon.pid()) / 1024;
    assert!(
        peak < 200,
        "the daemon grew to {peak} MiB for one stalled client"
    );
    // What was in flight drains, then the socket ends, long before 512 MiB came through.
    let mut received = 0usize;
    while let Some(message) = stalled.next(Duration::from_secs(10)).await {
        received += message["data"].as_str().map_or(0, str::len);
        assert!(received < 256 * 1024 * 1024, "the stream went on");
    }
    // The daemon serves a new socket.
    let mut fresh = WsClient::connect(&daemon, "/ws").await;
    let answer = fresh.call("p", "GET", "/api/ping", None).await;
    assert_eq!(answer.last["status"], 200);
}
