//! `POST /api/search` (one answer, sorted by path and line) and `POST /api/search/stream`
//! (SSE: each result as it is found, then `complete`). The engine runs on the blocking
//! pool; a client that goes away stops it.

use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use axum::{Json, Router};
use fsd_api::Operation;
use fsd_api::search::{SearchEvent, SearchMatch, SearchRequest, SearchResponse};
use fsd_search::{Found, Query, Stopped, Summary};
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::request;
use crate::error::{ApiError, OperationExt};
use crate::state::AppState;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;
use crate::wire::time::now_rfc3339;

/// The domain's routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/search", post(search))
        .route("/api/search/stream", post(search_stream))
}

fn display(path: &std::path::Path) -> String {
    path.display().to_string()
}

fn wire_match(line: fsd_search::Line) -> SearchMatch {
    SearchMatch {
        path: display(&line.path),
        line_number: line.line_number,
        column: line.column,
        line: line.text,
        truncated: line.truncated,
        before: line.before,
        after: line.after,
    }
}

fn stopped(summary: &Summary) -> Option<String> {
    match summary.stopped {
        Some(Stopped::MaxResults) => Some("max_results".into()),
        Some(Stopped::Timeout) => Some("timeout".into()),
        Some(Stopped::Caller) | None => None,
    }
}

/// Runs `query` on the blocking pool; each result goes to `results` (the search stops when
/// nobody takes them).
fn start(
    query: Query,
    results: mpsc::Sender<Found>,
) -> tokio::task::JoinHandle<Result<Summary, fsd_search::SearchError>> {
    tokio::task::spawn_blocking(move || {
        fsd_search::search(&query, |found| results.blocking_send(found).is_ok())
    })
}

pub async fn search(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<SearchRequest>,
) -> Result<Json<SearchResponse>, ApiError> {
    let op = Operation::FileRead;
    let query = request::query(&state.paths, &req).await?;
    let (sender, mut receiver) = mpsc::channel(256);
    let task = start(query, sender);
    let (mut files, mut matches) = (Vec::new(), Vec::new());
    while let Some(found) = receiver.recv().await {
        match found {
            Found::File(path) => files.push(display(&path)),
            Found::Line(line) => matches.push(wire_match(line)),
        }
    }
    let summary = task
        .await
        .map_err(|error| ApiError::new(fsd_api::ErrorCode::InternalError, error.to_string()))?
        .op(op)?;
    files.sort();
    matches.sort_by(|a, b| (&a.path, a.line_number).cmp(&(&b.path, b.line_number)));
    Ok(Json(SearchResponse {
        success: true,
        path: req.path,
        files,
        matches,
        files_searched: summary.files_searched,
        truncated: summary.stopped.is_some(),
        stopped: stopped(&summary),
        timestamp: now_rfc3339(),
    }))
}

pub async fn search_stream(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<SearchRequest>,
) -> Result<Response, ApiError> {
    let query = request::query(&state.paths, &req).await?;
    // A pattern or glob that does not compile is an error before the stream, not in it.
    fsd_search::check(&query)?;
    let (sender, receiver) = mpsc::channel(256);
    let task = start(query, sender);
    let results = futures_util::stream::unfold(receiver, |mut receiver| async move {
        let found = receiver.recv().await?;
        let event = match found {
            Found::File(path) => SearchEvent::File {
                path: display(&path),
            },
            Found::Line(line) => SearchEvent::Match(wire_match(line)),
        };
        Some((event, receiver))
    });
    let complete = futures_util::stream::once(async move {
        let summary = task.await.ok().and_then(Result::ok).unwrap_or(Summary {
            files_searched: 0,
            results: 0,
            stopped: None,
        });
        SearchEvent::Complete {
            files_searched: summary.files_searched,
            results: summary.results,
            truncated: summary.stopped.is_some(),
            stopped: stopped(&summary),
            timestamp: now_rfc3339(),
        }
    });
    Ok(sse_response(results.chain(complete)))
}
