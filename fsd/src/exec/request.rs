//! What a command request says, whichever route brought it (`/api/execute`, its stream,
//! `background: true`, `/api/process/start`): the command, its session, env and cwd,
//! checked in one place. A request the caller got wrong is a [`RequestError`] (inside an
//! [`ExecError`] where the check also looks at sessions), which `crate::error` turns into
//! the wire error.

use std::collections::BTreeMap;
use std::path::PathBuf;

use fsd_api::DISABLE_SESSION_TOKEN;
use fsd_api::exec::ExecuteRequest;
use fsd_api::process::StartProcessRequest;

use super::error::{ExecError, RequestError};
use super::script::valid_env_name;
use super::session::CommandSpec;
use super::sessions::SessionManager;
use crate::files::paths::Follow;

/// The session a request without one runs in.
pub const DEFAULT_SESSION: &str = "default";

/// A command request, from any route.
pub struct CommandRequest<'a> {
    pub command: &'a str,
    pub env: Option<&'a BTreeMap<String, Option<String>>>,
    pub cwd: Option<&'a str>,
}

impl<'a> From<&'a ExecuteRequest> for CommandRequest<'a> {
    fn from(req: &'a ExecuteRequest) -> Self {
        Self {
            command: &req.command,
            env: req.env.as_ref(),
            cwd: req.cwd.as_deref(),
        }
    }
}

impl<'a> CommandRequest<'a> {
    /// A process start, with the reference's own code for an empty command.
    pub fn for_process(req: &'a StartProcessRequest) -> Result<Self, RequestError> {
        if req.command.trim().is_empty() {
            return Err(RequestError::EmptyProcessCommand);
        }
        Ok(Self {
            command: &req.command,
            env: req.env.as_ref(),
            cwd: req.cwd.as_deref(),
        })
    }

    /// Checks the request and resolves its cwd against `session_id`'s directory.
    pub async fn spec(
        &self,
        sessions: &SessionManager,
        session_id: &str,
    ) -> Result<CommandSpec, ExecError> {
        if self.command.trim().is_empty() {
            return Err(RequestError::EmptyCommand.into());
        }
        if self.command.contains('\0') {
            return Err(RequestError::NulInCommand.into());
        }
        let env = match self.env {
            Some(env) => checked_env(env.clone().into_iter())?,
            None => Vec::new(),
        };
        let cwd = match self.cwd {
            Some(cwd) => {
                let base = if session_id == DISABLE_SESSION_TOKEN {
                    None
                } else {
                    sessions.cwd_of(session_id).await
                };
                Some(existing_dir(sessions, cwd, base)?)
            }
            None => None,
        };
        Ok(CommandSpec {
            command: self.command.to_string(),
            cwd,
            env,
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

/// `cwd` must be an existing directory; relative ones resolve against `base` (the session's
/// directory) or the workspace.
pub fn existing_dir(
    sessions: &SessionManager,
    cwd: &str,
    base: Option<PathBuf>,
) -> Result<PathBuf, ExecError> {
    if cwd.trim().is_empty() || cwd.contains('\0') {
        return Err(RequestError::Cwd.into());
    }
    let config = sessions.config();
    let base = base.unwrap_or_else(|| config.workspace.clone());
    let path = config
        .paths
        .resolve_in("cwd", cwd, &base, Follow::Final)
        .map_err(ExecError::Path)?;
    if path.is_dir() {
        Ok(path)
    } else {
        Err(ExecError::CwdNotFound {
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
