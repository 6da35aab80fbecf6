//! Cloning: `git clone` in the sandbox's process world, beside the caller's session (in its
//! working directory, without taking its shell, so a long clone does not block the session),
//! with git's progress read as it comes, and every string that leaves redacted.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use super::classify::{Failure, classify, repo_name};
use super::redact::redact;
use fsd_process::World;
use fsd_process::supervisor::OnExit;

/// The reference's default: ten minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
const MAX_URL_CHARS: usize = 2048;
/// The end of git's stderr kept for the error (progress lines are many).
const STDERR_KEPT: usize = 16 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("Invalid Git URL '{url}': {reason}")]
    InvalidUrl { url: String, reason: &'static str },
    #[error("{message}")]
    Invalid {
        field: &'static str,
        issue: &'static str,
        message: String,
    },
    #[error("Target directory {0} exists and is not empty; it was left as it is")]
    TargetExists(String),
    #[error("{message}")]
    Failed {
        failure: Failure,
        message: String,
        repository: String,
        target_dir: String,
        exit_code: i32,
        stderr: String,
    },
    /// Confined: the target's directory is outside the roots (a link swapped in since
    /// the request was checked).
    #[error("Target directory {0} is outside the allowed roots")]
    Outside(String),
    #[error("cannot run git: {0}")]
    Spawn(String),
}

/// A clone, checked.
#[derive(Debug, Clone)]
pub struct ClonePlan {
    pub url: String,
    pub branch: Option<String>,
    pub depth: Option<u64>,
    pub target: PathBuf,
    pub timeout: Duration,
}

/// Checks a request: the URL, the timeout, the target directory, in the reference's order
/// (the depth too, which the reference passes to git unchecked). A relative `target_dir`
/// (the caller resolved a session-relative one already) and the default resolve in
/// `workspace`.
pub fn plan(
    url: &str,
    branch: Option<&str>,
    depth: Option<&serde_json::Value>,
    target_dir: Option<&str>,
    timeout_ms: Option<&serde_json::Value>,
    workspace: &Path,
) -> Result<ClonePlan, GitError> {
    let url = url.trim();
    let bad_url = |reason| GitError::InvalidUrl {
        url: redact(url),
        reason,
    };
    if url.is_empty() {
        return Err(bad_url("it is empty"));
    }
    if url.chars().count() > MAX_URL_CHARS || url.contains('\0') {
        return Err(bad_url("too long or has a NUL byte"));
    }
    let timeout = match timeout_ms {
        None | Some(serde_json::Value::Null) => DEFAULT_TIMEOUT,
        Some(value) => match value.as_u64().filter(|ms| *ms > 0) {
            Some(ms) => Duration::from_millis(ms),
            None => {
                return Err(GitError::Invalid {
                    field: "timeoutMs",
                    issue: "INVALID_TIMEOUT",
                    message: format!(
                        "Invalid clone timeout '{value}'. Must be a positive integer representing milliseconds."
                    ),
                });
            }
        },
    };
    let depth = match depth {
        None | Some(serde_json::Value::Null) => None,
        Some(value) => {
            Some(
                value
                    .as_u64()
                    .filter(|d| *d > 0)
                    .ok_or_else(|| GitError::Invalid {
                        field: "depth",
                        issue: "INVALID_DEPTH",
                        message: format!("Invalid depth '{value}'. Must be a positive integer."),
                    })?,
            )
        }
    };
    let branch = branch.filter(|b| !b.is_empty());
    if let Some(branch) = branch
        && (branch.starts_with('-') || branch.chars().any(char::is_control))
    {
        return Err(GitError::Invalid {
            field: "branch",
            issue: "INVALID_BRANCH",
            message: format!("Invalid branch {branch:?}"),
        });
    }
    let target = match target_dir.filter(|t| !t.is_empty()) {
        None => workspace.join(repo_name(url)),
        Some(dir) if dir.len() > fsd_api::MAX_PATH_BYTES || dir.contains('\0') => {
            return Err(GitError::Invalid {
                field: "targetDir",
                issue: "INVALID_PATH",
                message: "targetDir is too long or has a NUL byte".into(),
            });
        }
        Some(dir) => workspace.join(dir),
    };
    Ok(ClonePlan {
        url: url.to_string(),
        branch: branch.map(str::to_string),
        depth,
        target,
        timeout,
    })
}

/// The branch the clone checked out.
pub struct Cloned {
    pub branch: String,
}

/// Runs the clone; git's progress lines (redacted) go to `progress` as they come.
pub async fn clone(
    world: &Arc<World>,
    base_env: &[(String, String)],
    plan: &ClonePlan,
    progress: Option<mpsc::Sender<String>>,
) -> Result<Cloned, GitError> {
    let target_text = plan.target.display().to_string();
    if let Ok(mut entries) = std::fs::read_dir(&plan.target) {
        if entries.next().is_some() {
            return Err(GitError::TargetExists(target_text));
        }
    } else if plan.target.exists() {
        return Err(GitError::TargetExists(target_text));
    }
    let secs = plan.timeout.as_secs_f64();
    let secs = if secs.fract() == 0.0 {
        format!("{}", secs as u64)
    } else {
        format!("{secs:.3}")
    };
    let mut args: Vec<&OsStr> = [
        "timeout",
        "-k",
        "5",
        &secs,
        "git",
        "-c",
        "http.lowSpeedLimit=1024",
        "-c",
        "http.lowSpeedTime=30",
        "clone",
        "--filter=blob:none",
        "--progress",
    ]
    .into_iter()
    .map(OsStr::new)
    .collect();
    let depth = plan.depth.map(|d| d.to_string());
    if let Some(branch) = &plan.branch {
        args.extend([OsStr::new("--branch"), OsStr::new(branch)]);
    }
    if let Some(depth) = &depth {
        args.extend([OsStr::new("--depth"), OsStr::new(depth)]);
    }
    // Confined, git starts in the target's parent, made beneath the roots and entered by
    // its supervisor by descriptor, and is given only the last name: no link swapped in
    // above the target can lead the clone out. Unconfined, git makes what is missing.
    let (cwd, target) = match (plan.target.parent(), plan.target.file_name()) {
        (Some(parent), Some(name)) if !world.within().is_empty() => {
            fsd_search::Within::new(world.within())
                .map_err(fsd_search::Refused::Io)
                .and_then(|within| within.create_dir_all(parent))
                .map_err(|refused| match refused {
                    fsd_search::Refused::Outside => GitError::Outside(target_text.clone()),
                    fsd_search::Refused::Io(err) => GitError::Spawn(err.to_string()),
                })?;
            (parent, name)
        }
        _ => {
            let parent = plan.target.parent().filter(|p| p.is_dir());
            (parent.unwrap_or(Path::new("/")), plan.target.as_os_str())
        }
    };
    args.extend([OsStr::new("--"), OsStr::new(&plan.url), target]);
    let mut child = world
        .command(OnExit::Kill, cwd, &args)
        .env_clear()
        .envs(base_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| GitError::Spawn(e.to_string()))?;
    let mut stderr = child.stderr.take();
    let read = async {
        let mut kept = VecDeque::new();
        let mut line = Vec::new();
        let mut buffer = [0u8; 8192];
        let Some(stream) = stderr.as_mut() else {
            return kept;
        };
        while let Ok(read) = stream.read(&mut buffer).await {
            if read == 0 {
                break;
            }
            for &byte in &buffer[..read] {
                kept.push_back(byte);
                if kept.len() > STDERR_KEPT {
                    kept.pop_front();
                }
                if byte == b'\r' || byte == b'\n' {
                    let text = String::from_utf8_lossy(&line).trim().to_string();
                    line.clear();
                    if let (false, Some(progress)) = (text.is_empty(), &progress) {
                        let _ = progress.send(redact(&text)).await;
                    }
                } else {
                    line.push(byte);
                }
            }
        }
        kept
    };
    // `timeout` ends git; this bounds a `timeout` that itself hangs.
    let limit = plan.timeout + Duration::from_secs(15);
    let outcome = tokio::time::timeout(limit, async {
        let kept = read.await;
        (child.wait().await, kept)
    })
    .await;
    let (status, kept) = match outcome {
        Ok((status, kept)) => (status.map_err(|e| GitError::Spawn(e.to_string()))?, kept),
        Err(_) => {
            let _ = child.kill().await;
            // As `timeout` itself reports it: exit 124.
            (
                std::os::unix::process::ExitStatusExt::from_raw(124 << 8),
                VecDeque::from(b"Operation timed out".to_vec()),
            )
        }
    };
    let exit_code = status.code().unwrap_or(124);
    if status.success() {
        return Ok(Cloned {
            branch: current_branch(&plan.target)
                .or_else(|| plan.branch.clone())
                .unwrap_or_else(|| "unknown".into()),
        });
    }
    let stderr = String::from_utf8_lossy(&kept.into_iter().collect::<Vec<u8>>())
        .replace('\r', "\n")
        .trim()
        .to_string();
    let failure = classify(exit_code, &stderr);
    let repository = redact(&plan.url);
    let (message, stderr) = if failure == Failure::TimedOut {
        (
            format!("Git clone timed out after {secs} seconds for '{repository}'"),
            "Operation timed out".to_string(),
        )
    } else {
        let last = stderr
            .lines()
            .rev()
            .find(|line| line.starts_with("fatal:") || line.starts_with("error:"))
            .unwrap_or(stderr.as_str());
        (
            redact(&format!(
                "Failed to clone repository '{repository}': {last}"
            )),
            redact(&stderr),
        )
    };
    tracing::info!(repository = %repository, exit_code, %message, "git clone failed");
    Err(GitError::Failed {
        failure,
        message,
        repository,
        target_dir: target_text,
        exit_code,
        stderr,
    })
}

/// The branch `.git/HEAD` names; `None` for a detached HEAD (a tag).
fn current_branch(target: &Path) -> Option<String> {
    let head = std::fs::read_to_string(target.join(".git/HEAD")).ok()?;
    head.trim()
        .strip_prefix("ref: refs/heads/")
        .map(str::to_string)
}
