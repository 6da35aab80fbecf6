//! What a command request says, whichever route brought it (`/api/execute`, its stream,
//! `background: true`, `/api/process/start`): the command, its session, env and cwd,
//! checked in one place. A request the caller got wrong is a [`RequestError`], which
//! `wire_error` turns into the wire error.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use fsd_api::exec::ExecuteRequest;
use fsd_api::process::{StartProcessRequest, StdinRequest};

use base64_simd::STANDARD as BASE64;
use fsd_process::{CommandSpec, Stdin, valid_env_name};
use nix::sys::signal::Signal;

use super::error::RequestError;
use crate::error::ApiError;
use crate::paths::{Follow, Paths};

/// The session a request without one runs in.
pub const DEFAULT_SESSION: &str = "default";

/// How long a stdin write waits for room by default, and at most.
const STDIN_WAIT_MS: u64 = 10_000;
const STDIN_WAIT_MAX_MS: u64 = 300_000;

/// A stdin write's bytes (text or base64) and how long it may wait for the pipe to have
/// room: for a background process's stdin and a streamed command's alike.
pub fn stdin_write(req: &StdinRequest) -> Result<(Vec<u8>, Duration), ApiError> {
    let bytes = match req.encoding.as_deref() {
        None | Some("utf8" | "utf-8") => req.data.clone().into_bytes(),
        Some("base64") => BASE64
            .decode_to_vec(req.data.as_bytes())
            .map_err(|_| ApiError::validation("data", "must be standard base64", "INVALID_DATA"))?,
        Some(other) => {
            return Err(ApiError::validation(
                "encoding",
                format!("must be \"utf8\" or \"base64\", not {other:?}"),
                "INVALID_ENCODING",
            ));
        }
    };
    let wait_ms = req.timeout_ms.unwrap_or(STDIN_WAIT_MS);
    if wait_ms == 0 || wait_ms > STDIN_WAIT_MAX_MS {
        return Err(ApiError::validation(
            "timeoutMs",
            format!("must be 1 to {STDIN_WAIT_MAX_MS}"),
            "INVALID_TIMEOUT",
        ));
    }
    Ok((bytes, Duration::from_millis(wait_ms)))
}

/// A command request, from any route.
pub struct CommandRequest<'a> {
    pub command: &'a str,
    pub env: Option<&'a BTreeMap<String, Option<String>>>,
    pub cwd: Option<&'a str>,
    pub stdin: Stdin,
}

impl<'a> CommandRequest<'a> {
    /// `/api/execute` and its stream: `stdin` as text, `stdinBase64` as bytes, or
    /// `stdinPipe`.
    pub fn for_execute(req: &'a ExecuteRequest) -> Result<Self, RequestError> {
        if req.stdin_pipe && (req.stdin.is_some() || req.stdin_base64.is_some()) {
            return Err(RequestError::Stdin {
                field: "stdinPipe",
                reason: "give stdinPipe, stdin or stdinBase64, not two".into(),
            });
        }
        let stdin = match (&req.stdin, &req.stdin_base64) {
            (None, None) if req.stdin_pipe => Stdin::Pipe,
            (None, None) => Stdin::Null,
            (Some(text), None) => Stdin::Content(text.as_bytes().to_vec()),
            (None, Some(encoded)) => Stdin::Content(BASE64.decode_to_vec(encoded).map_err(
                |_| RequestError::Stdin {
                    field: "stdinBase64",
                    reason: "must be standard base64".into(),
                },
            )?),
            (Some(_), Some(_)) => {
                return Err(RequestError::Stdin {
                    field: "stdinBase64",
                    reason: "give stdin or stdinBase64, not both".into(),
                });
            }
        };
        Ok(Self {
            command: &req.command,
            env: req.env.as_ref(),
            cwd: req.cwd.as_deref(),
            stdin,
        })
    }

    /// A process start, with the reference's own code for an empty command; `stdin` is
    /// `"pipe"` or `"null"`.
    pub fn for_process(req: &'a StartProcessRequest) -> Result<Self, RequestError> {
        if req.command.trim().is_empty() {
            return Err(RequestError::EmptyProcessCommand);
        }
        let stdin = match req.stdin.as_deref() {
            None | Some("null") => Stdin::Null,
            Some("pipe") => Stdin::Pipe,
            Some(other) => {
                return Err(RequestError::Stdin {
                    field: "stdin",
                    reason: format!("must be \"pipe\" or \"null\", not {other:?}"),
                });
            }
        };
        Ok(Self {
            command: &req.command,
            env: req.env.as_ref(),
            cwd: req.cwd.as_deref(),
            stdin,
        })
    }

    /// Checks the request and resolves its cwd against `session_id`'s directory.
    pub async fn spec(self, paths: &Paths, session_id: &str) -> Result<CommandSpec, RequestError> {
        if self.command.trim().is_empty() {
            return Err(RequestError::EmptyCommand);
        }
        if self.command.contains('\0') {
            return Err(RequestError::NulInCommand);
        }
        let env = match self.env {
            Some(env) => checked_env(env.clone().into_iter())?,
            None => Vec::new(),
        };
        let cwd = match self.cwd {
            Some(cwd) => Some(existing_dir(paths, Some(session_id), cwd).await?),
            None => None,
        };
        Ok(CommandSpec {
            command: self.command.to_string(),
            cwd,
            env,
            stdin: self.stdin,
        })
    }
}

/// Named variables with valid names; `null` values skipped.
pub fn checked_env(
    env: impl Iterator<Item = (String, Option<String>)>,
) -> Result<Vec<(String, String)>, RequestError> {
    let mut out = Vec::new();
    for (name, value) in env {
        if !valid_env_name(&name) {
            return Err(RequestError::EnvName(name));
        }
        if let Some(value) = value {
            if value.contains('\0') {
                return Err(RequestError::EnvNul(name));
            }
            out.push((name, value));
        }
    }
    Ok(out)
}

/// `cwd` must be an existing directory; relative ones resolve against `session`'s directory
/// or the workspace.
pub async fn existing_dir(
    paths: &Paths,
    session: Option<&str>,
    cwd: &str,
) -> Result<PathBuf, RequestError> {
    if cwd.trim().is_empty() || cwd.contains('\0') {
        return Err(RequestError::Cwd);
    }
    let path = paths
        .resolve(session, "cwd", cwd, Follow::Final)
        .await
        .map_err(RequestError::Path)?;
    if path.is_dir() {
        Ok(path)
    } else {
        Err(RequestError::CwdNotFound {
            cwd: cwd.to_string(),
        })
    }
}

/// A session id's shape: 1 to 256 bytes, not blank, no NUL.
pub fn checked_session_id(id: &str, field: &'static str) -> Result<(), RequestError> {
    if id.trim().is_empty() || id.contains('\0') || id.len() > 256 {
        return Err(RequestError::SessionId { field });
    }
    Ok(())
}

/// A signal by name (`SIGUSR1`, `usr1`) or number (`10`, `"10"`).
pub fn signal_named(value: &serde_json::Value) -> Result<Signal, RequestError> {
    let invalid = |reason: String| RequestError::Signal { reason };
    let text = match value {
        serde_json::Value::Number(number) => number.to_string(),
        serde_json::Value::String(text) => text.trim().to_string(),
        other => return Err(invalid(format!("{other} is not a signal name or number"))),
    };
    if let Ok(number) = text.parse::<i32>() {
        return Signal::try_from(number).map_err(|_| invalid(format!("{number} is not a signal")));
    }
    let upper = text.to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    name.parse::<Signal>()
        .map_err(|_| invalid(format!("{text:?} is not a signal name")))
}
