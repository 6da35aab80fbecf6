//! The next line's `workspace` (docs/api.md, RPC: `workspace`): the workspace archived to a tar
//! file with excludes, extracted back, and cleaned up. Its failures are plain `Error`s
//! without a code, as the reference's.

use serde_json::{Value, json};

use super::args::{Answer, options};
use crate::capnweb::protocol::{self as capnweb, Arg};
use crate::files::workspace_archive;
use crate::state::AppState;

/// Serves `workspace.createArchive`, `extractArchive` and `cleanupArchive`.
pub async fn call(state: &AppState, method: &str, args: &[Arg]) -> Option<Answer> {
    let options = options(args, 0).unwrap_or_default();
    let text = |name: &str| {
        options
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let plain = |error: workspace_archive::WorkspaceArchiveError| {
        capnweb::js_error("Error", &error.to_string())
    };
    Some(match method {
        "createArchive" => {
            let excludes: Vec<String> = match options.get("excludes") {
                None => Vec::new(),
                Some(Value::Array(items)) => match items
                    .iter()
                    .map(|item| item.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                {
                    Some(excludes) => excludes,
                    None => {
                        return Some(Err(capnweb::js_error(
                            "TypeError",
                            "excludes must be strings",
                        )));
                    }
                },
                Some(_) => {
                    return Some(Err(capnweb::js_error(
                        "TypeError",
                        "excludes must be an array",
                    )));
                }
            };
            workspace_archive::create(state.paths.workspace(), &text("root"), &excludes)
                .await
                .map(|path| json!({ "archivePath": path.display().to_string() }))
                .map_err(plain)
        }
        "extractArchive" => workspace_archive::extract(&text("root"), &text("archivePath"))
            .await
            .map(|()| capnweb::undefined())
            .map_err(plain),
        "cleanupArchive" => {
            let path = match args.first() {
                Some(Arg::Json(Value::String(path))) => path.clone(),
                _ => String::new(),
            };
            workspace_archive::cleanup(&path)
                .await
                .map(|()| capnweb::undefined())
                .map_err(plain)
        }
        _ => return None,
    })
}
