//! Bucket mounts served by a Durable Object's credential proxy: the container's FUSE client
//! sends unsigned requests to [`PROXY_HOST`], which the object intercepts; the Worker routes
//! them by the object's id in the path, and the object by the mount's token after it.
//!
//! A mount's proxy URL is `http://<PROXY_HOST>/<object id>/<token>`: the object id is the
//! Durable Object's own (64 hex digits, what `idFromString` takes), and the token (128
//! random bits) is the mount's secret, so a container can only use the mounts it was given;
//! a request naming another sandbox's object still needs that sandbox's token.

use serde::{Deserialize, Serialize};

use crate::scope::Scope;

/// The host the container's mounts send their requests to; never resolvable outside.
pub const PROXY_HOST: &str = "s3-credential-proxy.internal";

/// The proxy URL a mount is given by the object `object_id`.
pub fn proxy_url(object_id: &str, token: &str) -> String {
    format!("http://{PROXY_HOST}/{object_id}/{token}")
}

/// A mount's token from 16 random bytes, hex.
pub fn token(random: [u8; 16]) -> String {
    fsd_api::hex::lower(&random)
}

/// Splits an intercepted request's path into the object id and the rest (`/<token>/…`),
/// which that object checks. `None` without a well-formed object id.
pub fn route(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix('/')?;
    let at = rest.find('/')?;
    let (id, rest) = rest.split_at(at);
    let object_id = id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    object_id.then_some((id, rest))
}

/// One mount as the object keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedMount {
    pub mount_path: String,
    pub token: String,
    pub bucket: String,
    /// Normalised key prefix (`"team/"`, or `""` for the whole bucket).
    pub prefix: String,
    pub read_only: bool,
}

impl SavedMount {
    pub fn scope(&self) -> Scope {
        Scope {
            bucket: self.bucket.clone(),
            prefix: self.prefix.clone(),
            read_only: self.read_only,
        }
    }
}

/// Why a mount was refused before anything was asked of the container.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MountRuleError {
    #[error("mountPath must be an absolute path")]
    RelativePath,
    #[error("{0} is already mounted")]
    AlreadyMounted(String),
    #[error("bucket {0:?} is not a valid bucket name")]
    BadBucket(String),
    #[error("prefix must not contain '..'")]
    BadPrefix,
}

/// A sandbox's mounts, as saved in its object's storage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxMounts {
    mounts: Vec<SavedMount>,
}

impl SandboxMounts {
    pub fn from_saved(mounts: Vec<SavedMount>) -> Self {
        Self { mounts }
    }

    pub fn saved(&self) -> &[SavedMount] {
        &self.mounts
    }

    /// Checks a new mount and adds it with `token`; answers the saved record.
    pub fn add(
        &mut self,
        mount_path: &str,
        bucket: &str,
        prefix: &str,
        read_only: bool,
        token: String,
    ) -> Result<SavedMount, MountRuleError> {
        if !mount_path.starts_with('/') {
            return Err(MountRuleError::RelativePath);
        }
        let mount_path = mount_path.trim_end_matches('/');
        let mount_path = if mount_path.is_empty() {
            "/"
        } else {
            mount_path
        };
        if self.mounts.iter().any(|m| m.mount_path == mount_path) {
            return Err(MountRuleError::AlreadyMounted(mount_path.to_string()));
        }
        if !valid_bucket(bucket) {
            return Err(MountRuleError::BadBucket(bucket.to_string()));
        }
        if prefix.split('/').any(|segment| segment == "..") {
            return Err(MountRuleError::BadPrefix);
        }
        let prefix = normalize_prefix(prefix);
        let mount = SavedMount {
            mount_path: mount_path.to_string(),
            token,
            bucket: bucket.to_string(),
            prefix,
            read_only,
        };
        self.mounts.push(mount.clone());
        Ok(mount)
    }

    /// Forgets the mount at `mount_path`; answers it, if there was one.
    pub fn remove(&mut self, mount_path: &str) -> Option<SavedMount> {
        let mount_path = mount_path.trim_end_matches('/');
        let at = self
            .mounts
            .iter()
            .position(|m| m.mount_path == mount_path)?;
        Some(self.mounts.remove(at))
    }

    /// The mount whose token starts `path` (`/<token>/…`), and the path after the token.
    pub fn by_token<'p>(&self, path: &'p str) -> Option<(&SavedMount, &'p str)> {
        let rest = path.strip_prefix('/')?;
        let (first, after) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let mount = self
            .mounts
            .iter()
            .find(|m| crate::preview::tokens_match(first, &m.token))?;
        Some((mount, if after.is_empty() { "/" } else { after }))
    }
}

/// The reference's bucket name rule (`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`).
pub fn valid_bucket(bucket: &str) -> bool {
    let bytes = bucket.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (1..=63).contains(&bytes.len())
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| edge(b) || matches!(b, b'.' | b'-'))
}

/// `"/team/a"` → `"team/a/"`; `""` and `"/"` → `""` (the whole bucket), as the daemon's
/// mounts read a prefix.
pub fn normalize_prefix(prefix: &str) -> String {
    let trimmed = prefix.trim_matches('/');
    if trimmed.is_empty() {
        String::new()
    } else {
        format!("{trimmed}/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intercepted_paths_route_by_object_id() {
        let id = "0123456789abcdef".repeat(4);
        assert_eq!(
            route(&format!("/{id}/tok/b/k")),
            Some((id.as_str(), "/tok/b/k"))
        );
        assert_eq!(route(&format!("/{id}/tok")), Some((id.as_str(), "/tok")));
        let upper = id.to_uppercase();
        let short = &id[1..];
        for refused in [
            format!("/{id}"),
            format!("//{id}/tok"),
            format!("{id}/tok"),
            format!("/{upper}/tok"),
            format!("/{short}/tok"),
            "/my-box/tok/b".to_string(),
            String::new(),
        ] {
            assert_eq!(route(&refused), None, "{refused}");
        }
        assert_eq!(
            proxy_url(&id, "0a1b"),
            format!("http://s3-credential-proxy.internal/{id}/0a1b")
        );
        assert_eq!(token([0xab; 16]).len(), 32);
    }

    #[test]
    fn mounts_are_checked_kept_and_found_by_token() {
        let mut mounts = SandboxMounts::default();
        let added = mounts
            .add("/data/", "my-bucket", "/team/a", true, "t1".into())
            .expect("added");
        assert_eq!(added.mount_path, "/data");
        assert_eq!(added.prefix, "team/a/");
        assert_eq!(
            added.scope(),
            Scope {
                bucket: "my-bucket".into(),
                prefix: "team/a/".into(),
                read_only: true
            }
        );
        assert_eq!(
            mounts.add("/data", "my-bucket", "", false, "t2".into()),
            Err(MountRuleError::AlreadyMounted("/data".into()))
        );
        assert_eq!(
            mounts.add("data", "my-bucket", "", false, "t2".into()),
            Err(MountRuleError::RelativePath)
        );
        assert_eq!(
            mounts.add("/x", "My_Bucket", "", false, "t2".into()),
            Err(MountRuleError::BadBucket("My_Bucket".into()))
        );
        assert_eq!(
            mounts.add("/x", "my-bucket", "/a/../b", false, "t2".into()),
            Err(MountRuleError::BadPrefix)
        );
        mounts
            .add("/other", "my-bucket", "", false, "t2".into())
            .expect("second mount");

        let (found, rest) = mounts.by_token("/t1/my-bucket/team/a/x").expect("t1");
        assert_eq!(
            (found.mount_path.as_str(), rest),
            ("/data", "/my-bucket/team/a/x")
        );
        assert_eq!(
            mounts.by_token("/t2").map(|(m, r)| (m.token.as_str(), r)),
            Some(("t2", "/"))
        );
        assert!(mounts.by_token("/t3/my-bucket").is_none());
        assert!(
            mounts.by_token("/t/my-bucket").is_none(),
            "a token's prefix is not it"
        );

        let restored = SandboxMounts::from_saved(mounts.saved().to_vec());
        assert_eq!(restored, mounts);
        assert_eq!(mounts.remove("/data/").map(|m| m.token), Some("t1".into()));
        assert!(mounts.by_token("/t1/my-bucket").is_none());
        assert_eq!(mounts.remove("/data"), None);
    }

    #[test]
    fn bucket_names_follow_the_reference() {
        for good in ["a", "my-bucket", "b.c", "0abc9"] {
            assert!(valid_bucket(good), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a:b", &"a".repeat(64)] {
            assert!(!valid_bucket(bad), "{bad}");
        }
    }
}
