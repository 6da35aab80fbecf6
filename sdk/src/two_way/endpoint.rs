//! The two sides of a pair behind one interface. A pass asks each side the same two things
//! in the same order: what changed since the token it gave the last pass
//! ([`Endpoint::poll`]), then its tree where that changed, or whole ([`Endpoint::read`]).
//! The sandbox's side answers from its daemon (a change token; manifests whose hashes are
//! read there, no content moved); the local side from a watcher that outlives passes,
//! where one answers, and a scan that reads only the files whose stat changed.
//!
//! Then, with the merge's plan, each side is asked to make its share of it
//! ([`Endpoint::apply`]), each step checked there against what the merge saw, its new
//! content taken from the side itself where it holds it, else from what the other side
//! supplies ([`Endpoint::supply`]). Content moves differently each way, and [`Supply`]
//! names the two ways: from the sandbox a tar stream that the local writers read as it
//! comes, to it local files read into its apply requests as they are sent.
//!
//! What only one side has stays its own: the local walk of stats that finds changes where
//! no watcher told them ([`LocalSide::walk`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::content_hash::ContentHash;
use crate::merge::Entries;
use crate::scan::{self, Ignores, ScanCache};
use crate::{Sandbox, SdkError};

use super::local::{self, Contents, LocalTree, Refused, TEMP_SUFFIX};
use super::ops::{Op, put_hashes};
use super::remote;

/// Told how far a pass has come: the phase (`to local`, `to sandbox`), changes made, and
/// changes in all.
pub type Progress = Arc<dyn Fn(&str, u64, u64) + Send + Sync>;

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

    /// What it holds of `holders` (a content hash and a path of this side holding it), for
    /// the other side's steps.
    fn supply(&self, holders: HashMap<ContentHash, String>) -> Supply<'_>;

    /// Makes `steps` here, in order, each checked first against what the merge saw at its
    /// path (a change made meanwhile is refused, never overwritten); new content from this
    /// side's own files where it holds them, else from `from`. Answers each step's
    /// outcome; an error only where the side could not be reached.
    fn apply<'a>(
        &'a mut self,
        steps: Steps<'a>,
        from: Supply<'a>,
    ) -> BoxFuture<'a, Result<Outcomes, SdkError>>;
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

    fn supply(&self, holders: HashMap<ContentHash, String>) -> Supply<'_> {
        Supply::Stream {
            client: &self.client,
            dir: &self.dir,
            holders,
        }
    }

    /// In batches of apply requests, each file's content read from its local holder as
    /// the request is sent; the daemon checks each step as it makes it.
    fn apply<'a>(
        &'a mut self,
        steps: Steps<'a>,
        from: Supply<'a>,
    ) -> BoxFuture<'a, Result<Outcomes, SdkError>> {
        Box::pin(async move {
            let Supply::Files(sources) = from else {
                return Err(SdkError::invalid(
                    "a sandbox's steps take their content from local files",
                ));
            };
            let total = steps.ops.len() as u64;
            let progress = steps.progress;
            let sent: remote::Sent = Arc::new(move |done: usize| {
                if let Some(progress) = &progress {
                    progress("to sandbox", done as u64, total);
                }
            });
            remote::apply(&self.client, &self.dir, steps.ops, &sources, sent).await
        })
    }
}

/// The local directory of a pair, for one pass: the watcher that outlives passes where
/// one answers, and the last scan's records, which the pass takes from its state for the
/// read and for the apply, and gives back after each.
pub(super) struct LocalSide<'w> {
    root: PathBuf,
    ignores: Ignores,
    watcher: Option<&'w mut dyn LocalSince>,
    /// Where content the sandbox streams for more than one put is kept meanwhile.
    stash: PathBuf,
    pub records: ScanCache,
}

impl<'w> LocalSide<'w> {
    pub fn new(
        root: &Path,
        ignores: &Ignores,
        watcher: Option<&'w mut dyn LocalSince>,
        stash: PathBuf,
    ) -> Self {
        Self {
            root: root.to_path_buf(),
            ignores: ignores.clone(),
            watcher,
            stash,
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

    fn supply(&self, holders: HashMap<ContentHash, String>) -> Supply<'_> {
        Supply::Files(Sources::new(self.root.clone(), holders, &self.records))
    }

    /// On a thread of its own, with writer threads beside it (`LocalTree::apply_all`);
    /// content streamed from the sandbox is written where it goes as it comes. The records
    /// come back whatever the apply answers.
    fn apply<'a>(
        &'a mut self,
        steps: Steps<'a>,
        from: Supply<'a>,
    ) -> BoxFuture<'a, Result<Outcomes, SdkError>> {
        Box::pin(async move {
            let Steps {
                ops,
                mut own,
                progress,
            } = steps;
            let _ = std::fs::remove_dir_all(&self.stash);
            // What the sandbox sends: what the puts need that is not here.
            let streamed = match &from {
                Supply::Stream { holders, .. } => Some(wanted(ops, &own, holders)),
                Supply::Files(_) => None,
            };
            let kept = keep_sources(&self.root, ops, &mut own);
            let own = Sources::new(self.root.clone(), own, &self.records);
            let records = Arc::new(std::mem::take(&mut self.records));
            let (root, ops_owned, cache) = (self.root.clone(), ops.to_vec(), records.clone());
            let apply = move |other: Option<&dyn Contents>| -> Outcomes {
                let tree = LocalTree {
                    root: &root,
                    cache: &cache,
                };
                let total = ops_owned.len() as u64;
                let done = |done: usize| {
                    if let Some(progress) = &progress {
                        progress("to local", done as u64, total);
                    }
                };
                match other {
                    Some(other) => tree.apply_all(&ops_owned, &Both { own: &own, other }, &done),
                    None => tree.apply_all(&ops_owned, &own, &done),
                }
            };
            let applied = match (from, streamed) {
                (Supply::Stream { client, dir, .. }, Some((wanted, uses)))
                    if !wanted.is_empty() =>
                {
                    let stash = self.stash.clone();
                    remote::with_incoming(client, dir, wanted, uses, stash, move |incoming| {
                        apply(Some(incoming))
                    })
                    .await
                }
                (Supply::Files(files), _) => on_a_thread(move || apply(Some(&files))).await,
                (Supply::Stream { .. }, _) => on_a_thread(move || apply(None)).await,
            };
            self.records = Arc::try_unwrap(records).unwrap_or_else(|shared| (*shared).clone());
            let _ = std::fs::remove_dir_all(&self.stash);
            for link in kept {
                let _ = std::fs::remove_file(link);
            }
            applied
        })
    }
}

async fn on_a_thread(
    apply: impl FnOnce() -> Outcomes + Send + 'static,
) -> Result<Outcomes, SdkError> {
    Ok(tokio::task::spawn_blocking(apply)
        .await
        .map_err(std::io::Error::other)?)
}

/// What the sandbox streams for the local puts `ops`: each content the local side does not
/// hold (`own`), once, with the sandbox path holding it, in the order the puts need it;
/// and how many puts want each.
fn wanted(
    ops: &[Op],
    own: &HashMap<ContentHash, String>,
    holders: &HashMap<ContentHash, String>,
) -> (Vec<(ContentHash, String)>, HashMap<ContentHash, usize>) {
    let mut wanted: Vec<(ContentHash, String)> = Vec::new();
    let mut uses: HashMap<ContentHash, usize> = HashMap::new();
    for hash in put_hashes(ops) {
        let Some(path) = holders.get(hash).filter(|_| !own.contains_key(hash)) else {
            continue;
        };
        let count = uses.entry(*hash).or_insert(0);
        if *count == 0 {
            wanted.push((*hash, path.clone()));
        }
        *count += 1;
    }
    (wanted, uses)
}

/// Content the local changes take from local files that they themselves replace, remove or
/// move first (a file and a directory swapped: the file's content goes where the directory
/// was, after the file's path became a directory): linked aside at the root before any
/// change is made, and taken from there. Answers the links, removed after the changes.
fn keep_sources(
    root: &Path,
    ops: &[Op],
    by_hash: &mut HashMap<ContentHash, String>,
) -> Vec<PathBuf> {
    let changed: HashSet<&str> = ops.iter().map(Op::path).collect();
    // The path or a directory above it changed (looked up, not compared with each change:
    // a pass of 10,000 changes holds about as many holders).
    let touched = |path: &str| {
        changed.contains(path)
            || path
                .match_indices('/')
                .any(|(end, _)| changed.contains(&path[..end]))
    };
    let mut kept = Vec::new();
    for holder in by_hash.values_mut() {
        if !touched(holder) {
            continue;
        }
        let link = local::temp_beside(&root.join(".kept"));
        let linked = std::fs::hard_link(root.join(&*holder), &link)
            .or_else(|_| std::fs::copy(root.join(&*holder), &link).map(drop));
        if linked.is_ok()
            && let Some(name) = link.file_name().and_then(|name| name.to_str())
        {
            *holder = name.to_string();
            kept.push(link);
        }
    }
    kept
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

/// The outcome of each of a side's steps, in their order.
pub(super) type Outcomes = Vec<Result<(), Refused>>;

/// A side's share of a pass's plan, as [`Endpoint::apply`] takes it.
pub(super) struct Steps<'a> {
    pub ops: &'a [Op],
    /// Where this side itself holds content its puts need: a path each, the first holder
    /// in its tree as the merge saw it (the sandbox's side takes none of its own).
    pub own: HashMap<ContentHash, String>,
    /// Told how many of the steps are made.
    pub progress: Option<Progress>,
}

/// Content one side holds, as the other side's steps take it ([`Endpoint::supply`]). It
/// moves differently each way, so the two ways are named rather than hidden.
pub(super) enum Supply<'a> {
    /// Local files, read where they are as each step needs them, so the content sent is
    /// what the file holds then (what the sandbox's steps take).
    Files(Sources),
    /// The sandbox's files (a hash and a path holding it each), streamed once in the
    /// order the local steps need them and written where they go as they come (what the
    /// local steps take).
    Stream {
        client: &'a Sandbox,
        dir: &'a str,
        holders: HashMap<ContentHash, String>,
    },
}

/// Where content is, by hash, on the local side: each hash's holder under `root`.
pub(super) struct Sources {
    root: PathBuf,
    by_hash: HashMap<ContentHash, String>,
    /// The size of each content whose holder the local scan recorded holding it.
    sizes: HashMap<ContentHash, u64>,
}

impl Sources {
    /// Sizes from the holders' own records (looked up, not a walk of every record); a
    /// holder without one is `stat`ed when its content is sent.
    fn new(root: PathBuf, by_hash: HashMap<ContentHash, String>, cache: &ScanCache) -> Sources {
        let sizes = by_hash
            .iter()
            .filter_map(|(hash, path)| {
                let seen = cache.get(path).filter(|seen| seen.hash == *hash)?;
                Some((*hash, seen.size))
            })
            .collect();
        Sources {
            root,
            by_hash,
            sizes,
        }
    }
}

impl Contents for Sources {
    fn source(&self, hash: &ContentHash) -> Option<PathBuf> {
        self.by_hash.get(hash).map(|path| self.root.join(path))
    }

    fn size(&self, hash: &ContentHash) -> Option<u64> {
        self.sizes.get(hash).copied()
    }
}

/// Content for the local puts: what comes from the other side where it is needed (a
/// stream's content written where it goes, or kept for a second put), else a local file.
struct Both<'s> {
    own: &'s Sources,
    other: &'s dyn Contents,
}

impl Contents for Both<'_> {
    fn source(&self, hash: &ContentHash) -> Option<PathBuf> {
        self.other.source(hash).or_else(|| self.own.source(hash))
    }

    fn write(&self, hash: &ContentHash, temp: &Path, mode: u32) -> Option<Result<(), Refused>> {
        self.other.write(hash, temp, mode)
    }

    fn take(&self, hash: &ContentHash, limit: u64) -> Option<Result<Vec<u8>, Refused>> {
        self.other.take(hash, limit)
    }
}
