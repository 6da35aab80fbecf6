//! A kernel queue overflow is a recrawl: a token still gets an exact list. Its own test binary: it lowers the
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
async fn an_overflow_still_answers_an_exact_list() {
    if !available_or_skip(
        is_root(),
        "an_overflow_still_answers_an_exact_list",
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
    let (_, reply) = daemon
        .post(
            "/api/watch/check",
            json!({"path": ".", "since": baseline["version"], "paths": true}),
        )
        .await;
    let shown = &reply.to_string()[..reply.to_string().len().min(300)];
    assert_eq!(reply["status"], "changed", "{shown}");
    let listed: std::collections::BTreeSet<String> = reply["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|change| {
            assert_eq!(change["type"], "created", "{change}");
            change["path"].as_str().unwrap().to_string()
        })
        .collect();
    let written: std::collections::BTreeSet<String> = (0..2)
        .flat_map(|t| (0..3000).map(move |i| format!("f{t}-{i}")))
        .map(|name| daemon.root().join(name).display().to_string())
        .collect();
    assert_eq!(listed, written, "every file, once, as created");
}
