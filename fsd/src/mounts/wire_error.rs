//! Bucket-mount errors on the wire.

use fsd_api::ErrorCode;
use serde_json::json;

use fsd_mounts::MountError;

use super::service::MountServiceError;
use super::validate::MountConfigError;
use crate::error::ApiError;

/// Bucket mount failures: a caller's mistake is INVALID_MOUNT_CONFIG; a store that does not
/// answer or a mount that fails is BUCKET_MOUNT_ERROR; a busy unmount BUCKET_UNMOUNT_ERROR.
impl From<MountServiceError> for ApiError {
    fn from(err: MountServiceError) -> Self {
        let message = err.to_string();
        match &err {
            MountServiceError::AlreadyMounted(path)
            | MountServiceError::NotADirectory(path)
            | MountServiceError::NotMounted(path) => {
                ApiError::new(ErrorCode::InvalidMountConfig, message)
                    .with_context(json!({ "field": "mountPath", "path": path }))
            }
            MountServiceError::Mount(MountError::Mount { path, source })
            | MountServiceError::CreateDir { path, source }
                if fsd_search::is_outside(source) =>
            {
                ApiError::outside_roots(message, path.display().to_string())
            }
            MountServiceError::Mount(MountError::Store(store)) => {
                ApiError::new(ErrorCode::BucketMountError, message)
                    .with_context(json!({ "upstreamStatus": store.status() }))
            }
            MountServiceError::Mount(MountError::Unmount { path, .. }) => {
                ApiError::new(ErrorCode::BucketUnmountError, message)
                    .with_context(json!({ "path": path }))
                    .with_suggestion("Something still uses the mount; close it and unmount again")
            }
            _ => ApiError::new(ErrorCode::BucketMountError, message),
        }
    }
}

impl From<MountConfigError> for ApiError {
    fn from(err: MountConfigError) -> Self {
        match err {
            MountConfigError::Invalid { field, message } => {
                Self::invalid_field(ErrorCode::InvalidMountConfig, field, message)
            }
            MountConfigError::MissingCredentials => {
                Self::new(ErrorCode::MissingCredentials, err.to_string())
            }
        }
    }
}
