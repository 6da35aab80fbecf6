//! The Cloudflare path under `wrangler dev` (workerd, podman, fsd's release image): an exec
//! and a 1 MiB write through the Worker and its Durable Object, beside the same calls sent
//! straight to fsd in the container (its address on podman's network, with the object's
//! token), a route the object answers itself (`/status`), and `/api/ping` forwarded to the
//! container; then cold starts (a destroyed sandbox's first exec) beside `podman run` of the
//! same image to its first ping; and the SDK's next line's object: an exec to its exit through
//! it, beside a route it answers itself and the same run straight to fsd over `/rpc`, and the
//! same on the reference's own next runtime in fsd's place when the anchors built it.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench cloudflare`
//! (needs `scripts/dev-cloudflare tools`). `FSD_BENCH_QUICK=1` for a short run,
//! `FSD_BENCH_NEXT_ONLY=1` for the next line's rows alone.

use std::time::{Duration, Instant};

use fsd_tests::bench::{Summary, ms, p50_p99, pct};
use fsd_tests::cloudflare::{self, Stack, Worker};
use fsd_tests::rpc::RpcClient;
use serde_json::{Value, json};

const TOKEN: &str = "bench-worker-token";
/// The reference's own local cold start (`docs/PERF_TESTING.md` of cloudflare/sandbox-sdk:
/// `wrangler dev` with Docker), quoted, not measured here.
const REFERENCE_COLD: &str = "p50 1.37 s, p95 1.59 s (quoted)";

fn main() {
    let quick = std::env::var_os("FSD_BENCH_QUICK").is_some();
    let (rounds, starts) = if quick { (50, 3) } else { (500, 10) };
    if !cloudflare::available("cloudflare bench") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(rounds, starts));
}

fn podman(args: &[&str]) -> String {
    String::from_utf8_lossy(&fsd_tests::podman(args).stdout)
        .trim()
        .to_string()
}

/// fsd in the stack's one container: its URL on podman's network and the object's token
/// (the SDK's objects give it none).
fn direct(stack: &Stack) -> (String, Option<String>) {
    let containers = stack.containers();
    let [container] = containers.as_slice() else {
        panic!("expected one container, found {containers:?}");
    };
    let address = podman(&[
        "inspect",
        &format!("{container}-proxy"),
        "--format",
        "{{.NetworkSettings.IPAddress}}",
    ]);
    let env = podman(&[
        "inspect",
        container,
        "--format",
        "{{range .Config.Env}}{{println .}}{{end}}",
    ]);
    let token = env
        .lines()
        .find_map(|line| line.strip_prefix("FSD_TOKEN="))
        .map(str::to_string);
    (format!("http://{address}:3000"), token)
}

async fn timed(request: reqwest::RequestBuilder) -> Duration {
    let started = Instant::now();
    let response = request.send().await.expect("request");
    let status = response.status();
    let body = response.bytes().await.expect("body");
    assert!(
        status.is_success(),
        "{status}: {}",
        String::from_utf8_lossy(&body)
    );
    started.elapsed()
}

async fn run(rounds: usize, starts: usize) {
    if std::env::var_os("FSD_BENCH_NEXT_ONLY").is_some() {
        let mut summary = Summary::default();
        next_line(rounds, &mut summary).await;
        summary.print();
        return;
    }
    let stack = Stack::start(Worker::Fsd, &[("FSD_TOKEN", TOKEN)]);
    let client = reqwest::Client::new();
    let worker = |method: reqwest::Method, route: &str| {
        client
            .request(method, format!("{}/sandboxes/bench{route}", stack.url))
            .bearer_auth(TOKEN)
    };
    let exec = json!({"command": "true"});
    timed(worker(reqwest::Method::POST, "/api/execute").json(&exec)).await;
    let (fsd, token) = direct(&stack);
    let token = token.expect("the object's token in the container's env");
    let straight = |method: reqwest::Method, route: &str| {
        client
            .request(method, format!("{fsd}{route}"))
            .header("x-fsd-token", &token)
    };
    let mib = fsd_tests::noise(1 << 20, 7);

    let (mut exec_worker, mut exec_direct, mut object_only, mut ping_worker) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut write_worker, mut write_direct) = (Vec::new(), Vec::new());
    for round in 0..rounds + 20 {
        let samples = [
            timed(worker(reqwest::Method::POST, "/api/execute").json(&exec)).await,
            timed(straight(reqwest::Method::POST, "/api/execute").json(&exec)).await,
            timed(worker(reqwest::Method::GET, "/status")).await,
            timed(worker(reqwest::Method::GET, "/api/ping")).await,
        ];
        let writes = if round % 5 == 0 {
            Some([
                timed(
                    worker(reqwest::Method::PUT, "/api/files/raw?path=bench.bin").body(mib.clone()),
                )
                .await,
                timed(
                    straight(reqwest::Method::PUT, "/api/files/raw?path=bench.bin")
                        .body(mib.clone()),
                )
                .await,
            ])
        } else {
            None
        };
        if round >= 20 {
            exec_worker.push(samples[0]);
            exec_direct.push(samples[1]);
            object_only.push(samples[2]);
            ping_worker.push(samples[3]);
            if let Some([w, d]) = writes {
                write_worker.push(w);
                write_direct.push(d);
            }
        }
    }

    // Cold starts: a destroyed sandbox's first exec, answered.
    let mut cold = Vec::new();
    for _ in 0..starts {
        timed(worker(reqwest::Method::POST, "/destroy").json(&json!({}))).await;
        cold.push(timed(worker(reqwest::Method::POST, "/api/execute").json(&exec)).await);
    }
    // The same image under podman alone, to its first ping.
    let mut podman_start = Vec::new();
    for _ in 0..starts {
        let started = Instant::now();
        let id = podman(&["run", "-d", "-P", "localhost/fsd:latest"]);
        let port = podman(&["port", &id, "3000"]);
        let port = port.rsplit(':').next().unwrap_or_default().to_string();
        loop {
            let answered = client
                .get(format!("http://127.0.0.1:{port}/api/ping"))
                .timeout(Duration::from_secs(1))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if answered {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        podman_start.push(started.elapsed());
        // With its anonymous volumes (the image declares two): each holds a podman lock.
        podman(&["rm", "-f", "-v", "-t", "0", &id]);
    }
    let image_size: Value = serde_json::from_str(&podman(&[
        "image",
        "inspect",
        "localhost/fsd:latest",
        "--format",
        "{{json .Size}}",
    ]))
    .unwrap_or(Value::Null);

    let p50 = |samples: &mut Vec<Duration>| ms(pct(samples, 50.0));
    let overhead = p50(&mut ping_worker) - p50(&mut object_only);
    let exec_budget = p50(&mut object_only) + p50(&mut exec_direct) + 1.0;
    println!("fsd behind its Worker under wrangler dev ({rounds} rounds, release image)");
    let mut summary = Summary::default();
    summary.row(
        "exec `true` through the Worker",
        p50_p99(&mut exec_worker),
        format!(
            "straight to the container: {}; the object's own route (`/status`): {}",
            p50_p99(&mut exec_direct),
            p50_p99(&mut object_only)
        ),
        Summary::ratio(p50(&mut exec_worker), p50(&mut exec_direct)),
        &format!("p50 ≤ object route + direct exec + 1 ms = {exec_budget:.2} ms"),
    );
    summary.row(
        "`/api/ping` forwarded to the container",
        p50_p99(&mut ping_worker),
        format!("the object's own route: {}", p50_p99(&mut object_only)),
        format!("+{overhead:.2} ms"),
        "forwarding adds ≤ 1 ms p50",
    );
    summary.row(
        "1 MiB raw write through the Worker",
        p50_p99(&mut write_worker),
        format!("straight to the container: {}", p50_p99(&mut write_direct)),
        Summary::ratio(p50(&mut write_worker), p50(&mut write_direct)),
        "",
    );
    summary.row(
        &format!("cold start, first exec of a destroyed sandbox ({starts})"),
        format!(
            "p50 {:.0} ms, p95 {:.0} ms",
            ms(pct(&mut cold, 50.0)),
            ms(pct(&mut cold, 95.0))
        ),
        format!(
            "`podman run` of the image to its first ping: p50 {:.0} ms; the reference: {REFERENCE_COLD}",
            ms(pct(&mut podman_start, 50.0))
        ),
        format!("{:.2}× of 1.37 s", ms(pct(&mut cold, 50.0)) / 1370.0),
        "below the reference",
    );
    next_line(rounds, &mut summary).await;
    summary.print();
    println!();
    println!("image localhost/fsd:latest: {image_size} bytes");
}

/// One container behind the next line's object: its stack and a client straight to the
/// server in it, and what each round measured.
struct NextSide {
    stack: Stack,
    straight: RpcClient,
    exec: Vec<Duration>,
    /// The same exec as the Worker timed it (its answer's `ms`): without the local proxy in
    /// front of workerd and the bench's connection.
    inside: Vec<Duration>,
    ping: Vec<Duration>,
    direct: Vec<Duration>,
}

impl NextSide {
    async fn start(worker: Worker) -> NextSide {
        let stack = Stack::start(worker, &[]);
        let client = reqwest::Client::new();
        for _ in 0..20 {
            exec_through(&client, &stack).await;
            timed(client.get(format!("{}/ping?id=bench-next", stack.url))).await;
        }
        let (url, token) = direct(&stack);
        let straight = RpcClient::next_activated(&url, token.as_deref()).await;
        // Which server answers in the container: fsd says its own version, the reference
        // the one its image was built with.
        let metadata = straight
            .call("utils", "getRuntimeMetadata", json!([]))
            .await;
        println!(
            "  {worker:?}: the container's server says sandboxVersion {}",
            metadata[2]["sandboxVersion"]
        );
        NextSide {
            stack,
            straight,
            exec: Vec::new(),
            inside: Vec::new(),
            ping: Vec::new(),
            direct: Vec::new(),
        }
    }

    async fn round(&mut self, client: &reqwest::Client) {
        let (total, inside) = exec_through(client, &self.stack).await;
        self.exec.push(total);
        self.inside.push(inside);
        let ping = client.get(format!("{}/ping?id=bench-next", self.stack.url));
        self.ping.push(timed(ping).await);
        let started = Instant::now();
        self.straight.run_to_exit(json!([["true"]])).await;
        self.direct.push(started.elapsed());
    }

    /// The exec's p50 over the object's own route and the direct exec together.
    fn over(&mut self) -> f64 {
        let p50 = |samples: &mut Vec<Duration>| ms(pct(samples, 50.0));
        p50(&mut self.exec) - p50(&mut self.ping) - p50(&mut self.direct)
    }
}

/// fsd's count of the connections it accepted (`/metrics`), at `url`, read on a connection
/// of its own (counted).
async fn connections_accepted(url: &str) -> f64 {
    let text = reqwest::Client::new()
        .get(format!("{url}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .find_map(|line| line.strip_prefix("fsd_connections_accepted_total "))
        .and_then(|value| value.trim().parse().ok())
        .expect("fsd_connections_accepted_total")
}

/// `/exec` of the next line's Worker: an exec of `true` to its exit through the object, as
/// the bench saw it and as the Worker timed it.
async fn exec_through(client: &reqwest::Client, stack: &Stack) -> (Duration, Duration) {
    let started = Instant::now();
    let response = client
        .get(format!("{}/exec?id=bench-next", stack.url))
        .send()
        .await
        .expect("request");
    let status = response.status();
    let body = response.text().await.expect("body");
    let total = started.elapsed();
    assert!(status.is_success(), "{status}: {body}");
    let answer: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    assert_eq!(answer["exit"]["code"], 0, "{body}");
    let inside = answer["ms"].as_f64().unwrap_or_default();
    (total, Duration::from_secs_f64(inside / 1000.0))
}

/// The SDK's next line's object (its long-lived control socket into the container): an
/// exec of `true` to its exit through the Worker, beside a route the object answers itself
/// and the same run sent straight to the container's server over `/rpc`; on fsd's image and,
/// where the anchors built it, on the same image with the reference's own next runtime in
/// fsd's place, the two taking turns round by round.
async fn next_line(rounds: usize, summary: &mut Summary) {
    let client = reqwest::Client::new();
    let mut fsd = NextSide::start(Worker::Next).await;
    let mut reference = match cloudflare::reference_next_image() {
        Ok(()) => Some(NextSide::start(Worker::NextReference).await),
        Err(reason) => {
            println!("  the reference's next runtime is not in the run: {reason}");
            None
        }
    };
    let (url, _) = direct(&fsd.stack);
    let accepted_before = connections_accepted(&url).await;
    for _ in 0..rounds {
        fsd.round(&client).await;
        if let Some(reference) = reference.as_mut() {
            reference.round(&client).await;
        }
    }
    // The bench's own socket straight to fsd is open already: what was accepted meanwhile
    // is the object's, and the second reading's own.
    let accepted = connections_accepted(&url).await - accepted_before - 1.0;
    let p50 = |samples: &mut Vec<Duration>| ms(pct(samples, 50.0));
    let budget = p50(&mut fsd.ping) + p50(&mut fsd.direct) + 1.0;
    let over = fsd.over();
    let beside = match reference.as_mut() {
        Some(reference) => format!(
            "; the reference's runtime in its place: {} ({:.2} ms inside the Worker), its own \
             route {}, straight {} (+{:.2} ms over both)",
            p50_p99(&mut reference.exec),
            p50(&mut reference.inside),
            p50_p99(&mut reference.ping),
            p50_p99(&mut reference.direct),
            reference.over()
        ),
        None => String::new(),
    };
    summary.row(
        "next line: exec `true` to its exit through the object",
        p50_p99(&mut fsd.exec),
        format!(
            "{:.2} ms inside the Worker, fsd accepting {:.2} new connections per exec; the \
             object's own route: {}; straight to the container over /rpc: {}{beside}",
            p50(&mut fsd.inside),
            accepted / rounds as f64,
            p50_p99(&mut fsd.ping),
            p50_p99(&mut fsd.direct),
        ),
        match reference.as_mut() {
            Some(reference) => format!(
                "+{over:.2} ms over both; {:.2}× the reference's",
                p50(&mut fsd.exec) / p50(&mut reference.exec)
            ),
            None => format!("+{over:.2} ms over both"),
        },
        &format!("p50 ≤ object route + direct exec + 1 ms = {budget:.2} ms"),
    );
}
