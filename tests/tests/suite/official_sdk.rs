//! The drop-in test: `@cloudflare/sandbox`'s own Worker and Durable Object (0.12.10,
//! unchanged, `worker/dev/official`) under workerd, with fsd's image as their container.
//! The SDK's calls run inside the Worker (`/drive`), over the SDK's `http`, `websocket` and
//! `rpc` transports; a preview URL the SDK made is requested through the Worker, and a
//! terminal is opened through `sandbox.terminal()`.

use std::sync::OnceLock;
use std::time::Duration;

use fsd_tests::cloudflare::{self, Stack, Worker};
use fsd_tests::ws::WsClient;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

fn stack(test: &str) -> Option<&'static Stack> {
    static STACK: OnceLock<Stack> = OnceLock::new();
    cloudflare::available(test).then(|| STACK.get_or_init(|| Stack::start(Worker::Official, &[])))
}

/// Runs the SDK's calls in the Worker against sandbox `id` over `transport`; answers each
/// call's detail by method, after checking every call succeeded.
async fn drive(stack: &Stack, id: &str, transport: &str) -> serde_json::Map<String, Value> {
    let url = format!(
        "{}/drive?id={id}&transport={transport}&hostname=drop.example.test",
        stack.url
    );
    let response = reqwest::Client::new()
        .post(url)
        .timeout(Duration::from_secs(300))
        .send()
        .await
        .expect("drive");
    assert_eq!(response.status(), 200);
    let report: Vec<Value> = response.json().await.expect("report");
    let failed: Vec<&Value> = report.iter().filter(|call| call["ok"] != true).collect();
    assert!(failed.is_empty(), "{transport}: calls failed: {failed:#?}");
    report
        .into_iter()
        .map(|call| {
            let method = call["method"].as_str().unwrap_or_default().to_string();
            (method, call["detail"].clone())
        })
        .collect()
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
    let host = url.trim_start_matches("https://").trim_end_matches('/');
    let response = reqwest::Client::new()
        .get(format!("{}/sub/hello.txt", stack.url))
        .header("host", host)
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .expect("preview");
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "hello\n");
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
    let url = format!("{}/terminal?id=drop-term", stack.url);
    let mut client = WsClient::connect_url(&url, None)
        .await
        .expect("terminal through sandbox.terminal()");
    let mut screen = String::new();
    let mut typed = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !screen.contains("drop-42") {
        let frame = tokio::time::timeout_at(deadline, client.socket.next())
            .await
            .unwrap_or_else(|_| panic!("no echo; screen: {screen:?}"));
        match frame {
            Some(Ok(Message::Binary(bytes))) => screen.push_str(&String::from_utf8_lossy(&bytes)),
            Some(Ok(Message::Text(text))) => {
                let control: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                if control["type"] == "ready" && !typed {
                    client
                        .socket
                        .send(Message::Binary(b"echo drop-$((40+2))\r".to_vec().into()))
                        .await
                        .unwrap();
                    typed = true;
                }
            }
            Some(Ok(_)) => {}
            None | Some(Err(_)) => panic!("the terminal closed; screen: {screen:?}"),
        }
    }
}
