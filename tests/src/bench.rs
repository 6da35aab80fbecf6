//! What the benchmarks share: percentiles and milliseconds.

use std::time::Duration;

/// The `pct`th percentile of `samples` (sorted in place), nearest rank.
pub fn pct(samples: &mut [Duration], pct: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * pct / 100.0).round() as usize]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
