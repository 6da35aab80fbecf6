//! The domain's typed operations: a request in, a response or an [`ApiError`] out, no HTTP.
//! The route and the 0.12 `/rpc` are codecs over these (the route's progress stream is its
//! own).

use fsd_api::git::{GitCheckoutRequest, GitCheckoutResponse};

use fsd_process::SessionManager;

use super::redact::redact;
use super::service::{self, ClonePlan};
use crate::error::ApiError;
use crate::paths::{Follow, Paths};
use crate::time::now_rfc3339;

/// Clones `req`'s repository, answering when the clone is done.
pub async fn checkout(
    sessions: &SessionManager,
    paths: &Paths,
    req: &GitCheckoutRequest,
) -> Result<GitCheckoutResponse, ApiError> {
    let plan = checked(sessions, paths, req).await?;
    let config = sessions.config();
    let cloned = service::clone(&config.world, &config.base_env, &plan, None).await?;
    Ok(answer(&plan, cloned.branch))
}

/// The request checked, its target resolved against the session's directory.
pub async fn checked(
    sessions: &SessionManager,
    paths: &Paths,
    req: &GitCheckoutRequest,
) -> Result<ClonePlan, ApiError> {
    let workspace = sessions.config().workspace.clone();
    let target = match req.target_dir.as_deref() {
        Some(dir) if !dir.is_empty() => {
            let session = req.session_id.as_deref();
            let target = paths.in_session(session, "targetDir", dir).await;
            paths.in_workspace("targetDir", &target, Follow::Final)?;
            Some(target)
        }
        _ => None,
    };
    Ok(service::plan(
        &req.repo_url,
        req.branch.as_deref(),
        req.depth.as_ref(),
        target.as_deref(),
        req.timeout_ms.as_ref(),
        &workspace,
    )?)
}

pub fn answer(plan: &ClonePlan, branch: String) -> GitCheckoutResponse {
    GitCheckoutResponse {
        success: true,
        repo_url: redact(&plan.url),
        branch,
        target_dir: plan.target.display().to_string(),
        timestamp: now_rfc3339(),
    }
}
