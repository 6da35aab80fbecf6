//! The daemon's bucket mount routes. Mounting through a credential proxy the caller runs
//! is [`crate::control::BucketMounts`].

use fsd_api::mounts::{
    BucketMountInfo, ListMountsResponse, MountBucketRequest, MountBucketResponse,
    UnmountBucketRequest, UnmountBucketResponse,
};
use reqwest::Method;

use crate::client::decode;
use crate::{Sandbox, SdkError};

impl Sandbox {
    /// Mounts a bucket in the sandbox (`POST /api/mounts`).
    pub async fn mount_bucket(
        &self,
        request: &MountBucketRequest,
    ) -> Result<BucketMountInfo, SdkError> {
        let response: MountBucketResponse = self.post_json("/api/mounts", request).await?;
        Ok(response.mount)
    }

    /// Unmounts it (`DELETE /api/mounts`); the directory goes too if fsd made it.
    pub async fn unmount_bucket(
        &self,
        mount_path: &str,
    ) -> Result<UnmountBucketResponse, SdkError> {
        let request = UnmountBucketRequest {
            mount_path: mount_path.to_string(),
        };
        let response = self
            .request(Method::DELETE, "/api/mounts")
            .json(&request)
            .send()
            .await?;
        decode(response).await
    }

    /// The active mounts (`GET /api/mounts`).
    pub async fn list_bucket_mounts(&self) -> Result<Vec<BucketMountInfo>, SdkError> {
        let response: ListMountsResponse = self.get_json("/api/mounts").await?;
        Ok(response.mounts)
    }
}
