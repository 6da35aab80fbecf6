//! The drop-in test: `@cloudflare/sandbox`'s own Worker and Durable Object (0.12.10,
//! unchanged, `worker/dev/official`) under workerd, with fsd's image as their container.
//! The SDK's calls run inside the Worker (`/drive`), over the SDK's `http`, `websocket` and
//! `rpc` transports; a preview URL the SDK made is requested through the Worker, and a
//! terminal is opened through `sandbox.terminal()`.

use fsd_tests::cloudflare::{self, Stack, Worker};
use serde_json::{Value, json};
use std::sync::OnceLock;

fn stack(test: &str) -> Option<&'static Stack> {
    static STACK: OnceLock<Stack> = OnceLock::new();
    cloudflare::available(test).then(|| STACK.get_or_init(|| Stack::start(Worker::Official, &[])))
}

/// Runs the SDK's calls in the Worker against sandbox `id` over `transport`.
async fn drive(stack: &Stack, id: &str, transport: &str) -> serde_json::Map<String, Value> {
    stack
        .drive(&format!(
            "id={id}&transport={transport}&hostname=drop.example.test"
        ))
        .await
}

fn check_details(details: &serde_json::Map<String, Value>) {
    assert_eq!(
        details["exec"],
        json!({"stdout": "a\nb\n", "stderr": "err\n", "exitCode": 3})
    );
    assert_eq!(
        details["execStream"],
        json!({"stdout": "one\ntwo\n", "exitCode": 0})
    );
    assert_eq!(details["readFile"], "hello\n");
    assert_eq!(details["exists"], true);
    assert_eq!(details["listFiles"], json!(["sub", "sub/hello.txt"]));
    assert_eq!(details["killProcess"], "killed");
    assert_eq!(details["watch"], true);
    assert_eq!(details["createSession"], "hi /workspace/official\n");
    assert_eq!(details["runCode"], json!(["42"]));
    assert_eq!(
        details["gitCheckout"],
        json!({"success": true, "readme": "readme\n"})
    );
    assert_eq!(details["createBackup"], "kept\n");
}

/// The preview URL the SDK made serves the sandbox's port through the Worker.
async fn preview_serves(stack: &Stack, url: &str) {
    stack.preview_serves(url, "/sub/hello.txt", "hello\n").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_object_drives_fsd_over_http() {
    let Some(stack) = stack("official_sdk::http") else {
        return;
    };
    let details = drive(stack, "drop-http", "http").await;
    check_details(&details);
    let url = details["exposePort"].as_str().expect("preview URL");
    preview_serves(stack, url).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_object_drives_fsd_over_websocket() {
    let Some(stack) = stack("official_sdk::websocket") else {
        return;
    };
    let details = drive(stack, "drop-ws", "websocket").await;
    check_details(&details);
    let url = details["exposePort"].as_str().expect("preview URL");
    preview_serves(stack, url).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_object_drives_fsd_over_rpc() {
    let Some(stack) = stack("official_sdk::rpc") else {
        return;
    };
    let details = drive(stack, "drop-rpc", "rpc").await;
    check_details(&details);
    let url = details["exposePort"].as_str().expect("preview URL");
    preview_serves(stack, url).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_terminal_reaches_fsd() {
    let Some(stack) = stack("official_sdk::terminal") else {
        return;
    };
    stack.terminal_echoes("/terminal?id=drop-term").await;
}
