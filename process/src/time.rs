//! Timestamps as the reference writes them: RFC 3339, UTC, milliseconds, `Z`.

use chrono::{SecondsFormat, Utc};

pub fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}
