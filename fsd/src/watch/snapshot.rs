//! Change tokens for snapshots: a snapshot records a token of its directory, and the next
//! snapshot asks what changed since it, so it looks only at those paths. The watch includes
//! every path (`**`: no default excludes; a backup leaves out only what its own excludes
//! say) and is kept like any token's watch (10 idle minutes, saved across restarts).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fsd_watch::Filter;

use super::key::WatchKey;
use super::service::{Hold, WatchService};
use fsd_watch::changes::Change;

/// The token of `dir` now, and what changed since `since` when the journal can say
/// (relative paths, each with a rename's origin). No token when the directory cannot be
/// watched; no changes when `since` is absent, from another journal, or beyond what the
/// journal knows (the caller then compares the whole tree).
pub async fn token_and_changes(
    watches: &Arc<WatchService>,
    dir: &Path,
    since: Option<&str>,
) -> (Option<String>, Option<Vec<(PathBuf, Option<PathBuf>)>>) {
    let Ok(dir) = std::fs::canonicalize(dir) else {
        return (None, None);
    };
    let include = vec!["**".to_string()];
    let Ok(filter) = Filter::new(&include, &[]) else {
        return (None, None);
    };
    let key = WatchKey {
        path: dir.clone(),
        recursive: true,
        include,
        exclude: Vec::new(),
    };
    let started = {
        let watches = watches.clone();
        tokio::task::spawn_blocking(move || watches.get_or_start(&key, filter, Hold::Retain)).await
    };
    let Ok(Ok((root, _))) = started else {
        return (None, None);
    };
    root.caught_up().await;
    let journal = root.journal();
    let token = format!("{}:{}", root.id, journal.cursor());
    let cursor = since
        .and_then(|since| since.rsplit_once(':'))
        .filter(|(id, _)| *id == root.id)
        .and_then(|(_, cursor)| cursor.parse::<u64>().ok())
        .filter(|cursor| *cursor <= journal.cursor());
    // A path outside the directory (it cannot be) makes the list unusable, not shorter.
    let changes = cursor
        .and_then(|cursor| journal.changes_since(cursor))
        .and_then(|listed| {
            listed
                .into_iter()
                .map(|listed| {
                    let path = listed.path.strip_prefix(&dir).ok()?.to_path_buf();
                    let from = match listed.change {
                        Change::Renamed { from } => {
                            Some(from.strip_prefix(&dir).ok()?.to_path_buf())
                        }
                        _ => None,
                    };
                    Some((path, from))
                })
                .collect::<Option<Vec<_>>>()
        });
    (Some(token), changes)
}
