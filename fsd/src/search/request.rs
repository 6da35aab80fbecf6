//! What a search request asks for, checked and bounded: each field out of range is named.

use std::time::Duration;

use fsd_api::search::{
    DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_RESULTS, DEFAULT_TIMEOUT_MS, MAX_CONTEXT,
    MAX_LINE_BYTES_LIMIT, MAX_RESULTS_LIMIT, MAX_TIMEOUT_MS, SearchRequest,
};
use fsd_search::Query;

use crate::error::ApiError;
use crate::paths::{Follow, Paths};

/// `value` within `1..=max`, or a `VALIDATION_FAILED` naming `field`.
pub fn bounded(field: &str, value: Option<u64>, default: u64, max: u64) -> Result<u64, ApiError> {
    match value {
        None => Ok(default),
        Some(value) if (1..=max).contains(&value) => Ok(value),
        Some(value) => Err(ApiError::validation(
            field,
            format!("must be 1 to {max}, got {value}"),
            "INVALID_RANGE",
        )),
    }
}

/// The engine's query for `req`, its root resolved through the path policy.
pub async fn query(paths: &Paths, req: &SearchRequest) -> Result<Query, ApiError> {
    let root = paths
        .resolve(req.session_id.as_deref(), "path", &req.path, Follow::Final)
        .await?;
    if req.pattern.as_deref() == Some("") {
        return Err(ApiError::validation(
            "pattern",
            "must not be empty",
            "INVALID_PATTERN",
        ));
    }
    let context = req.context.unwrap_or(0);
    if context > MAX_CONTEXT {
        return Err(ApiError::validation(
            "context",
            format!("must be at most {MAX_CONTEXT}, got {context}"),
            "INVALID_RANGE",
        ));
    }
    let max_line_bytes = bounded(
        "maxLineBytes",
        req.max_line_bytes.map(u64::from),
        DEFAULT_MAX_LINE_BYTES.into(),
        MAX_LINE_BYTES_LIMIT.into(),
    )?;
    Ok(Query {
        root,
        pattern: req.pattern.clone(),
        literal: req.literal.unwrap_or(false),
        case_insensitive: req.case_insensitive.unwrap_or(false),
        globs: req.globs.clone().unwrap_or_default(),
        hidden: req.hidden.unwrap_or(false),
        no_ignore: req.no_ignore.unwrap_or(false),
        follow_links: req.follow_links.unwrap_or(false),
        // Under `--confine`, the kernel keeps every file the walk opens beneath the roots.
        within: paths.policy().beneath().cloned(),
        context: context as usize,
        max_results: bounded(
            "maxResults",
            req.max_results,
            DEFAULT_MAX_RESULTS,
            MAX_RESULTS_LIMIT,
        )?,
        max_line_bytes: max_line_bytes as usize,
        timeout: Duration::from_millis(bounded(
            "timeoutMs",
            req.timeout_ms,
            DEFAULT_TIMEOUT_MS,
            MAX_TIMEOUT_MS,
        )?),
    })
}
