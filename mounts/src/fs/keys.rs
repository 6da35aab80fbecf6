//! How paths in the mount map to object keys: a file `a/b` is the object `<prefix>a/b`, a
//! directory `a` is every key under `<prefix>a/` (plus, when made here, the empty marker
//! object `<prefix>a/`).

use std::time::SystemTime;

use fsd_s3::{Listing, ObjectInfo};

use crate::fs::tree::{Entry, Kind};

/// `prefix` as keys are built from it: empty, or ending in `/` (a leading `/` is dropped).
/// The credential proxies' scopes read a prefix by the same rule.
pub use fsd_control::mounts::normalize_prefix;

/// The object key of the file at `path` (`path` relative to the mount root).
pub fn file_key(prefix: &str, path: &str) -> String {
    format!("{prefix}{path}")
}

/// The key prefix that holds the directory at `path` (`prefix` itself for the root).
pub fn dir_key(prefix: &str, path: &str) -> String {
    if path.is_empty() {
        prefix.to_string()
    } else {
        format!("{prefix}{path}/")
    }
}

/// The longest name a directory entry may have, in bytes.
const NAME_MAX: usize = 255;

/// Whether `name` can be a path segment: S3 keys can hold names a directory entry cannot.
pub fn usable_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_MAX
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\0')
}

/// The entries of the directory whose keys start with `dir`. A name that is both an object
/// and a prefix shows as the directory (the object is shadowed, as in mountpoint-s3).
pub fn entries(listing: &Listing, dir: &str) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    let mut dirs = std::collections::HashSet::new();
    for prefix in &listing.prefixes {
        let Some(name) = prefix.strip_prefix(dir).map(|n| n.trim_end_matches('/')) else {
            continue;
        };
        if usable_name(name) && dirs.insert(name.to_string()) {
            out.push(Entry {
                name: name.to_string(),
                kind: Kind::Dir,
                size: 0,
                mtime: SystemTime::UNIX_EPOCH,
                etag: String::new(),
            });
        }
    }
    for object in &listing.objects {
        let Some(name) = object.key.strip_prefix(dir) else {
            continue;
        };
        if usable_name(name) && !dirs.contains(name) {
            out.push(file_entry(name, object));
        }
    }
    out
}

pub fn file_entry(name: &str, object: &ObjectInfo) -> Entry {
    Entry {
        name: name.to_string(),
        kind: Kind::File,
        size: object.size,
        mtime: parse_time(&object.last_modified),
        etag: object.etag.clone(),
    }
}

/// RFC 3339 (listings) or an HTTP date (HEAD); the epoch when neither parses.
pub fn parse_time(text: &str) -> SystemTime {
    chrono::DateTime::parse_from_rfc3339(text)
        .or_else(|_| chrono::DateTime::parse_from_rfc2822(text))
        .map(SystemTime::from)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(key: &str, size: u64) -> ObjectInfo {
        ObjectInfo {
            key: key.into(),
            size,
            etag: String::new(),
            last_modified: "2026-01-02T03:04:05.000Z".into(),
        }
    }

    #[test]
    fn prefixes_are_normalized() {
        assert_eq!(normalize_prefix(""), "");
        assert_eq!(normalize_prefix("/"), "");
        assert_eq!(normalize_prefix("/data"), "data/");
        assert_eq!(normalize_prefix("data/x/"), "data/x/");
        assert_eq!(dir_key("data/", ""), "data/");
        assert_eq!(dir_key("data/", "a/b"), "data/a/b/");
        assert_eq!(file_key("data/", "a/b"), "data/a/b");
    }

    #[test]
    fn listings_become_entries() {
        let listing = Listing {
            objects: vec![
                object("d/", 0),
                object("d/file.txt", 5),
                object("d/sub", 9),
                object("d/..", 1),
            ],
            prefixes: vec!["d/sub/".into(), "d/other/".into(), "d//".into()],
        };
        let entries = entries(&listing, "d/");
        let names: Vec<(&str, Kind)> = entries.iter().map(|e| (e.name.as_str(), e.kind)).collect();
        assert_eq!(
            names,
            vec![
                ("sub", Kind::Dir),
                ("other", Kind::Dir),
                ("file.txt", Kind::File)
            ]
        );
        assert_eq!(entries[2].size, 5);
        assert_ne!(entries[2].mtime, SystemTime::UNIX_EPOCH);
    }

    #[test]
    fn http_dates_parse() {
        assert_ne!(
            parse_time("Sun, 22 Nov 2026 19:00:00 GMT"),
            SystemTime::UNIX_EPOCH
        );
        assert_eq!(parse_time("garbage"), SystemTime::UNIX_EPOCH);
    }
}
