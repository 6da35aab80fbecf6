//! A stand-in for cloudflared, which cannot be installed on the project's machines. It
//! behaves as the real one does on the wire fsd depends on: the same arguments, JSON log
//! lines on stderr naming the metrics server and (quick mode) a trycloudflare URL, a
//! metrics server whose `/ready` reports connections, and an end on SIGTERM.
//!
//! `FSD_STAND_IN` picks a behaviour: `ok` (default), `fail` (exits 1 at once), `hang`
//! (never ready), `die` (exits 3 a second after it is ready), `stubborn` (ignores SIGTERM).
//! `FSD_STAND_IN_ARGS` names a file to write its arguments to.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Ok(file) = std::env::var("FSD_STAND_IN_ARGS") {
        let _ = std::fs::write(file, args.join("\n"));
    }
    let behaviour = std::env::var("FSD_STAND_IN").unwrap_or_else(|_| "ok".into());
    let log = |message: &str| {
        let line = serde_json::json!({"level": "info", "message": message});
        eprintln!("{line}");
    };
    if behaviour == "fail" {
        log("failed to connect to the edge: stand-in told to fail");
        std::process::exit(1);
    }
    if behaviour == "stubborn" {
        // SAFETY: ignoring a signal is async-signal-safe.
        unsafe {
            let _ = nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGTERM,
                nix::sys::signal::SigHandler::SigIgn,
            );
        }
    }
    let Ok(metrics) = TcpListener::bind("127.0.0.1:0") else {
        std::process::exit(2);
    };
    let address = metrics
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    log(&format!("Starting metrics server on {address}/metrics"));
    let quick = args.iter().any(|arg| arg == "--output");
    if quick {
        let name: String = format!("stand-in-{}", std::process::id());
        log(&format!("|  https://{name}.trycloudflare.com  |"));
    }
    let started = Instant::now();
    let connected_after = Duration::from_millis(300);
    let never = behaviour == "hang";
    if behaviour == "die" {
        std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(1300));
            std::process::exit(3);
        });
    }
    for stream in metrics.incoming().flatten() {
        let mut stream = stream;
        let mut request = String::new();
        let _ = BufReader::new(&stream).read_line(&mut request);
        let connections = u32::from(!never && started.elapsed() >= connected_after);
        let body = format!(r#"{{"status":200,"readyConnections":{connections}}}"#);
        let status = if connections > 0 {
            "200 OK"
        } else {
            "503 Service Unavailable"
        };
        let _ = write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}
