//! The next line's `mounts` (docs/api.md, RPC: `mounts`): the shell strings the 0.12 object
//! ran to mount buckets with s3fs, as methods. fsd serves bucket mounts itself with its own
//! FUSE filesystem, so `mountS3FS` translates the object's s3fs options onto a mount of
//! fsd's (`source` → bucket and prefix, `url` → endpoint, `passwd_file` → the credentials
//! read from it, `ro` → read-only; s3fs's tuning options do not apply and are ignored);
//! the other primitives are file and mount checks done in the daemon, no shell.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use fsd_api::mounts::{MountBucketRequest, MountCredentials};
use serde_json::{Map, Value, json};

use super::args::Answer;
use crate::capnweb::protocol::{self as capnweb, Arg};
use crate::error::ApiError;
use crate::state::AppState;

/// Serves `mounts.method`; `None` when it is not one of the next line's.
pub async fn call(state: &AppState, method: &str, args: &[Arg]) -> Option<Answer> {
    Some(match method {
        "pathExists" => path(args).map(|p| Value::Bool(Path::new(&p).is_dir())),
        "ensureDirectory" => path(args).map(|p| {
            let _ = std::fs::create_dir_all(p);
            capnweb::undefined()
        }),
        "chmodOwnerOnly" => path(args).map(|p| {
            let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600));
            capnweb::undefined()
        }),
        "deleteFile" => path(args).map(|p| {
            let _ = std::fs::remove_file(p);
            capnweb::undefined()
        }),
        "isMountpoint" => path(args).map(|p| Value::Bool(is_mountpoint(Path::new(&p)))),
        "unmountFuse" => match path(args) {
            Ok(p) => Ok(unmount(state, &p).await),
            Err(refused) => Err(refused),
        },
        "unmountFuseIfMounted" => match path(args) {
            Ok(p) => {
                if is_mountpoint(Path::new(&p)) {
                    unmount(state, &p).await;
                }
                Ok(capnweb::undefined())
            }
            Err(refused) => Err(refused),
        },
        "removeMountDirectory" => remove_directory(args),
        "mountS3FS" => match mount_request(args) {
            Ok(request) => Ok(mount(state, &request, false).await),
            Err(refused) => Err(refused),
        },
        "mountS3FSAndVerify" => match mount_request(args) {
            Ok(request) => Ok(mount(state, &request, true).await),
            Err(refused) => Err(refused),
        },
        _ => return None,
    })
}

/// A `TypeError`, as the reference's validation throws.
fn type_error(message: &str) -> Value {
    capnweb::js_error("TypeError", message)
}

fn checked_path(value: Option<&Value>) -> Result<String, Value> {
    match value {
        Some(Value::String(path)) if !path.is_empty() && !path.contains('\0') => Ok(path.clone()),
        _ => Err(type_error("path must be a non-empty string without NUL")),
    }
}

fn path(args: &[Arg]) -> Result<String, Value> {
    match args.first() {
        Some(Arg::Json(value)) => checked_path(Some(value)),
        _ => checked_path(None),
    }
}

/// A result as `MountCommandResult`.
fn command_result(exit_code: i32, stdout: &str, stderr: &str) -> Value {
    json!({
        "success": exit_code == 0,
        "exitCode": exit_code,
        "stdout": stdout,
        "stderr": stderr,
    })
}

/// `mountpoint -q`: a directory on another filesystem than its parent's, or `/`.
fn is_mountpoint(path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    if !meta.is_dir() {
        return false;
    }
    let parent = path.join("..");
    match std::fs::metadata(&parent) {
        Ok(up) => up.dev() != meta.dev() || up.ino() == meta.ino(),
        Err(_) => false,
    }
}

async fn unmount(state: &AppState, path: &str) -> Value {
    match state.mounts.unmount(Path::new(path)).await {
        Ok(_) => command_result(0, "", ""),
        Err(error) => command_result(1, "", &ApiError::from(error).message),
    }
}

/// `removeMountDirectory({path, onlyIfNotMountpoint})`: `rmdir`, or nothing when asked to
/// spare a mount point and it is one.
fn remove_directory(args: &[Arg]) -> Answer {
    let Some(Arg::Json(Value::Object(options))) = args.first() else {
        return Err(type_error("options must be an object"));
    };
    let path = checked_path(options.get("path"))?;
    let spare = match options.get("onlyIfNotMountpoint") {
        None => false,
        Some(Value::Bool(spare)) => *spare,
        Some(_) => return Err(type_error("onlyIfNotMountpoint must be a boolean")),
    };
    if spare && is_mountpoint(Path::new(&path)) {
        return Ok(command_result(0, "", ""));
    }
    Ok(match std::fs::remove_dir(&path) {
        Ok(()) => command_result(0, "", ""),
        Err(error) => command_result(1, "", &format!("rmdir: {path}: {error}")),
    })
}

/// The object's s3fs call as a bucket mount of fsd's.
fn mount_request(args: &[Arg]) -> Result<MountBucketRequest, Value> {
    let Some(Arg::Json(Value::Object(call))) = args.first() else {
        return Err(type_error("options must be an object"));
    };
    let source = checked_path(call.get("source"))?;
    let mount_path = checked_path(call.get("mountPath"))?;
    let options: Map<String, Value> = match call.get("options") {
        Some(Value::Object(options)) => options.clone(),
        None => Map::new(),
        Some(_) => return Err(type_error("options must be a plain object")),
    };
    for (key, value) in &options {
        if key.is_empty() || key.contains('\0') {
            return Err(type_error("option names must be non-empty without NUL"));
        }
        let valid = match value {
            Value::Bool(true) => true,
            Value::String(text) => !text.is_empty() && !text.contains('\0'),
            _ => false,
        };
        if !valid {
            return Err(type_error(&format!(
                "option {key} must be true or a non-empty string"
            )));
        }
    }
    let (bucket, prefix) = match source.split_once(':') {
        Some((bucket, prefix)) => (
            bucket.to_string(),
            Some(prefix.trim_end_matches('/').to_string()),
        ),
        None => (source.clone(), None),
    };
    let text = |name: &str| {
        options
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let credentials = text("passwd_file").and_then(|file| {
        let content = std::fs::read_to_string(file).ok()?;
        let line = content.lines().next()?.trim().to_string();
        let mut parts: Vec<&str> = line.split(':').collect();
        if parts.len() == 3 {
            parts.remove(0);
        }
        match parts.as_slice() {
            [key, secret] => Some(MountCredentials {
                access_key_id: key.to_string(),
                secret_access_key: secret.to_string(),
            }),
            _ => None,
        }
    });
    Ok(MountBucketRequest {
        bucket,
        mount_path,
        endpoint: text("url"),
        prefix: prefix.filter(|prefix| !prefix.is_empty()),
        read_only: options.get("ro").map(|_| true),
        credentials,
        ..MountBucketRequest::default()
    })
}

/// Mounts as `s3fs` would answer: exit 0, or 1 (2 when verifying) with the reason; a mount
/// of fsd's is up when the call returns, so verifying is one mountpoint check.
async fn mount(state: &AppState, request: &MountBucketRequest, verify: bool) -> Value {
    let failed = if verify { 2 } else { 1 };
    let plan = match crate::mounts::plan(request, |name| {
        crate::config::environment().credential(name)
    }) {
        Ok(plan) => plan,
        Err(error) => {
            let message = ApiError::from(error).message;
            return command_result(failed, if verify { &message } else { "" }, &message);
        }
    };
    if let Err(error) = state.mounts.mount(plan).await {
        let message = ApiError::from(error).message;
        return command_result(failed, if verify { &message } else { "" }, &message);
    }
    if verify && !is_mountpoint(Path::new(&request.mount_path)) {
        return command_result(3, "", "the mount did not appear");
    }
    command_result(0, "", "")
}
