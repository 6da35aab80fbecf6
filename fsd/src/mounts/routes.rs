//! `/api/mounts`: parse (INVALID_MOUNT_CONFIG naming the field), call the service, answer.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRef, Query, State};
use axum::routing::get;
use axum::{Json, Router};
use fsd_api::mounts::{
    ListMountsResponse, MountBucketRequest, MountBucketResponse, UnmountBucketRequest,
    UnmountBucketResponse,
};
use fsd_api::{ErrorCode, Operation};

use super::MountService;
use super::validate;
use crate::error::{ApiError, OperationExt};
use crate::paths::{Follow, Paths};
use crate::time::now_rfc3339;

/// The domain's routes.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<MountService>: FromRef<S>,
    Paths: FromRef<S>,
{
    Router::new().route("/api/mounts", get(list).post(mount).delete(unmount))
}

pub async fn mount(
    State(mounts): State<Arc<MountService>>,
    State(paths): State<Paths>,
    body: Bytes,
) -> Result<Json<MountBucketResponse>, ApiError> {
    let op = Operation::BucketMount;
    let req: MountBucketRequest = parse_mount_request(&body, op)?;
    paths.in_workspace("mountPath", &req.mount_path, Follow::Final)?;
    let plan = validate::plan(&req, |name| crate::config::environment().credential(name)).op(op)?;
    let mount = mounts.mount(plan).await.op(op)?;
    Ok(Json(MountBucketResponse {
        success: true,
        mount,
        timestamp: now_rfc3339(),
    }))
}

/// The mount path comes in the JSON body or as `?mountPath=`.
pub async fn unmount(
    State(mounts): State<Arc<MountService>>,
    State(paths): State<Paths>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    body: Bytes,
) -> Result<Json<UnmountBucketResponse>, ApiError> {
    let op = Operation::BucketUnmount;
    let mount_path = match query.get("mountPath") {
        Some(path) if body.is_empty() => path.clone(),
        _ => parse_mount_request::<UnmountBucketRequest>(&body, op)?.mount_path,
    };
    let path = validate::mount_path(&mount_path).op(op)?;
    // A bucket mounted at this path is unmounted by name beneath its parent's descriptor
    // (or by its root, if it moved with a parent), even when a link now stands on the way;
    // any other path is checked as every route checks it.
    if !mounts.is_mounted(&path).await {
        paths.in_workspace("mountPath", &mount_path, Follow::Parent)?;
    }
    let removed_dir = mounts.unmount(&path).await.op(op)?;
    Ok(Json(UnmountBucketResponse {
        success: true,
        mount_path: path.display().to_string(),
        removed_dir,
        timestamp: now_rfc3339(),
    }))
}

pub async fn list(State(mounts): State<Arc<MountService>>) -> Json<ListMountsResponse> {
    Json(ListMountsResponse {
        success: true,
        mounts: mounts.list().await,
        timestamp: now_rfc3339(),
    })
}

/// Parses a mount request; type errors are INVALID_MOUNT_CONFIG too.
fn parse_mount_request<T: serde::de::DeserializeOwned>(
    body: &[u8],
    operation: Operation,
) -> Result<T, ApiError> {
    crate::wire::json::parse_as(body, ErrorCode::InvalidMountConfig, operation)
}
