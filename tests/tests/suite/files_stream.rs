//! /api/read/stream: SSE framing, chunking and errors.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use fsd_tests::{Daemon, assert_error};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Splits an SSE body into its JSON frames, checking the reference framing on the way.
fn frames(body: &str) -> Vec<Value> {
    assert!(body.ends_with("\n\n"), "body must end with a blank line");
    body.split_terminator("\n\n")
        .map(|frame| {
            assert!(!frame.contains('\n'), "one data line per frame: {frame:?}");
            let json = frame
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data frame: {frame:?}"));
            serde_json::from_str(json).unwrap()
        })
        .collect()
}

async fn stream(daemon: &Daemon, path: &str) -> (reqwest::header::HeaderMap, Vec<Value>) {
    let response = daemon
        .request(reqwest::Method::POST, "/api/read/stream")
        .json(&json!({"path": path}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers().clone();
    (headers, frames(&response.text().await.unwrap()))
}

#[tokio::test]
async fn small_text_file_is_metadata_one_chunk_complete() {
    let daemon = Daemon::start();
    std::fs::write(daemon.path("hello.txt"), "Hello, stream!\n").unwrap();
    let (headers, events) = stream(&daemon, "hello.txt").await;
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["cache-control"], "no-cache");
    assert_eq!(
        events,
        [
            json!({"type": "metadata", "mimeType": "text/plain", "size": 15, "isBinary": false, "encoding": "utf-8"}),
            json!({"type": "chunk", "data": "Hello, stream!\n"}),
            json!({"type": "complete", "bytesRead": 15}),
        ]
    );
}

#[tokio::test]
async fn binary_files_stream_in_65535_byte_base64_chunks() {
    let daemon = Daemon::start();
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(daemon.path("blob.bin"), &bytes).unwrap();
    let (_, events) = stream(&daemon, "blob.bin").await;
    assert_eq!(events[0]["type"], "metadata");
    assert_eq!(events[0]["isBinary"], true);
    assert_eq!(events[0]["encoding"], "base64");
    assert_eq!(events[0]["size"], 200_000);
    let chunks: Vec<Vec<u8>> = events[1..events.len() - 1]
        .iter()
        .map(|e| {
            assert_eq!(e["type"], "chunk");
            BASE64.decode(e["data"].as_str().unwrap()).unwrap()
        })
        .collect();
    let sizes: Vec<usize> = chunks.iter().map(Vec::len).collect();
    assert_eq!(sizes, [65_535, 65_535, 65_535, 3_395]);
    assert_eq!(chunks.concat(), bytes);
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "complete", "bytesRead": 200_000})
    );
}

#[tokio::test]
async fn multibyte_text_across_chunk_boundaries_is_intact() {
    let daemon = Daemon::start();
    let text = "añ€😀".repeat(40_000);
    std::fs::write(daemon.path("u.txt"), &text).unwrap();
    let (_, events) = stream(&daemon, "u.txt").await;
    let joined: String = events[1..events.len() - 1]
        .iter()
        .map(|e| e["data"].as_str().unwrap())
        .collect();
    assert_eq!(joined, text);
    assert_eq!(events.last().unwrap()["bytesRead"], text.len());
}

#[tokio::test]
async fn empty_file_streams_metadata_and_complete() {
    let daemon = Daemon::start();
    std::fs::write(daemon.path("empty.txt"), "").unwrap();
    let (_, events) = stream(&daemon, "empty.txt").await;
    assert_eq!(events.len(), 2);
    assert_eq!(events[1], json!({"type": "complete", "bytesRead": 0}));
}

#[tokio::test]
async fn errors_before_the_stream_are_json() {
    let daemon = Daemon::start();
    let (status, body) = daemon
        .post("/api/read/stream", json!({"path": "missing"}))
        .await;
    assert_error(status, &body, 404, "FILE_NOT_FOUND");
    std::fs::create_dir(daemon.path("d")).unwrap();
    let (status, body) = daemon.post("/api/read/stream", json!({"path": "d"})).await;
    assert_error(status, &body, 400, "IS_DIRECTORY");
}
