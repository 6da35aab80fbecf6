//! Exec benchmark: the real release `fsd` over loopback HTTP (keep-alive) and over the
//! WebSocket transport (`/ws`), with `bash -c true` spawned directly as the floor in the
//! same run.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench exec`
//! Set `FSD_BENCH_QUICK=1` for a short smoke run.

use std::time::{Duration, Instant};

use fsd_tests::Daemon;
use serde_json::json;

fn main() {
    let quick = std::env::var_os("FSD_BENCH_QUICK").is_some();
    let (round_trips, per_session, starts) = if quick {
        (200, 50, 20)
    } else {
        (3000, 500, 300)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(round_trips, per_session, starts));
}

async fn run(round_trips: usize, per_session: usize, starts: usize) {
    let daemon = std::sync::Arc::new(Daemon::start());
    let client = reqwest::Client::new();
    println!("fsd exec benchmark (release build, loopback HTTP)");
    println!();

    let mut trips = Vec::new();
    for i in 0..round_trips + 50 {
        let start = Instant::now();
        exec(&client, &daemon, json!({"command": "true"})).await;
        if i >= 50 {
            trips.push(start.elapsed());
        }
    }
    let mut socket = fsd_tests::ws::WsClient::connect(&daemon, "/ws").await;
    let mut ws_trips = Vec::new();
    for i in 0..round_trips + 50 {
        let start = Instant::now();
        let id = i.to_string();
        let answer = socket
            .call(
                &id,
                "POST",
                "/api/execute",
                Some(json!({"command": "true"})),
            )
            .await;
        assert_eq!(answer.last["status"], 200, "{}", answer.last);
        if i >= 50 {
            ws_trips.push(start.elapsed());
        }
    }
    let mut floor: Vec<Duration> = (0..round_trips.min(1000))
        .map(|_| {
            let start = Instant::now();
            let status = std::process::Command::new("bash")
                .args(["-c", "true"])
                .status()
                .expect("bash");
            assert!(status.success());
            start.elapsed()
        })
        .collect();
    println!("exec `true` in a warm session ({round_trips} round trips)");
    println!(
        "  fsd POST /api/execute               p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut trips, 50.0)),
        ms(pct(&mut trips, 99.0))
    );
    println!(
        "  fsd the same over /ws (one socket)  p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut ws_trips, 50.0)),
        ms(pct(&mut ws_trips, 99.0))
    );
    println!(
        "  floor: `bash -c true` spawned directly p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut floor, 50.0)),
        ms(pct(&mut floor, 99.0))
    );
    println!();

    for id in 0..8 {
        exec(
            &client,
            &daemon,
            json!({"command": "true", "sessionId": format!("s{id}")}),
        )
        .await;
    }
    let started = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|id| {
            let (client, daemon) = (client.clone(), daemon.clone());
            tokio::spawn(async move {
                for _ in 0..per_session {
                    exec(
                        &client,
                        &daemon,
                        json!({"command": "true", "sessionId": format!("s{id}")}),
                    )
                    .await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    let elapsed = started.elapsed();
    let total = 8 * per_session;
    println!("throughput, 8 sessions in parallel ({total} execs of `true`)");
    println!("  {:>8.0} execs/s", total as f64 / elapsed.as_secs_f64());
    println!();

    let mut to_pid = Vec::new();
    for i in 0..starts {
        let start = Instant::now();
        let response = client
            .post(daemon.url("/api/process/start"))
            .json(&json!({"command": "true", "processId": format!("bench-{i}")}))
            .send()
            .await
            .expect("start");
        let body: serde_json::Value = response.json().await.expect("json");
        assert!(body["pid"].as_u64().is_some(), "{body}");
        to_pid.push(start.elapsed());
    }
    println!("process start to pid ({starts} starts)");
    println!(
        "  fsd POST /api/process/start          p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut to_pid, 50.0)),
        ms(pct(&mut to_pid, 99.0))
    );
    println!();
    println!(
        "daemon peak RSS: {:.1} MiB",
        fsd_tests::peak_rss_kib(daemon.pid()) as f64 / 1024.0
    );
}

async fn exec(client: &reqwest::Client, daemon: &Daemon, body: serde_json::Value) {
    let response = client
        .post(daemon.url("/api/execute"))
        .json(&body)
        .send()
        .await
        .expect("exec");
    assert!(response.status().is_success(), "{}", response.status());
    let _ = response.bytes().await;
}

fn pct(samples: &mut [Duration], pct: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * pct / 100.0).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
