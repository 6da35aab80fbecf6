//! The two sides of a pair behind one interface. A pass asks each side the same two things
//! in the same order: what changed since the token it gave the last pass
//! ([`Endpoint::poll`]), then its tree where that changed, or whole ([`Endpoint::read`]).
//! The sandbox's side answers from its daemon (a change token; manifests whose hashes are
//! read there, no content moved); the local side from a watcher that outlives passes,
//! where one answers, and a scan that reads only the files whose stat changed.
//!
//! What only one side has stays its own: the local walk of stats that finds changes where
//! no watcher told them ([`LocalSide::walk`]), and the making of changes, whose content
//! moves differently each way (from the sandbox a tar stream that the local writers read as
//! it comes, `remote::with_incoming`; to it local files sent in its apply requests,
//! `remote::apply`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use futures_util::future::BoxFuture;

use crate::merge::Entries;
use crate::scan::{self, Ignores, ScanCache};
use crate::{Sandbox, SdkError};

use super::local::TEMP_SUFFIX;
use super::remote;

/// Changed paths told beyond this many read the side whole.
pub(super) const MOST_PATHS: usize = 20_000;

/// Where a single pass learns what changed in the local tree since an earlier pass, in
/// another process: a watcher that outlives passes (fsctl leaves one per pair) and answers
/// with a change token of its own, as the daemon does for the sandbox's side.
pub trait LocalSince: Send {
    /// The watcher's token now, every change made before this call told by tokens up to
    /// it, and the paths (absolute) changed since `since`, a token it gave earlier; paths
    /// `None` when it cannot tell (no `since`, another watcher's token, changes lost).
    /// `None` in all: no watcher answers (the tree is walked).
    fn since<'a>(
        &'a mut self,
        since: Option<&'a str>,
    ) -> BoxFuture<'a, Option<(String, Option<Vec<PathBuf>>)>>;

    /// Told when a pass that asked is over (fsctl starts a watcher then, where none ran).
    fn passed(&mut self) {}
}

/// Whether a local path is the sync's own (its state directory, its temp files): a
/// watcher waking [`TwoWay::follow`](super::TwoWay::follow) leaves those out.
pub fn is_own_path(local: &Path, path: &Path) -> bool {
    path.starts_with(local.join(scan::STATE_DIR)) || path.to_string_lossy().ends_with(TEMP_SUFFIX)
}

/// What a side tells at a pass's start.
pub(super) struct Polled {
    /// Its token now: the daemon's change token; the local watcher's (`None`: no watcher
    /// answers).
    pub token: Option<String>,
    /// The paths (relative) changed since the token asked with; `None`: it cannot tell.
    pub changed: Option<BTreeSet<String>>,
}

/// A side as a pass read it.
pub(super) struct Read {
    pub entries: Entries,
    /// What it holds that the merge cannot (devices, FIFOs, sockets, names not UTF-8).
    pub skipped: Vec<String>,
    /// The local side's records of the files it read (a stat and a hash each), which the
    /// next scan compares to; none for the sandbox, whose daemon hashes.
    pub records: ScanCache,
}

/// One side of a pair, as a pass asks it.
pub(super) trait Endpoint: Send {
    /// Its token now and the paths changed since `since`, a token it gave before.
    fn poll<'a>(&'a mut self, since: Option<&'a str>) -> BoxFuture<'a, Result<Polled, SdkError>>;

    /// Its tree at `paths` and under them, or whole (`None`).
    fn read<'a>(
        &'a mut self,
        paths: Option<&'a BTreeSet<String>>,
    ) -> BoxFuture<'a, Result<Read, SdkError>>;
}

/// The sandbox's directory of a pair, through its daemon.
pub(super) struct SandboxSide {
    pub client: Sandbox,
    /// The directory in the sandbox, relative to its workspace.
    pub dir: String,
    /// The directory as the daemon names the paths of its changes, asked once.
    root: Option<PathBuf>,
    /// What the change watch leaves out (see `TwoWay::watch_excludes`).
    watch_excludes: Vec<String>,
    /// What a read leaves out of the tree.
    exclude: Vec<String>,
}

impl SandboxSide {
    pub fn new(
        client: Sandbox,
        dir: &str,
        watch_excludes: Vec<String>,
        exclude: Vec<String>,
    ) -> Self {
        Self {
            client,
            dir: dir.to_string(),
            root: None,
            watch_excludes,
            exclude,
        }
    }
}

impl Endpoint for SandboxSide {
    /// The directory is made if missing, once in a process and at each pass that reads it
    /// whole (no `since`); the token is taken before any tree is read, so a change during
    /// the pass is seen by the next.
    fn poll<'a>(&'a mut self, since: Option<&'a str>) -> BoxFuture<'a, Result<Polled, SdkError>> {
        Box::pin(async move {
            if (since.is_none() || self.root.is_none())
                && let Err(err) = self.client.mkdir(&self.dir, true).await
                && err.code() != Some(&fsd_api::ErrorCode::FileExists)
            {
                return Err(err);
            }
            let root = match &self.root {
                Some(root) => root.clone(),
                None => {
                    let root = self.client.remote_root(&self.dir).await?;
                    self.root = Some(root.clone());
                    root
                }
            };
            let (token, changed) =
                remote::changes_since(&self.client, &self.dir, &root, since, &self.watch_excludes)
                    .await?;
            Ok(Polled {
                token: Some(token),
                changed: changed.filter(|paths| paths.len() <= MOST_PATHS),
            })
        })
    }

    fn read<'a>(
        &'a mut self,
        paths: Option<&'a BTreeSet<String>>,
    ) -> BoxFuture<'a, Result<Read, SdkError>> {
        Box::pin(async move {
            let (entries, skipped) = match paths {
                Some(paths) => remote::tree_of(&self.client, &self.dir, &self.exclude, paths).await,
                None => remote::tree(&self.client, &self.dir, &self.exclude).await,
            }?;
            Ok(Read {
                entries,
                skipped,
                records: ScanCache::default(),
            })
        })
    }
}

/// The local directory of a pair, for one pass: the watcher that outlives passes where
/// one answers, and the last scan's records, which the pass takes from its state for the
/// read and gives back after.
pub(super) struct LocalSide<'w> {
    root: PathBuf,
    ignores: Ignores,
    watcher: Option<&'w mut dyn LocalSince>,
    pub records: ScanCache,
}

impl<'w> LocalSide<'w> {
    pub fn new(root: &Path, ignores: &Ignores, watcher: Option<&'w mut dyn LocalSince>) -> Self {
        Self {
            root: root.to_path_buf(),
            ignores: ignores.clone(),
            watcher,
            records: ScanCache::default(),
        }
    }

    /// The paths changed since the pass that left `ancestor` and the records: a walk of
    /// stats against them, which reads no file (`None`: most of the tree, read it whole),
    /// with what the walk passed over. Runs on threads of its own while the pass waits.
    pub fn walk(
        &self,
        ancestor: &Entries,
    ) -> std::io::Result<(Option<BTreeSet<String>>, Vec<String>)> {
        let (changed, skipped) =
            scan::changed_paths(&self.root, &self.ignores, ancestor, &self.records)?;
        Ok(((changed.len() <= MOST_PATHS).then_some(changed), skipped))
    }
}

impl Endpoint for LocalSide<'_> {
    /// The watcher's token, taken before the side is read: what changes during the read is
    /// told to the next pass.
    fn poll<'a>(&'a mut self, since: Option<&'a str>) -> BoxFuture<'a, Result<Polled, SdkError>> {
        Box::pin(async move {
            let Some(watcher) = self.watcher.as_deref_mut() else {
                return Ok(Polled {
                    token: None,
                    changed: None,
                });
            };
            Ok(match watcher.since(since).await {
                Some((token, paths)) => Polled {
                    token: Some(token),
                    changed: paths.and_then(|paths| relative_paths(&self.root, paths)),
                },
                None => Polled {
                    token: None,
                    changed: None,
                },
            })
        })
    }

    /// A scan on a thread of its own: only files whose stat differs from their record
    /// are read. The records come back whatever the scan answers.
    fn read<'a>(
        &'a mut self,
        paths: Option<&'a BTreeSet<String>>,
    ) -> BoxFuture<'a, Result<Read, SdkError>> {
        let (root, ignores) = (self.root.clone(), self.ignores.clone());
        let records = std::mem::take(&mut self.records);
        let paths = paths.cloned();
        Box::pin(async move {
            let (scanned, records) = tokio::task::spawn_blocking(move || {
                let scanned = match &paths {
                    Some(paths) => scan::scan_paths(&root, paths, &ignores, &records),
                    None => scan::scan(&root, &ignores, &records),
                };
                (scanned, records)
            })
            .await
            .map_err(std::io::Error::other)?;
            self.records = records;
            let scanned = scanned?;
            Ok(Read {
                entries: scanned.entries,
                skipped: scanned.skipped,
                records: scanned.cache,
            })
        })
    }
}

/// Paths under the local directory `local`, relative, the sync's own left out; `None` when
/// there are too many to read one by one.
pub(super) fn relative_paths(local: &Path, paths: Vec<PathBuf>) -> Option<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for path in paths {
        if is_own_path(local, &path) {
            continue;
        }
        let Ok(relative) = path.strip_prefix(local) else {
            continue;
        };
        // A name that is not UTF-8: the nearest directory above it that is.
        let mut relative = relative;
        while relative.to_str().is_none() {
            relative = relative.parent()?;
        }
        match relative.to_str() {
            Some("") => return None,
            Some(text) => out.insert(text.replace(std::path::MAIN_SEPARATOR, "/")),
            None => return None,
        };
    }
    (out.len() <= MOST_PATHS).then_some(out)
}
