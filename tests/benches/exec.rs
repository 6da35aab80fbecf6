//! Exec benchmark: the real release `fsd` over loopback HTTP (keep-alive) and over the
//! WebSocket transport (`/ws`), with `bash -c true` spawned directly as the floor in the
//! same run; terminal echo over `/ws/pty` beside bash on a local PTY pair; and the daemon's
//! start to its first answer, with its idle memory.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench exec`
//! Set `FSD_BENCH_QUICK=1` for a short smoke run.

use std::time::{Duration, Instant};

use fsd_tests::Daemon;
use fsd_tests::bench::{Summary, ms, p50_p99, pct};
use fsd_tests::split_writes::SplitWrites;
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
    let mut pings = Vec::new();
    for i in 0..round_trips + 50 {
        let start = Instant::now();
        fsd_tests::bench::ping(&client, &daemon).await;
        if i >= 50 {
            pings.push(start.elapsed());
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
    // A client that writes each request's head and body apart, without TCP_NODELAY (one
    // kept-alive connection), beside the same client writing each request at once.
    let (mut split, mut joined) = {
        let address = daemon.url.trim_start_matches("http://").to_string();
        let rounds = round_trips.min(2000);
        tokio::task::spawn_blocking(move || {
            let mut client = SplitWrites::connect(&address).expect("connect");
            let body = r#"{"command":"true"}"#;
            let (mut split, mut joined) = (Vec::new(), Vec::new());
            for i in 0..rounds + 50 {
                for (apart, samples) in [(true, &mut split), (false, &mut joined)] {
                    let (status, answer, took) = client
                        .post("/api/execute", &[], body, apart)
                        .expect("request");
                    assert_eq!(status, 200, "{answer}");
                    if i >= 50 {
                        samples.push(took);
                    }
                }
            }
            (split, joined)
        })
        .await
        .expect("split-writes client")
    };
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
        "  HTTP alone: GET /api/ping           p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut pings, 50.0)),
        ms(pct(&mut pings, 99.0))
    );
    println!(
        "  floor: `bash -c true` spawned directly p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut floor, 50.0)),
        ms(pct(&mut floor, 99.0))
    );
    let mut summary = Summary::default();
    summary.row(
        "exec `true`, warm session, HTTP",
        p50_p99(&mut trips),
        format!(
            "`bash -c true` spawned: {}; the HTTP round trip alone (`GET /api/ping`): p50 {:.3} ms",
            p50_p99(&mut floor),
            ms(pct(&mut pings, 50.0))
        ),
        Summary::ratio(ms(pct(&mut trips, 50.0)), ms(pct(&mut floor, 50.0))),
        "p50 ≤ 0.3 ms, p99 ≤ 1 ms",
    );
    summary.row(
        "exec `true`, head and body written apart without TCP_NODELAY",
        p50_p99(&mut split),
        format!(
            "the same client writing each request at once: {}",
            p50_p99(&mut joined)
        ),
        Summary::ratio(ms(pct(&mut split, 50.0)), ms(pct(&mut joined, 50.0))),
        "within 0.2 ms of one write",
    );
    summary.row(
        "exec `true`, warm session, `/ws`",
        p50_p99(&mut ws_trips),
        format!("`bash -c true` spawned: {}", p50_p99(&mut floor)),
        Summary::ratio(ms(pct(&mut ws_trips, 50.0)), ms(pct(&mut floor, 50.0))),
        "",
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
    let rate = total as f64 / elapsed.as_secs_f64();
    println!("  {rate:>8.0} execs/s");
    summary.row(
        "exec throughput, 8 sessions",
        format!("{rate:.0} /s"),
        "—".into(),
        "—".into(),
        "≥ 6,000 /s",
    );
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

    let mut first_output = Vec::new();
    let mut in_shell = Vec::new();
    for _ in 0..starts {
        first_output.push(first_stream_output(&client, &daemon, false).await);
        in_shell.push(first_stream_output(&client, &daemon, true).await);
    }
    println!("`/api/execute/stream` of `echo hi`: request to its stdout event ({starts} runs)");
    println!(
        "  fsd (a background process, as the reference) p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut first_output, 50.0)),
        ms(pct(&mut first_output, 99.0))
    );
    println!(
        "  fsd foreground: true (the session's shell)   p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut in_shell, 50.0)),
        ms(pct(&mut in_shell, 99.0))
    );
    let line_rounds = starts.max(20);
    let mut echoed = stdin_to_stream(&client, &daemon, line_rounds).await;
    println!(
        "a line into a running `cat` over `/stdin` to its echo on `/stream` ({line_rounds} lines)"
    );
    println!(
        "  fsd                                  p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut echoed, 50.0)),
        ms(pct(&mut echoed, 99.0))
    );
    println!();

    let mebibytes = starts / 5 + 4;
    let (through_api, local) = stdin_throughput(&client, &daemon, mebibytes).await;
    println!("stdin into a running `cat > /dev/null` ({mebibytes} MiB in 1 MiB base64 writes)");
    println!("  fsd POST /api/process/{{id}}/stdin     {through_api:>7.0} MiB/s");
    println!("  floor: a local pipe, 1 MiB writes     {local:>7.0} MiB/s");
    println!();

    let keystrokes = starts * 2;
    let mut through_fsd = terminal_echo(&daemon, keystrokes).await;
    let mut floor = local_pty_echo(keystrokes);
    println!("terminal echo: keystroke to its echo ({keystrokes} keystrokes to bash's readline)");
    println!(
        "  fsd /ws/pty                          p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut through_fsd, 50.0)),
        ms(pct(&mut through_fsd, 99.0))
    );
    println!(
        "  floor: bash on a local pty pair      p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut floor, 50.0)),
        ms(pct(&mut floor, 99.0))
    );
    println!();
    println!(
        "daemon peak RSS: {:.1} MiB",
        fsd_tests::peak_rss_kib(daemon.pid()) as f64 / 1024.0
    );
    println!();

    let mut to_ping: Vec<Duration> = (0..starts / 10 + 10)
        .map(|_| {
            let (elapsed, mut child, _dirs) = start_to_ping();
            let _ = child.kill();
            let _ = child.wait();
            elapsed
        })
        .collect();
    let idle_rss = idle_rss_kib();
    println!(
        "daemon start to its first /api/ping 200 ({} starts, PID namespace on)",
        to_ping.len()
    );
    println!(
        "  fsd serve                            p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(pct(&mut to_ping, 50.0)),
        ms(pct(&mut to_ping, 99.0))
    );
    println!(
        "  idle RSS after start                 {:.1} MiB, of which anonymous {:.1} MiB (the rest is the binary's code pages)",
        idle_rss.0 as f64 / 1024.0,
        idle_rss.1 as f64 / 1024.0
    );
    summary.row(
        "daemon start → first `/api/ping` 200",
        p50_p99(&mut to_ping),
        format!("the reference: {REFERENCE_START_MS} ms (recorded; it does not run here)"),
        Summary::ratio(ms(pct(&mut to_ping, 50.0)), REFERENCE_START_MS),
        "≤ 5 ms",
    );
    summary.row(
        "idle RSS",
        format!(
            "{:.1} MiB ({:.1} MiB anonymous)",
            idle_rss.0 as f64 / 1024.0,
            idle_rss.1 as f64 / 1024.0
        ),
        "—".into(),
        "—".into(),
        "≤ 10 MiB",
    );
    summary.print();
}

/// The reference runtime's start to its first answer, as recorded when fsd's start was
/// first measured beside it; the reference does not run on this machine.
const REFERENCE_START_MS: f64 = 173.0;

/// Spawns `fsd serve` on fresh directories and times it up to the first `/api/ping` 200
/// (read from its listen line, one raw HTTP request). Returns the time and the daemon.
fn start_to_ping() -> (Duration, std::process::Child, [tempfile::TempDir; 2]) {
    use std::io::{Read, Write};
    let dirs = [
        tempfile::tempdir().expect("temp"),
        tempfile::tempdir().expect("temp"),
    ];
    let start = Instant::now();
    let mut child = std::process::Command::new(fsd_tests::binary("fsd"))
        .args(["serve", "--listen", "127.0.0.1:0", "--workspace"])
        .arg(dirs[0].path())
        .arg("--state-dir")
        .arg(dirs[1].path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("fsd");
    let url = fsd_tests::read_listen_line(&mut child);
    let address = url.strip_prefix("http://").expect("http url");
    let mut socket = std::net::TcpStream::connect(address).expect("connect");
    socket
        .write_all(b"GET /api/ping HTTP/1.1\r\nhost: fsd\r\nconnection: close\r\n\r\n")
        .expect("ping");
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).expect("answer");
    let elapsed = start.elapsed();
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    (elapsed, child, dirs)
}

/// The resident set (KiB: all, anonymous) of a daemon that started, answered one ping and
/// then sat idle past the 2 s after which it hands freed memory back.
fn idle_rss_kib() -> (u64, u64) {
    let (_, mut child, _dirs) = start_to_ping();
    std::thread::sleep(Duration::from_secs(3));
    let field = |name| fsd_tests::status_kib(child.id(), name).expect(name);
    let rss = (field("VmRSS"), field("RssAnon"));
    let _ = child.kill();
    let _ = child.wait();
    rss
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

/// From sending `/api/execute/stream` for `echo hi` (run in the session's shell with
/// `foreground`) to its `stdout` event.
async fn first_stream_output(
    client: &reqwest::Client,
    daemon: &Daemon,
    foreground: bool,
) -> Duration {
    use futures_util::StreamExt;
    let start = Instant::now();
    let response = client
        .post(daemon.url("/api/execute/stream"))
        .json(&json!({"command": "echo hi", "foreground": foreground}))
        .send()
        .await
        .expect("stream");
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    while let Some(chunk) = body.next().await {
        seen.push_str(&String::from_utf8_lossy(&chunk.expect("chunk")));
        if seen.contains("\"type\":\"stdout\"") {
            break;
        }
    }
    start.elapsed()
}

/// Lines written to a running `cat`'s stdin, each timed to its echo on the process's stream.
async fn stdin_to_stream(client: &reqwest::Client, daemon: &Daemon, lines: usize) -> Vec<Duration> {
    use futures_util::StreamExt;
    let response = client
        .post(daemon.url("/api/process/start"))
        .json(&json!({"command": "cat", "processId": "echo-bench", "stdin": "pipe"}))
        .send()
        .await
        .expect("start");
    assert!(response.status().is_success());
    let stream = client
        .get(daemon.url("/api/process/echo-bench/stream"))
        .send()
        .await
        .expect("stream");
    let mut body = stream.bytes_stream();
    let mut times = Vec::new();
    for n in 0..lines {
        let start = Instant::now();
        let response = client
            .post(daemon.url("/api/process/echo-bench/stdin"))
            .json(&json!({"data": format!("line {n}\n")}))
            .send()
            .await
            .expect("stdin");
        assert!(response.status().is_success());
        let wanted = format!("line {n}");
        let mut seen = String::new();
        while !seen.contains(&wanted) {
            let chunk = body.next().await.expect("an event").expect("chunk");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        times.push(start.elapsed());
    }
    let _ = client
        .delete(daemon.url("/api/process/echo-bench"))
        .send()
        .await;
    times
}

/// MiB/s through a process's stdin pipe over the API (1 MiB writes, base64 in JSON, each
/// answered once the bytes are in the pipe), and through a local pipe into `cat`.
async fn stdin_throughput(
    client: &reqwest::Client,
    daemon: &Daemon,
    mebibytes: usize,
) -> (f64, f64) {
    use base64::Engine;
    let chunk = vec![b'x'; 1 << 20];
    let encoded = base64::engine::general_purpose::STANDARD.encode(&chunk);
    let response = client
        .post(daemon.url("/api/process/start"))
        .json(&json!({"command": "cat > /dev/null", "processId": "stdin-bench", "stdin": "pipe"}))
        .send()
        .await
        .expect("start");
    assert!(response.status().is_success());
    let start = Instant::now();
    for n in 0..mebibytes {
        let response = client
            .post(daemon.url("/api/process/stdin-bench/stdin"))
            .json(&json!({"data": encoded, "encoding": "base64", "close": n + 1 == mebibytes}))
            .send()
            .await
            .expect("stdin");
        assert!(response.status().is_success(), "{}", response.status());
    }
    let through_api = mebibytes as f64 / start.elapsed().as_secs_f64();
    let local = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut cat = std::process::Command::new("sh")
            .args(["-c", "cat > /dev/null"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("cat");
        let start = Instant::now();
        let mut input = cat.stdin.take().expect("stdin");
        for _ in 0..mebibytes {
            input.write_all(&chunk).expect("write");
        }
        drop(input);
        let _ = cat.wait();
        mebibytes as f64 / start.elapsed().as_secs_f64()
    })
    .await
    .expect("local");
    (through_api, local)
}

/// Types `a` into a terminal over `/ws/pty` and times each echo (the line is cleared with
/// Ctrl-U every 50 keys).
async fn terminal_echo(daemon: &Daemon, keystrokes: usize) -> Vec<Duration> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let mut socket = fsd_tests::ws::WsClient::connect(daemon, "/ws/pty?sessionId=bench-tty")
        .await
        .socket;
    // Up to `ready`, then until the prompt has been drawn.
    while let Some(Ok(frame)) = socket.next().await {
        if matches!(&frame, Message::Text(text) if text.as_str().contains("ready")) {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut samples = Vec::with_capacity(keystrokes);
    for i in 0..keystrokes {
        if i % 50 == 0 {
            socket
                .send(Message::Binary(vec![0x15].into()))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            drain(&mut socket).await;
        }
        let start = Instant::now();
        socket
            .send(Message::Binary(b"a".to_vec().into()))
            .await
            .unwrap();
        loop {
            match socket.next().await {
                Some(Ok(Message::Binary(bytes))) if bytes.contains(&b'a') => break,
                Some(Ok(_)) => {}
                _ => panic!("the terminal closed"),
            }
        }
        samples.push(start.elapsed());
    }
    samples
}

/// Reads what is already waiting on the socket.
async fn drain(socket: &mut fsd_tests::ws::Socket) {
    use futures_util::StreamExt;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(5), socket.next()).await {}
}

/// The same keystrokes to bash on a PTY pair of the bench's own: the floor.
fn local_pty_echo(keystrokes: usize) -> Vec<Duration> {
    use std::io::{Read, Write};
    let pair = nix::pty::openpty(None, None).expect("openpty");
    let slave = std::fs::File::from(pair.slave);
    let mut command = std::process::Command::new("bash");
    command
        .args(["--norc", "--noprofile", "-i"])
        .env("TERM", "xterm-256color")
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave.try_clone().unwrap());
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            if nix::libc::ioctl(0, nix::libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut bash = command.spawn().expect("bash");
    drop(slave);
    let mut master = std::fs::File::from(pair.master);
    let (seen, echoes) = std::sync::mpsc::channel::<Vec<u8>>();
    let mut reader = master.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(read) = reader.read(&mut buffer) {
            if read == 0 || seen.send(buffer[..read].to_vec()).is_err() {
                return;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    while echoes.try_recv().is_ok() {}
    let mut samples = Vec::with_capacity(keystrokes);
    for i in 0..keystrokes {
        if i % 50 == 0 {
            master.write_all(&[0x15]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            while echoes.try_recv().is_ok() {}
        }
        let start = Instant::now();
        master.write_all(b"a").unwrap();
        while !echoes.recv().expect("bash output").contains(&b'a') {}
        samples.push(start.elapsed());
    }
    let _ = bash.kill();
    let _ = bash.wait();
    samples
}
