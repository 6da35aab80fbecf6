//! The one resolver every route takes its paths through: a relative path means the
//! session's current directory when the request names a live session (as the reference
//! has it), else the workspace; then the policy applies (`--confine`'s roots, the daemon's
//! own `/proc`), whatever the route (files, a command's `cwd`, a code context's `cwd`, a
//! clone's target, a backup's `dir`, a mount point).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fsd_api::DISABLE_SESSION_TOKEN;
use fsd_process::SessionManager;

use super::error::PathError;
use super::policy::{Follow, PathPolicy, validate};

#[derive(Clone)]
pub struct Paths {
    policy: PathPolicy,
    sessions: Arc<SessionManager>,
}

impl Paths {
    pub fn new(policy: PathPolicy, sessions: Arc<SessionManager>) -> Self {
        Self { policy, sessions }
    }

    pub fn policy(&self) -> &PathPolicy {
        &self.policy
    }

    pub fn workspace(&self) -> &Path {
        self.policy.workspace()
    }

    /// The directory a relative path of a request on `session` means: the session's
    /// current directory when it is live, else the workspace.
    pub async fn base(&self, session: Option<&str>) -> PathBuf {
        match session {
            Some(id) if id != DISABLE_SESSION_TOKEN => self.sessions.cwd_of(id).await,
            _ => None,
        }
        .unwrap_or_else(|| self.workspace().to_path_buf())
    }

    /// `raw` (the value of request field `field`), resolved from `session`'s directory and
    /// checked by the policy.
    pub async fn resolve(
        &self,
        session: Option<&str>,
        field: &'static str,
        raw: &str,
        follow: Follow,
    ) -> Result<PathBuf, PathError> {
        let base = self.base(session).await;
        self.policy.resolve_in(field, raw, &base, follow)
    }

    /// `raw` from a request that names no session: resolved from the workspace and checked
    /// by the policy.
    pub fn in_workspace(
        &self,
        field: &'static str,
        raw: &str,
        follow: Follow,
    ) -> Result<PathBuf, PathError> {
        self.policy.resolve(field, raw, follow)
    }

    /// `raw` as the path it names on `session`: joined to the session's directory when it
    /// is relative, as given otherwise (and when it is invalid, so the policy refuses it
    /// naming the field). Services that report errors by the path they worked on take this.
    pub async fn in_session(
        &self,
        session: Option<&str>,
        field: &'static str,
        raw: &str,
    ) -> String {
        let relative = !Path::new(raw).is_absolute() && validate(field, raw).is_ok();
        match session {
            Some(id) if relative && id != DISABLE_SESSION_TOKEN => {
                match self.sessions.cwd_of(id).await {
                    Some(cwd) => cwd.join(raw).display().to_string(),
                    None => raw.to_string(),
                }
            }
            _ => raw.to_string(),
        }
    }
}
