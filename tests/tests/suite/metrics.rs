//! Resource figures against the real binary: `GET /api/metrics`, per-process CPU time and
//! memory in the process routes, the Prometheus text on `GET /metrics`, and `fsctl top`.

use std::time::Duration;

use fsd_tests::{Daemon, fsctl, succeeded};
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn start(daemon: &Daemon, command: &str, id: &str) {
    let (status, reply) = daemon
        .post(
            "/api/process/start",
            json!({"command": command, "processId": id}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
}

/// Polls the process until `holds` says its info is as wanted.
async fn process_until(daemon: &Daemon, id: &str, holds: impl Fn(&Value) -> bool) -> Value {
    let mut process = Value::Null;
    for _ in 0..500 {
        process = daemon.get(&format!("/api/process/{id}")).await.1["process"].clone();
        if holds(&process) {
            return process;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{id} never became as wanted: {process}");
}

#[tokio::test]
async fn the_sandbox_reports_cpu_memory_disks_connections_and_processes() {
    let daemon = Daemon::start();
    let (status, _) = daemon
        .post("/api/execute", json!({"command": "true"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    start(&daemon, "sleep 3101", "idle").await;
    // The CPU figure covers the last sampled interval: wait for a second sample.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (status, metrics) = daemon.get("/api/metrics").await;
    assert_eq!(status, StatusCode::OK, "{metrics}");
    let cpu = &metrics["cpu"];
    assert!(cpu["cores"].as_u64().unwrap() >= 1, "{cpu}");
    assert!(cpu["usageSeconds"].as_f64().unwrap() > 0.0, "{cpu}");
    assert!(cpu["intervalSeconds"].as_f64().unwrap() > 0.5, "{cpu}");
    assert!(cpu["percent"].as_f64().unwrap() >= 0.0, "{cpu}");
    assert!(["cgroup", "host"].contains(&cpu["source"].as_str().unwrap()));
    let memory = &metrics["memory"];
    let (used, total) = (
        memory["usedBytes"].as_u64().unwrap(),
        memory["hostTotalBytes"].as_u64().unwrap(),
    );
    assert!(used > 0 && total > 0, "{memory}");
    if let Some(limit) = memory["limitBytes"].as_u64() {
        assert!(
            limit < total,
            "a limit is reported only below the host's memory: {memory}"
        );
    }
    let disks = metrics["disks"].as_array().unwrap();
    let names: Vec<&str> = disks.iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["workspace", "state"]);
    for disk in disks {
        let total = disk["totalBytes"].as_u64().unwrap();
        assert!(total > 0, "{disk}");
        assert!(disk["usedBytes"].as_u64().unwrap() <= total, "{disk}");
        assert!(disk["freeBytes"].as_u64().unwrap() <= total, "{disk}");
    }
    assert!(
        metrics["connections"]["open"].as_u64().unwrap() >= 1,
        "{metrics}"
    );
    assert!(
        metrics["connections"]["accepted"].as_u64().unwrap() >= 1,
        "{metrics}"
    );
    let processes = &metrics["processes"];
    assert_eq!(processes["background"], 1, "{processes}");
    assert!(processes["sessions"].as_u64().unwrap() >= 1, "{processes}");
    // The idle process, its supervisor, a shell: at least those run below the daemon.
    assert!(processes["total"].as_u64().unwrap() >= 3, "{processes}");
}

#[tokio::test]
async fn each_process_reports_its_cpu_time_and_memory() {
    let daemon = Daemon::start();
    // A busy loop, and a shell holding 50 MB in a variable.
    start(&daemon, "while :; do :; done", "busy").await;
    start(
        &daemon,
        "x=$(head -c 50000000 /dev/zero | tr '\\0' a); sleep 3102",
        "big",
    )
    .await;
    let busy = process_until(&daemon, "busy", |p| {
        p["cpuSeconds"].as_f64().unwrap_or(0.0) > 0.2
    })
    .await;
    assert!(busy["rssBytes"].as_u64().unwrap() > 0, "{busy}");
    let big = process_until(&daemon, "big", |p| {
        p["rssBytes"].as_u64().unwrap_or(0) > 50_000_000
    })
    .await;
    assert!(big["cpuSeconds"].as_f64().is_some(), "{big}");
    let (_, list) = daemon.get("/api/process/list").await;
    let listed: Vec<&Value> = list["processes"].as_array().unwrap().iter().collect();
    assert!(
        listed
            .iter()
            .all(|p| p["cpuSeconds"].is_number() && p["rssBytes"].is_number()),
        "{list}"
    );
    // A process that has ended keeps the CPU time it used (its supervisor's count of what
    // it waited for) and has no memory.
    start(
        &daemon,
        "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done",
        "counted",
    )
    .await;
    let done = process_until(&daemon, "counted", |p| p["status"] == "completed").await;
    assert!(done["cpuSeconds"].as_f64().unwrap() > 0.05, "{done}");
    assert!(done.get("rssBytes").is_none(), "{done}");
    for id in ["busy", "big"] {
        daemon.delete(&format!("/api/process/{id}")).await;
    }
}

#[tokio::test]
async fn prometheus_text_carries_the_figures_and_the_requests() {
    let daemon = Daemon::start();
    start(&daemon, "sleep 3103", "scraped").await;
    for _ in 0..3 {
        daemon.get("/api/process/scraped").await;
    }
    daemon.get("/api/process/missing").await;
    let response = daemon
        .request(reqwest::Method::GET, "/metrics")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = response.text().await.unwrap();
    // Every line is a comment or `name{labels} value` with a number for the value.
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (_, value) = line.rsplit_once(' ').unwrap();
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
    let sample = |prefix: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
            .rsplit_once(' ')
            .unwrap()
            .1
            .parse()
            .unwrap()
    };
    assert!(sample("fsd_cpu_usage_seconds_total ") > 0.0);
    assert!(sample("fsd_memory_used_bytes ") > 0.0);
    assert!(sample("fsd_disk_total_bytes{name=\"workspace\"") > 0.0);
    assert_eq!(sample("fsd_background_processes "), 1.0);
    assert!(sample("fsd_process_resident_bytes{process_id=\"scraped\"}") > 0.0);
    // Requests by route pattern (not by path), method and status.
    assert_eq!(
        sample(
            "fsd_http_requests_total{method=\"GET\",route=\"/api/process/{id}\",status=\"200\"}"
        ),
        3.0
    );
    assert_eq!(
        sample(
            "fsd_http_requests_total{method=\"GET\",route=\"/api/process/{id}\",status=\"404\"}"
        ),
        1.0
    );
    let count = sample(
        "fsd_http_request_duration_seconds_count{method=\"GET\",route=\"/api/process/{id}\"}",
    );
    let all = sample(
        "fsd_http_request_duration_seconds_bucket{method=\"GET\",route=\"/api/process/{id}\",le=\"+Inf\"}",
    );
    assert_eq!((count, all), (4.0, 4.0));
    assert!(
        !text.contains("/api/process/scraped\""),
        "paths never become labels"
    );
    // Invented methods share one series.
    for method in ["BREW", "WHEN"] {
        daemon
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                "/api/ping",
            )
            .send()
            .await
            .unwrap();
    }
    let text = daemon.get_text("/metrics").await;
    assert!(!text.contains("BREW") && !text.contains("WHEN"), "{text}");
    assert!(
        text.contains(
            "fsd_http_requests_total{method=\"OTHER\",route=\"/api/ping\",status=\"404\"} 2"
        ),
        "{text}"
    );
    daemon.delete("/api/process/scraped").await;
}

#[tokio::test]
async fn fsctl_top_and_the_sdk_show_the_figures() {
    let daemon = Daemon::start();
    start(&daemon, "sleep 3104", "topped").await;
    let sandbox = daemon.client().await;
    let metrics = sandbox.metrics().await.unwrap();
    assert_eq!(metrics.processes.background, 1);
    let screen = succeeded(&fsctl(&daemon, &["top", "-n", "2", "-d", "0.2"]));
    assert!(
        screen.contains("cpu ") && screen.contains("disk workspace"),
        "{screen}"
    );
    assert!(
        screen
            .lines()
            .any(|l| l.starts_with("topped") && l.ends_with("sleep 3104")),
        "{screen}"
    );
    let json = succeeded(&fsctl(&daemon, &["--json", "top", "-n", "1"]));
    let frame: Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(frame["processes"][0]["id"], "topped", "{frame}");
    assert!(frame["metrics"]["cpu"]["cores"].as_u64().unwrap() >= 1);
    let output = fsctl(&daemon, &["top", "-d", "0"]);
    assert!(!output.status.success());
    daemon.delete("/api/process/topped").await;
}

/// The v1 memory cgroup directory of `pid`, when that hierarchy is mounted.
fn v1_memory_cgroup(pid: u32) -> Option<std::path::PathBuf> {
    let listing = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = listing.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then_some(path)
    })?;
    let dir = std::path::Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/'));
    dir.join("memory.limit_in_bytes").exists().then_some(dir)
}

#[tokio::test]
async fn a_memory_limit_set_on_the_daemons_cgroup_is_reported() {
    let test = "metrics::a_memory_limit_set_on_the_daemons_cgroup_is_reported";
    let daemon = Daemon::start();
    let own = v1_memory_cgroup(daemon.pid()).filter(|_| fsd_tests::is_root());
    if !fsd_tests::available_or_skip(own.is_some(), test, "root and a v1 memory cgroup") {
        return;
    }
    let own = own.unwrap();
    let (_, before) = daemon.get("/api/metrics").await;
    let host = before["memory"]["hostTotalBytes"].as_u64().unwrap();
    // A cgroup of its own with a limit below the host's memory, the daemon moved into it:
    // the figures follow the daemon.
    let boxed = own.join(format!("fsd-metrics-{}", std::process::id()));
    std::fs::create_dir(&boxed).unwrap();
    let limit = (host / 2).min(512 << 20);
    std::fs::write(boxed.join("memory.limit_in_bytes"), limit.to_string()).unwrap();
    let set: u64 = std::fs::read_to_string(boxed.join("memory.limit_in_bytes"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::write(boxed.join("cgroup.procs"), daemon.pid().to_string()).unwrap();
    let (_, metrics) = daemon.get("/api/metrics").await;
    // Moved back before anything else can fail, so the cgroup can be removed.
    std::fs::write(own.join("cgroup.procs"), daemon.pid().to_string()).unwrap();
    let removed = (0..100).any(|_| {
        std::fs::remove_dir(&boxed).is_ok() || {
            std::thread::sleep(Duration::from_millis(20));
            false
        }
    });
    let memory = &metrics["memory"];
    assert_eq!(memory["limitBytes"].as_u64(), Some(set), "{memory}");
    assert_eq!(memory["source"], "cgroup", "{memory}");
    assert!(memory["usedBytes"].as_u64().unwrap() > 0, "{memory}");
    assert!(removed, "{} could not be removed", boxed.display());
    // Out of it again, the limit is gone.
    let (_, after) = daemon.get("/api/metrics").await;
    assert_ne!(after["memory"]["limitBytes"].as_u64(), Some(set), "{after}");
}
