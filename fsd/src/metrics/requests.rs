//! The daemon's own request counts and latencies, by route: what a fleet scraping
//! `GET /metrics` watches for errors and slow calls. Requests carried over `/ws` go through
//! the same routes and are counted with them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

/// Histogram bucket bounds, in seconds: from a warm exec (half a millisecond) to a clone.
pub const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// One route and method: answers by status, and the time to the answer's head.
#[derive(Debug, Clone, Default)]
pub struct RouteStats {
    pub by_status: HashMap<u16, u64>,
    /// Requests at or under each of [`BUCKETS`] (not cumulative; the rendering sums).
    pub buckets: [u64; BUCKETS.len()],
    pub count: u64,
    pub sum_seconds: f64,
}

/// Every route's figures, keyed by (method, route pattern).
#[derive(Debug, Default)]
pub struct RequestStats {
    routes: Mutex<HashMap<(String, String), RouteStats>>,
}

impl RequestStats {
    fn note(&self, method: &str, route: &str, status: u16, seconds: f64) {
        let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        let stats = routes
            .entry((method.to_string(), route.to_string()))
            .or_default();
        *stats.by_status.entry(status).or_default() += 1;
        if let Some(bucket) = BUCKETS.iter().position(|&bound| seconds <= bound) {
            stats.buckets[bucket] += 1;
        }
        stats.count += 1;
        stats.sum_seconds += seconds;
    }

    /// The figures now, sorted by route and method.
    pub fn snapshot(&self) -> Vec<((String, String), RouteStats)> {
        let routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<_> = routes
            .iter()
            .map(|(key, stats)| (key.clone(), stats.clone()))
            .collect();
        all.sort_by(|a, b| (&a.0.1, &a.0.0).cmp(&(&b.0.1, &b.0.0)));
        all
    }
}

/// Middleware: times each request to its answer's head (a stream's body is not waited
/// for) and counts it under its route's pattern (`/api/process/{id}`), never the path
/// itself, so ids do not grow the table.
pub async fn record(
    State(stats): State<Arc<RequestStats>>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    // Only the standard methods name a series: any other is `OTHER`, so a caller inventing
    // methods cannot grow the table.
    let method = match *request.method() {
        Method::GET
        | Method::POST
        | Method::PUT
        | Method::DELETE
        | Method::PATCH
        | Method::HEAD
        | Method::OPTIONS => request.method().as_str(),
        _ => "OTHER",
    }
    .to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_string();
    let response = next.run(request).await;
    stats.note(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_status_and_bucket() {
        let stats = RequestStats::default();
        stats.note("GET", "/api/ping", 200, 0.0004);
        stats.note("GET", "/api/ping", 200, 0.003);
        stats.note("GET", "/api/ping", 404, 20.0);
        let all = stats.snapshot();
        let (_, ping) = &all[0];
        assert_eq!(ping.count, 3);
        assert_eq!(ping.by_status[&200], 2);
        assert_eq!((ping.buckets[0], ping.buckets[3]), (1, 1));
        assert_eq!(
            ping.buckets.iter().sum::<u64>(),
            2,
            "20 s is past every bound"
        );
    }
}
