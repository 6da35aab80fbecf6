//! Watch benchmark on a generated 100,000-directory tree, beside `inotifywait -r`
//! (inotify-tools) in the same run: time to establish the watches, write → event latency,
//! checkChanges latency, daemon memory, and how long a check takes to answer with an exact
//! list after a kernel queue overflow (a recrawl of the whole tree; needs root to lower
//! `max_queued_events` for the watch it makes).
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench watch`
//! (needs `inotifywait`: `apt-get install inotify-tools`). `FSD_BENCH_QUICK=1`: 10,000 dirs.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use fsd_tests::bench::{Summary, ms, p50_p99, pct};
use fsd_tests::{Daemon, rss_kib};
use futures_util::StreamExt;
use serde_json::json;

fn main() {
    let quick = std::env::var_os("FSD_BENCH_QUICK").is_some();
    let (top, mid, leaf) = if quick { (10, 20, 50) } else { (50, 40, 50) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(top, mid, leaf, if quick { 50 } else { 300 }));
}

async fn run(top: usize, mid: usize, leaf: usize, samples: usize) {
    let daemon = Daemon::start();
    let tree = daemon.path("tree");
    let dirs = generate(&tree, top, mid, leaf);
    println!("fsd watch benchmark: {dirs} directories (release build, loopback HTTP)");
    println!();

    let anchor_setup = inotifywait_setup(&tree);
    let rss_before = rss_kib(daemon.pid());
    let client = reqwest::Client::new();
    let started = Instant::now();
    let baseline: serde_json::Value = client
        .post(daemon.url("/api/watch/check"))
        .json(&json!({"path": "tree"}))
        .send()
        .await
        .expect("check")
        .json()
        .await
        .expect("json");
    let setup = started.elapsed();
    let rss_after = rss_kib(daemon.pid());
    let version = baseline["version"].as_str().expect("version").to_string();
    println!("time to establish watches on the tree");
    println!("  fsd (first checkChanges)   {:>8.1} ms", ms(setup));
    match anchor_setup {
        Some(anchor) => println!(
            "  anchor: inotifywait -r      {:>8.1} ms   ratio {:.2}",
            ms(anchor),
            setup.as_secs_f64() / anchor.as_secs_f64()
        ),
        None => println!("  anchor: inotifywait not installed"),
    }
    println!(
        "  daemon RSS for the watched tree: {:.1} MiB",
        (rss_after.saturating_sub(rss_before)) as f64 / 1024.0
    );
    println!();

    let mut checks = Vec::new();
    for _ in 0..samples.max(200) {
        let started = Instant::now();
        let response = client
            .post(daemon.url("/api/watch/check"))
            .json(&json!({"path": "tree", "since": version}))
            .send()
            .await
            .expect("check");
        let _ = response.bytes().await;
        checks.push(started.elapsed());
    }
    println!("checkChanges with a token (nothing changed)");
    println!(
        "  p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut checks, 50.0)),
        ms(pct(&mut checks, 99.0))
    );
    println!();

    let deep = tree.join("d0/d0/d0");
    let mut fsd_latency = sse_latency(&daemon, &deep, samples).await;
    let mut anchor_latency = inotifywait_latency(&tree, &deep, samples);
    println!("write → event latency ({samples} writes in a leaf directory)");
    println!(
        "  fsd SSE /api/watch          p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut fsd_latency, 50.0)),
        ms(pct(&mut fsd_latency, 99.0))
    );
    let mut summary = Summary::default();
    match anchor_latency.take() {
        Some(mut anchor) => {
            println!(
                "  anchor: inotifywait -m -r   p50 {:>7.3} ms   p99 {:>7.3} ms",
                ms(pct(&mut anchor, 50.0)),
                ms(pct(&mut anchor, 99.0))
            );
            summary.row(
                "watch: write → SSE event",
                p50_p99(&mut fsd_latency),
                format!("`inotifywait -m -r`: {}", p50_p99(&mut anchor)),
                Summary::ratio(ms(pct(&mut fsd_latency, 50.0)), ms(pct(&mut anchor, 50.0))),
                "p50 ≤ 1 ms, p99 ≤ 3 ms",
            );
        }
        None => summary.row(
            "watch: write → SSE event",
            p50_p99(&mut fsd_latency),
            "inotifywait not installed".into(),
            "—".into(),
            "p50 ≤ 1 ms, p99 ≤ 3 ms",
        ),
    }
    println!();
    if let Some(recrawl) = overflow_recrawl(&daemon, &tree).await {
        println!(
            "after a kernel queue overflow: the check's exact list (a recrawl of {dirs} directories)"
        );
        println!("  {:>8.1} ms", ms(recrawl));
        summary.row(
            "watch: exact list after an overflow",
            format!("{:.0} ms", ms(recrawl)),
            "none: `inotifywait` and the reference lose the events".into(),
            "—".into(),
            "≤ 2 s on 100,000 directories",
        );
        println!();
    }
    println!(
        "note: the first change after 5 ms of quiet goes out at once; a burst follows in batches (5 ms of quiet, 75 ms at most)"
    );
    summary.print();
}

/// A second watch of the tree made while `max_queued_events` is 16, a burst of writes that
/// overflows its queue, then a check: the time that check takes to answer (the recrawl),
/// with its list checked to hold every file written. `None` without root.
async fn overflow_recrawl(daemon: &Daemon, tree: &Path) -> Option<Duration> {
    const KNOB: &str = "/proc/sys/fs/inotify/max_queued_events";
    const WATCHES: &str = "/proc/sys/fs/inotify/max_user_watches";
    let original = std::fs::read_to_string(KNOB).ok()?;
    // Room for a second watch of every directory beside the first one's.
    let watches = std::fs::read_to_string(WATCHES).ok()?;
    let wanted = watches.trim().parse::<u64>().ok()?.max(450_000);
    std::fs::write(WATCHES, wanted.to_string()).ok()?;
    std::fs::write(KNOB, "16").ok()?;
    let client = reqwest::Client::new();
    let body = json!({"path": "tree", "exclude": ["no-such-name"], "paths": true});
    let baseline: Result<serde_json::Value, _> = async {
        client
            .post(daemon.url("/api/watch/check"))
            .json(&body)
            .send()
            .await?
            .json()
            .await
    }
    .await;
    let _ = std::fs::write(KNOB, original.trim());
    let baseline = baseline.ok()?;
    let burst = tree.join("d1/d1/d1");
    // The daemon is stopped while the burst is written, so its 16-event queue overflows
    // for sure (running, its engine can keep up with the writes and no recrawl happens).
    let pid = nix::unistd::Pid::from_raw(daemon.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).ok()?;
    let written =
        (0..200).try_for_each(|i| std::fs::write(burst.join(format!("overflow-{i}")), "x"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).ok()?;
    written.ok()?;
    let mut since = body.clone();
    since["since"] = baseline["version"].clone();
    let started = Instant::now();
    let answer: serde_json::Value = client
        .post(daemon.url("/api/watch/check"))
        .json(&since)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    let elapsed = started.elapsed();
    let _ = std::fs::write(WATCHES, watches.trim());
    let listed = answer["changes"].as_array().map_or(0, |c| c.len());
    assert_eq!(answer["status"], "changed", "{answer}");
    assert_eq!(listed, 200, "every file written during the overflow, once");
    Some(elapsed)
}

/// `top`/`mid`/`leaf` directories under `root`; returns how many directories there are.
fn generate(root: &Path, top: usize, mid: usize, leaf: usize) -> usize {
    let mut count = 1;
    std::fs::create_dir_all(root).expect("root");
    for a in 0..top {
        for b in 0..mid {
            for c in 0..leaf {
                std::fs::create_dir_all(root.join(format!("d{a}/d{b}/d{c}"))).expect("mkdir");
            }
            count += 1 + leaf;
        }
        count += 1;
    }
    count
}

/// Starts `inotifywait -r -m ARGS TREE` and returns once it says its watches are in place.
fn inotifywait(args: &[&str], tree: &Path, stdout: Stdio) -> Option<std::process::Child> {
    let mut child = Command::new("inotifywait")
        .args(["-r", "-m"])
        .args(args)
        .arg(tree)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let mut stderr = BufReader::new(child.stderr.take()?);
    let mut line = String::new();
    while stderr.read_line(&mut line).ok()? > 0 && !line.contains("Watches established") {
        line.clear();
    }
    Some(child)
}

/// Time until `inotifywait -r` says the watches are established.
fn inotifywait_setup(tree: &Path) -> Option<Duration> {
    let started = Instant::now();
    let mut child = inotifywait(
        &["-e", "create,modify,delete,moved_from,moved_to"],
        tree,
        Stdio::null(),
    )?;
    let elapsed = started.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    Some(elapsed)
}

async fn sse_latency(daemon: &Daemon, dir: &Path, samples: usize) -> Vec<Duration> {
    let response = reqwest::Client::new()
        .post(daemon.url("/api/watch"))
        .json(&json!({"path": "tree", "events": ["create"]}))
        .send()
        .await
        .expect("watch");
    let mut body = response.bytes_stream();
    let mut buffer = BytesMut::new();
    let mut frames = 0;
    let mut next_frame = async || loop {
        if let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let _ = buffer.split_to(end + 2);
            return;
        }
        let chunk = body.next().await.expect("stream").expect("chunk");
        buffer.extend_from_slice(&chunk);
    };
    next_frame().await; // watching
    let mut out = Vec::new();
    for i in 0..samples {
        let started = Instant::now();
        std::fs::write(dir.join(format!("sse-{i}")), "x").expect("write");
        next_frame().await;
        frames += 1;
        out.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(80)).await;
    }
    assert_eq!(frames, samples);
    out
}

fn inotifywait_latency(tree: &Path, dir: &Path, samples: usize) -> Option<Vec<Duration>> {
    let mut child = inotifywait(&["-e", "create", "--format", "%w%f"], tree, Stdio::piped())?;
    let mut stdout = BufReader::new(child.stdout.take()?);
    let mut line = String::new();
    let mut out = Vec::new();
    for i in 0..samples {
        let started = Instant::now();
        std::fs::write(dir.join(format!("iw-{i}")), "x").ok()?;
        line.clear();
        stdout.read_line(&mut line).ok()?;
        out.push(started.elapsed());
    }
    let _ = child.kill();
    let _ = child.wait();
    Some(out)
}
