//! Backups as both sides keep them in the bucket, in plain Rust so `fsctl` and the Worker
//! read and write them alike: the keys (`backups/<id>/data.sqsh`, `backups/<id>/meta.json`),
//! the meta document, and the TTL rule (refused from 60 s before expiry, as the reference).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Default time to live: 3 days, as the reference.
pub const DEFAULT_TTL_SECS: u64 = 259_200;
/// A backup this close to expiry is refused, as the reference does.
const EXPIRY_BUFFER_MS: i64 = 60_000;

/// The archive's key.
pub fn data_key(id: &str) -> String {
    format!("backups/{id}/data.sqsh")
}

/// The meta document's key.
pub fn meta_key(id: &str) -> String {
    format!("backups/{id}/meta.json")
}

/// `backups/<id>/meta.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BackupMeta {
    pub id: String,
    pub dir: String,
    pub name: Option<String>,
    pub size_bytes: u64,
    /// Seconds.
    pub ttl: u64,
    /// RFC 3339.
    pub created_at: String,
    /// fsd: SHA-256 of the archive, checked after download.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// fsd: for a layer, the backup it stacks on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

impl BackupMeta {
    /// When the backup stops being restorable.
    pub fn expires_at(&self) -> Option<DateTime<Utc>> {
        let created = DateTime::parse_from_rfc3339(&self.created_at)
            .ok()?
            .with_timezone(&Utc);
        Some(created + chrono::Duration::seconds(self.ttl as i64))
    }

    /// Whether it may no longer be restored at `now` (or its time cannot be read).
    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at()
            .is_none_or(|at| now + chrono::Duration::milliseconds(EXPIRY_BUFFER_MS) > at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(created_at: &str, ttl: u64) -> BackupMeta {
        BackupMeta {
            id: "x".into(),
            dir: "/workspace".into(),
            name: None,
            size_bytes: 1,
            ttl,
            created_at: created_at.into(),
            sha256: None,
            parent: None,
        }
    }

    #[test]
    fn expiry_has_a_sixty_second_buffer() {
        let now = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        // The reference refuses when now + 60 s > createdAt + ttl.
        assert!(!meta("2026-01-01T00:00:00Z", 60).expired(now));
        assert!(meta("2026-01-01T00:00:00Z", 59).expired(now));
        assert!(meta("2025-12-31T00:00:00Z", 3600).expired(now));
        assert!(meta("not a date", 3600).expired(now));
    }
}
