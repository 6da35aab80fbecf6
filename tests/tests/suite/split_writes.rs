//! A client that writes each request's head and body apart without `TCP_NODELAY` gets its
//! answers as fast as one that writes them together: the daemon acknowledges what it reads
//! at once, so the client's Nagle algorithm never holds the body for a delayed ACK.

use fsd_tests::Daemon;
use fsd_tests::split_writes::SplitWrites;

/// Linux delays an ACK by at least 40 ms; a request held for one takes longer than this.
/// The figure itself is the exec benchmark's (`split writes` row), not this test's.
const STALL: std::time::Duration = std::time::Duration::from_millis(20);

#[tokio::test(flavor = "multi_thread")]
async fn a_request_written_in_two_parts_is_not_held_for_a_delayed_ack() {
    let daemon = Daemon::start();
    let address = daemon.url.trim_start_matches("http://").to_string();
    let figures = tokio::task::spawn_blocking(move || {
        let mut client = SplitWrites::connect(&address).expect("connect");
        let body = r#"{"command":"true"}"#;
        let mut times = |split: bool| {
            (0..15)
                .map(|_| {
                    let (status, answer, took) = client
                        .post("/api/execute", &[], body, split)
                        .expect("request");
                    assert_eq!(status, 200, "{answer}");
                    assert!(answer.contains(r#""exitCode":0"#), "{answer}");
                    took
                })
                .collect::<Vec<_>>()
        };
        // The first answers put the connection in the state where ACKs are delayed.
        times(false);
        let mut together = times(false);
        let mut apart = times(true);
        together.sort();
        apart.sort();
        (together[together.len() / 2], apart[apart.len() / 2], apart)
    })
    .await
    .expect("client thread");
    let (together, apart, all) = figures;
    println!("one write: p50 {together:?}; head and body apart: p50 {apart:?} ({all:?})");
    assert!(
        apart < STALL,
        "requests written in two parts waited for delayed ACKs: p50 {apart:?} (one write: {together:?})"
    );
}
