//! Gateway benchmark: a small GET and a 1 GiB download through `fsctl gateway` (release)
//! beside the same requests sent straight to the server, in one run. The server is an
//! axum app in this process listening on loopback, as a sandbox's dev server listens in
//! the sandbox; the gateway fronts a real release daemon (it asks it for its run id). The
//! anchor beside both is `tcp-relay`, a bare byte relay in a process of its own: the
//! least any proxy costs here.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench gateway`
//! Set `FSD_BENCH_QUICK=1` for a short smoke run.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use bytes::Bytes;
use fsd_tests::Daemon;
use fsd_tests::bench::{ms, pct};
use futures_util::StreamExt;

const MIB: usize = 1 << 20;

fn main() {
    let quick = std::env::var_os("FSD_BENCH_QUICK").is_some();
    let (paced, closed, download_mib) = if quick {
        (1_000, 2_000, 256)
    } else {
        (5_000, 20_000, 1024)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(paced, closed, download_mib));
}

/// Where a request goes: the server's own address, or the gateway with a preview `Host`.
#[derive(Clone)]
struct Target {
    base: String,
    host: Option<String>,
}

async fn run(paced: usize, closed: usize, download_mib: usize) {
    let server = serve().await;
    let daemon = Daemon::start();
    let state = tempfile::tempdir().expect("state dir");
    let mut fsctl = std::process::Command::new(fsd_tests::binary("fsctl"));
    fsctl
        .args(["--url", &daemon.url, "gateway", "--listen", "127.0.0.1:0"])
        .arg("--state")
        .arg(state.path().join("exposures.json"))
        .env_remove("FSD_TOKEN");
    let (mut gateway, gateway_url) = listening(fsctl);
    let exposed: serde_json::Value = reqwest::Client::new()
        .post(format!("{gateway_url}/expose"))
        .json(&serde_json::json!({"sandboxId": "bench", "port": server}))
        .send()
        .await
        .expect("expose")
        .json()
        .await
        .expect("expose answer");
    let preview = exposed["url"].as_str().expect("preview url");
    let direct = Target {
        base: format!("http://127.0.0.1:{server}"),
        host: None,
    };
    let through = Target {
        base: gateway_url.clone(),
        host: Some(
            preview
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_string(),
        ),
    };
    // The anchor for what any proxy in a process of its own costs: a bare TCP relay.
    let mut bare = std::process::Command::new(fsd_tests::binary("tcp-relay"));
    bare.arg(format!("127.0.0.1:{server}"));
    let (mut relay, relay_address) = listening(bare);
    let relayed = Target {
        base: format!("http://{relay_address}"),
        host: None,
    };
    println!("fsctl gateway benchmark (release build, loopback)");
    println!();

    println!("small GET paced at 1,000 req/s ({paced} requests each)");
    let mut direct_paced = paced_latencies(&direct, paced).await;
    let mut relay_paced = paced_latencies(&relayed, paced).await;
    let mut gateway_paced = paced_latencies(&through, paced).await;
    let (d50, d99) = (pct(&mut direct_paced, 50.0), pct(&mut direct_paced, 99.0));
    let (g50, g99) = (pct(&mut gateway_paced, 50.0), pct(&mut gateway_paced, 99.0));
    println!(
        "  direct to the server        p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(d50),
        ms(d99)
    );
    println!(
        "  anchor: a bare TCP relay    p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut relay_paced, 50.0)),
        ms(pct(&mut relay_paced, 99.0))
    );
    println!(
        "  through the gateway         p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(g50),
        ms(g99)
    );
    println!(
        "  added by the gateway        p50 {:>7.3} ms   p99 {:>7.3} ms   (target: p50 ≤ 0.3 ms)",
        ms(g50.saturating_sub(d50)),
        ms(g99.saturating_sub(d99))
    );
    println!();

    println!("small GET as fast as it goes (8 connections, {closed} requests each)");
    let direct_rate = throughput(&direct, closed).await;
    let relay_rate = throughput(&relayed, closed).await;
    let gateway_rate = throughput(&through, closed).await;
    println!("  direct to the server        {direct_rate:>9.0} req/s");
    println!(
        "  anchor: a bare TCP relay    {relay_rate:>9.0} req/s   ({:.2}× direct)",
        relay_rate / direct_rate
    );
    println!(
        "  through the gateway         {gateway_rate:>9.0} req/s   ({:.2}× direct)",
        gateway_rate / direct_rate
    );
    println!();

    println!("download of {download_mib} MiB");
    let direct_mb = download(&direct, download_mib).await;
    let relay_mb = download(&relayed, download_mib).await;
    let gateway_mb = download(&through, download_mib).await;
    println!("  direct to the server        {direct_mb:>9.0} MB/s");
    println!(
        "  anchor: a bare TCP relay    {relay_mb:>9.0} MB/s   ({:.2}× direct)",
        relay_mb / direct_mb
    );
    println!(
        "  through the gateway         {gateway_mb:>9.0} MB/s   ({:.2}× direct; target ≥ 0.8×)",
        gateway_mb / direct_mb
    );
    for child in [&mut gateway, &mut relay] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Starts `command` and reads the address its first line ends with (`… listening on A`).
fn listening(mut command: std::process::Command) -> (std::process::Child, String) {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let line = fsd_tests::first_line(&mut child, "a listening process");
    let address = line.rsplit(' ').next().unwrap_or_default().to_string();
    (child, address)
}

/// The server: `/small` answers 2 bytes, `/big?mib=N` streams N MiB.
async fn serve() -> u16 {
    let chunk = Bytes::from(vec![7u8; MIB]);
    let app = Router::new().route("/small", get(|| async { "ok" })).route(
        "/big",
        get(
            move |query: axum::extract::Query<std::collections::HashMap<String, usize>>| {
                let chunk = chunk.clone();
                let mib = query.get("mib").copied().unwrap_or(1);
                async move {
                    let pieces = futures_util::stream::iter(
                        (0..mib).map(move |_| Ok::<_, std::io::Error>(chunk.clone())),
                    );
                    Body::from_stream(pieces)
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

fn request(client: &reqwest::Client, target: &Target, path: &str) -> reqwest::RequestBuilder {
    let builder = client.get(format!("{}{path}", target.base));
    match &target.host {
        Some(host) => builder.header("host", host),
        None => builder,
    }
}

/// One request started every millisecond whether or not the last one finished; each one's
/// time from its start to its whole body.
async fn paced_latencies(target: &Target, count: usize) -> Vec<Duration> {
    let client = reqwest::Client::new();
    for _ in 0..200 {
        small(&client, target).await;
    }
    let samples = Arc::new(Mutex::new(Vec::with_capacity(count)));
    let mut ticks = tokio::time::interval(Duration::from_millis(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = Vec::with_capacity(count);
    for _ in 0..count {
        ticks.tick().await;
        let (client, target, samples) = (client.clone(), target.clone(), samples.clone());
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            small(&client, &target).await;
            let took = start.elapsed();
            samples.lock().unwrap_or_else(|p| p.into_inner()).push(took);
        }));
    }
    for task in tasks {
        task.await.expect("request task");
    }
    samples.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

async fn small(client: &reqwest::Client, target: &Target) {
    let response = request(client, target, "/small").send().await.expect("GET");
    assert_eq!(response.status(), 200);
    assert_eq!(response.bytes().await.expect("body").as_ref(), b"ok");
}

/// Requests per second with 8 connections each sending `per_connection` requests in turn.
async fn throughput(target: &Target, per_connection: usize) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let target = target.clone();
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                for _ in 0..per_connection {
                    small(&client, &target).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("connection task");
    }
    (8 * per_connection) as f64 / start.elapsed().as_secs_f64()
}

/// MB/s of a download of `mib` MiB, read as it arrives.
async fn download(target: &Target, mib: usize) -> f64 {
    let client = reqwest::Client::new();
    let start = Instant::now();
    let response = request(&client, target, &format!("/big?mib={mib}"))
        .send()
        .await
        .expect("GET /big");
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut received = 0;
    while let Some(chunk) = body.next().await {
        received += chunk.expect("chunk").len();
    }
    assert_eq!(received, mib * MIB);
    received as f64 / 1e6 / start.elapsed().as_secs_f64()
}
