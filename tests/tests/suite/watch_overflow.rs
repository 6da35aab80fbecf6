//! A kernel queue overflow reaches the API as a resync. Its own test binary: it lowers the
//! machine-wide `max_queued_events` while the daemon creates its inotify instance.

use fsd_tests::{Daemon, available_or_skip, is_root};
use reqwest::StatusCode;
use serde_json::json;

const KNOB: &str = "/proc/sys/fs/inotify/max_queued_events";

/// Lowers the knob; puts it back when dropped, even if the test panics in between.
struct Lowered(String);

impl Lowered {
    fn to(value: &str) -> Self {
        let original = std::fs::read_to_string(KNOB).unwrap().trim().to_string();
        std::fs::write(KNOB, value).unwrap();
        Self(original)
    }
}

impl Drop for Lowered {
    fn drop(&mut self) {
        let _ = std::fs::write(KNOB, &self.0);
    }
}

#[tokio::test]
async fn an_overflow_answers_resync_not_a_partial_list() {
    if !available_or_skip(
        is_root(),
        "an_overflow_answers_resync_not_a_partial_list",
        "root to lower max_queued_events",
    ) {
        return;
    }
    let daemon = Daemon::start();
    let (status, baseline) = {
        let _lowered = Lowered::to("4");
        daemon.post("/api/watch/check", json!({"path": "."})).await
    };
    assert_eq!(status, StatusCode::OK, "{baseline}");
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let root = daemon.root();
            std::thread::spawn(move || {
                for i in 0..3000 {
                    std::fs::write(root.join(format!("f{t}-{i}")), "data").unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (_, reply) = daemon
        .post(
            "/api/watch/check",
            json!({"path": ".", "since": baseline["version"], "paths": true}),
        )
        .await;
    assert_eq!(
        reply["status"],
        "resync",
        "{}",
        &reply.to_string()[..reply.to_string().len().min(300)]
    );
    assert_eq!(reply["reason"], "overflow");
    assert!(reply.get("changes").is_none());
    // Without `paths`, the answer is still "changed": something did change.
    let (_, plain) = daemon
        .post(
            "/api/watch/check",
            json!({"path": ".", "since": baseline["version"]}),
        )
        .await;
    assert_eq!(plain["status"], "changed");
}
