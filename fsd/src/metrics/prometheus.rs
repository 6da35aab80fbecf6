//! The figures in Prometheus's text exposition format (version 0.0.4), for `GET /metrics`.
//! A fixed set of families written from the figures the daemon already keeps, so no
//! registry of its own.

use std::fmt::Write;

use fsd_api::metrics::{DiskMetrics, MetricsResponse};
use fsd_api::process::ProcessInfo;

use super::requests::{BUCKETS, RouteStats};

/// The content type scrapers expect.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders the sandbox's figures, each running process's, and the request statistics.
pub fn render(
    metrics: &MetricsResponse,
    running: &[ProcessInfo],
    requests: &[((String, String), RouteStats)],
) -> String {
    let mut out = Text::default();
    out.gauge(
        "fsd_uptime_seconds",
        "Seconds since the daemon started.",
        &[],
        metrics.uptime_seconds,
    );
    let cpu = &metrics.cpu;
    out.counter(
        "fsd_cpu_usage_seconds_total",
        "CPU time the sandbox has used.",
        &[],
        cpu.usage_seconds,
    );
    out.gauge(
        "fsd_cpu_percent",
        "CPU use over the last interval, in percent of one core.",
        &[],
        cpu.percent,
    );
    out.gauge(
        "fsd_cpu_cores",
        "Cores the daemon may run on.",
        &[],
        f64::from(cpu.cores),
    );
    if let Some(limit) = cpu.limit_cores {
        out.gauge(
            "fsd_cpu_limit_cores",
            "Cores' worth of CPU time the cgroup's quota allows.",
            &[],
            limit,
        );
    }
    let memory = &metrics.memory;
    out.gauge(
        "fsd_memory_used_bytes",
        "Memory in use, droppable page cache left out.",
        &[],
        memory.used_bytes as f64,
    );
    if let Some(limit) = memory.limit_bytes {
        out.gauge(
            "fsd_memory_limit_bytes",
            "The cgroup's memory limit.",
            &[],
            limit as f64,
        );
    }
    out.gauge(
        "fsd_memory_host_total_bytes",
        "The host's memory.",
        &[],
        memory.host_total_bytes as f64,
    );
    let disk_families: [DiskFamily; 3] = [
        ("fsd_disk_total_bytes", "Size of the filesystem.", |d| {
            d.total_bytes
        }),
        (
            "fsd_disk_used_bytes",
            "Bytes used on the filesystem.",
            |d| d.used_bytes,
        ),
        (
            "fsd_disk_free_bytes",
            "Bytes free to unprivileged writers.",
            |d| d.free_bytes,
        ),
    ];
    for (family, help, value) in disk_families {
        out.header(family, help, "gauge");
        for disk in &metrics.disks {
            out.sample(
                family,
                &[("name", &disk.name), ("path", &disk.path)],
                value(disk) as f64,
            );
        }
    }
    let connections = &metrics.connections;
    out.gauge(
        "fsd_connections_open",
        "HTTP connections open.",
        &[],
        connections.open as f64,
    );
    out.counter(
        "fsd_connections_accepted_total",
        "HTTP connections accepted.",
        &[],
        connections.accepted as f64,
    );
    out.counter(
        "fsd_disk_flushes_total",
        "Flushes to the disk made for writes (none under --durability atomic).",
        &[("durability", metrics.durability.mode.name())],
        metrics.durability.flushes as f64,
    );
    let processes = &metrics.processes;
    out.gauge(
        "fsd_processes",
        "Processes running below the daemon.",
        &[],
        processes.total as f64,
    );
    out.gauge(
        "fsd_background_processes",
        "Background processes running.",
        &[],
        processes.background as f64,
    );
    out.gauge("fsd_sessions", "Sessions.", &[], processes.sessions as f64);
    out.header(
        "fsd_process_cpu_seconds_total",
        "CPU time of a running background process's tree.",
        "counter",
    );
    for info in running {
        if let Some(cpu) = info.cpu_seconds {
            out.sample(
                "fsd_process_cpu_seconds_total",
                &[("process_id", &info.id)],
                cpu,
            );
        }
    }
    out.header(
        "fsd_process_resident_bytes",
        "Resident memory of a running background process's tree.",
        "gauge",
    );
    for info in running {
        if let Some(rss) = info.rss_bytes {
            out.sample(
                "fsd_process_resident_bytes",
                &[("process_id", &info.id)],
                rss as f64,
            );
        }
    }
    out.header(
        "fsd_http_requests_total",
        "Requests answered, by route pattern, method and status.",
        "counter",
    );
    for ((method, route), stats) in requests {
        let mut statuses: Vec<_> = stats.by_status.iter().collect();
        statuses.sort();
        for (status, count) in statuses {
            let status = status.to_string();
            let labels = [
                ("method", method.as_str()),
                ("route", route.as_str()),
                ("status", &status),
            ];
            out.sample("fsd_http_requests_total", &labels, *count as f64);
        }
    }
    let family = "fsd_http_request_duration_seconds";
    out.header(
        family,
        "Time to the answer's head, by route pattern and method.",
        "histogram",
    );
    for ((method, route), stats) in requests {
        let mut below = 0;
        for (bound, count) in BUCKETS.iter().zip(stats.buckets) {
            below += count;
            let le = bound.to_string();
            let labels = [
                ("method", method.as_str()),
                ("route", route.as_str()),
                ("le", &le),
            ];
            out.sample(&format!("{family}_bucket"), &labels, below as f64);
        }
        let labels = [
            ("method", method.as_str()),
            ("route", route.as_str()),
            ("le", "+Inf"),
        ];
        out.sample(&format!("{family}_bucket"), &labels, stats.count as f64);
        let labels = [("method", method.as_str()), ("route", route.as_str())];
        out.sample(&format!("{family}_sum"), &labels, stats.sum_seconds);
        out.sample(&format!("{family}_count"), &labels, stats.count as f64);
    }
    out.0
}

/// A disk figure's family, help and reading.
type DiskFamily = (&'static str, &'static str, fn(&DiskMetrics) -> u64);

#[derive(Default)]
struct Text(String);

impl Text {
    fn header(&mut self, family: &str, help: &str, kind: &str) {
        let _ = writeln!(self.0, "# HELP {family} {help}\n# TYPE {family} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (label, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{label}=\"{}\"", escaped(value));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    fn gauge(&mut self, family: &str, help: &str, labels: &[(&str, &str)], value: f64) {
        self.header(family, help, "gauge");
        self.sample(family, labels, value);
    }

    fn counter(&mut self, family: &str, help: &str, labels: &[(&str, &str)], value: f64) {
        self.header(family, help, "counter");
        self.sample(family, labels, value);
    }
}

/// A label value with `\`, `"` and newlines escaped, as the format asks.
fn escaped(value: &str) -> String {
    value
        .replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_and_labels_as_the_format_asks() {
        let mut text = Text::default();
        text.gauge("g", "A gauge.", &[("path", "a\"b\\c\nd")], 1.5);
        assert_eq!(
            text.0,
            "# HELP g A gauge.\n# TYPE g gauge\ng{path=\"a\\\"b\\\\c\\nd\"} 1.5\n"
        );
    }
}
