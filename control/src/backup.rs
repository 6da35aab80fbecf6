//! Backups as both sides keep them in the bucket, in plain Rust so `fsctl` and the Worker
//! read and write them alike: the keys (`backups/<id>/data.sqsh`, `backups/<id>/meta.json`),
//! the meta document, the TTL rule (refused from 60 s before expiry, as the reference), the
//! multipart upload's sizes and documents, and the final event of the daemon's
//! progress streams.

use chrono::{DateTime, Utc};
pub use fsd_api::backup::SnapshotChanges;
use serde::{Deserialize, Serialize};

/// Default time to live: 3 days, as the reference.
pub const DEFAULT_TTL_SECS: u64 = 259_200;
/// A backup this close to expiry is refused, as the reference does.
const EXPIRY_BUFFER_MS: i64 = 60_000;

/// Where archives live in the sandbox.
pub const ARCHIVE_DIR: &str = "/var/backups";
/// Part URLs presigned per upload; the daemon uses as many as the archive needs.
pub const PART_URLS: usize = 64;
/// Smallest part: 8 MiB (above S3's and R2's 5 MiB floor).
pub const MIN_PART_SIZE: u64 = 8 * 1024 * 1024;

/// The archive of backup `id` in the sandbox.
pub fn archive_path(id: &str) -> String {
    format!("{ARCHIVE_DIR}/{id}.sqsh")
}

/// The archive's key.
pub fn data_key(id: &str) -> String {
    format!("backups/{id}/data.sqsh")
}

/// The meta document's key.
pub fn meta_key(id: &str) -> String {
    format!("backups/{id}/meta.json")
}

/// The snapshot index's key (what the next incremental snapshot compares the tree with).
pub fn index_key(id: &str) -> String {
    format!("backups/{id}/index.zst")
}

/// Longest chain of incremental snapshots: the next one after a snapshot this deep is full.
/// A restore mounts every archive of the chain as an overlay lower layer; 16 keeps that
/// cheap and bounds what one lost archive takes with it.
pub const MAX_CHAIN_DEPTH: u8 = 16;

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
    /// fsd: the depth of an incremental snapshot in its chain (0 or absent: a full one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u8>,
    /// fsd: the snapshot's index is stored (`index_key`): it can be the parent of an
    /// incremental snapshot, and listed and compared without its archive.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub indexed: bool,
    /// fsd, incremental snapshots: how the tree differed from the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<SnapshotChanges>,
    /// fsd: what the snapshot left out, so it is compared with the live tree the same way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excludes: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gitignore: bool,
    /// fsd: the directory's change token when the snapshot was taken: the next snapshot
    /// asks the daemon what changed since it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
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

/// The snapshot a new snapshot of `dir` taken at `now` builds on: the newest snapshot of
/// `dir`, when it is indexed, not a restored directory's layer, less deep than
/// [`MAX_CHAIN_DEPTH`], and not expired. `None`: take a full snapshot.
///
/// A TTL is the restorability of the snapshot it is set on: the snapshots below it in its
/// chain are its data, restored with it after their own TTL has passed (and retention keeps
/// them while it is kept).
pub fn incremental_parent<'a>(
    snapshots: &'a [BackupMeta],
    dir: &str,
    now: DateTime<Utc>,
) -> Option<&'a BackupMeta> {
    let newest = snapshots
        .iter()
        .filter(|meta| meta.dir == dir)
        .filter_map(|meta| Some((DateTime::parse_from_rfc3339(&meta.created_at).ok()?, meta)))
        .max_by_key(|(created, _)| *created)?
        .1;
    let layer_of_restore = newest.parent.is_some() && newest.depth.is_none();
    (newest.indexed
        && !layer_of_restore
        && newest.depth.unwrap_or(0) < MAX_CHAIN_DEPTH
        && !newest.expired(now))
    .then_some(newest)
}

/// The snapshots built on `id` (its layers and incremental snapshots: their `parent`), in
/// the order given. A snapshot with any is not deleted: they would stop restoring.
pub fn dependents<'a>(snapshots: &'a [BackupMeta], id: &str) -> Vec<&'a BackupMeta> {
    snapshots
        .iter()
        .filter(|meta| meta.parent.as_deref() == Some(id))
        .collect()
}

/// The refusal of a delete of a snapshot others build on: the message names them.
pub fn dependents_refusal(id: &str, dependents: &[&BackupMeta]) -> String {
    let ids: Vec<&str> = dependents.iter().map(|meta| meta.id.as_str()).collect();
    format!(
        "backup {id} has {} snapshot{} built on it ({}): deleting it would break them; delete \
         them first (newest first), or let `fsctl backup forget` choose",
        ids.len(),
        if ids.len() == 1 { "" } else { "s" },
        ids.join(", ")
    )
}

/// `ids` in an order in which each is deleted before what it is built on (a snapshot before
/// its parent), so every delete of a retention decision is allowed when it comes.
pub fn deletion_order(snapshots: &[BackupMeta], ids: &[String]) -> Vec<String> {
    let depth = |id: &str| {
        let mut depth = 0usize;
        let mut at = id.to_string();
        while let Some(parent) = snapshots
            .iter()
            .find(|meta| meta.id == at)
            .and_then(|meta| meta.parent.clone())
        {
            depth += 1;
            at = parent;
            if depth > snapshots.len() {
                break;
            }
        }
        depth
    };
    let mut ordered: Vec<(usize, String)> = ids.iter().map(|id| (depth(id), id.clone())).collect();
    ordered.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    ordered.into_iter().map(|(_, id)| id).collect()
}

/// The backup ids a `ListObjectsV2` page (prefix `backups/`, delimiter `/`) names in its
/// common prefixes, and the token of the next page when it is truncated.
pub fn listed_backups(page: &str) -> (Vec<String>, Option<String>) {
    let ids = elements(page, "Prefix")
        .filter_map(|prefix| {
            let id = prefix.strip_prefix("backups/")?.trim_end_matches('/');
            (!id.is_empty() && !id.contains('/')).then(|| id.to_string())
        })
        .collect();
    let next = elements(page, "IsTruncated")
        .any(|truncated| truncated == "true")
        .then(|| elements(page, "NextContinuationToken").next())
        .flatten();
    (ids, next)
}

/// The text of each `<tag>…</tag>` in `document`, unescaped, in order.
fn elements<'a>(document: &'a str, tag: &'a str) -> impl Iterator<Item = String> + 'a {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut rest = document;
    std::iter::from_fn(move || {
        let start = rest.find(&open)? + open.len();
        let len = rest[start..].find(&close)?;
        let text = crate::xml::unescape(rest[start..start + len].trim());
        rest = &rest[start + len + close.len()..];
        Some(text)
    })
}

/// The `UploadId` of a `CreateMultipartUpload` answer.
pub fn upload_id(answer: &str) -> Option<String> {
    let start = answer.find("<UploadId>")? + "<UploadId>".len();
    let len = answer[start..].find("</UploadId>")?;
    let id = answer[start..start + len].trim();
    (!id.is_empty()).then(|| crate::xml::unescape(id))
}

/// The body of a `CompleteMultipartUpload`: the parts, by number, with their ETags.
pub fn complete_multipart_body(parts: &[(u32, String)]) -> String {
    let mut sorted: Vec<&(u32, String)> = parts.iter().collect();
    sorted.sort_by_key(|(number, _)| *number);
    let mut body = String::from("<CompleteMultipartUpload>");
    for (number, etag) in sorted {
        body.push_str(&format!(
            "<Part><PartNumber>{number}</PartNumber><ETag>{}</ETag></Part>",
            crate::xml::escape(etag)
        ));
    }
    body.push_str("</CompleteMultipartUpload>");
    body
}

/// The data of the last event of a server-sent event stream (the daemon's backup routes end
/// theirs with a `complete` or an `error` event).
pub fn last_event_data(stream: &str) -> Option<String> {
    let mut last = None;
    let mut current: Vec<&str> = Vec::new();
    for line in stream.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if !current.is_empty() {
                last = Some(current.join("\n"));
                current.clear();
            }
        } else if let Some(data) = line.strip_prefix("data:") {
            current.push(data.strip_prefix(' ').unwrap_or(data));
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipart_documents() {
        let answer = "<?xml version=\"1.0\"?><InitiateMultipartUploadResult><Bucket>b</Bucket>\
            <Key>k</Key><UploadId> a&amp;b~1 </UploadId></InitiateMultipartUploadResult>";
        assert_eq!(upload_id(answer).as_deref(), Some("a&b~1"));
        assert_eq!(upload_id("<UploadId></UploadId>"), None);
        assert_eq!(upload_id("<Error/>"), None);
        let body = complete_multipart_body(&[(2, "\"e2\"".into()), (1, "\"e1\"".into())]);
        assert_eq!(
            body,
            "<CompleteMultipartUpload>\
             <Part><PartNumber>1</PartNumber><ETag>&quot;e1&quot;</ETag></Part>\
             <Part><PartNumber>2</PartNumber><ETag>&quot;e2&quot;</ETag></Part>\
             </CompleteMultipartUpload>"
        );
        assert_eq!(archive_path("x"), "/var/backups/x.sqsh");
    }

    #[test]
    fn listed_backups_come_from_common_prefixes() {
        let page = "<ListBucketResult><Name>b</Name><Prefix>backups/</Prefix>\
            <IsTruncated>true</IsTruncated>\
            <CommonPrefixes><Prefix>backups/a1/</Prefix></CommonPrefixes>\
            <CommonPrefixes><Prefix>backups/b&amp;2/</Prefix></CommonPrefixes>\
            <NextContinuationToken>t&amp;1</NextContinuationToken></ListBucketResult>";
        let (ids, next) = listed_backups(page);
        assert_eq!(ids, ["a1", "b&2"]);
        assert_eq!(next.as_deref(), Some("t&1"));
        let last = "<ListBucketResult><Prefix>backups/</Prefix><IsTruncated>false</IsTruncated>\
            <CommonPrefixes><Prefix>backups/c3/</Prefix></CommonPrefixes></ListBucketResult>";
        assert_eq!(listed_backups(last), (vec!["c3".to_string()], None));
    }

    #[test]
    fn the_last_event_of_a_stream() {
        let stream = "data: {\"type\":\"progress\"}\n\n: comment\n\ndata: {\"type\":\n\
                      data: \"complete\"}\n\n";
        assert_eq!(
            last_event_data(stream).as_deref(),
            Some("{\"type\":\n\"complete\"}")
        );
        let unterminated = "data: {\"a\":1}\n\ndata:{\"b\":2}";
        assert_eq!(last_event_data(unterminated).as_deref(), Some("{\"b\":2}"));
        assert_eq!(last_event_data(": only a comment\n\n"), None);
    }

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
            depth: None,
            indexed: true,
            changes: None,
            excludes: Vec::new(),
            gitignore: false,
            token: None,
        }
    }

    #[test]
    fn an_incremental_snapshot_builds_on_the_newest_usable_one() {
        let now = DateTime::parse_from_rfc3339("2026-01-02T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let day = 86_400;
        let older = BackupMeta {
            id: "older".into(),
            ..meta("2026-01-01T00:00:00Z", 10 * day)
        };
        let newest = BackupMeta {
            id: "newest".into(),
            depth: Some(3),
            parent: Some("older".into()),
            ..meta("2026-01-01T12:00:00Z", 10 * day)
        };
        let other_dir = BackupMeta {
            id: "other".into(),
            dir: "/workspace/other".into(),
            ..meta("2026-01-01T23:00:00Z", 10 * day)
        };
        let all = vec![older.clone(), newest.clone(), other_dir];
        let parent = |all: &[BackupMeta], _| {
            incremental_parent(all, "/workspace", now).map(|m| m.id.clone())
        };
        assert_eq!(parent(&all, day).as_deref(), Some("newest"));
        // The newest has expired: a full one.
        let expired = vec![BackupMeta {
            ttl: 60,
            ..newest.clone()
        }];
        assert_eq!(parent(&expired, day), None);
        // The chain is as deep as allowed.
        let deep = vec![BackupMeta {
            depth: Some(MAX_CHAIN_DEPTH),
            ..newest.clone()
        }];
        assert_eq!(parent(&deep, day), None);
        // No index stored, or a restored directory's layer (parent without depth).
        let unindexed = vec![BackupMeta {
            indexed: false,
            ..newest.clone()
        }];
        assert_eq!(parent(&unindexed, day), None);
        let layer = vec![BackupMeta {
            depth: None,
            ..newest.clone()
        }];
        assert_eq!(parent(&layer, day), None);
        assert_eq!(parent(&[], day), None);
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

    #[test]
    fn a_snapshot_others_build_on_is_named_with_them_and_deleted_after_them() {
        let chain = |id: &str, parent: Option<&str>| BackupMeta {
            id: id.into(),
            parent: parent.map(str::to_string),
            ..meta("2026-01-01T00:00:00Z", 3600)
        };
        let snapshots = [
            chain("full", None),
            chain("l1", Some("full")),
            chain("l2", Some("l1")),
            chain("branch", Some("full")),
            chain("alone", None),
        ];
        let named: Vec<&str> = dependents(&snapshots, "full")
            .iter()
            .map(|meta| meta.id.as_str())
            .collect();
        assert_eq!(named, ["l1", "branch"]);
        assert!(dependents(&snapshots, "l2").is_empty());
        let message = dependents_refusal("full", &dependents(&snapshots, "full"));
        assert!(
            message.contains("2 snapshots built on it (l1, branch)"),
            "{message}"
        );
        let ids: Vec<String> = ["full", "alone", "l1", "l2"].map(String::from).into();
        assert_eq!(
            deletion_order(&snapshots, &ids),
            ["l2", "l1", "alone", "full"]
        );
    }
}
