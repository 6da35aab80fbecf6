//! The three transports side by side on the real release `fsd`, in one run: exec `true`
//! and a 1 MiB text write over HTTP keep-alive, `/ws` and `/rpc` (one call at a time), and
//! calls per second on one socket with 64 in flight over `/rpc`; the SDK next line's
//! `processes.start` of `true` to its exit event beside them, and a log line's way from a
//! running process to a follower of its logs.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench transports`
//! Set `FSD_BENCH_QUICK=1` for a short smoke run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fsd_tests::Daemon;
use fsd_tests::bench::{ms, pct};
use fsd_tests::rpc::{RpcClient, settled};
use fsd_tests::ws::WsClient;
use serde_json::{Value, json};

fn main() {
    let quick = std::env::var_os("FSD_BENCH_QUICK").is_some();
    let (round_trips, writes, in_flight_calls) = if quick {
        (200, 20, 2_000)
    } else {
        (3000, 200, 50_000)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(round_trips, writes, in_flight_calls));
}

/// Times `rounds` calls of `call` after 20 unmeasured ones.
async fn timed<F, Fut>(rounds: usize, mut call: F) -> Vec<Duration>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds + 20 {
        let start = Instant::now();
        call(i).await;
        if i >= 20 {
            samples.push(start.elapsed());
        }
    }
    samples
}

/// Times `rounds` POSTs of `body` to `route` over HTTP keep-alive, after 20 unmeasured.
async fn http_calls(
    http: &reqwest::Client,
    daemon: &Daemon,
    route: &str,
    body: &Value,
    rounds: usize,
) -> Vec<Duration> {
    let token = daemon.token.clone().unwrap_or_default();
    timed(rounds, |_| {
        let request = http.post(daemon.url(route)).bearer_auth(&token).json(body);
        async move {
            let response = request.send().await.expect("a call");
            assert!(response.status().is_success());
            response.bytes().await.expect("body");
        }
    })
    .await
}

/// Times `rounds` POSTs of `body` to `route` over `/ws`, after 20 unmeasured.
async fn ws_calls(ws: &mut WsClient, route: &str, body: &Value, rounds: usize) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds + 20 {
        let start = Instant::now();
        let answer = ws
            .call(&format!("{route}-{i}"), "POST", route, Some(body.clone()))
            .await;
        assert_eq!(answer.last["status"], 200, "{}", answer.last);
        if i >= 20 {
            samples.push(start.elapsed());
        }
    }
    samples
}

fn row(name: &str, samples: &mut [Duration]) {
    println!(
        "  {name:<28} p50 {:>8.3} ms   p99 {:>8.3} ms",
        ms(pct(samples, 50.0)),
        ms(pct(samples, 99.0))
    );
}

/// How long each line a process prints takes to reach a follower of its logs: the process
/// prints its clock at the write, the follower reads the same clock at the event.
async fn line_latencies(next: &RpcClient, lines: usize) -> Vec<Duration> {
    let script = format!(
        "import time\nfor i in range({lines}):\n    print(time.time_ns(), flush=True)\n    time.sleep(0.002)"
    );
    let export = next
        .start_and_follow(json!([["python3", "-u", "-c", script]]))
        .await;
    let mut samples = Vec::with_capacity(lines);
    while let Some(event) = next.next_write().await {
        if event["type"] == "terminal" {
            break;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let text = event["data"][1].as_str().unwrap_or_default();
        let bytes = base64_simd::forgiving_decode_to_vec(text.as_bytes()).unwrap_or_default();
        for line in String::from_utf8_lossy(&bytes).lines() {
            if let Ok(written) = line.trim().parse::<u128>() {
                samples.push(Duration::from_nanos(now.saturating_sub(written) as u64));
            }
        }
    }
    next.release(export, 1);
    samples
}

async fn run(round_trips: usize, writes: usize, in_flight_calls: usize) {
    let daemon = Daemon::start();
    let http = reqwest::Client::new();
    let mut ws = WsClient::connect(&daemon, "/ws").await;
    let rpc = RpcClient::connect(&daemon.url, daemon.token.as_deref()).await;
    println!("fsd transports benchmark (release build, loopback)");
    println!();

    println!("exec `true` in a warm session ({round_trips} round trips each)");
    let exec = json!({"command": "true", "sessionId": "bench"});
    let mut over_http = http_calls(&http, &daemon, "/api/execute", &exec, round_trips).await;
    let mut over_ws = ws_calls(&mut ws, "/api/execute", &exec, round_trips).await;
    let mut over_rpc = timed(round_trips, |_| async {
        settled(
            &rpc.call(
                "commands",
                "execute",
                json!(["true", "bench", ["undefined"]]),
            )
            .await,
        );
    })
    .await;
    row("HTTP keep-alive", &mut over_http);
    row("/ws (one socket)", &mut over_ws);
    row("/rpc (one socket)", &mut over_rpc);
    let rpc_vs_ws = ms(pct(&mut over_rpc, 50.0)) / ms(pct(&mut over_ws, 50.0));
    println!("  /rpc p50 is {:.2}× /ws's", rpc_vs_ws);
    let next = RpcClient::next_activated(&daemon.url, daemon.token.as_deref()).await;
    let mut over_next = timed(round_trips, |_| async {
        next.run_to_exit(json!([["true"]])).await;
    })
    .await;
    row("next: start → exit event", &mut over_next);
    let next_vs_rpc = ms(pct(&mut over_next, 50.0)) / ms(pct(&mut over_rpc, 50.0));
    let next_vs_ws = ms(pct(&mut over_next, 50.0)) / ms(pct(&mut over_ws, 50.0));
    println!("  next p50 is {next_vs_rpc:.2}× /rpc's, {next_vs_ws:.2}× /ws's");
    println!();

    let lines = round_trips.min(1000);
    println!("a log line to the next line's subscription ({lines} lines, 2 ms apart)");
    let mut latencies = line_latencies(&next, lines).await;
    row("write → event", &mut latencies);
    println!();

    println!("1 MiB text write ({writes} each)");
    let content = "x".repeat(1 << 20);
    let path = daemon.root().join("bench-1mib.txt").display().to_string();
    let body = json!({"path": path, "content": content});
    let mut write_http = http_calls(&http, &daemon, "/api/write", &body, writes).await;
    let mut write_ws = ws_calls(&mut ws, "/api/write", &body, writes).await;
    let mut write_rpc = timed(writes, |_| async {
        let args = json!([path, content, "bench", ["undefined"]]);
        settled(&rpc.call("files", "writeFile", args).await);
    })
    .await;
    row("HTTP keep-alive", &mut write_http);
    row("/ws (one socket)", &mut write_ws);
    row("/rpc (one socket)", &mut write_rpc);
    println!();

    let small = round_trips.min(1000);
    println!("next line: 1 KiB files.writeFile and files.readFile ({small} each), by --durability");
    let atomic = Daemon::start_with(fsd_tests::Options {
        extra_args: vec!["--durability".into(), "atomic".into()],
        ..Default::default()
    });
    for (durability, served) in [("fsync", &daemon), ("atomic", &atomic)] {
        let next = RpcClient::next_activated(&served.url, served.token.as_deref()).await;
        let path = served.root().join("bench-1kib.txt").display().to_string();
        let kib = "k".repeat(1024);
        let mut writes = timed(small, |_| async {
            settled(
                &next
                    .call("files", "writeFile", json!([path, kib, {}]))
                    .await,
            );
        })
        .await;
        let mut reads = timed(small, |_| async {
            settled(&next.call("files", "readFile", json!([path, {}])).await);
        })
        .await;
        row(&format!("writeFile ({durability})"), &mut writes);
        row(&format!("readFile ({durability})"), &mut reads);
        let ratio = ms(pct(&mut writes, 50.0)) / ms(pct(&mut reads, 50.0));
        println!(
            "  the write's p50 is {ratio:.2}× the read's (target with the image's atomic: ≤ 1.2×)"
        );
    }
    drop(atomic);
    println!();

    println!("calls per second, one /rpc socket, 64 in flight ({in_flight_calls} `files.exists`)");
    let rpc = Arc::new(rpc);
    let exists = json!([daemon.root().display().to_string(), ["undefined"]]);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let start = Instant::now();
    let workers: Vec<_> = (0..64)
        .map(|_| {
            let (rpc, exists, next) = (Arc::clone(&rpc), exists.clone(), Arc::clone(&next));
            tokio::spawn(async move {
                while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < in_flight_calls {
                    settled(&rpc.call("files", "exists", exists.clone()).await);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("worker");
    }
    let rate = in_flight_calls as f64 / start.elapsed().as_secs_f64();
    println!("  /rpc                         {rate:>8.0} calls/s");
}
