//! `fsctl gateway`: preview URLs in front of a real HTTP server that a sandbox process runs.

use std::time::Duration;

use fsd_tests::{Daemon, free_port};
use serde_json::{Value, json};

#[path = "gateway/fleet.rs"]
mod fleet;
#[path = "gateway/streaming.rs"]
mod streaming;

/// A running gateway and its address.
struct Gateway {
    child: std::process::Child,
    url: String,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn gateway(daemon: &Daemon, state: &std::path::Path, hostname: Option<&str>) -> Gateway {
    let mut args = vec!["--url", &daemon.url, "gateway"];
    if let Some(hostname) = hostname {
        args.extend(["--hostname", hostname]);
    }
    gateway_with(&args, state)
}

/// `fsctl ARGS --listen 127.0.0.1:0 --state STATE` (ARGS ending in `gateway` and its
/// flags), once it says where it listens.
fn gateway_with(args: &[&str], state: &std::path::Path) -> Gateway {
    let mut child = std::process::Command::new(fsd_tests::binary("fsctl"))
        .args(args)
        .args(["--listen", "127.0.0.1:0", "--state"])
        .arg(state)
        .env_remove("FSD_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let line = fsd_tests::first_line(&mut child, "fsctl gateway");
    let url = line.rsplit(' ').next().unwrap().to_string();
    Gateway { child, url }
}

/// Starts `command` with `/api/process/start` and waits until it listens on `port`.
async fn serve_in_sandbox(daemon: &Daemon, command: &str, port: u16) {
    let (status, started) = daemon
        .post("/api/process/start", json!({"command": command}))
        .await;
    assert_eq!(status, 200, "{started}");
    fsd_tests::wait_until_listening(([127, 0, 0, 1], port).into(), command).await;
}

/// Starts `tests/fixtures/preview_upstream.py` in the sandbox, as a user's dev server is
/// started; its port.
async fn serve_upstream(daemon: &Daemon) -> u16 {
    std::fs::write(
        daemon.root().join("upstream.py"),
        include_str!("../../fixtures/preview_upstream.py"),
    )
    .unwrap();
    let port = free_port();
    serve_in_sandbox(daemon, &format!("python3 upstream.py {port}"), port).await;
    port
}

/// `POST /expose` on the gateway; its JSON answer.
async fn expose(gateway: &Gateway, body: Value) -> Value {
    expose_as(&gateway.url, None, body).await
}

/// `POST /expose` with the gateway's token, if it has one.
async fn expose_as(gateway: &str, token: Option<&str>, body: Value) -> Value {
    let request = reqwest::Client::new()
        .post(format!("{gateway}/expose"))
        .json(&body);
    match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    }
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap()
}

/// A GET through the gateway for the preview URL `preview` (its host sent as `Host`).
async fn get(gateway: &Gateway, preview: &str, path: &str) -> reqwest::Response {
    let host = preview
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    reqwest::Client::new()
        .get(format!("{}{path}", gateway.url))
        .header("host", host)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn preview_urls_reach_a_sandbox_server_and_refuse_what_they_must() {
    let mut daemon = Daemon::start();
    std::fs::write(daemon.root().join("hello.txt"), "hello through the gateway").unwrap();
    let port = free_port();
    serve_in_sandbox(
        &daemon,
        &format!("python3 -m http.server {port} --bind 127.0.0.1"),
        port,
    )
    .await;
    let state = tempfile::tempdir().unwrap();
    let gateway = gateway(&daemon, &state.path().join("exposures.json"), None);
    let client = reqwest::Client::new();
    let exposed = expose(&gateway, json!({"sandboxId": "Box1", "port": port})).await;
    let url = exposed["url"].as_str().unwrap().to_string();
    let token = exposed["token"].as_str().unwrap().to_string();
    assert_eq!(token.len(), 16, "{exposed}");
    assert!(
        url.starts_with(&format!("http://{port}-box1-{token}.localhost:")),
        "{url}"
    );

    // Through the gateway to the sandbox's server.
    let answer = get(&gateway, &url, "/hello.txt").await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.unwrap(), "hello through the gateway");

    // A wrong token, an unexposed port: 404 INVALID_TOKEN.
    let wrong = url.replace(&token, "wrongtoken");
    let answer = get(&gateway, &wrong, "/hello.txt").await;
    assert_eq!(answer.status(), 404);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["code"], "INVALID_TOKEN");
    let other_port = url.replacen(&port.to_string(), "5999", 1);
    assert_eq!(get(&gateway, &other_port, "/").await.status(), 404);

    // The exposure is listed as active, and survives a gateway restart.
    let listed: Value = client
        .get(format!("{}/exposed?sandboxId=Box1", gateway.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["ports"][0]["status"], "active", "{listed}");
    drop(gateway);
    let gateway = self::gateway(&daemon, &state.path().join("exposures.json"), None);
    let again = url.replacen(
        url.rsplit(':').next().unwrap().trim_end_matches('/'),
        gateway.url.rsplit(':').next().unwrap(),
        1,
    );
    assert_eq!(get(&gateway, &again, "/hello.txt").await.status(), 200);

    // A sandbox that restarted since: 410 STALE_PREVIEW_URL until exposed again (the
    // gateway asks a sandbox for its run at most once a second).
    daemon.restart();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let stale = get(&gateway, &again, "/hello.txt").await;
    assert_eq!(stale.status(), 410);
    let body: Value = stale.json().await.unwrap();
    assert_eq!(body["code"], "STALE_PREVIEW_URL");

    // workers.dev cannot carry preview hosts.
    let workers = self::gateway(
        &daemon,
        &state.path().join("w.json"),
        Some("me.workers.dev"),
    );
    let refused = client
        .post(format!("{}/expose", workers.url))
        .json(&json!({"sandboxId": "box", "port": port}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "CUSTOM_DOMAIN_REQUIRED");
}

/// A WebSocket through a preview URL: upgraded at the sandbox's port, frames carried both
/// ways, to the echo of a server the sandbox runs.
#[tokio::test]
async fn websockets_are_bridged_frame_by_frame() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let daemon = Daemon::start();
    let port = serve_upstream(&daemon).await;
    let state = tempfile::tempdir().unwrap();
    let gateway = gateway(&daemon, &state.path().join("exposures.json"), None);
    let exposed = expose(&gateway, json!({"sandboxId": "wsbox", "port": port})).await;
    let preview = exposed["url"].as_str().unwrap();
    let host = preview.trim_start_matches("http://").trim_end_matches('/');
    let mut request = format!("{}/echo", gateway.url.replacen("http://", "ws://", 1))
        .into_client_request()
        .unwrap();
    request.headers_mut().insert("host", host.parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    socket.send(Message::Text("hello".into())).await.unwrap();
    let echoed = socket.next().await.unwrap().unwrap();
    assert_eq!(echoed.into_text().unwrap().as_str(), "hello");
    socket
        .send(Message::Binary(vec![0, 159, 255].into()))
        .await
        .unwrap();
    let echoed = socket.next().await.unwrap().unwrap();
    assert_eq!(echoed.into_data().to_vec(), [0, 159, 255]);
    let large: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    socket
        .send(Message::Binary(large.clone().into()))
        .await
        .unwrap();
    let echoed = socket.next().await.unwrap().unwrap();
    assert!(
        echoed.into_data().to_vec() == large,
        "the large frame came back changed"
    );
    socket.close(None).await.unwrap();

    // The wrong token is refused before any upgrade.
    let wrong = host.replace(exposed["token"].as_str().unwrap(), "nope");
    let mut request = format!("{}/echo", gateway.url.replacen("http://", "ws://", 1))
        .into_client_request()
        .unwrap();
    request.headers_mut().insert("host", wrong.parse().unwrap());
    assert!(tokio_tungstenite::connect_async(request).await.is_err());
}

/// `fsctl expose`, `fsctl exposed`, `fsctl unexpose`, and the SDK's gateway client.
#[tokio::test]
async fn fsctl_and_the_sdk_expose_ports() {
    let daemon = Daemon::start();
    let state = tempfile::tempdir().unwrap();
    let gateway = gateway(&daemon, &state.path().join("exposures.json"), None);
    let fsctl = |args: &[&str]| {
        let output = std::process::Command::new(fsd_tests::binary("fsctl"))
            .args(args)
            .args(["--gateway", &gateway.url, "--sandbox", "cli"])
            .env_remove("FSD_TOKEN")
            .output()
            .unwrap();
        fsd_tests::succeeded(&output)
    };
    let exposed: Value = serde_json::from_str(&fsctl(&[
        "--json",
        "expose",
        "4321",
        "--preview-token",
        "my_tok",
    ]))
    .unwrap();
    assert_eq!(exposed["token"], "my_tok");
    assert!(
        exposed["url"]
            .as_str()
            .unwrap()
            .starts_with("http://4321-cli-my_tok.localhost:")
    );
    let listed = fsctl(&["exposed"]);
    assert!(
        listed.contains("4321") && listed.contains("active"),
        "{listed}"
    );

    let client = fsd_sdk::Gateway::connect(&gateway.url, None);
    let second = client.expose_port("cli", 4322, None).await.unwrap();
    assert_eq!(second.token.as_deref().map(str::len), Some(16));
    let ports = client.exposed_ports("cli").await.unwrap();
    assert_eq!(
        ports.iter().map(|p| p.port).collect::<Vec<_>>(),
        [4321, 4322]
    );
    fsctl(&["unexpose", "4321"]);
    client.unexpose_port("cli", 4322).await.unwrap();
    assert!(client.exposed_ports("cli").await.unwrap().is_empty());
    // A port that cannot be exposed is refused.
    assert!(client.expose_port("cli", 80, None).await.is_err());
}
