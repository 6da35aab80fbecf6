//! What a credential proxy lets through: one bucket, one key prefix, optionally read-only.
//! Requests are path-style (`/<bucket>/<key>?<query>`), as the FUSE client sends them.

use std::fmt;

/// The bucket, key prefix and write permission a proxy grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub bucket: String,
    /// Keys must start with this (`""`: the whole bucket). A non-empty prefix should end in `/`.
    pub prefix: String,
    pub read_only: bool,
}

/// Why a request was refused; becomes an S3 `AccessDenied` error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeDenied(pub String);

impl fmt::Display for ScopeDenied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Scope {
    /// Checks one request: method, percent-decoded path, query pairs and the copy source
    /// header (`x-amz-copy-source`), if any.
    pub fn check(
        &self,
        method: &str,
        path: &str,
        query: &[(String, String)],
        copy_source: Option<&str>,
    ) -> Result<(), ScopeDenied> {
        let deny = |why: String| Err(ScopeDenied(why));
        let trimmed = path.trim_start_matches('/');
        let (bucket, key) = match trimmed.split_once('/') {
            Some((bucket, key)) => (bucket, key),
            None => (trimmed, ""),
        };
        if bucket != self.bucket {
            return deny(format!("bucket {bucket:?} is outside this proxy's scope"));
        }
        if key.split('/').any(|segment| segment == "..") {
            return deny("keys with '..' segments are refused".into());
        }
        let reading = matches!(method, "GET" | "HEAD");
        if self.read_only && !reading {
            return deny(format!("{method} on a read-only mount"));
        }
        let has = |name: &str| query.iter().any(|(k, _)| k == name);
        if key.is_empty() {
            // Bucket-level: only listing (V2 or V1), within the prefix.
            if method != "GET" || has("acl") || has("policy") || has("tagging") {
                return deny(format!(
                    "bucket-level {method} other than listing is refused"
                ));
            }
            let prefix = query
                .iter()
                .find(|(k, _)| k == "prefix")
                .map(|(_, v)| v.as_str())
                .unwrap_or("");
            if !prefix.starts_with(&self.prefix) {
                return deny(format!(
                    "listing prefix {prefix:?} is outside {:?}",
                    self.prefix
                ));
            }
            return Ok(());
        }
        if !key.starts_with(&self.prefix) {
            return deny(format!("key {key:?} is outside prefix {:?}", self.prefix));
        }
        if has("acl") || has("policy") || has("tagging") {
            return deny("object ACLs, policies and tags are refused".into());
        }
        if let Some(source) = copy_source {
            let source = source.trim_start_matches('/');
            let source = source.split('?').next().unwrap_or(source);
            let (source_bucket, source_key) = source.split_once('/').unwrap_or((source, ""));
            if source_bucket != self.bucket || !source_key.starts_with(&self.prefix) {
                return deny(format!("copy source {source:?} is outside the scope"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(read_only: bool) -> Scope {
        Scope {
            bucket: "data".into(),
            prefix: "team-a/".into(),
            read_only,
        }
    }

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn objects_inside_the_prefix_pass() {
        let s = scope(false);
        assert!(s.check("GET", "/data/team-a/x.csv", &[], None).is_ok());
        assert!(s.check("PUT", "/data/team-a/dir/y", &[], None).is_ok());
        assert!(s.check("DELETE", "/data/team-a/y", &[], None).is_ok());
        assert!(
            s.check("POST", "/data/team-a/big", &q(&[("uploads", "")]), None)
                .is_ok()
        );
        assert!(
            s.check("PUT", "/data/team-a/b", &[], Some("/data/team-a/a"))
                .is_ok()
        );
    }

    #[test]
    fn everything_else_is_denied() {
        let s = scope(false);
        assert!(s.check("GET", "/other/team-a/x", &[], None).is_err());
        assert!(s.check("GET", "/data/team-b/x", &[], None).is_err());
        assert!(
            s.check("GET", "/data/team-a/../team-b/x", &[], None)
                .is_err()
        );
        assert!(
            s.check("PUT", "/data/team-a/b", &[], Some("/data/team-b/a"))
                .is_err()
        );
        assert!(s.check("PUT", "/data", &[], None).is_err());
        assert!(
            s.check("POST", "/data", &q(&[("delete", "")]), None)
                .is_err()
        );
        assert!(
            s.check(
                "GET",
                "/data",
                &q(&[("list-type", "2"), ("prefix", "")]),
                None
            )
            .is_err()
        );
        assert!(
            s.check("PUT", "/data/team-a/x", &q(&[("acl", "")]), None)
                .is_err()
        );
    }

    #[test]
    fn listing_within_the_prefix_passes() {
        let s = scope(true);
        assert!(
            s.check(
                "GET",
                "/data",
                &q(&[("list-type", "2"), ("prefix", "team-a/sub/")]),
                None
            )
            .is_ok()
        );
        assert!(
            s.check(
                "GET",
                "/data/",
                &q(&[("list-type", "2"), ("prefix", "team-a/")]),
                None
            )
            .is_ok()
        );
    }

    #[test]
    fn read_only_refuses_writes() {
        let s = scope(true);
        assert!(s.check("GET", "/data/team-a/x", &[], None).is_ok());
        assert!(s.check("HEAD", "/data/team-a/x", &[], None).is_ok());
        assert!(s.check("PUT", "/data/team-a/x", &[], None).is_err());
        assert!(s.check("DELETE", "/data/team-a/x", &[], None).is_err());
        assert!(
            s.check("POST", "/data/team-a/x", &q(&[("uploads", "")]), None)
                .is_err()
        );
    }
}
