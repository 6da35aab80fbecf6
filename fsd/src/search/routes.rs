//! `POST /api/search` (one answer, sorted by path and line) and `POST /api/search/stream`
//! (SSE: each result as it is found, then `complete`). The engine runs on the blocking
//! pool; a client that goes away stops it.

use axum::extract::{FromRef, State};
use axum::response::Response;
use axum::routing::post;
use axum::{Json, Router};
use fsd_api::Operation;
use fsd_api::search::{
    DEFAULT_MAX_FILES, MAX_FILES_LIMIT, MAX_RESULTS_LIMIT, ReplaceRequest, ReplaceResponse,
    ReplacedFile, SearchEvent, SearchMatch, SearchRequest, SearchResponse, Skipped,
};
use fsd_search::{Found, Query, Refused, Replacer, Stopped, Summary, Within};
use futures_util::StreamExt;
use std::io::Read;
use std::sync::Arc;
use tokio::sync::mpsc;

use super::request;
use crate::channel::receiver_stream;
use crate::error::{ApiError, OperationExt};
use crate::files::FileService;
use crate::time::now_rfc3339;
use crate::wire::json::JsonBody;
use crate::wire::sse::sse_response;

/// The domain's routes.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<FileService>: FromRef<S>,
{
    Router::new()
        .route("/api/search", post(search))
        .route("/api/search/stream", post(search_stream))
        .route("/api/replace", post(replace))
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

/// A file the search found, read whole for a replace: confined, beneath its root, as the
/// search read it.
fn read_found(within: Option<&Within>, path: &std::path::Path) -> Result<Vec<u8>, Refused> {
    match within {
        None => Ok(std::fs::read(path)?),
        Some(within) => {
            let mut content = Vec::new();
            within.open(path)?.read_to_end(&mut content)?;
            Ok(content)
        }
    }
}

fn skipped(summary: &Summary) -> Skipped {
    Skipped {
        outside: summary.outside,
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
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<SearchRequest>,
) -> Result<Json<SearchResponse>, ApiError> {
    let op = Operation::FileRead;
    let query = request::query(files.paths(), &req).await?;
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
        skipped: skipped(&summary),
        timestamp: now_rfc3339(),
    }))
}

pub async fn search_stream(
    State(files): State<Arc<FileService>>,
    JsonBody(req): JsonBody<SearchRequest>,
) -> Result<Response, ApiError> {
    let query = request::query(files.paths(), &req).await?;
    // A pattern or glob that does not compile is an error before the stream, not in it.
    fsd_search::check(&query)?;
    let (sender, receiver) = mpsc::channel(256);
    let task = start(query, sender);
    let results = receiver_stream(receiver).map(|found| match found {
        Found::File(path) => SearchEvent::File {
            path: display(&path),
        },
        Found::Line(line) => SearchEvent::Match(wire_match(line)),
    });
    let complete = futures_util::stream::once(async move {
        let summary = task.await.ok().and_then(Result::ok).unwrap_or(Summary {
            files_searched: 0,
            results: 0,
            stopped: None,
            outside: 0,
        });
        SearchEvent::Complete {
            files_searched: summary.files_searched,
            results: summary.results,
            truncated: summary.stopped.is_some(),
            stopped: stopped(&summary),
            skipped: skipped(&summary),
            timestamp: now_rfc3339(),
        }
    });
    Ok(sse_response(results.chain(complete)))
}

/// `POST /api/replace`: the files the search finds, each rewritten atomically through the
/// file service (or, on a dry run, its diff).
pub async fn replace(
    State(service): State<Arc<FileService>>,
    JsonBody(req): JsonBody<ReplaceRequest>,
) -> Result<Json<ReplaceResponse>, ApiError> {
    let op = Operation::FileWrite;
    let Some(pattern) = req.search.pattern.clone() else {
        return Err(ApiError::validation(
            "pattern",
            "is required",
            "INVALID_PATTERN",
        ));
    };
    let search = SearchRequest {
        max_results: Some(MAX_RESULTS_LIMIT),
        max_line_bytes: None,
        context: None,
        ..req.search.clone()
    };
    let query = request::query(service.paths(), &search).await?;
    let within = query.within.clone();
    let max_files = request::bounded(
        "maxFiles",
        req.max_files,
        DEFAULT_MAX_FILES,
        MAX_FILES_LIMIT,
    )?;
    let replacer = Replacer::new(
        &pattern,
        search.literal.unwrap_or(false),
        search.case_insensitive.unwrap_or(false),
        &req.replacement,
    )?;
    let (sender, mut receiver) = mpsc::channel(256);
    let task = start(query, sender);
    let mut paths = std::collections::BTreeSet::new();
    let mut truncated = false;
    while let Some(found) = receiver.recv().await {
        if let Found::Line(line) = found {
            paths.insert(line.path);
            if paths.len() as u64 > max_files {
                truncated = true;
                break;
            }
        }
    }
    drop(receiver);
    let summary = task.await.ok().and_then(Result::ok);
    let mut outside = summary.map_or(0, |summary| summary.outside);
    let dry_run = req.dry_run.unwrap_or(false);
    let mut files = Vec::new();
    let mut replacements = 0;
    for path in paths.into_iter().take(max_files as usize) {
        let raw = display(&path);
        let (within, found) = (within.clone(), path.clone());
        let read = tokio::task::spawn_blocking(move || read_found(within.as_deref(), &found))
            .await
            .unwrap_or_else(|join| Err(Refused::Io(std::io::Error::other(join))));
        let content = match read {
            Ok(content) => content,
            Err(Refused::Outside) => {
                outside += 1;
                continue;
            }
            Err(Refused::Io(_)) => continue,
        };
        let Some(replaced) = replacer.apply(&content) else {
            continue;
        };
        replacements += replaced.count;
        let diff = if dry_run {
            Some(fsd_search::unified_diff(&raw, &replaced.changes))
        } else {
            let bytes = bytes::Bytes::from(replaced.content);
            service.write(None, &raw, bytes, None).await.op(op)?;
            None
        };
        files.push(ReplacedFile {
            path: raw,
            replacements: replaced.count,
            diff,
        });
    }
    Ok(Json(ReplaceResponse {
        success: true,
        dry_run,
        files,
        replacements,
        truncated,
        skipped: Skipped { outside },
        timestamp: now_rfc3339(),
    }))
}
