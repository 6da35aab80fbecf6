//! `POST /api/git/checkout`: a JSON answer when the clone is done, or, with
//! `Accept: text/event-stream`, git's progress as it comes (`progress` events with `line`)
//! ending in `complete` (the JSON answer's fields) or `error` (the error envelope).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use fsd_api::git::{GitCheckoutEvent, GitCheckoutRequest, GitCheckoutResponse};

use super::redact::redact;
use super::service::{self, ClonePlan};
use crate::error::ApiError;
use crate::paths::Follow;
use crate::state::AppState;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;
use crate::wire::time::now_rfc3339;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/git/checkout", post(checkout))
}

pub async fn checkout(
    State(state): State<AppState>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<GitCheckoutRequest>,
) -> Result<Response, ApiError> {
    let plan = checked(&state, &req).await?;
    let world = state.sessions.config().world.clone();
    let env = state.sessions.config().base_env.clone();
    let streaming = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if !streaming {
        let cloned = service::clone(&world, &env, &plan, None).await?;
        return Ok(Json(answer(&plan, cloned.branch)).into_response());
    }
    let (progress, mut lines) = tokio::sync::mpsc::channel(64);
    let (events, receiver) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        let forward = {
            let events = events.clone();
            async move {
                while let Some(line) = lines.recv().await {
                    let _ = events.send(GitCheckoutEvent::Progress { line }).await;
                }
            }
        };
        let (cloned, ()) =
            tokio::join!(service::clone(&world, &env, &plan, Some(progress)), forward);
        let last = match cloned {
            Ok(cloned) => GitCheckoutEvent::Complete(answer(&plan, cloned.branch)),
            Err(error) => GitCheckoutEvent::Error(ApiError::from(error).body()),
        };
        let _ = events.send(last).await;
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|event| (event, receiver))
    });
    Ok(sse_response(stream).into_response())
}

/// The request checked, its target resolved against the session's directory.
async fn checked(state: &AppState, req: &GitCheckoutRequest) -> Result<ClonePlan, ApiError> {
    let workspace = state.sessions.config().workspace.clone();
    let target = match req.target_dir.as_deref() {
        Some(dir) if !dir.is_empty() => {
            let session = req.session_id.as_deref();
            let target = state.paths.in_session(session, "targetDir", dir).await;
            state
                .paths
                .in_workspace("targetDir", &target, Follow::Final)?;
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

fn answer(plan: &ClonePlan, branch: String) -> GitCheckoutResponse {
    GitCheckoutResponse {
        success: true,
        repo_url: redact(&plan.url),
        branch,
        target_dir: plan.target.display().to_string(),
        timestamp: now_rfc3339(),
    }
}
