//! Search benchmark: `POST /api/search` on the real release `fsd` beside `rg` on the same
//! tree in the same run: a 50,000-file project (a git repository whose `node_modules`, a
//! fifth of the files, is ignored), contents by regex and by literal, and file names by
//! glob. Each figure is the median wall time of several runs after a warm-up, `rg` writing
//! its matches to a pipe, fsd answering over HTTP with every match in one JSON answer.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench search`
//! Set `FSD_BENCH_QUICK=1` for a short smoke run.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use fsd_tests::Daemon;
use serde_json::{Value, json};

fn main() {
    let quick = std::env::var_os("FSD_BENCH_QUICK").is_some();
    let (files, runs) = if quick { (5_000, 3) } else { (50_000, 7) };
    if Command::new("rg").arg("--version").output().is_err() {
        eprintln!("search bench: `rg` is not installed (apt-get install ripgrep)");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(files, runs));
}

/// A project of `files` files: sources under `src/` (one in 50 holds the needle), a fifth
/// of them under a git-ignored `node_modules/` (holding the needle too, to be skipped).
fn project(root: &Path, files: usize) {
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".gitignore"), "node_modules/\n").unwrap();
    let filler =
        "let value = compute(input, options);\n// nothing to see on this line\n".repeat(20);
    for i in 0..files {
        let dir = if i % 5 == 0 {
            root.join(format!("node_modules/pkg{}/lib", i % 400))
        } else {
            root.join(format!("src/module{}/part{}", i % 100, i % 7))
        };
        std::fs::create_dir_all(&dir).unwrap();
        let needle = if i % 50 == 1 || i % 5 == 0 {
            "const NeedleValue = 42;\n"
        } else {
            ""
        };
        let name = if i % 3 == 0 { "file.ts" } else { "file.rs" };
        std::fs::write(dir.join(format!("{i}-{name}")), format!("{filler}{needle}")).unwrap();
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn rg(root: &Path, args: &[&str]) -> (Duration, usize) {
    let start = Instant::now();
    let output = Command::new("rg")
        .args(args)
        .arg(root)
        .output()
        .expect("rg runs");
    let took = start.elapsed();
    let lines = String::from_utf8_lossy(&output.stdout).lines().count();
    (took, lines)
}

async fn fsd(client: &reqwest::Client, daemon: &Daemon, body: &Value) -> (Duration, usize) {
    let start = Instant::now();
    let answer: Value = client
        .post(daemon.url("/api/search"))
        .bearer_auth(daemon.token.clone().unwrap_or_default())
        .json(body)
        .send()
        .await
        .expect("search")
        .json()
        .await
        .expect("JSON");
    let took = start.elapsed();
    assert_eq!(answer["success"], true, "{answer}");
    let found = answer["matches"].as_array().map_or(0, Vec::len)
        + answer["files"].as_array().map_or(0, Vec::len);
    (took, found)
}

async fn run(files: usize, runs: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("project");
    let made = Instant::now();
    project(&root, files);
    println!(
        "fsd search benchmark (release build, loopback HTTP): {files} files, made in {:.1} s",
        made.elapsed().as_secs_f64()
    );
    println!();
    let daemon = Daemon::start();
    let client = reqwest::Client::new();
    let root_text = root.display().to_string();
    let cases: [(&str, Vec<&str>, Value); 3] = [
        (
            "regex `Needle\\w+ = \\d+`",
            vec!["-n", r"Needle\w+ = \d+"],
            json!({"path": root_text, "pattern": r"Needle\w+ = \d+", "maxResults": 1_000_000}),
        ),
        (
            "literal `NeedleValue`",
            vec!["-n", "-F", "NeedleValue"],
            json!({"path": root_text, "pattern": "NeedleValue", "literal": true, "maxResults": 1_000_000}),
        ),
        (
            "names by glob `*.ts`",
            vec!["--files", "-g", "*.ts"],
            json!({"path": root_text, "globs": ["*.ts"], "maxResults": 1_000_000}),
        ),
    ];
    println!(
        "| search ({files} files, median of {runs}) | `rg` | fsd `POST /api/search` | fsd / rg | results |"
    );
    println!("|---|---|---|---|---|");
    for (name, rg_args, body) in cases {
        // Warm the page cache and both sides once.
        let (_, rg_found) = rg(&root, &rg_args);
        let (_, fsd_found) = fsd(&client, &daemon, &body).await;
        assert_eq!(rg_found, fsd_found, "{name}: rg and fsd find the same");
        let mut rg_times = Vec::new();
        let mut fsd_times = Vec::new();
        for _ in 0..runs {
            rg_times.push(rg(&root, &rg_args).0);
            fsd_times.push(fsd(&client, &daemon, &body).await.0);
        }
        let (rg_median, fsd_median) = (median(rg_times), median(fsd_times));
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {:.2}× | {fsd_found} |",
            rg_median.as_secs_f64() * 1e3,
            fsd_median.as_secs_f64() * 1e3,
            fsd_median.as_secs_f64() / rg_median.as_secs_f64()
        );
    }
}
