//! The next line's domains (`reference-next.md` §4), called on the services with typed
//! arguments (no request through the router, unlike the 0.12 methods in `api.rs`). Served
//! so far: `files.exists`, `files.mkdir`, `files.deleteFile` and `files.listFiles`; relative
//! paths are taken from the workspace, as the next line's runtime takes them from
//! `/workspace`.

use fsd_api::Operation;
use fsd_api::files::{ExistsResponse, ListFilesResponse, MkdirResponse, PathResponse};
use serde::Serialize;
use serde_json::{Map, Value};

use super::api::invalid;
use super::wire::{self, Arg};
use crate::error::{ApiError, OperationExt};
use crate::files::ListOptions;
use crate::state::AppState;
use crate::wire::time::now_rfc3339;

type Answer = Result<Value, Value>;

/// Serves `domain.method` for an activated next socket; `None` when it is not served yet.
pub async fn call(state: &AppState, domain: &str, method: &str, args: &[Arg]) -> Option<Answer> {
    match domain {
        "files" => Some(files(state, FilesMethod::named(method)?, args).await),
        _ => None,
    }
}

/// The `files` methods served so far.
#[derive(Debug, Clone, Copy)]
enum FilesMethod {
    Exists,
    Mkdir,
    DeleteFile,
    ListFiles,
}

impl FilesMethod {
    fn named(method: &str) -> Option<Self> {
        Some(match method {
            "exists" => Self::Exists,
            "mkdir" => Self::Mkdir,
            "deleteFile" => Self::DeleteFile,
            "listFiles" => Self::ListFiles,
            _ => return None,
        })
    }
}

/// One `files` method: each takes its path first, then its options.
async fn files(state: &AppState, method: FilesMethod, args: &[Arg]) -> Answer {
    let files = &state.files;
    let path = string(args, 0, "path")?;
    let answer = match method {
        FilesMethod::Exists => {
            files
                .exists(None, &path)
                .await
                .op(Operation::FileStat)
                .map(|exists| {
                    value(ExistsResponse {
                        success: true,
                        path,
                        exists,
                        timestamp: now_rfc3339(),
                    })
                })
        }
        FilesMethod::Mkdir => {
            let recursive = flag(args, 1, "recursive");
            files
                .mkdir(None, &path, recursive, None)
                .await
                .op(Operation::DirectoryCreate)
                .map(|_| {
                    value(MkdirResponse {
                        success: true,
                        path,
                        recursive,
                        mode: None,
                        timestamp: now_rfc3339(),
                    })
                })
        }
        FilesMethod::DeleteFile => files
            .delete(None, &path)
            .await
            .op(Operation::FileDelete)
            .map(|()| {
                value(PathResponse {
                    success: true,
                    path,
                    timestamp: now_rfc3339(),
                })
            }),
        FilesMethod::ListFiles => {
            let options = ListOptions {
                recursive: flag(args, 1, "recursive"),
                include_hidden: flag(args, 1, "includeHidden"),
            };
            files
                .list(None, &path, options)
                .await
                .op(Operation::DirectoryList)
                .map(|files| {
                    value(ListFilesResponse {
                        success: true,
                        path,
                        count: files.len(),
                        files,
                        timestamp: now_rfc3339(),
                    })
                })
        }
    };
    answer.map_err(|error| rpc_error(&error))
}

/// The string argument at `index`, or the 0.12 methods' validation error naming it.
fn string(args: &[Arg], index: usize, name: &str) -> Result<String, Value> {
    match args.get(index) {
        Some(Arg::Json(Value::String(text))) => Ok(text.clone()),
        _ => Err(invalid(name, "must be a string")),
    }
}

/// A boolean field of the options object at `index` (absent: false).
fn flag(args: &[Arg], index: usize, name: &str) -> bool {
    match args.get(index) {
        Some(Arg::Json(Value::Object(options))) => {
            options.get(name).and_then(Value::as_bool).unwrap_or(false)
        }
        _ => false,
    }
}

/// A result as the wire carries it.
fn value(result: impl Serialize) -> Value {
    let json = serde_json::to_value(result).unwrap_or_else(|_| Value::Object(Map::new()));
    wire::from_json(&json)
}

/// An error as the next line's object maps it: `code` and `details` as properties.
fn rpc_error(error: &ApiError) -> Value {
    wire::sandbox_error(&error.message, error.code.as_str(), &error.context)
}
