//! The next line's `files` (`reference-next.md` §4.2): 0.12's methods without `sessionId`,
//! on the file service. Served so far: `exists`, `mkdir`, `deleteFile` and `listFiles`;
//! relative paths are taken from the workspace, as the next line's runtime takes them from
//! `/workspace`.

use fsd_api::Operation;
use fsd_api::files::{ExistsResponse, ListFilesResponse, MkdirResponse, PathResponse};

use super::args::{Answer, api_error, flag, string, value};
use crate::error::OperationExt;
use crate::files::ListOptions;
use crate::rpc::wire::Arg;
use crate::state::AppState;
use crate::wire::time::now_rfc3339;

/// Serves `files.method`; `None` when it is not served yet.
pub async fn call(state: &AppState, method: &str, args: &[Arg]) -> Option<Answer> {
    Some(files(state, FilesMethod::named(method)?, args).await)
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
    answer.map_err(|error| api_error(&error))
}
