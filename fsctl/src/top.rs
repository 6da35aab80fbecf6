//! `fsctl top`: the sandbox's CPU, memory, disks and connections, and its background
//! processes by CPU use, refreshed until Ctrl-C (or `-n` times).

use std::collections::HashMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use fsd_sdk::api::metrics::MetricsResponse;
use fsd_sdk::api::process::{ProcessInfo, ProcessStatus};
use fsd_sdk::{Sandbox, SdkError};

use crate::output;

#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Seconds between refreshes.
    #[arg(short = 'd', long, default_value_t = 2.0)]
    delay: f64,
    /// Refresh this many times, then exit (default: until Ctrl-C).
    #[arg(short = 'n', long)]
    iterations: Option<u64>,
}

/// One refresh: the figures and the running processes.
#[derive(serde::Serialize)]
struct Frame {
    metrics: MetricsResponse,
    processes: Vec<ProcessInfo>,
}

pub async fn run(sandbox: &Sandbox, args: TopArgs, as_json: bool) -> Result<ExitCode, SdkError> {
    if !(args.delay.is_finite() && args.delay > 0.0) {
        return Err(SdkError::Io(std::io::Error::other(
            "--delay must be a number of seconds above 0",
        )));
    }
    let clear = !as_json && std::io::stdout().is_terminal();
    // CPU seconds of each process at the last refresh, for its use since.
    let mut last: HashMap<String, (Instant, f64)> = HashMap::new();
    let mut shown = 0;
    loop {
        let (metrics, processes) = tokio::try_join!(
            sandbox.metrics(),
            sandbox.list_processes(Some(ProcessStatus::Running))
        )?;
        if as_json {
            output::json_line(&Frame { metrics, processes });
        } else {
            let now = Instant::now();
            let percents: Vec<Option<f64>> = processes
                .iter()
                .map(|p| {
                    let cpu = p.cpu_seconds?;
                    let (then, before) = last.get(&p.id)?;
                    let elapsed = now.duration_since(*then).as_secs_f64();
                    Some((cpu - before).max(0.0) / elapsed.max(1e-9) * 100.0)
                })
                .collect();
            last = processes
                .iter()
                .filter_map(|p| Some((p.id.clone(), (now, p.cpu_seconds?))))
                .collect();
            if clear {
                print!("\x1b[H\x1b[2J");
            }
            print!("{}", render(&metrics, &processes, &percents));
        }
        shown += 1;
        if args.iterations.is_some_and(|n| shown >= n) {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(Duration::from_secs_f64(args.delay)).await;
    }
}

/// The screen: a summary, then the processes by CPU use (the first refresh has no use yet,
/// so they are by CPU time).
fn render(
    metrics: &MetricsResponse,
    processes: &[ProcessInfo],
    percents: &[Option<f64>],
) -> String {
    let cpu = &metrics.cpu;
    let memory = &metrics.memory;
    let mut out = format!(
        "up {}  cpu {:.1}% of {} core(s){}  mem {}{}  conns {}  procs {}  background {}  sessions {}\n",
        duration(metrics.uptime_seconds),
        cpu.percent,
        cpu.cores,
        cpu.limit_cores
            .map(|limit| format!(" (limit {limit:.2})"))
            .unwrap_or_default(),
        bytes(memory.used_bytes),
        memory
            .limit_bytes
            .map(|limit| format!(" / {}", bytes(limit)))
            .unwrap_or_default(),
        metrics.connections.open,
        metrics.processes.total,
        metrics.processes.background,
        metrics.processes.sessions,
    );
    for disk in &metrics.disks {
        out.push_str(&format!(
            "disk {:<9} {} used, {} free of {}  ({})\n",
            disk.name,
            bytes(disk.used_bytes),
            bytes(disk.free_bytes),
            bytes(disk.total_bytes),
            disk.path
        ));
    }
    out.push_str(&format!(
        "\n{:<28} {:>8} {:>6} {:>9} {:>9}  COMMAND\n",
        "ID", "PID", "CPU%", "TIME", "RSS"
    ));
    let mut rows: Vec<(&ProcessInfo, Option<f64>)> =
        processes.iter().zip(percents.iter().copied()).collect();
    rows.sort_by(|a, b| {
        let key = |row: &(&ProcessInfo, Option<f64>)| {
            row.1.unwrap_or(0.0) * 1e9 + row.0.cpu_seconds.unwrap_or(0.0)
        };
        key(b).total_cmp(&key(a))
    });
    for (process, percent) in rows {
        out.push_str(&format!(
            "{:<28} {:>8} {:>6} {:>9} {:>9}  {}\n",
            process.id,
            process.pid,
            percent.map_or_else(|| "-".to_string(), |p| format!("{p:.1}")),
            process
                .cpu_seconds
                .map_or_else(|| "-".to_string(), duration),
            process.rss_bytes.map_or_else(|| "-".to_string(), bytes),
            process.command.lines().next().unwrap_or_default(),
        ));
    }
    out
}

/// `1h02m`, `3m05s`, `4.20s`.
fn duration(seconds: f64) -> String {
    let whole = seconds as u64;
    if whole >= 3600 {
        format!("{}h{:02}m", whole / 3600, whole % 3600 / 60)
    } else if whole >= 60 {
        format!("{}m{:02}s", whole / 60, whole % 60)
    } else {
        format!("{seconds:.2}s")
    }
}

/// Bytes in binary units, as `top` shows them.
fn bytes(count: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = count as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{count}B")
    } else {
        format!("{value:.1}{}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(bytes(512), "512B");
        assert_eq!(bytes(3 * 1024 * 1024 / 2), "1.5MiB");
        assert_eq!(duration(4.2), "4.20s");
        assert_eq!(duration(185.0), "3m05s");
        assert_eq!(duration(3720.0), "1h02m");
    }
}
