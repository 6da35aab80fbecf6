//! Mounting a bucket without handing the sandbox a key: a credential proxy scoped to the
//! mount (bucket, prefix, read-only) runs here, on the trusted side, and the daemon's FUSE
//! client sends it unsigned requests.

use std::net::SocketAddr;

use fsd_api::mounts::{BucketMountInfo, MountBucketRequest};
use fsd_control::Scope;
use fsd_s3::CredentialProxy;

use super::access::BucketAccess;
use fsd_sdk::{Sandbox, SdkError};

/// Where a mount goes and what it may do.
#[derive(Debug, Clone, Default)]
pub struct MountOptions {
    /// Key prefix shown as the mount's root (`/data`); empty for the whole bucket.
    pub prefix: String,
    pub read_only: bool,
    /// Where the proxy listens; `127.0.0.1:0` when `None` (the sandbox on this machine).
    pub listen: Option<SocketAddr>,
    /// The proxy URL as the sandbox reaches it, when that is not the listen address
    /// (another host, a container network).
    pub advertise: Option<String>,
}

/// A mounted bucket and the proxy that serves it; the proxy lives as long as this does.
pub struct ProxiedMount {
    pub info: BucketMountInfo,
    proxy: CredentialProxy,
}

impl ProxiedMount {
    pub fn proxy_url(&self) -> String {
        self.proxy.url()
    }

    /// Unmounts in the sandbox, then stops the proxy.
    pub async fn unmount(self, sandbox: &Sandbox) -> Result<(), SdkError> {
        sandbox.unmount_bucket(&self.info.mount_path).await?;
        drop(self.proxy);
        Ok(())
    }
}

/// Starts a proxy scoped to `options` and mounts `store`'s bucket at `mount_path`.
pub async fn mount_bucket(
    sandbox: &Sandbox,
    store: &BucketAccess,
    mount_path: &str,
    options: &MountOptions,
) -> Result<ProxiedMount, SdkError> {
    let prefix = fsd_mounts::fs::keys::normalize_prefix(&options.prefix);
    let scope = Scope {
        bucket: store.bucket.clone(),
        prefix: prefix.clone(),
        read_only: options.read_only,
    };
    let listen = options
        .listen
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let proxy = CredentialProxy::start(listen, scope, store.upstream())
        .await
        .map_err(|error| SdkError::Storage(format!("credential proxy: {error}")))?;
    let request = MountBucketRequest {
        bucket: store.bucket.clone(),
        mount_path: mount_path.to_string(),
        proxy_url: Some(options.advertise.clone().unwrap_or_else(|| proxy.url())),
        prefix: (!prefix.is_empty()).then(|| format!("/{prefix}")),
        read_only: Some(options.read_only),
        ..MountBucketRequest::default()
    };
    let info = sandbox.mount_bucket(&request).await?;
    Ok(ProxiedMount { info, proxy })
}
