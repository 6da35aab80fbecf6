//! Resource figures: `GET /api/metrics` (the sandbox's CPU, memory, disks, connections and
//! processes) and `GET /metrics`, the same in Prometheus's text format with the daemon's
//! request counts and latencies.
//!
//! `service` samples and reads the machine (no HTTP), `cgroup` finds the figures in the
//! sandbox's cgroup, `requests` counts requests, `prometheus` writes the text format,
//! `routes` answers.

mod cgroup;
mod prometheus;
mod requests;
mod routes;
mod service;

pub use requests::record;
pub use routes::router;
pub use service::MetricsService;
