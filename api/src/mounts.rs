//! Bucket mounts: `POST /api/mounts`, `DELETE /api/mounts`, `GET /api/mounts`. The
//! reference mounts from its Durable Object through exec; fsd serves the mount itself.

use serde::{Deserialize, Serialize};

/// Keys for signing requests in the sandbox, when no credential proxy is used.
#[derive(Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MountCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for MountCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MountCredentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MountBucketRequest {
    pub bucket: String,
    /// Absolute; made if missing (and then removed again at unmount).
    pub mount_path: String,
    /// The store, signed in the sandbox with `credentials` (or the daemon's
    /// `AWS_*`/`R2_*` environment). Exactly one of `endpoint` and `proxyUrl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// A credential proxy on the trusted side (`fsctl proxy`, the SDK's mount_bucket):
    /// requests go out unsigned and no key enters the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_url: Option<String>,
    /// Key prefix to show as the mount's root; starts with `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// `r2`, `s3`, `gcs` or another S3-compatible store; guessed from `endpoint` if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Signing region; `auto` for R2, else `us-east-1` unless given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<MountCredentials>,
    /// How long attributes, listings and absent names are cached (ms, default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_ttl_ms: Option<u64>,
}

/// One active mount.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BucketMountInfo {
    pub mount_path: String,
    pub bucket: String,
    /// Normalized: empty, or ending in `/`.
    pub prefix: String,
    pub read_only: bool,
    /// The store or proxy URL requests go to.
    pub endpoint: String,
    pub provider: String,
    /// Through a credential proxy: no secret key in the sandbox.
    pub via_proxy: bool,
    /// fsd made the mount directory, and removes it at unmount.
    pub created_dir: bool,
    pub mounted_at: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MountBucketResponse {
    pub success: bool,
    pub mount: BucketMountInfo,
    pub timestamp: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct UnmountBucketRequest {
    pub mount_path: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct UnmountBucketResponse {
    pub success: bool,
    pub mount_path: String,
    /// The mount directory was removed (fsd had made it).
    pub removed_dir: bool,
    pub timestamp: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ListMountsResponse {
    pub success: bool,
    pub mounts: Vec<BucketMountInfo>,
    pub timestamp: String,
}
