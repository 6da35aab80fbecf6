//! The sandbox side's one retry policy for object-store requests: the bucket mount's object
//! client and the backup transfers over presigned URLs both retry by it. (The trusted side
//! uses aws-sdk-s3, whose standard retry policy it keeps; see docs/architecture.md.) Pure
//! arithmetic, so it builds without the `client` feature.

use std::time::Duration;

/// Attempts per request, and the first backoff (doubled after each failed attempt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub backoff: Duration,
}

impl Default for RetryPolicy {
    /// Four attempts, 250 ms then 500 ms then 1 s apart: a store that restarts or sheds
    /// load for about two seconds is ridden out; one that is down fails within them.
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            backoff: Duration::from_millis(250),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt `attempt` (1-based), or `None` when it was the last.
    pub fn delay_after(&self, attempt: u32) -> Option<Duration> {
        (attempt < self.attempts.max(1)).then(|| {
            self.backoff
                .saturating_mul(1 << attempt.saturating_sub(1).min(16))
        })
    }
}

/// Whether an HTTP status is worth another attempt: the store was broken (5xx), timed the
/// request out (408) or shed load (429). Every other answer is final.
pub fn transient_status(status: u16) -> bool {
    status >= 500 || status == 408 || status == 429
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_stops_at_the_last_attempt() {
        let policy = RetryPolicy::default();
        let delays: Vec<_> = (1..=5).map(|n| policy.delay_after(n)).collect();
        let ms = Duration::from_millis;
        assert_eq!(
            delays,
            [Some(ms(250)), Some(ms(500)), Some(ms(1000)), None, None]
        );
        let once = RetryPolicy {
            attempts: 0,
            backoff: ms(1),
        };
        assert_eq!(once.delay_after(1), None, "zero attempts still makes one");
    }

    #[test]
    fn only_broken_timed_out_or_busy_answers_are_retried() {
        for status in [500, 502, 503, 504, 408, 429] {
            assert!(transient_status(status), "{status}");
        }
        for status in [200, 301, 400, 401, 403, 404, 409, 412] {
            assert!(!transient_status(status), "{status}");
        }
    }
}
