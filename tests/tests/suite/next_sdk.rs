//! The SDK's next line (`@cloudflare/sandbox` 0.13.0-next.751.1, pinned, unchanged; its own
//! Worker and Durable Object in `worker/dev/next`) under workerd, with the same fsd image
//! the 0.12.10 drop-in (`official_sdk`) runs in the same test process. The object speaks
//! only `/rpc` (with its handshake) and `/ws/terminal` to the container; its calls run in
//! the Worker (`/drive`) and are checked against the table below; a preview URL it made is
//! requested through the Worker, a quick tunnel runs on the cloudflared stand-in the stacks'
//! image carries, a terminal is reached through `terminal.connect()`, and a
//! sandbox with a running process stays awake past its `sleepAfter` and sleeps once the
//! process has ended (the object asks `processes.hasActive`).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use fsd_tests::cloudflare::{self, Stack, Worker};
use serde_json::json;

fn stack(test: &str) -> Option<&'static Stack> {
    static STACK: OnceLock<Stack> = OnceLock::new();
    cloudflare::available(test).then(|| STACK.get_or_init(|| Stack::start(Worker::Next, &[])))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_next_lines_object_drives_fsd() {
    let Some(stack) = stack("next_sdk::drive") else {
        return;
    };
    let details = stack
        .drive("id=next-drive&hostname=next.example.test")
        .await;
    let expected = json!({
        "exec": {"stdout": "a\nb\n", "stderr": "err\n", "exitCode": 3, "timedOut": false},
        "execEnvCwd": "hi /workspace/next\n",
        "logs": {
            "all": {"stdout": "one\n", "stderr": "two\n", "exit": {"code": 4, "timedOut": false}},
            "rest": {"stdout": "", "stderr": "two\n", "exit": {"code": 4, "timedOut": false}},
            "cursor": true
        },
        "waitForLog": {
            "line": "ready-42",
            "stream": "stdout",
            "exit": {"code": 143, "signal": 15, "timedOut": false}
        },
        "kill": {"exit": {"code": 137, "signal": 9, "timedOut": false}, "state": "exited"},
        "timeout": {"code": 143, "signal": 15, "timedOut": true},
        "spawnFailed": "ProcessSpawnFailedError",
        "listProcesses": true,
        "files": {"read": "hello\n", "exists": true, "listed": ["sub", "sub/renamed.txt"]},
        "waitForPort": true,
        "tunnel": {"url": true, "same": true, "listed": [8080], "after": 0},
        "watch": true,
        "checkChanges": {"first": "unchanged", "second": "changed"},
        "terminal": {"exit": {"code": 7, "timedOut": false}, "size": true, "echoed": true},
        "runCode": ["42"],
        "workspaceArchive": {"kept": "kept\n", "skipped": false, "archiveLeft": false},
        "createBackup": "kept\n",
    });
    for (method, want) in expected.as_object().expect("table") {
        assert_eq!(&details[method], want, "{method}");
    }
    let url = details["exposePort"].as_str().expect("preview URL");
    stack
        .preview_serves(url, "/sub/renamed.txt", "hello\n")
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_next_lines_terminal_reaches_fsd() {
    let Some(stack) = stack("next_sdk::terminal") else {
        return;
    };
    stack.terminal_echoes("/terminal?id=next-term").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_process_keeps_the_next_lines_sandbox_awake_and_then_it_sleeps() {
    let Some(stack) = stack("next_sdk::sleep") else {
        return;
    };
    let response = reqwest::Client::new()
        .post(format!(
            "{}/start?id=next-sleepy&sleepAfter=3s&seconds=10",
            stack.url
        ))
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .unwrap_or_else(|e| panic!("start: {e}\n{}", stack.log_tail()));
    assert_eq!(response.status(), 200, "{}", stack.log_tail());
    let started = Instant::now();
    let answer: serde_json::Value = response.json().await.expect("start's answer");
    let object = answer["object"].as_str().expect("the object's id");
    let container = stack
        .containers()
        .into_iter()
        .find(|name| name.ends_with(&format!("-Sandbox-{object}")))
        .expect("the sandbox's container");
    // Past `sleepAfter` the process still runs: the object's expiry asks hasActive and the
    // sandbox stays up.
    while started.elapsed() < Duration::from_secs(8) {
        assert!(
            stack.running(&container),
            "the sandbox slept at {:?} with its process running",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Once it has ended, nothing is active: the sandbox sleeps.
    let deadline = started + Duration::from_secs(60);
    while stack.running(&container) {
        assert!(
            Instant::now() < deadline,
            "the sandbox is still up 50 s after its process ended"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
