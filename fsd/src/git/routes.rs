//! `POST /api/git/checkout`: a JSON answer when the clone is done, or, with
//! `Accept: text/event-stream`, git's progress as it comes (`progress` events with `line`)
//! ending in `complete` (the JSON answer's fields) or `error` (the error envelope).

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use fsd_api::git::{GitCheckoutEvent, GitCheckoutRequest};
use fsd_process::SessionManager;

use super::ops;
use super::service;
use crate::channel::receiver_stream;
use crate::error::ApiError;
use crate::paths::Paths;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<SessionManager>: FromRef<S>,
    Paths: FromRef<S>,
{
    Router::new().route("/api/git/checkout", post(checkout))
}

pub async fn checkout(
    State(sessions): State<Arc<SessionManager>>,
    State(paths): State<Paths>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<GitCheckoutRequest>,
) -> Result<Response, ApiError> {
    let streaming = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if !streaming {
        return Ok(Json(ops::checkout(&sessions, &paths, &req).await?).into_response());
    }
    let plan = ops::checked(&sessions, &paths, &req).await?;
    let world = sessions.config().world.clone();
    let env = sessions.config().base_env.clone();
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
            Ok(cloned) => GitCheckoutEvent::Complete(ops::answer(&plan, cloned.branch)),
            Err(error) => GitCheckoutEvent::Error(ApiError::from(error).body()),
        };
        let _ = events.send(last).await;
    });
    Ok(sse_response(receiver_stream(receiver)).into_response())
}
