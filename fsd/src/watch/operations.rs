//! The watch domain's operations with typed requests: a watch's event stream and a token
//! check. `POST /api/watch`, `/api/watch/check`, 0.12's `/rpc` and the next line's
//! `watch` domain all run these.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fsd_api::watch::{
    CheckChangesRequest, CheckChangesResponse, PathChange, WatchEvent, WatchRequest,
};
use fsd_watch::changes::{Change, Listed};
use fsd_watch::{Event, EventKind, Filter};
use futures_util::{StreamExt, stream};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use super::error::WatchRequestError;
use super::key::WatchKey;
use super::service::{Hold, Root, WatchService};
use crate::error::ApiError;
use crate::paths::Paths;
use crate::time::now_rfc3339;

/// A batch closes after this much quiet, or at [`COALESCE_MAX`]: bursts collapse as in the
/// reference's 75 ms windows. The first batch after this much quiet goes out at once, with
/// what is already queued and nothing waited for, so a lone change arrives in well under a
/// millisecond; the rest of a burst follows in windows. Longer than the engine's own burst
/// window, whose reports of a burst come that far apart and are not a quiet spell.
const COALESCE_QUIET: Duration = fsd_watch::BURST_AT_MOST.saturating_mul(2);
const COALESCE_MAX: Duration = Duration::from_millis(75);
const EVENT_TYPES: &[&str] = &[
    "create",
    "modify",
    "delete",
    "move_from",
    "move_to",
    "attrib",
];
const DEFAULT_EVENT_TYPES: &[&str] = &["create", "modify", "delete", "move_from", "move_to"];

/// A watch's events: `watching` once its root is watched, then batches of changes as they
/// come, for as long as the stream is read. Every transport's watch is this call.
pub async fn events(
    watches: &Arc<WatchService>,
    paths: &Paths,
    req: &WatchRequest,
) -> Result<impl futures_util::Stream<Item = WatchEvent> + Send + 'static, ApiError> {
    let (key, filter, wanted) = checked(paths, req)?;
    let watches = Arc::clone(watches);
    // The subscription is made where the root is got, so a caller gone in between drops
    // it (and its count) with the task's output.
    let subscription = tokio::task::spawn_blocking(move || {
        let (root, _) = watches.get_or_start(&key, filter, Hold::Subscribe)?;
        Ok::<_, fsd_watch::WatchError>(watches.subscription(root))
    })
    .await
    .map_err(|err| WatchRequestError::Start(err.to_string()))??;
    let watching = WatchEvent::Watching {
        path: subscription.root.path.display().to_string(),
        watch_id: subscription.root.id.clone(),
    };
    let batches = stream::unfold((subscription, None), move |(mut subscription, last)| {
        let wanted = wanted.clone();
        async move {
            let last: Option<tokio::time::Instant> = last;
            let first = match subscription.events.recv().await {
                Ok(event) => event,
                Err(RecvError::Lagged(_)) => {
                    return Some((
                        vec![WatchEvent::Resync {
                            reason: "overflow".into(),
                        }],
                        (subscription, last),
                    ));
                }
                Err(RecvError::Closed) => return None,
            };
            let mut batch = vec![first];
            let idle = last.is_none_or(|at| at.elapsed() >= COALESCE_QUIET);
            let lost = || Event {
                kind: EventKind::Overflow,
                path: PathBuf::new(),
                from: None,
                is_dir: true,
            };
            if idle {
                // What is already queued goes with it; nothing is waited for.
                loop {
                    match subscription.events.try_recv() {
                        Ok(event) => batch.push(event),
                        Err(TryRecvError::Lagged(_)) => batch.push(lost()),
                        Err(_) => break,
                    }
                }
            } else {
                let window = tokio::time::sleep(COALESCE_MAX);
                tokio::pin!(window);
                loop {
                    tokio::select! {
                        () = &mut window => break,
                        () = tokio::time::sleep(COALESCE_QUIET) => break,
                        next = subscription.events.recv() => match next {
                            Ok(event) => batch.push(event),
                            Err(RecvError::Lagged(_)) => batch.push(lost()),
                            Err(RecvError::Closed) => break,
                        },
                    }
                }
            }
            Some((
                to_wire(batch, &wanted),
                (subscription, Some(tokio::time::Instant::now())),
            ))
        }
    });
    Ok(stream::once(async { watching }).chain(batches.flat_map(stream::iter)))
}

/// Wire events for a batch: renames as a `move_from`/`move_to` pair, duplicates dropped,
/// only the asked-for types.
fn to_wire(batch: Vec<Event>, wanted: &HashSet<String>) -> Vec<WatchEvent> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let timestamp = now_rfc3339();
    for event in batch {
        let path = event.path.display().to_string();
        let parts: Vec<(&str, String, Option<String>)> = match event.kind {
            EventKind::Overflow => {
                out.push(WatchEvent::Resync {
                    reason: "overflow".into(),
                });
                continue;
            }
            EventKind::Create | EventKind::MoveIn => vec![("create", path, None)],
            EventKind::Modify => vec![("modify", path, None)],
            EventKind::Delete => vec![("delete", path, None)],
            EventKind::Attrib => vec![("attrib", path, None)],
            EventKind::Rename => {
                let from = event
                    .from
                    .as_ref()
                    .map(|f| f.display().to_string())
                    .unwrap_or_default();
                vec![
                    ("move_from", from.clone(), None),
                    ("move_to", path, Some(from)),
                ]
            }
        };
        for (kind, path, from) in parts {
            if wanted.contains(kind) && seen.insert((kind, path.clone(), event.is_dir)) {
                out.push(WatchEvent::Event {
                    event_type: kind.to_string(),
                    path,
                    is_directory: event.is_dir,
                    timestamp: timestamp.clone(),
                    from,
                });
            }
        }
    }
    out
}

/// What changed under a path since a token (`unchanged`, `changed` with the paths when
/// asked, or `resync` with why). Every transport's check is this call.
pub async fn changes(
    watches: &Arc<WatchService>,
    paths: &Paths,
    req: &CheckChangesRequest,
) -> Result<CheckChangesResponse, ApiError> {
    let since = match &req.since {
        None => None,
        Some(token) => Some(parse_token(token)?),
    };
    let (key, filter, _) = checked(paths, &req.watch())?;
    let (mut root, mut created) = root_for(watches, key.clone(), filter.clone()).await?;
    root.caught_up().await;
    if root.ended() {
        // The watched directory was deleted or moved away before this call: the key
        // watches what is at the path now (404 when nothing is), and the token, from the
        // old directory, is answered `resync`.
        (root, created) = root_for(watches, key, filter).await?;
    }
    let journal = root.journal();
    let current = journal.cursor();
    let version = format!("{}:{current}", root.id);
    let want_touched = req.touched == Some(true);
    let touched = |cursor: Option<u64>| -> Option<Vec<String>> {
        if !want_touched {
            return None;
        }
        match cursor {
            None => Some(Vec::new()),
            Some(cursor) => journal.touched_since(cursor).map(|paths| {
                paths
                    .into_iter()
                    .map(|path| path.display().to_string())
                    .collect()
            }),
        }
    };
    let answer = |status: &str,
                  reason: Option<&str>,
                  changes: Option<Vec<PathChange>>,
                  touched: Option<Vec<String>>| CheckChangesResponse {
        success: true,
        status: status.to_string(),
        reason: reason.map(str::to_string),
        version: version.clone(),
        changes,
        touched,
        timestamp: now_rfc3339(),
    };
    let want_paths = req.paths == Some(true);
    let reply = match since {
        None => answer("unchanged", None, want_paths.then(Vec::new), touched(None)),
        Some((id, _)) if id != root.id => answer(
            "resync",
            Some(if created { "expired" } else { "restarted" }),
            None,
            None,
        ),
        Some((_, cursor)) if cursor > current => {
            return Err(WatchRequestError::FutureToken.into());
        }
        Some((_, cursor)) if cursor == current => {
            answer("unchanged", None, want_paths.then(Vec::new), touched(None))
        }
        Some((_, cursor)) => {
            let changes = match want_paths {
                true => match journal.changes_since(cursor) {
                    Some(changes) => Some(changes.into_iter().map(path_change).collect()),
                    None => return Ok(answer("resync", Some("overflow"), None, None)),
                },
                false => None,
            };
            match (want_touched, touched(Some(cursor))) {
                (true, None) => answer("resync", Some("overflow"), None, None),
                (_, touched) => answer("changed", None, changes, touched),
            }
        }
    };
    Ok(reply)
}

fn path_change(
    Listed {
        path,
        change,
        is_dir,
    }: Listed,
) -> PathChange {
    let (kind, from) = match change {
        Change::Created => ("created", None),
        Change::Modified => ("modified", None),
        Change::Deleted => ("deleted", None),
        Change::Renamed { from } => ("renamed", Some(from.display().to_string())),
    };
    PathChange {
        change: kind.to_string(),
        path: path.display().to_string(),
        from,
        is_directory: is_dir,
    }
}

/// `watch-<n>-<ms>:<cursor>`, split at the last colon.
fn parse_token(token: &str) -> Result<(String, u64), ApiError> {
    let invalid = || ApiError::from(WatchRequestError::Token);
    if token.trim().is_empty() || token.contains('\0') {
        return Err(invalid());
    }
    let (id, cursor) = token.rsplit_once(':').ok_or_else(invalid)?;
    if id.is_empty() || !cursor.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    Ok((id.to_string(), cursor.parse().map_err(|_| invalid())?))
}

/// The reference's checks: a path inside the workspace that exists, globs of the supported
/// kind, not both include and exclude, known event types.
fn checked(
    paths: &Paths,
    req: &WatchRequest,
) -> Result<(WatchKey, Filter, HashSet<String>), ApiError> {
    let raw = req.path.trim();
    if raw.is_empty() || raw.contains('\0') {
        return Err(WatchRequestError::Path.into());
    }
    let include = req.include.clone().unwrap_or_default();
    let exclude = req.exclude.clone().unwrap_or_default();
    if !include.is_empty() && !exclude.is_empty() {
        return Err(WatchRequestError::IncludeAndExclude.into());
    }
    let filter = Filter::new(&include, &exclude).map_err(|err| {
        let field = if include.is_empty() {
            "exclude"
        } else {
            "include"
        };
        WatchRequestError::Pattern {
            field,
            reason: err.to_string(),
        }
    })?;
    let wanted: HashSet<String> = match &req.events {
        Some(types) => {
            for kind in types {
                if !EVENT_TYPES.contains(&kind.as_str()) {
                    return Err(WatchRequestError::EventType(kind.clone()).into());
                }
            }
            types.iter().cloned().collect()
        }
        None => DEFAULT_EVENT_TYPES.iter().map(|s| s.to_string()).collect(),
    };
    let path = resolve_inside(paths.workspace(), raw)?;
    let mut include = include;
    let mut exclude = exclude;
    include.sort();
    include.dedup();
    exclude.sort();
    exclude.dedup();
    let key = WatchKey {
        path,
        recursive: req.recursive.unwrap_or(true),
        include,
        exclude,
    };
    Ok((key, filter, wanted))
}

/// Resolves against the workspace; outside it is 403, missing is 404 (as the reference).
/// Stricter than `crate::paths` (which allows `--allow-root`s and, without `--confine`,
/// any path): a watch is of the workspace, and its keys are canonical paths.
fn resolve_inside(workspace: &Path, raw: &str) -> Result<PathBuf, ApiError> {
    let joined = workspace.join(raw);
    let Ok(real) = std::fs::canonicalize(&joined) else {
        let outside = !joined
            .components()
            .collect::<PathBuf>()
            .starts_with(workspace);
        return Err(if outside {
            WatchRequestError::Outside { found: None }
        } else {
            WatchRequestError::Missing(raw.to_string())
        }
        .into());
    };
    if !real.starts_with(workspace) {
        return Err(WatchRequestError::Outside {
            found: Some((raw.to_string(), workspace.to_path_buf())),
        }
        .into());
    }
    Ok(real)
}

/// The root for a watch key. Starting one adds a watch per directory (about a second for
/// 100,000 of them), so it runs on the blocking pool, not on an async worker.
/// The root for a token check, retained.
async fn root_for(
    watches: &Arc<WatchService>,
    key: WatchKey,
    filter: Filter,
) -> Result<(Arc<Root>, bool), ApiError> {
    let watches = Arc::clone(watches);
    tokio::task::spawn_blocking(move || watches.get_or_start(&key, filter, Hold::Retain))
        .await
        .map_err(|err| WatchRequestError::Start(err.to_string()))?
        .map_err(ApiError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        assert_eq!(
            parse_token("watch-1-1700000000000:42").unwrap(),
            ("watch-1-1700000000000".into(), 42)
        );
        for bad in ["", "nocolon", "watch-1:", "watch-1:x", ":3", "a:\u{0}"] {
            assert!(parse_token(bad).is_err(), "{bad:?}");
        }
    }
}
