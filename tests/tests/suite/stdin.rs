//! Stdin: a pipe kept for background processes (`stdin: "pipe"`, `POST
//! /api/process/{id}/stdin`) and content for commands (`stdin`, `stdinBase64`).

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use fsd_tests::{Daemon, assert_error, assert_validation};
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn start(daemon: &Daemon, body: Value) {
    let (status, reply) = daemon.post("/api/process/start", body).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
}

async fn write(daemon: &Daemon, id: &str, body: Value) -> (StatusCode, Value) {
    daemon.post(&format!("/api/process/{id}/stdin"), body).await
}

async fn kill(daemon: &Daemon, id: &str) {
    let (status, reply) = daemon.delete(&format!("/api/process/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
}

async fn logs(daemon: &Daemon, id: &str) -> Value {
    daemon.get(&format!("/api/process/{id}/logs")).await.1
}

/// Waits until the process's stdout holds `wanted`.
async fn stdout_holds(daemon: &Daemon, id: &str, wanted: &str) -> String {
    let mut stdout = String::new();
    for _ in 0..500 {
        stdout = logs(daemon, id).await["stdout"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if stdout.contains(wanted) {
            return stdout;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{id}'s stdout never held {wanted:?}: {stdout:?}");
}

async fn wait_ended(daemon: &Daemon, id: &str) -> Value {
    for _ in 0..500 {
        let (_, body) = daemon.get(&format!("/api/process/{id}")).await;
        if body["process"]["status"] != "running" {
            return body["process"].clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{id} never ended");
}

#[tokio::test]
async fn a_piped_process_reads_what_is_written_and_ends_on_close() {
    let daemon = Daemon::start();
    // A conversation: each line is answered before the next is sent.
    let command = "while IFS= read -r line; do echo \"got $line\"; done; echo eof; sleep 30";
    start(
        &daemon,
        json!({"command": command, "processId": "talker", "stdin": "pipe"}),
    )
    .await;
    let (status, reply) = write(&daemon, "talker", json!({"data": "one\n"})).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["written"], 4, "{reply}");
    assert_eq!(reply["closed"], false, "{reply}");
    stdout_holds(&daemon, "talker", "got one\n").await;
    let two = STANDARD.encode("tw\u{e9}\n");
    let (status, reply) = write(
        &daemon,
        "talker",
        json!({"data": two, "encoding": "base64", "close": true}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["closed"], true, "{reply}");
    let stdout = stdout_holds(&daemon, "talker", "eof\n").await;
    assert_eq!(stdout, "got one\ngot tw\u{e9}\neof\n");
    // Closed, while the process runs on: the write is refused as such.
    let (status, reply) = write(&daemon, "talker", json!({"data": "late\n"})).await;
    assert_error(status, &reply, 409, "STDIN_CLOSED");
    kill(&daemon, "talker").await;
    let (status, reply) = write(&daemon, "talker", json!({"data": "x"})).await;
    assert_error(status, &reply, 409, "PROCESS_EXITED");
    assert_eq!(reply["context"]["processId"], "talker", "{reply}");
}

#[tokio::test]
async fn many_writes_arrive_whole_and_in_order() {
    let daemon = Daemon::start();
    let target = daemon.path("copy.bin");
    let command = format!("cat > '{}'", target.display());
    start(
        &daemon,
        json!({"command": command, "processId": "copier", "stdin": "pipe"}),
    )
    .await;
    // 3 MiB of every byte value, more than the pipe holds, in uneven pieces.
    let bytes: Vec<u8> = (0..3 * 1024 * 1024u32)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    let mut sent = 0;
    for (n, piece) in bytes.chunks(700_001).enumerate() {
        let last = (n + 1) * 700_001 >= bytes.len();
        let (status, reply) = write(
            &daemon,
            "copier",
            json!({"data": STANDARD.encode(piece), "encoding": "base64", "close": last}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{reply}");
        assert_eq!(reply["written"], piece.len(), "{reply}");
        sent += piece.len();
    }
    assert_eq!(sent, bytes.len());
    let process = wait_ended(&daemon, "copier").await;
    assert_eq!(process["exitCode"], 0, "{process}");
    assert!(std::fs::read(&target).unwrap() == bytes, "the copy differs");
}

#[tokio::test]
async fn a_process_that_never_reads_holds_the_daemon_to_its_pipe() {
    let daemon = Daemon::start();
    start(
        &daemon,
        json!({"command": "sleep 30", "processId": "deaf", "stdin": "pipe"}),
    )
    .await;
    let big = STANDARD.encode(vec![b'x'; 3 * 1024 * 1024]);
    let (status, reply) = write(
        &daemon,
        "deaf",
        json!({"data": big, "encoding": "base64", "timeoutMs": 300}),
    )
    .await;
    assert_error(status, &reply, 409, "STDIN_FULL");
    let limit = reply["context"]["pipeBytes"].as_u64().unwrap();
    let written = reply["context"]["written"].as_u64().unwrap();
    assert_eq!(limit, 1024 * 1024, "{reply}");
    assert!(written > 0 && written <= limit, "{reply}");
    // Full stays full: the next write says so with nothing written, and the daemon serves.
    let (status, reply) = write(&daemon, "deaf", json!({"data": "y", "timeoutMs": 100})).await;
    assert_error(status, &reply, 409, "STDIN_FULL");
    assert_eq!(reply["context"]["written"], 0, "{reply}");
    let (status, _) = daemon.get("/api/process/deaf").await;
    assert_eq!(status, StatusCode::OK);
    kill(&daemon, "deaf").await;
}

#[tokio::test]
async fn stdin_mistakes_are_named() {
    let daemon = Daemon::start();
    start(
        &daemon,
        json!({"command": "sleep 30", "processId": "unpiped"}),
    )
    .await;
    let (status, reply) = write(&daemon, "unpiped", json!({"data": "x"})).await;
    assert_error(status, &reply, 409, "STDIN_NOT_PIPED");
    let (status, reply) = write(&daemon, "nope", json!({"data": "x"})).await;
    assert_error(status, &reply, 404, "PROCESS_NOT_FOUND");
    for (body, field) in [
        (json!({"data": "x", "encoding": "hex"}), "encoding"),
        (json!({"data": "%%%", "encoding": "base64"}), "data"),
        (json!({"data": "x", "timeoutMs": 0}), "timeoutMs"),
        (json!({"data": 5}), "data"),
    ] {
        let (status, reply) = write(&daemon, "unpiped", body).await;
        assert_validation(status, &reply, field);
    }
    let (status, reply) = daemon
        .post(
            "/api/process/start",
            json!({"command": "cat", "stdin": "file"}),
        )
        .await;
    assert_validation(status, &reply, "stdin");
    let (status, reply) = daemon
        .post(
            "/api/execute",
            json!({"command": "cat", "stdin": "a", "stdinBase64": "YQ=="}),
        )
        .await;
    assert_validation(status, &reply, "stdinBase64");
    let (status, reply) = daemon
        .post(
            "/api/execute",
            json!({"command": "cat", "stdinBase64": "not base64!"}),
        )
        .await;
    assert_validation(status, &reply, "stdinBase64");
    kill(&daemon, "unpiped").await;
}

#[tokio::test]
async fn commands_read_the_content_they_are_given() {
    let daemon = Daemon::start();
    let (status, reply) = daemon
        .post(
            "/api/execute",
            json!({"command": "tr a-z A-Z", "stdin": "hello\n"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["stdout"], "HELLO\n");
    let (status, reply) = daemon
        .post(
            "/api/execute",
            json!({"command": "od -An -tx1 | tr -d ' \\n'", "stdinBase64": STANDARD.encode([0u8, 255, 10])}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["stdout"], "00ff0a");
    // Without content stdin is empty, as before: the session does not wait.
    let (status, reply) = daemon
        .post("/api/execute", json!({"command": "cat; echo done"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["stdout"], "done\n");
    // A background command given content reads it too.
    let (status, reply) = daemon
        .post(
            "/api/execute",
            json!({"command": "wc -l", "stdin": "a\nb\nc\n", "background": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let id = reply["processId"].as_str().unwrap().to_string();
    let process = wait_ended(&daemon, &id).await;
    assert_eq!(process["exitCode"], 0, "{process}");
    assert_eq!(
        logs(&daemon, &id).await["stdout"].as_str().unwrap().trim(),
        "3"
    );
}

#[tokio::test]
async fn concurrent_writes_never_interleave() {
    let daemon = Daemon::start();
    let target = daemon.path("blocks.bin");
    let command = format!("cat > '{}'", target.display());
    start(
        &daemon,
        json!({"command": command, "processId": "blocks", "stdin": "pipe"}),
    )
    .await;
    // Eight writers at once, each 300 KB of its own letter (more than the pipe takes in one
    // write, so each write is many write(2) calls).
    let block = 300_000;
    let writers = (0..8u8).map(|n| {
        let daemon = &daemon;
        async move {
            let data = STANDARD.encode(vec![b'a' + n; block]);
            let (status, reply) = write(
                daemon,
                "blocks",
                json!({"data": data, "encoding": "base64"}),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{reply}");
        }
    });
    futures_util::future::join_all(writers).await;
    let (status, _) = write(&daemon, "blocks", json!({"data": "", "close": true})).await;
    assert_eq!(status, StatusCode::OK);
    let process = wait_ended(&daemon, "blocks").await;
    assert_eq!(process["exitCode"], 0, "{process}");
    let written = std::fs::read(&target).unwrap();
    assert_eq!(written.len(), 8 * block);
    let mut letters: Vec<u8> = written
        .chunks(block)
        .map(|chunk| {
            assert!(
                chunk.iter().all(|&b| b == chunk[0]),
                "a write was interleaved"
            );
            chunk[0]
        })
        .collect();
    letters.sort_unstable();
    assert_eq!(letters, b"abcdefgh");
}
