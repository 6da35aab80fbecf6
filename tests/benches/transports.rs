//! The three transports side by side on the real release `fsd`, in one run: exec `true`
//! and a 1 MiB text write over HTTP keep-alive, `/ws` and `/rpc` (one call at a time), and
//! calls per second on one socket with 64 in flight over `/rpc`; the SDK next line's
//! `processes.start` of `true` to its exit event beside them, and a log line's way from a
//! running process to a follower of its logs. Then the SDK next line's calls beside the
//! reference's own next runtime (its `sandbox` binary, `FSD_REFERENCE_NEXT`, by default
//! where the anchors' `reference-next/setup.sh` builds it), the two servers taking turns,
//! and with them a server that does no work (this binary answering every call at once with
//! a literal, in a process of its own) where the client reads no answer: the floor this
//! client and the kernel set under both servers' rows. A process's row has its program run
//! by the client alone in that column (spawned, its output read, waited for): no server
//! can start it for less.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench transports`
//! Set `FSD_BENCH_QUICK=1` for a short smoke run, `FSD_BENCH_NEXT_ONLY=1` for the part
//! beside the reference's next runtime alone, `FSD_BIN_BEFORE=<fsd>` for the 0.12 rows
//! and the next line's (under the image's durability) beside another build of fsd alone (a
//! build before a change), the two daemons up at once and taking turns every few hundred
//! calls: whole runs one after the other differ by more than a change to these rows does on
//! a shared machine. With `FSD_BENCH_ONLY=<text>` those two modes run only the next line's
//! operations whose name holds the text (`"1 MiB"`: the 1 MiB writes and the read of what
//! they wrote).
//! `FSD_BENCH_UNDER=<dir>` puts the next line's fsd workspace on another filesystem (a
//! journaled ext4, as a container's disk usually is, where this machine's root has none).

use std::sync::Arc;
use std::time::{Duration, Instant};

use fsd_tests::Daemon;
use fsd_tests::bench::{ms, pct};
use fsd_tests::rpc::{RpcClient, settled};
use fsd_tests::ws::WsClient;
use serde_json::{Value, json};

fn main() {
    if std::env::var_os(NO_WORK_SERVER).is_some() {
        answer_every_call();
        return;
    }
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

/// A row for each transport's samples: HTTP keep-alive, `/ws`, `/rpc`.
fn transport_rows(samples: &mut [Vec<Duration>; 3]) {
    let names = ["HTTP keep-alive", "/ws (one socket)", "/rpc (one socket)"];
    for (name, samples) in names.iter().zip(samples.iter_mut()) {
        row(name, samples);
    }
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
    // FSD_BENCH_CALLS: more calls a round, to profile the daemon under one operation.
    let next_rounds = std::env::var("FSD_BENCH_CALLS")
        .ok()
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(if round_trips > 1000 { 500 } else { 50 });
    if let Some(before) = std::env::var_os("FSD_BIN_BEFORE") {
        let turns = if round_trips > 1000 { 20 } else { 2 };
        beside_the_build_before(before.into(), turns).await;
        return;
    }
    if std::env::var_os("FSD_BENCH_NEXT_ONLY").is_some() {
        beside_the_reference_next(&Daemon::start_with(image_durability()), next_rounds).await;
        return;
    }
    let mut transports = Transports::open(Daemon::start()).await;
    println!("fsd transports benchmark (release build, loopback)");
    println!();

    println!("exec `true` in a warm session ({round_trips} round trips each)");
    let mut execs: [Vec<Duration>; 3] = Default::default();
    transports.exec(round_trips, &mut execs).await;
    transport_rows(&mut execs);
    let [_, over_ws, over_rpc] = &mut execs;
    let rpc_vs_ws = ms(pct(over_rpc, 50.0)) / ms(pct(over_ws, 50.0));
    println!("  /rpc p50 is {:.2}× /ws's", rpc_vs_ws);
    let (url, token) = (&transports.daemon.url, transports.daemon.token.as_deref());
    let next = RpcClient::next_activated(url, token).await;
    let mut over_next = timed(round_trips, |_| async {
        next.run_to_exit(json!([["true"]])).await;
    })
    .await;
    row("next: start → exit event", &mut over_next);
    let next_vs_rpc = ms(pct(&mut over_next, 50.0)) / ms(pct(over_rpc, 50.0));
    let next_vs_ws = ms(pct(&mut over_next, 50.0)) / ms(pct(over_ws, 50.0));
    println!("  next p50 is {next_vs_rpc:.2}× /rpc's, {next_vs_ws:.2}× /ws's");
    println!();

    let lines = round_trips.min(1000);
    println!("a log line to the next line's subscription ({lines} lines, 2 ms apart)");
    let mut latencies = line_latencies(&next, lines).await;
    row("write → event", &mut latencies);
    println!();

    println!("1 MiB text write ({writes} each)");
    let mut written: [Vec<Duration>; 3] = Default::default();
    transports.write(writes, &mut written).await;
    transport_rows(&mut written);
    let Transports { daemon, rpc, .. } = transports;
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
    println!();
    drop(daemon);
    let atomic = Daemon::start_with(image_durability());
    beside_the_reference_next(&atomic, next_rounds).await;
}

/// One daemon's three 0.12 transports, for the 0.12 rows of a run and of
/// [`beside_the_build_before`].
struct Transports {
    daemon: Daemon,
    http: reqwest::Client,
    ws: WsClient,
    rpc: RpcClient,
}

impl Transports {
    async fn open(daemon: Daemon) -> Self {
        let ws = WsClient::connect(&daemon, "/ws").await;
        let rpc = RpcClient::connect(&daemon.url, daemon.token.as_deref()).await;
        Self {
            daemon,
            http: reqwest::Client::new(),
            ws,
            rpc,
        }
    }

    /// `calls` foreground execs of `true` in a warm session on each transport.
    async fn exec(&mut self, calls: usize, samples: &mut [Vec<Duration>; 3]) {
        let exec = json!({"command": "true", "sessionId": "bench"});
        let (http, daemon) = (&self.http, &self.daemon);
        samples[0].extend(http_calls(http, daemon, "/api/execute", &exec, calls).await);
        samples[1].extend(ws_calls(&mut self.ws, "/api/execute", &exec, calls).await);
        let rpc = &self.rpc;
        let args = json!(["true", "bench", ["undefined"]]);
        let over_rpc = timed(calls, |_| async {
            settled(&rpc.call("commands", "execute", args.clone()).await);
        });
        samples[2].extend(over_rpc.await);
    }

    /// `writes` 1 MiB text writes on each transport.
    async fn write(&mut self, writes: usize, samples: &mut [Vec<Duration>; 3]) {
        let path = self
            .daemon
            .root()
            .join("bench-1mib.txt")
            .display()
            .to_string();
        let body = json!({"path": path, "content": "x".repeat(1 << 20)});
        let (http, daemon) = (&self.http, &self.daemon);
        samples[0].extend(http_calls(http, daemon, "/api/write", &body, writes).await);
        samples[1].extend(ws_calls(&mut self.ws, "/api/write", &body, writes).await);
        let rpc = &self.rpc;
        let args = json!([path, body["content"], "bench", ["undefined"]]);
        let over_rpc = timed(writes, |_| async {
            settled(&rpc.call("files", "writeFile", args.clone()).await);
        });
        samples[2].extend(over_rpc.await);
    }
}

/// The 0.12 exec and 1 MiB write rows of this build beside `before`'s, both daemons up,
/// `turns` turns of 250 execs and 25 writes per transport each; then the next line's
/// operations, `turns` turns of 100 calls each, on two daemons under the image's durability.
async fn beside_the_build_before(before: std::path::PathBuf, turns: usize) {
    println!("0.12 calls, this build beside {}", before.display());
    println!("({turns} turns of 250 execs and 25 writes per transport each, alternating, p50)");
    let before_binary = before;
    let before = fsd_tests::Options {
        fsd: Some(before_binary.clone()),
        ..Default::default()
    };
    let mut sides = [
        Transports::open(Daemon::start()).await,
        Transports::open(Daemon::start_with(before)).await,
    ];
    let mut execs: [[Vec<Duration>; 3]; 2] = Default::default();
    let mut writes: [[Vec<Duration>; 3]; 2] = Default::default();
    // Only some of the next line's operations: none of these.
    let only = std::env::var_os("FSD_BENCH_ONLY").is_some();
    for _ in 0..if only { 0 } else { turns } {
        for (side, (execs, writes)) in sides.iter_mut().zip(execs.iter_mut().zip(&mut writes)) {
            side.exec(250, execs).await;
            side.write(25, writes).await;
        }
    }
    println!("  call                             this ms   before ms   this/before");
    for (call, samples) in [("exec `true`", &mut execs), ("1 MiB write", &mut writes)] {
        for (index, transport) in ["HTTP keep-alive", "/ws", "/rpc"].iter().enumerate() {
            let [this, before] = samples;
            if this[index].is_empty() {
                continue;
            }
            let (this, before) = (
                ms(pct(&mut this[index], 50.0)),
                ms(pct(&mut before[index], 50.0)),
            );
            let name = format!("{call}, {transport}");
            println!(
                "  {name:<30} {this:>9.3} {before:>11.3} {:>12.2}×",
                this / before
            );
        }
    }
    drop(sides);
    // The next line's rows under the image's durability, as beside the reference (a plain
    // `fsd serve` flushes every write).
    println!(
        "the SDK's next line, this build beside the one before, both under the image's \
         durability ({turns} turns of 100 calls)"
    );
    let this = Daemon::start_with(image_durability());
    let before = Daemon::start_with(fsd_tests::Options {
        fsd: Some(before_binary),
        ..image_durability()
    });
    let servers = [
        next_server("this", &this).await,
        next_server("before", &before).await,
    ];
    let mut samples = take_turns(&servers, turns, 100).await;
    println!(
        "  operation                                          this ms   before ms   this/before"
    );
    for (op, sides) in NextOp::ALL.iter().zip(samples.iter_mut()) {
        let [this, before] = &mut sides[..] else {
            continue;
        };
        if this.is_empty() {
            continue;
        }
        let (this, before) = (ms(pct(this, 50.0)), ms(pct(before, 50.0)));
        println!(
            "  {:<48} {this:>9.2} {before:>11.2} {:>12.2}×",
            op.name(),
            this / before
        );
    }
}

/// Each of the next line's operations `calls` times on each server in turn, `turns` times
/// over; the samples of each operation, per server.
async fn take_turns(servers: &[NextServer], turns: usize, calls: usize) -> Vec<Vec<Vec<Duration>>> {
    let mut samples: Vec<Vec<Vec<Duration>>> = NextOp::ALL
        .iter()
        .map(|_| servers.iter().map(|_| Vec::new()).collect())
        .collect();
    let only = std::env::var("FSD_BENCH_ONLY").unwrap_or_default();
    for _turn in 0..turns {
        for (op, taken) in NextOp::ALL.iter().zip(samples.iter_mut()) {
            if !op.name().contains(only.as_str()) {
                continue;
            }
            for (server, taken) in servers.iter().zip(taken.iter_mut()) {
                if server.does_no_work && !op.answered_without_work() {
                    // A process's row: its program run here with no server, in the same
                    // turns, for the floor under both servers.
                    if let Some(program) = op.program() {
                        taken.extend(
                            timed(calls + 10, |_| async { run_alone(program) })
                                .await
                                .into_iter()
                                .skip(10),
                        );
                    }
                    continue;
                }
                // 30 unmeasured in all (`timed` leaves out 20).
                taken.extend(
                    timed(calls + 10, |_| op.run(server))
                        .await
                        .into_iter()
                        .skip(10),
                );
            }
        }
    }
    samples
}

/// A daemon as a server of the next line's operations.
async fn next_server(name: &'static str, daemon: &Daemon) -> NextServer {
    let file = daemon.path("next-1k.txt").display().to_string();
    NextServer::activated(name, &daemon.url, daemon.token.clone(), file, false).await
}

/// fsd as the image runs it: nothing waits for the disk, as the reference does not. Its
/// workspace and state directory where `FSD_BENCH_UNDER` says (another filesystem than the
/// temp directory's), if set.
fn image_durability() -> fsd_tests::Options {
    fsd_tests::Options {
        extra_args: vec!["--durability".into(), "atomic".into()],
        under: std::env::var_os("FSD_BENCH_UNDER")
            .filter(|dir| !dir.is_empty())
            .map(std::path::PathBuf::from),
        ..Default::default()
    }
}

/// The reference's next runtime (its standalone `sandbox` binary), started as its image
/// runs it: under tini, in a clean environment, on a loopback port; stopped when dropped.
struct ReferenceNext {
    child: std::process::Child,
    url: String,
}

impl ReferenceNext {
    fn start() -> Option<ReferenceNext> {
        let binary = std::env::var_os("FSD_REFERENCE_NEXT")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| "/opt/sandbox-ref-next/container-server/sandbox".into());
        let dir = binary.parent()?.to_path_buf();
        if !binary.is_file() {
            return None;
        }
        let version = std::fs::read_to_string(dir.join("VERSION")).unwrap_or_default();
        let bun = dir.parent()?.join("bun/node_modules/.bin");
        let port = fsd_tests::free_port();
        std::fs::create_dir_all("/workspace").ok()?;
        let child = std::process::Command::new("tini")
            .args(["-s", "--"])
            .arg(&binary)
            .current_dir(&dir)
            .env_clear()
            .env(
                "HOME",
                std::env::var_os("HOME").unwrap_or_else(|| "/root".into()),
            )
            .env(
                "PATH",
                format!(
                    "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    bun.display()
                ),
            )
            .env("LANG", "C.UTF-8")
            .env("SANDBOX_VERSION", version.trim())
            .env("PYTHON_POOL_MIN_SIZE", "0")
            .env("JAVASCRIPT_POOL_MIN_SIZE", "0")
            .env("TYPESCRIPT_POOL_MIN_SIZE", "0")
            .env("SANDBOX_LISTEN_PORT", port.to_string())
            .env("SANDBOX_LISTEN_HOST", "127.0.0.1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let reference = ReferenceNext {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed() > Duration::from_secs(30) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(reference)
    }
}

impl Drop for ReferenceNext {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

/// One server of the next line: where it is, a socket to it, and where files go.
struct NextServer {
    name: &'static str,
    url: String,
    token: Option<String>,
    next: RpcClient,
    file: String,
    /// The writes' arguments, written once (see [`NextOp::written_args`]).
    written: WrittenArgs,
    /// It answers every call at once with a literal (see [`answer_every_call`]).
    does_no_work: bool,
}

impl NextServer {
    /// A server at `url` on a session the next line's object activated, its files beside
    /// `file`.
    async fn activated(
        name: &'static str,
        url: &str,
        token: Option<String>,
        file: String,
        does_no_work: bool,
    ) -> NextServer {
        NextServer {
            name,
            url: url.to_string(),
            next: RpcClient::next_activated(url, token.as_deref()).await,
            token,
            written: WrittenArgs::beside(&file),
            file,
            does_no_work,
        }
    }
}

struct WrittenArgs {
    kib: String,
    mib: String,
    source: String,
}

impl WrittenArgs {
    fn beside(file: &str) -> WrittenArgs {
        WrittenArgs {
            kib: NextOp::WriteKib.written_args(file),
            mib: NextOp::WriteMib.written_args(file),
            source: NextOp::WriteSource.written_args(file),
        }
    }
}

/// 1 MiB of this workspace's own Rust source, as an agent writes: a line end every few
/// dozen bytes, quotes and tabs, each an escape in JSON (a run of one letter has none, and
/// is the case a parser that finds a string's end a vector at a time does best).
fn source_text() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(read_source_text)
}

/// [`source_text`], read from `fsd/src`.
fn read_source_text() -> String {
    let mut files = Vec::new();
    let mut dirs = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fsd/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut text = String::new();
    for file in files.iter().cycle().take(files.len() * 64) {
        text.push_str(&std::fs::read_to_string(file).unwrap_or_default());
        if text.len() >= 1 << 20 {
            break;
        }
    }
    assert!(text.len() >= 1 << 20, "fsd's sources: {} bytes", text.len());
    let mut end = 1 << 20;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text
}

/// What the SDK's operations cost on each server, and the calls each makes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NextOp {
    /// A new socket and `utils.getRuntimeMetadata`, as the object's probe before each
    /// waking operation.
    Probe,
    /// `utils.getRuntimeMetadata` on the open socket: a call with no work behind it.
    Call,
    /// `processes.start(['true'])`, then the SDK's wait: `get`, `openLogs({replay,
    /// follow})`, `stream()` to the terminal event, `cancel()`, release.
    StartAndWait,
    /// `processes.start(['true'])`, then `get` until it has exited.
    StartAndPoll,
    /// `processes.start(['/bin/echo','hi'])` and its logs read to the end.
    EchoLogs,
    WriteKib,
    ReadKib,
    WriteMib,
    ReadMib,
    /// `files.writeFile` of 1 MiB of source text ([`source_text`]).
    WriteSource,
}

impl NextOp {
    const ALL: [NextOp; 10] = [
        NextOp::Probe,
        NextOp::Call,
        NextOp::StartAndWait,
        NextOp::StartAndPoll,
        NextOp::EchoLogs,
        NextOp::WriteKib,
        NextOp::ReadKib,
        NextOp::WriteMib,
        NextOp::ReadMib,
        NextOp::WriteSource,
    ];

    fn name(self) -> &'static str {
        match self {
            NextOp::Probe => "probe socket (connect + getRuntimeMetadata)",
            NextOp::Call => "getRuntimeMetadata on the open socket",
            NextOp::StartAndWait => "start ['true'] + the SDK's wait",
            NextOp::StartAndPoll => "start ['true'] + get until exited",
            NextOp::EchoLogs => "start ['/bin/echo','hi'] + its logs to the end",
            NextOp::WriteKib => "files.writeFile 1 KiB",
            NextOp::ReadKib => "files.readFile 1 KiB",
            NextOp::WriteMib => "files.writeFile 1 MiB",
            NextOp::ReadMib => "files.readFile 1 MiB",
            NextOp::WriteSource => "files.writeFile 1 MiB of source text",
        }
    }

    /// The file a write or read goes to (beside a server's `file`), and its size.
    fn file(self, file: &str) -> (String, usize) {
        match self {
            NextOp::WriteMib | NextOp::ReadMib => (format!("{file}-mib"), 1 << 20),
            NextOp::WriteSource => (format!("{file}-source"), 1 << 20),
            _ => (file.to_string(), 1024),
        }
    }

    /// A write's arguments as JSON, written once per server: the SDK's client serializes
    /// them in the Worker, and this client's JSON writer (serde_json's, a byte at a time)
    /// took half a core on the 1 MiB write, more than the server it measured.
    fn written_args(self, file: &str) -> String {
        let (file, size) = self.file(file);
        let letters;
        let content = if self == NextOp::WriteSource {
            source_text()
        } else {
            letters = "x".repeat(size);
            &letters
        };
        json!([file, content, {}]).to_string()
    }

    /// Whether a server that answers every call with a small literal can stand in for it:
    /// the calls whose answer the client does not look into.
    fn answered_without_work(self) -> bool {
        matches!(
            self,
            NextOp::Probe
                | NextOp::Call
                | NextOp::WriteKib
                | NextOp::WriteMib
                | NextOp::WriteSource
        )
    }

    /// The program a process row starts: run alone by this client, it is part of the
    /// floor (the floor of calls alone left out what no server can skip: running
    /// the program, which takes longer here than the calls).
    fn program(self) -> Option<&'static [&'static str]> {
        match self {
            NextOp::StartAndWait | NextOp::StartAndPoll => Some(&["true"]),
            NextOp::EchoLogs => Some(&["/bin/echo", "hi"]),
            _ => None,
        }
    }

    /// The calls the SDK makes for it at least (its floor: that many 1 KiB reads, and the
    /// program's own run for a process row).
    fn calls(self) -> f64 {
        match self {
            NextOp::StartAndWait => 5.0,
            NextOp::EchoLogs => 4.0,
            NextOp::StartAndPoll => 2.0,
            NextOp::Probe
            | NextOp::Call
            | NextOp::WriteKib
            | NextOp::ReadKib
            | NextOp::WriteMib
            | NextOp::ReadMib
            | NextOp::WriteSource => 1.0,
        }
    }

    async fn run(self, server: &NextServer) {
        let next = &server.next;
        match self {
            NextOp::Probe => {
                let probe = RpcClient::connect(&server.url, server.token.as_deref()).await;
                settled(&probe.call("utils", "getRuntimeMetadata", json!([])).await);
                probe.close();
            }
            NextOp::Call => {
                settled(&next.call("utils", "getRuntimeMetadata", json!([])).await);
            }
            NextOp::StartAndWait => {
                let id = started(next, json!(["true"])).await;
                settled(&next.call("processes", "get", json!([id])).await);
                logs_to_the_end(next, &id).await;
            }
            NextOp::StartAndPoll => {
                let id = started(next, json!(["true"])).await;
                loop {
                    let status = next.call("processes", "get", json!([id])).await;
                    settled(&status);
                    if status[2]["state"] != "running" {
                        break;
                    }
                }
            }
            NextOp::EchoLogs => {
                let id = started(next, json!(["/bin/echo", "hi"])).await;
                let printed = logs_to_the_end(next, &id).await;
                assert_eq!(printed, 1, "{}: echo's output", server.name);
            }
            NextOp::WriteKib | NextOp::WriteMib | NextOp::WriteSource => {
                let args = match self {
                    NextOp::WriteKib => &server.written.kib,
                    NextOp::WriteMib => &server.written.mib,
                    _ => &server.written.source,
                };
                settled(&next.call_written("files", "writeFile", args).await);
            }
            NextOp::ReadKib | NextOp::ReadMib => {
                let (file, _) = self.file(&server.file);
                settled(&next.call("files", "readFile", json!([file, {}])).await);
            }
        }
    }
}

/// Runs `argv` as a server at its best would, with nothing around it: `posix_spawn` (std's
/// way for a plain command), its output into a pipe read to the end, and a wait.
fn run_alone(argv: &[&str]) {
    use std::io::Read;
    let mut child = std::process::Command::new(argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the program runs");
    let mut printed = Vec::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_end(&mut printed);
    }
    assert!(child.wait().expect("the program ends").success());
}

/// `processes.start(argv, {})`: the process's id (an array literal goes in one more array,
/// as capnweb writes it).
async fn started(next: &RpcClient, argv: Value) -> Value {
    let started = next.call("processes", "start", json!([[argv], {}])).await;
    settled(&started);
    started[2]["id"].clone()
}

/// The SDK's read of a process's logs to its end: `openLogs({replay, follow})`, `stream()`
/// to the terminal event, `cancel()`, release. Answers how many output events came.
async fn logs_to_the_end(next: &RpcClient, id: &Value) -> usize {
    let logs = next
        .call(
            "processes",
            "openLogs",
            json!([id, {"replay": true, "follow": true}]),
        )
        .await;
    settled(&logs);
    let export = logs[2][1].as_i64().expect("a subscription");
    settled(&next.call_on(export, "stream", json!([])).await);
    let mut printed = 0;
    while let Some(event) = next.next_write().await {
        if event["type"] == "terminal" {
            break;
        }
        printed += 1;
    }
    settled(&next.call_on(export, "cancel", json!([])).await);
    next.release(export, 1);
    printed
}

/// The SDK next line's operations on fsd and on the reference's next runtime, taking
/// turns: two rounds, each `rounds` measured calls after 30 unmeasured, p50 of both rounds.
async fn beside_the_reference_next(daemon: &Daemon, rounds: usize) {
    println!(
        "the SDK's next line beside the reference's next runtime ({rounds} calls × 2 rounds, p50)"
    );
    let Some(reference) = ReferenceNext::start() else {
        println!(
            "  the reference's next runtime is not built: the anchors' reference-next/setup.sh \
             builds it (FSD_REFERENCE_NEXT names another binary)"
        );
        return;
    };
    let no_work = NoWorkServer::start();
    let mut servers = vec![
        next_server("fsd", daemon).await,
        NextServer::activated(
            "reference",
            &reference.url,
            None,
            "/workspace/fsd-bench-next-1k.txt".into(),
            false,
        )
        .await,
    ];
    if let Some(no_work) = &no_work {
        servers
            .push(NextServer::activated("no work", &no_work.url, None, String::new(), true).await);
    }
    let mut samples = take_turns(&servers, 2, rounds).await;
    let p50 = |samples: &mut Vec<Duration>| {
        if samples.is_empty() {
            f64::NAN
        } else {
            ms(pct(samples, 50.0))
        }
    };
    let read = samples[NextOp::ALL
        .iter()
        .position(|op| *op == NextOp::ReadKib)
        .unwrap_or(0)]
    .first_mut()
    .map_or(f64::NAN, &p50);
    println!(
        "  {:<48} {:>9} {:>11} {:>8} {:>12} {:>9}",
        "operation", "fsd ms", "reference", "fsd/ref", "fsd's floor", "no work"
    );
    for (op, taken) in NextOp::ALL.iter().zip(samples.iter_mut()) {
        let [fsd, reference, no_work @ ..] = &mut taken[..] else {
            continue;
        };
        if fsd.is_empty() {
            continue;
        }
        let (fsd, reference) = (p50(fsd), p50(reference));
        let no_work = no_work.first_mut().map_or(f64::NAN, &p50);
        // A process row's "no work" is its program run alone, which its floor holds too.
        let program = if op.program().is_some() { no_work } else { 0.0 };
        println!(
            "  {:<48} {fsd:>9.2} {reference:>11.2} {:>7.2}× {:>12.2} {no_work:>9.2}",
            op.name(),
            fsd / reference,
            op.calls() * read + program,
        );
    }
    println!(
        "  (no work: a server that answers every call at once with a small literal, after \
         reading and parsing it: what this client and the kernel cost before a server's work;\n   \
         for a process row, its program run by this client alone, spawned, read and waited \
         for; a row's floor: its calls as 1 KiB reads, and that run)"
    );
    let _ = std::fs::remove_file("/workspace/fsd-bench-next-1k.txt");
    let _ = std::fs::remove_file("/workspace/fsd-bench-next-1k.txt-mib");
    drop(servers);
    drop(reference);
}

/// Set in the environment of this bench's own binary started as [`NoWorkServer`].
const NO_WORK_SERVER: &str = "FSD_BENCH_NO_WORK_SERVER";

/// This bench's binary started as a server that does no work, in a process of its own as
/// the other servers are; stopped when dropped.
struct NoWorkServer {
    child: std::process::Child,
    url: String,
}

impl NoWorkServer {
    fn start() -> Option<NoWorkServer> {
        use std::io::BufRead;
        let mut child = std::process::Command::new(std::env::current_exe().ok()?)
            .env(NO_WORK_SERVER, "1")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .ok()?;
        let mut port = String::new();
        std::io::BufReader::new(child.stdout.take()?)
            .read_line(&mut port)
            .ok()?;
        let url = format!("http://127.0.0.1:{}", port.trim());
        Some(NoWorkServer { child, url })
    }
}

impl Drop for NoWorkServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A capnweb peer on a loopback port (printed on stdout) that parses each message and
/// answers each `pull` with `{"runtimeIncarnationID": "no work"}` at once, its sockets
/// served by one thread as an event loop does.
fn answer_every_call() {
    use futures_util::{SinkExt, StreamExt};
    use std::io::Write;
    use tokio_tungstenite::tungstenite::Message;
    let Ok(listener) = std::net::TcpListener::bind("127.0.0.1:0") else {
        return;
    };
    let Ok(address) = listener.local_addr() else {
        return;
    };
    println!("{}", address.port());
    let _ = std::io::stdout().flush();
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    runtime.block_on(async move {
        let _ = listener.set_nonblocking(true);
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let Ok(mut socket) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                while let Some(Ok(message)) = socket.next().await {
                    let Message::Text(text) = message else {
                        continue;
                    };
                    let Ok(message) = serde_json::from_str::<Value>(text.as_str()) else {
                        continue;
                    };
                    if message[0] == "pull" {
                        let answer =
                            json!(["resolve", message[1], {"runtimeIncarnationID": "no work"}]);
                        if socket
                            .send(Message::Text(answer.to_string().into()))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            });
        }
    });
}
