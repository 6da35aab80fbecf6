//! Timestamps as the reference writes them: RFC 3339, UTC, milliseconds, `Z`.

use chrono::{DateTime, SecondsFormat, Utc};

pub fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Seconds and nanoseconds since the epoch (from `stat`), as RFC 3339.
pub fn unix_rfc3339(secs: i64, nanos: i64) -> String {
    DateTime::<Utc>::from_timestamp(secs, u32::try_from(nanos).unwrap_or(0))
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_millis_and_z() {
        assert_eq!(unix_rfc3339(0, 5_000_000), "1970-01-01T00:00:00.005Z");
        let now = now_rfc3339();
        assert_eq!(now.len(), 24, "{now}");
        assert!(now.ends_with('Z'));
    }
}
