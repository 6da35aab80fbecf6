//! What the benchmarks share: percentiles, milliseconds, the backup benchmarks' tree.

use std::path::Path;
use std::time::Duration;

/// The `pct`th percentile of `samples` (sorted in place), nearest rank.
pub fn pct(samples: &mut [Duration], pct: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * pct / 100.0).round() as usize]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One `GET /api/ping` round trip, the HTTP floor under every route.
pub async fn ping(client: &reqwest::Client, daemon: &crate::Daemon) {
    let response = client
        .get(daemon.url("/api/ping"))
        .send()
        .await
        .expect("ping");
    response.bytes().await.expect("ping body");
}

/// Pseudo-text: compresses about like source code and logs do.
pub fn text(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "fn",
        "let",
        "return",
        "value",
        "error",
        "self",
        "match",
        "impl",
        "struct",
        "0x3f",
        "=>",
        "{",
        "}",
        "\n",
        "    ",
        "workspace",
        "backup",
        "squashfs",
    ];
    let mut x = seed.wrapping_mul(2).wrapping_add(1);
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % WORDS.len() as u64) as usize].as_bytes());
        out.push(b' ');
    }
    out.truncate(len);
    out
}

/// The bytes under `dir` as `du -sb` counts them.
pub fn dir_bytes(dir: &Path) -> u64 {
    let out = std::process::Command::new("du")
        .arg("-sb")
        .arg(dir)
        .output()
        .expect("du");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The backup benchmarks' tree: 50,000 small source-like files in 3,500 directories and
/// three 100 MB files (half text, half noise); `divisor` shrinks it.
pub fn generate(tree: &Path, divisor: usize) {
    for i in 0..50_000 / divisor {
        let dir = tree.join(format!("pkg{:03}/mod{}", i % 500, i % 7));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(
            dir.join(format!("file{i}.rs")),
            text(200 + (i * 37) % 4000, i as u64),
        )
        .expect("write");
    }
    for i in 0..3 {
        // half text, half noise: a build artefact, a dataset
        let mut big = text(50_000_000 / divisor, 1000 + i);
        big.extend(crate::noise(50_000_000 / divisor, 2000 + i));
        std::fs::write(tree.join(format!("big{i}.bin")), big).expect("write big");
    }
}

/// The table a benchmark ends with: each hot path's figure beside its floor or anchor
/// measured in the same run, their ratio, and the target it is held to.
#[derive(Default)]
pub struct Summary {
    rows: Vec<[String; 5]>,
}

impl Summary {
    pub fn row(&mut self, path: &str, fsd: String, floor: String, ratio: String, target: &str) {
        self.rows
            .push([path.to_string(), fsd, floor, ratio, target.to_string()]);
    }

    /// `fsd / floor`, two decimals.
    pub fn ratio(fsd: f64, floor: f64) -> String {
        format!("{:.2}×", fsd / floor)
    }

    /// Prints the rows as one Markdown table (docs/benchmarks.md is made of them).
    pub fn print(&self) {
        println!();
        println!("| path | fsd | floor or anchor, same run | ratio | target |");
        println!("|---|---|---|---|---|");
        for [path, fsd, floor, ratio, target] in &self.rows {
            println!("| {path} | {fsd} | {floor} | {ratio} | {target} |");
        }
    }
}

/// `p50 X ms, p99 Y ms` of `samples` (sorted in place).
pub fn p50_p99(samples: &mut [Duration]) -> String {
    format!(
        "p50 {:.3} ms, p99 {:.3} ms",
        ms(pct(samples, 50.0)),
        ms(pct(samples, 99.0))
    )
}
