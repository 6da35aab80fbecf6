//! The Sandbox Durable Object's decisions, in plain Rust so the Worker runs them in wasm
//! and they are unit-tested natively: the id a sandbox name gets, how long an idle
//! container lives (`sleepAfter`, `keepAlive`), and how long a request may keep retrying
//! while the container starts (the 503 budget the reference's clients expect).

use std::time::Duration;

use thiserror::Error;

/// `sleepAfter` when none is given (the reference's default).
pub const DEFAULT_SLEEP_AFTER: Duration = Duration::from_secs(600);
/// The port fsd serves on inside the container.
pub const DAEMON_PORT: u16 = 3000;
/// How long a request may wait for the container, retrying while it answers 503.
pub const RETRY_BUDGET: Duration = Duration::from_secs(120);
/// A retry is not started with less than this left of the budget.
pub const MIN_RETRY_LEFT: Duration = Duration::from_secs(15);
const FIRST_DELAY: Duration = Duration::from_millis(500);
const MAX_DELAY: Duration = Duration::from_secs(8);

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SandboxIdError {
    #[error("sandbox id {id:?}: 1-63 characters, no '-' at either end, not a reserved name")]
    Invalid { id: String },
    #[error("sandbox id {id:?} has uppercase letters: lowercase it or ask for normalizeId")]
    Uppercase { id: String },
}

/// The id a sandbox name stands for: the name itself, lowercased when `normalize` is set
/// (as `getSandbox(ns, id, {normalizeId: true})`); preview hostnames carry ids lowercased,
/// so an id with uppercase letters is refused otherwise.
pub fn sandbox_id(name: &str, normalize: bool) -> Result<String, SandboxIdError> {
    let id = if normalize {
        name.to_ascii_lowercase()
    } else {
        name.to_string()
    };
    if !crate::preview::valid_host_id(&id) {
        return Err(SandboxIdError::Invalid { id });
    }
    if id.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(SandboxIdError::Uppercase { id });
    }
    Ok(id)
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("sleepAfter {given:?}: a number of seconds, or a number followed by s, m or h")]
pub struct SleepAfterError {
    pub given: String,
}

/// Reads `sleepAfter` as the reference does: `"30s"`, `"3m"`, `"1h"`, or seconds (`"600"`).
pub fn parse_sleep_after(text: &str) -> Result<Duration, SleepAfterError> {
    let refused = || SleepAfterError {
        given: text.to_string(),
    };
    let text = text.trim();
    let (number, unit) = match text.char_indices().last() {
        Some((at, 's' | 'm' | 'h')) => text.split_at(at),
        _ => (text, "s"),
    };
    let count: u64 = number.parse().map_err(|_| refused())?;
    let seconds = match unit {
        "s" => Some(count),
        "m" => count.checked_mul(60),
        _ => count.checked_mul(3600),
    };
    seconds
        .filter(|&s| s > 0)
        .map(Duration::from_secs)
        .ok_or_else(refused)
}

/// When the container should be put to sleep, given its last activity: `None` while it is
/// kept alive. Times are milliseconds since the epoch, as the Workers clock gives them.
pub fn sleep_due(last_activity_ms: i64, sleep_after: Duration, keep_alive: bool) -> Option<i64> {
    if keep_alive {
        return None;
    }
    let after = i64::try_from(sleep_after.as_millis()).unwrap_or(i64::MAX);
    Some(last_activity_ms.saturating_add(after))
}

/// The wait before retry number `attempt` (0 is the first retry) of a request that got 503
/// from a starting container, begun `elapsed` ago; `None` when the budget does not allow
/// another. Delays double from 0.5 s up to 8 s.
pub fn retry_delay(attempt: u32, elapsed: Duration) -> Option<Duration> {
    let left = RETRY_BUDGET.checked_sub(elapsed)?;
    if left < MIN_RETRY_LEFT {
        return None;
    }
    let delay = FIRST_DELAY
        .checked_mul(2u32.saturating_pow(attempt.min(16)))
        .unwrap_or(MAX_DELAY)
        .min(MAX_DELAY);
    Some(
        delay
            .min(left - MIN_RETRY_LEFT)
            .max(Duration::from_millis(1)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_host_rules_and_normalisation() {
        assert_eq!(sandbox_id("box-1", false).as_deref(), Ok("box-1"));
        assert_eq!(sandbox_id("Box-1", true).as_deref(), Ok("box-1"));
        assert!(matches!(
            sandbox_id("Box-1", false),
            Err(SandboxIdError::Uppercase { .. })
        ));
        for bad in ["", "-a", "a-", "www", "API", "workers", &"x".repeat(64)] {
            assert!(sandbox_id(bad, true).is_err(), "{bad:?}");
        }
        assert!(sandbox_id(&"x".repeat(63), false).is_ok());
    }

    #[test]
    fn sleep_after_reads_as_the_reference() {
        assert_eq!(parse_sleep_after("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_sleep_after("3m"), Ok(Duration::from_secs(180)));
        assert_eq!(parse_sleep_after("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_sleep_after("600"), Ok(DEFAULT_SLEEP_AFTER));
        for bad in [
            "",
            "0",
            "0m",
            "m",
            "-5s",
            "1d",
            "1.5m",
            "99999999999999999999h",
        ] {
            assert!(parse_sleep_after(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sleep_is_due_after_idle_unless_kept_alive() {
        assert_eq!(
            sleep_due(1_000, Duration::from_secs(30), false),
            Some(31_000)
        );
        assert_eq!(sleep_due(1_000, Duration::from_secs(30), true), None);
        assert_eq!(
            sleep_due(i64::MAX - 5, Duration::from_secs(30), false),
            Some(i64::MAX)
        );
    }

    #[test]
    fn retries_double_and_stop_with_fifteen_seconds_left() {
        assert_eq!(retry_delay(0, Duration::ZERO), Some(FIRST_DELAY));
        assert_eq!(retry_delay(1, Duration::ZERO), Some(Duration::from_secs(1)));
        assert_eq!(retry_delay(10, Duration::ZERO), Some(MAX_DELAY));
        // Never past the point where 15 s would be left.
        assert_eq!(
            retry_delay(10, Duration::from_secs(103)),
            Some(Duration::from_secs(2))
        );
        assert_eq!(retry_delay(0, Duration::from_secs(106)), None);
        assert_eq!(retry_delay(0, Duration::from_secs(500)), None);
    }
}
