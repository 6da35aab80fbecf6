//! The next line's `backup` (docs/api.md, RPC: `backup`): 0.12's `createArchive`,
//! `restoreArchive` and `uploadParts` without `sessionId`, and the steps the object used to
//! run as shell commands (`uploadArchive`, `prepareRestore`, `downloadArchive`,
//! `extractArchive`, `cleanupArchive`), all on the backup domain's typed operations; and
//! fsd's own workspace forks (`fork`, `branches`, `mergeBranch`, `discardBranch`).

use std::time::Duration;

use fsd_api::backup::{
    CreateBackupRequest, DiscardBranchRequest, ForkRequest, MergeBranchRequest,
    RestoreBackupRequest, UploadPartsRequest,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::args::{Answer, api_error, options, string, value};
use crate::backup::operations::{self, DownloadPart};
use crate::backup::{BackupState, fork};
use crate::capnweb::protocol::{self as capnweb, Arg};
use crate::error::ApiError;
use crate::rpc::api::invalid;
use crate::state::AppState;
use axum::extract::FromRef;

/// How long a transfer may take when the object gives no `timeoutMs`.
const DEFAULT_TRANSFER: Duration = Duration::from_secs(1810);

/// Serves `backup.method`; `None` when it is not one of the next line's.
pub async fn call(state: &AppState, method: &str, args: &[Arg]) -> Option<Answer> {
    let state = &BackupState::from_ref(state);
    let answer = match method {
        "createArchive" => create(state, args).await,
        "restoreArchive" => restore(state, args).await,
        "uploadParts" => match request::<UploadPartsRequest>(options(args, 0)) {
            Ok(req) => operations::upload_parts(state, &req).await.map(value),
            Err(refused) => return Some(Err(refused)),
        },
        "uploadArchive" => {
            let options = options(args, 0).unwrap_or_default();
            operations::upload_archive(
                state,
                &text(&options, "archivePath"),
                &text(&options, "url"),
                timeout(&options),
            )
            .await
            .map(|()| capnweb::undefined())
        }
        "prepareRestore" => {
            let options = options(args, 0).unwrap_or_default();
            operations::prepare_restore(
                state,
                &text(&options, "dir"),
                &text(&options, "backupId"),
                &text(&options, "archivePath"),
            )
            .await
            .map(|size| json!({ "existingSize": size }))
        }
        "downloadArchive" => download(state, args).await,
        "extractArchive" => {
            let (dir, archive) = match (string(args, 0, "dir"), string(args, 1, "archivePath")) {
                (Ok(dir), Ok(archive)) => (dir, archive),
                (Err(refused), _) | (_, Err(refused)) => return Some(Err(refused)),
            };
            operations::extract_archive(state, &dir, &archive)
                .await
                .map(|()| capnweb::undefined())
        }
        "cleanupArchive" => {
            let archive = match string(args, 0, "archivePath") {
                Ok(archive) => archive,
                Err(refused) => return Some(Err(refused)),
            };
            operations::cleanup_archive(state, &archive).map(|()| capnweb::undefined())
        }
        // fsd's own: workspace forks, as `/api/fork`'s routes take and answer them.
        "fork" => match request::<ForkRequest>(options(args, 0)) {
            Ok(req) => fork::fork_dir(state, req).await.map(value),
            Err(refused) => return Some(Err(refused)),
        },
        "branches" => fork::list_branches(state).await.map(value),
        "mergeBranch" => match request::<MergeBranchRequest>(options(args, 0)) {
            Ok(req) => fork::merge_branch(state, req).await.map(value),
            Err(refused) => return Some(Err(refused)),
        },
        "discardBranch" => match request::<DiscardBranchRequest>(options(args, 0)) {
            Ok(req) => fork::discard_branch(state, req).await.map(value),
            Err(refused) => return Some(Err(refused)),
        },
        _ => return None,
    };
    Some(answer.map_err(|error: ApiError| api_error(&error)))
}

fn text(options: &Map<String, Value>, name: &str) -> String {
    options
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn timeout(options: &Map<String, Value>) -> Duration {
    options
        .get("timeoutMs")
        .and_then(Value::as_u64)
        .filter(|ms| *ms > 0)
        .map_or(DEFAULT_TRANSFER, Duration::from_millis)
}

/// A request body read from the object's options (field names as 0.12's bodies).
fn request<T: DeserializeOwned>(options: Option<Map<String, Value>>) -> Result<T, Value> {
    serde_json::from_value(Value::Object(options.unwrap_or_default()))
        .map_err(|error| invalid("options", &error.to_string()))
}

/// `createArchive(dir, archivePath, {excludes, gitignore, compression})`.
async fn create(state: &BackupState, args: &[Arg]) -> Result<Value, ApiError> {
    let mut body = options(args, 2).unwrap_or_default();
    if let (Ok(dir), Ok(archive)) = (string(args, 0, "dir"), string(args, 1, "archivePath")) {
        body.insert("dir".into(), json!(dir));
        body.insert("archivePath".into(), json!(archive));
    }
    let req: CreateBackupRequest =
        serde_json::from_value(Value::Object(body)).map_err(|error| {
            crate::backup::operations::invalid_request("options", &error.to_string())
        })?;
    operations::create_archive(state, &req).await.map(value)
}

/// `restoreArchive(dir, archivePath)`.
async fn restore(state: &BackupState, args: &[Arg]) -> Result<Value, ApiError> {
    let body = json!({
        "dir": string(args, 0, "dir").unwrap_or_default(),
        "archivePath": string(args, 1, "archivePath").unwrap_or_default(),
    });
    let req: RestoreBackupRequest = serde_json::from_value(body)
        .map_err(|error| crate::backup::operations::invalid_request("dir", &error.to_string()))?;
    operations::restore_archive(state, &req).await.map(value)
}

/// `downloadArchive({archivePath, expectedSize, parts: [{url, offset, range?}], timeoutMs})`.
async fn download(state: &BackupState, args: &[Arg]) -> Result<Value, ApiError> {
    let options = options(args, 0).unwrap_or_default();
    let parts = options
        .get("parts")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .map(|part| DownloadPart {
                    url: part["url"].as_str().unwrap_or_default().to_string(),
                    offset: part["offset"].as_u64().unwrap_or(u64::MAX),
                    range: part["range"].as_str().map(str::to_string),
                })
                .collect()
        })
        .unwrap_or_default();
    let expected = options
        .get("expectedSize")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    operations::download_archive(
        state,
        &text(&options, "archivePath"),
        expected,
        parts,
        timeout(&options),
    )
    .await
    .map(|()| capnweb::undefined())
}
