//! /api/port-watch against real listeners and processes.

use fsd_tests::{Daemon, assert_error, assert_validation, free_port};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn watch(daemon: &Daemon, body: Value) -> Vec<Value> {
    let response = daemon
        .request(Method::POST, "/api/port-watch")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    text.split_terminator("\n\n")
        .map(|frame| serde_json::from_str(frame.strip_prefix("data: ").unwrap()).unwrap())
        .collect()
}

#[tokio::test]
async fn tcp_ready_on_a_listening_port() {
    let daemon = Daemon::start();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let events = watch(
        &daemon,
        json!({"port": port, "mode": "tcp", "interval": 100}),
    )
    .await;
    assert_eq!(
        events,
        [
            json!({"type": "watching", "port": port}),
            json!({"type": "ready", "port": port})
        ]
    );
}

#[tokio::test]
async fn http_ready_once_a_server_started_by_a_process_answers() {
    let daemon = Daemon::start();
    let port = free_port();
    let command = format!("sleep 0.3; exec python3 -m http.server {port} --bind 127.0.0.1");
    let (status, _) = daemon
        .post(
            "/api/process/start",
            json!({"command": command, "processId": "web"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let events = watch(
        &daemon,
        json!({"port": port, "mode": "http", "processId": "web", "interval": 100}),
    )
    .await;
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "ready", "port": port, "statusCode": 200})
    );
    // A status outside the range is not ready; inside a custom range it is.
    let events = watch(
        &daemon,
        json!({"port": port, "mode": "http", "path": "/missing", "statusMin": 404, "statusMax": 404, "interval": 100}),
    )
    .await;
    assert_eq!(events.last().unwrap()["statusCode"], 404);
    daemon
        .request(Method::DELETE, "/api/process/web")
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn process_exit_ends_the_watch() {
    let daemon = Daemon::start();
    let port = free_port();
    daemon
        .post(
            "/api/process/start",
            json!({"command": "sleep 0.2; exit 3", "processId": "dies"}),
        )
        .await;
    let events = watch(
        &daemon,
        json!({"port": port, "mode": "http", "processId": "dies", "interval": 100}),
    )
    .await;
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "process_exited", "port": port, "exitCode": 3})
    );
}

#[tokio::test]
async fn bad_requests() {
    let daemon = Daemon::start();
    let (status, body) = daemon
        .post("/api/port-watch", json!({"port": 0, "mode": "tcp"}))
        .await;
    assert_validation(status, &body, "port");
    let (status, body) = daemon
        .post("/api/port-watch", json!({"port": 70000, "mode": "tcp"}))
        .await;
    assert_validation(status, &body, "port");
    let (status, body) = daemon
        .post("/api/port-watch", json!({"port": 80, "mode": "udp"}))
        .await;
    assert_validation(status, &body, "mode");
    let (status, body) = daemon
        .post(
            "/api/port-watch",
            json!({"port": 80, "mode": "http", "path": "no-slash"}),
        )
        .await;
    assert_validation(status, &body, "path");
    let (status, body) = daemon
        .post(
            "/api/port-watch",
            json!({"port": 80, "mode": "tcp", "processId": "ghost"}),
        )
        .await;
    assert_error(status, &body, 404, "PROCESS_NOT_FOUND");
}
