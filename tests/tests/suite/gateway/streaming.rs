//! Preview traffic that must stream: 100 MiB down and up with the gateway's memory staying
//! far below that, SSE events that arrive one by one, and wrong tokens that never reach the
//! sandbox's server. The server (`tests/fixtures/preview_upstream.py`) is started through
//! `/api/process/start`, as a user's dev server is.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use fsd_tests::Daemon;
use futures_util::StreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{expose, gateway, serve_upstream};

const MIB: usize = 1 << 20;
const BIG_MIB: usize = 100;
/// The gateway's resident memory may not reach this while 100 MiB pass each way.
const PEAK_RSS_LIMIT_KIB: u64 = 48 * 1024;

#[tokio::test]
async fn bodies_and_events_stream_and_wrong_tokens_reach_nothing() {
    let daemon = Daemon::start();
    let port = serve_upstream(&daemon).await;
    let state = tempfile::tempdir().unwrap();
    let gateway = gateway(&daemon, &state.path().join("exposures.json"), None);
    let exposed = expose(&gateway, json!({"sandboxId": "stream", "port": port})).await;
    let preview = exposed["url"].as_str().unwrap();
    let host = preview
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let client = reqwest::Client::new();
    let send = |method: reqwest::Method, path: &str, host: &str| {
        client
            .request(method, format!("{}{path}", gateway.url))
            .header("host", host)
    };

    // The gateway's memory is sampled while 100 MiB go down and 100 MiB go up.
    let sampling = Arc::new(AtomicBool::new(true));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = tokio::spawn({
        let (sampling, peak, pid) = (sampling.clone(), peak.clone(), gateway.child.id());
        async move {
            while sampling.load(Ordering::Relaxed) {
                peak.fetch_max(fsd_tests::rss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });

    let download = send(reqwest::Method::GET, &format!("/big?mib={BIG_MIB}"), &host)
        .send()
        .await
        .unwrap();
    assert_eq!(download.status(), 200);
    let mut received = 0usize;
    let mut body = download.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.unwrap();
        let wrong = chunk
            .iter()
            .enumerate()
            .find(|(i, byte)| **byte != ((received + i) % 256) as u8);
        assert!(
            wrong.is_none(),
            "byte {} differs",
            received + wrong.unwrap().0
        );
        received += chunk.len();
    }
    assert_eq!(received, BIG_MIB * MIB);

    let piece: Bytes = (0..MIB).map(|i| (i * 31 % 251) as u8).collect();
    let mut expected = Sha256::new();
    for _ in 0..BIG_MIB {
        expected.update(&piece);
    }
    let pieces = futures_util::stream::iter(
        (0..BIG_MIB).map(move |_| Ok::<_, std::io::Error>(piece.clone())),
    );
    let upload = send(reqwest::Method::POST, "/upload", &host)
        .header("content-length", (BIG_MIB * MIB).to_string())
        .body(reqwest::Body::wrap_stream(pieces))
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status(), 200);
    let stored: Value = upload.json().await.unwrap();
    assert_eq!(stored["length"], BIG_MIB * MIB);
    assert_eq!(
        stored["sha256"],
        format!("{:x}", expected.finalize()),
        "the upload arrived changed"
    );
    sampling.store(false, Ordering::Relaxed);
    sampler.await.unwrap();
    let peak = peak.load(Ordering::Relaxed);
    assert!(
        peak > 0 && peak < PEAK_RSS_LIMIT_KIB,
        "the gateway held {peak} KiB at its peak while 100 MiB passed each way"
    );

    // SSE: `second` is written only once the client has `first`, so a gateway that
    // buffered would never deliver `first` (the read gives up after 10 s).
    let events = send(reqwest::Method::GET, "/events", &host)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let mut events = events.bytes_stream();
    let mut text = String::new();
    let mut read_until = async |wanted: &str| {
        while !text.contains(wanted) {
            let chunk = tokio::time::timeout(Duration::from_secs(10), events.next())
                .await
                .unwrap_or_else(|_| panic!("{wanted:?} did not arrive; got {text:?}"))
                .unwrap()
                .unwrap();
            text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
        text.clone()
    };
    let first = read_until("data: first\n\n").await;
    assert!(!first.contains("second"), "{first:?}");
    std::fs::write(daemon.root().join("go"), "").unwrap();
    read_until("data: second\n\n").await;

    // Wrong tokens: 404 INVALID_TOKEN, and the server never hears of them.
    let log = daemon.root().join("requests.log");
    let heard = std::fs::read_to_string(&log).unwrap();
    assert!(heard.contains("GET /big?mib=100") && heard.contains("POST /upload"));
    let token = exposed["token"].as_str().unwrap();
    let wrong = host.replace(token, "not_the_token");
    for method in [reqwest::Method::GET, reqwest::Method::POST] {
        let refused = send(method, "/big?mib=1", &wrong)
            .body("a body that must not arrive")
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 404);
        let body: Value = refused.json().await.unwrap();
        assert_eq!(body["code"], "INVALID_TOKEN");
    }
    let unexposed = host.replacen(&port.to_string(), "7999", 1);
    assert_eq!(
        send(reqwest::Method::GET, "/big?mib=1", &unexposed)
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), heard);
}
