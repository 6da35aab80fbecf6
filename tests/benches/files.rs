//! File API benchmark: the real release `fsd` over loopback HTTP, with `dd` and a direct
//! atomic write on the same disk as anchors in the same run.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench files`
//! Set `FSD_BENCH_QUICK=1` for a short smoke run, `FSD_BENCH_JSON_ROUNDS=N` to set the
//! 1 MiB JSON rounds alone.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use fsd_tests::Daemon;
use fsd_tests::bench::{Summary, ms, pct};
use futures_util::StreamExt;
use serde_json::json;

const MIB: usize = 1024 * 1024;

struct Plan {
    small_iterations: usize,
    json_mib_iterations: usize,
    raw_mib: usize,
    raw_repeats: usize,
}

fn main() {
    let quick = std::env::var_os("FSD_BENCH_QUICK").is_some();
    let plan = if quick {
        Plan {
            small_iterations: 200,
            json_mib_iterations: 5,
            raw_mib: 100,
            raw_repeats: 1,
        }
    } else {
        Plan {
            small_iterations: 5000,
            json_mib_iterations: 50,
            raw_mib: 100,
            raw_repeats: 5,
        }
    };
    let mut plan = plan;
    // FSD_BENCH_JSON_ROUNDS sets the 1 MiB rounds alone (for comparing changes to that path).
    if let Some(rounds) = std::env::var("FSD_BENCH_JSON_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        plan.json_mib_iterations = rounds;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(&plan));
}

async fn run(plan: &Plan) {
    let daemon = Daemon::start();
    let client = reqwest::Client::new();
    println!(
        "fsd file API benchmark (release build, loopback HTTP, workspace {})",
        daemon.root().display()
    );
    println!();

    // Small JSON write + read, each half timed too, and a ping as the HTTP baseline.
    let (mut pairs, mut writes, mut reads, mut pings) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let content = "x".repeat(100);
    for i in 0..plan.small_iterations + 50 {
        let start = Instant::now();
        post(
            &client,
            &daemon,
            "/api/write",
            json!({"path": "small.txt", "content": content}),
        )
        .await;
        let written = Instant::now();
        post(&client, &daemon, "/api/read", json!({"path": "small.txt"})).await;
        let read = Instant::now();
        fsd_tests::bench::ping(&client, &daemon).await;
        if i >= 50 {
            pairs.push(read - start);
            writes.push(written - start);
            reads.push(read - written);
            pings.push(read.elapsed());
        }
    }
    let mut floor = direct_atomic_writes(&daemon.path("floor.txt"), plan.small_iterations);
    println!(
        "small JSON write+read (100 B, {} pairs)",
        plan.small_iterations
    );
    for (label, samples) in [
        ("fsd write+read", &mut pairs),
        ("  fsd write alone", &mut writes),
        ("  fsd read alone", &mut reads),
        ("anchor: GET /api/ping (HTTP floor)", &mut pings),
        ("anchor: direct create+write+fsync+rename", &mut floor),
    ] {
        println!(
            "  {label:<42} p50 {:>7.3} ms   p99 {:>7.3} ms",
            ms(pct(samples, 50.0)),
            ms(pct(samples, 99.0))
        );
    }
    println!();

    // What `--confine` costs: the same small write, read and stat, and a command with a
    // `cwd` (in a session: the shell's check of where its `cd` landed; sessionless: the
    // supervisor's open beneath the roots and `fchdir`), against a confined daemon and an
    // unconfined one, taking turns.
    let confined = Daemon::start_with(fsd_tests::Options {
        confine: true,
        ..fsd_tests::Options::default()
    });
    for target in [&daemon, &confined] {
        std::fs::create_dir_all(target.path("d")).unwrap();
    }
    let calls = [
        (
            "write",
            "/api/write",
            json!({"path": "small.txt", "content": content}),
        ),
        ("read", "/api/read", json!({"path": "small.txt"})),
        ("stat", "/api/stat", json!({"path": "small.txt"})),
        (
            "command with cwd, in a session",
            "/api/execute",
            json!({"command": "true", "cwd": "d", "sessionId": "bench"}),
        ),
        (
            "command with cwd, sessionless",
            "/api/execute",
            json!({"command": "true", "cwd": "d"}),
        ),
    ];
    let mut turns: Vec<[Vec<Duration>; 2]> = calls.iter().map(|_| Default::default()).collect();
    for i in 0..plan.small_iterations + 50 {
        for (which, target) in [&daemon, &confined].into_iter().enumerate() {
            for (call, (_, route, body)) in calls.iter().enumerate() {
                // Sessionless commands fork twice: a tenth as many.
                if call == 4 && i % 10 != 0 {
                    continue;
                }
                let start = Instant::now();
                post(&client, target, route, body.clone()).await;
                if i >= 50 {
                    turns[call][which].push(start.elapsed());
                }
            }
        }
    }
    println!("the cost of --confine (the same calls, daemons taking turns)");
    for ((label, _, _), [open, fenced]) in calls.iter().zip(turns.iter_mut()) {
        for (which, samples) in [("unconfined", open), ("--confine", fenced)] {
            println!(
                "  {:<42} p50 {:>7.3} ms   p99 {:>7.3} ms",
                format!("{label}, {which}"),
                ms(pct(samples, 50.0)),
                ms(pct(samples, 99.0))
            );
        }
    }
    drop(confined);
    println!();

    // 1 MiB of random bytes as base64 JSON, the body built once (as curl sends a file), beside
    // the floor: the same base64 decoded (with the daemon's decoder) and written by create +
    // write + fsync + rename here; for reads, the file read and encoded.
    let random = fsd_tests::noise(MIB, 7);
    let encoded = BASE64.encode(&random);
    // The fields in the order the official client sends them (`path`, `content`, `encoding`);
    // `json!` would sort them and put `content` first.
    let body = Bytes::from(format!(
        r#"{{"path":"mib.bin","content":"{encoded}","encoding":"base64"}}"#
    ));
    // fsd and the anchors take turns in each round, so both see the same state of the disk
    // (its fsync time drifts by a millisecond between runs).
    let floor_path = daemon.path("mib-floor.bin");
    let mut samples: [Vec<Duration>; 7] = Default::default();
    // The same body sent by curl, a client in another process (as the reference was measured):
    // fsd's own client shares this process, and with it the machine's two cores.
    let body_file = daemon.path("mib-body.json");
    std::fs::write(&body_file, &body).expect("body file");
    let sink = body_sink().await;
    // The same base64 decoded and written atomically here; `durable` adds the directory fsync
    // fsd does so that the rename itself is durable.
    let floor = |durable: bool| {
        let start = Instant::now();
        let bytes = base64_simd::STANDARD
            .decode_to_vec(encoded.as_bytes())
            .expect("base64");
        write_atomically(&floor_path, &bytes);
        if durable {
            std::fs::File::open(daemon.root())
                .and_then(|dir| dir.sync_all())
                .expect("directory fsync");
        }
        start.elapsed()
    };
    for round in 0..plan.json_mib_iterations + 5 {
        // The four writes take turns in going first: a write's fsync also waits for what the
        // write before it left to the disk, so a fixed order favours whoever follows the
        // cheapest neighbour (measured: the second of the two floors came out 0.6-1 ms
        // faster than the first, in either order).
        let mut writes = [Duration::ZERO; 4];
        for turn in 0..4 {
            let which = (round + turn) % 4;
            writes[which] = match which {
                0 => timed_post(&client, &daemon.url("/api/write"), body.clone()).await,
                1 => curl_post(&daemon.url("/api/write"), &body_file),
                2 => floor(false),
                _ => floor(true),
            };
        }
        let [fsd_write, curl_write, floor_write, durable_write] = writes;

        // The transfer alone: the same body to a route on the same HTTP stack (axum over
        // hyper, loopback) that collects it as fsd does and answers.
        let transfer = timed_post(&client, &sink, body.clone()).await;

        let start = Instant::now();
        let response = client
            .post(daemon.url("/api/read"))
            .header("content-type", "application/json")
            .body(r#"{"path":"mib.bin"}"#)
            .send()
            .await
            .expect("read");
        let reply = response.bytes().await.expect("read reply");
        let fsd_read = start.elapsed();
        assert!(reply.len() > encoded.len(), "a short read reply");

        let start = Instant::now();
        let bytes = std::fs::read(&floor_path).expect("read");
        let text = base64_simd::STANDARD.encode_to_string(&bytes);
        let floor_read = start.elapsed();
        assert_eq!(text.len(), encoded.len());

        if round >= 5 {
            for (list, sample) in samples.iter_mut().zip([
                fsd_write,
                floor_write,
                durable_write,
                fsd_read,
                floor_read,
                transfer,
                curl_write,
            ]) {
                list.push(sample);
            }
        }
    }
    println!(
        "1 MiB JSON write and read ({} rounds, random bytes as base64)",
        plan.json_mib_iterations
    );
    let labels = [
        "fsd POST /api/write",
        "anchor: decode + create+write+fsync+rename",
        "anchor: the same + directory fsync",
        "fsd POST /api/read",
        "anchor: read + encode",
        "anchor: body POSTed, collected (axum)",
        "fsd POST /api/write, sent by curl",
    ];
    let mut p50 = [0.0; 7];
    for (index, (label, list)) in labels.iter().zip(samples.iter_mut()).enumerate() {
        p50[index] = ms(pct(list, 50.0));
        println!(
            "  {label:<42} p50 {:>7.3} ms   p99 {:>7.3} ms",
            p50[index],
            ms(pct(list, 99.0))
        );
    }
    println!(
        "  write p50 minus floor p50: {:.3} ms (minus the durable floor: {:.3} ms)   read p50 minus floor p50: {:.3} ms",
        p50[0] - p50[1],
        p50[0] - p50[2],
        p50[3] - p50[4],
    );
    println!(
        "  write p50 minus floor p50 minus transfer p50: {:.3} ms",
        p50[0] - p50[1] - p50[5],
    );
    println!(
        "  curl's write p50 minus floor p50: {:.3} ms (minus the durable floor: {:.3} ms)",
        p50[6] - p50[1],
        p50[6] - p50[2],
    );
    println!();

    // Raw PUT and GET of a large file, beside dd on the same disk.
    let size = plan.raw_mib * MIB;
    let block = Bytes::from(vec![0x5au8; MIB]);
    let (mut puts, mut gets) = (Vec::new(), Vec::new());
    for _ in 0..plan.raw_repeats {
        let block = block.clone();
        let chunks = futures_util::stream::iter(
            (0..plan.raw_mib).map(move |_| Ok::<_, std::io::Error>(block.clone())),
        );
        let start = Instant::now();
        let response = client
            .put(daemon.url("/api/files/raw?path=raw.bin"))
            .body(reqwest::Body::wrap_stream(chunks))
            .send()
            .await
            .expect("PUT");
        assert!(response.status().is_success());
        puts.push(start.elapsed());

        let start = Instant::now();
        let mut stream = client
            .get(daemon.url("/api/files/raw?path=raw.bin"))
            .send()
            .await
            .expect("GET")
            .bytes_stream();
        let mut received = 0;
        while let Some(chunk) = stream.next().await {
            received += chunk.expect("chunk").len();
        }
        gets.push(start.elapsed());
        assert_eq!(received, size);
    }
    let dd_path = daemon.path("dd.bin");
    let (mut dd_writes, mut dd_reads) = (Vec::new(), Vec::new());
    for _ in 0..plan.raw_repeats {
        dd_writes.push(dd(&[
            "if=/dev/zero",
            &format!("of={}", dd_path.display()),
            "bs=1M",
            &format!("count={}", plan.raw_mib),
            "conv=fsync",
        ]));
        dd_reads.push(dd(&[
            &format!("if={}", dd_path.display()),
            "of=/dev/null",
            "bs=1M",
        ]));
    }
    let mut socket_floor: Vec<Duration> = (0..plan.raw_repeats)
        .map(|_| loopback_copy(&dd_path))
        .collect();
    let bytes = size as f64;
    let socket_floor = mbps(bytes, pct(&mut socket_floor, 50.0));
    let put = mbps(bytes, pct(&mut puts, 50.0));
    let get = mbps(bytes, pct(&mut gets, 50.0));
    let dd_write = mbps(bytes, pct(&mut dd_writes, 50.0));
    let dd_read = mbps(bytes, pct(&mut dd_reads, 50.0));
    println!(
        "raw {} MiB transfers (median of {})",
        plan.raw_mib, plan.raw_repeats
    );
    println!(
        "  fsd PUT {put:>8.1} MB/s   anchor dd write (conv=fsync) {dd_write:>8.1} MB/s   ratio {:.2}",
        put / dd_write
    );
    println!(
        "  fsd GET {get:>8.1} MB/s   anchor dd read (page cache)   {dd_read:>8.1} MB/s   ratio {:.2}",
        get / dd_read
    );
    println!(
        "  floor: the file sent over a loopback TCP socket, no HTTP {socket_floor:>8.1} MB/s   ratio to dd {:.2}; fsd GET / floor {:.2}",
        socket_floor / dd_read,
        get / socket_floor
    );
    let mut summary = Summary::default();
    summary.row(
        &format!("raw GET {} MiB", plan.raw_mib),
        format!("{:.2} GB/s", get / 1000.0),
        format!(
            "dd from the page cache: {:.2} GB/s; loopback TCP alone: {:.2} GB/s ({})",
            dd_read / 1000.0,
            socket_floor / 1000.0,
            Summary::ratio(get, socket_floor)
        ),
        Summary::ratio(get, dd_read),
        "≥ 0.5× dd",
    );
    summary.row(
        &format!("raw PUT {} MiB", plan.raw_mib),
        format!("{:.2} GB/s (fsync included)", put / 1000.0),
        format!("dd conv=fsync: {:.2} GB/s", dd_write / 1000.0),
        Summary::ratio(put, dd_write),
        "≥ 0.95× dd",
    );
    let peak = fsd_tests::peak_rss_kib(daemon.pid());
    println!();
    println!(
        "daemon peak RSS over the whole run: {:.1} MiB",
        peak as f64 / 1024.0
    );
    summary.print();
}

async fn post(
    client: &reqwest::Client,
    daemon: &Daemon,
    route: &str,
    body: serde_json::Value,
) -> serde_json::Value {
    let response = client
        .post(daemon.url(route))
        .json(&body)
        .send()
        .await
        .expect("request");
    assert!(
        response.status().is_success(),
        "{route}: {}",
        response.status()
    );
    response.json().await.expect("JSON")
}

/// What fsd's write path costs without HTTP: temp file, write, fsync, rename.
/// How long a JSON POST of `body` takes, its reply read whole.
async fn timed_post(client: &reqwest::Client, url: &str, body: Bytes) -> Duration {
    let start = Instant::now();
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("POST");
    assert!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
    response.bytes().await.expect("reply");
    start.elapsed()
}

/// POSTs a JSON file with curl (a new connection; no `Expect: 100-continue` round trip) and
/// answers the time curl measured, from connect to the last byte of the answer.
fn curl_post(url: &str, body: &std::path::Path) -> Duration {
    let output = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code} %{time_total}"])
        .args(["-H", "content-type: application/json", "-H", "Expect:"])
        .arg("--data-binary")
        .arg(format!("@{}", body.display()))
        .arg(url)
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&output.stdout);
    let (status, seconds) = text.split_once(' ').expect("curl's status and time");
    assert_eq!(status, "200", "curl POST {url}: {text}");
    Duration::from_secs_f64(seconds.trim().parse().expect("curl's time"))
}

/// A loopback HTTP route on fsd's stack that reads a body whole and answers; its URL.
async fn body_sink() -> String {
    use axum::routing::post;
    let app = axum::Router::new().route(
        "/sink",
        post(|body: axum::body::Bytes| async move { format!("{{\"read\":{}}}", body.len()) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("sink listener");
    let address = listener.local_addr().expect("sink address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}/sink")
}

fn direct_atomic_writes(target: &std::path::Path, iterations: usize) -> Vec<Duration> {
    (0..iterations)
        .map(|_| {
            let start = Instant::now();
            write_atomically(target, &[b'x'; 100]);
            start.elapsed()
        })
        .collect()
}

/// Create + write + fsync + rename, as fsd's atomic write does.
fn write_atomically(target: &std::path::Path, bytes: &[u8]) {
    let temp = target.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(&temp)
        .expect("temp");
    file.write_all(bytes).expect("write");
    file.sync_all().expect("fsync");
    std::fs::rename(&temp, target).expect("rename");
}

/// What moving a file's bytes through a loopback TCP socket costs with no HTTP at all:
/// 1 MiB reads from the file written to the socket, 1 MiB reads on the other end. (On
/// this machine that beats sendfile(2) into the socket: 3.5 against 2.5 GB/s.)
fn loopback_copy(path: &std::path::Path) -> Duration {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    let path = path.to_path_buf();
    let sender = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().expect("accept");
        let mut file = std::fs::File::open(path).expect("open");
        let mut buf = vec![0u8; MIB];
        loop {
            let n = file.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            socket.write_all(&buf[..n]).expect("send");
        }
    });
    let start = Instant::now();
    let mut socket = std::net::TcpStream::connect(address).expect("connect");
    let mut buf = vec![0u8; MIB];
    while socket.read(&mut buf).expect("receive") > 0 {}
    let elapsed = start.elapsed();
    sender.join().expect("sender");
    elapsed
}

fn dd(args: &[&str]) -> Duration {
    let start = Instant::now();
    let status = Command::new("dd")
        .args(args)
        .arg("status=none")
        .status()
        .expect("dd");
    assert!(status.success(), "dd {args:?}");
    start.elapsed()
}

fn mbps(bytes: f64, duration: Duration) -> f64 {
    bytes / duration.as_secs_f64() / 1e6
}
