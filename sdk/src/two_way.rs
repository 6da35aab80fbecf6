//! Two-way sync between a local directory and a sandbox directory: both sides read (the
//! local tree scanned, the sandbox's from the daemon's manifest), merged three ways against
//! the ancestor (what both last agreed on, kept in `LOCAL/.fsd-sync/`), and the plan made
//! on both sides with every change checked first against what the merge saw, so an edit
//! made while the sync runs is never overwritten: its change is refused, the path keeps
//! its old ancestor, and the next pass merges the edit.
//!
//! A pass is safe to cut anywhere (a disconnect, a crash, a reboot): the ancestor is
//! written only after both sides were changed, and a pass made again from the old one finds
//! the same changes on both sides, which are no conflict. Conflicts are settled by the
//! [`Mode`] and reported; those that leave something for a person to look at (both
//! versions kept) are listed by [`conflicts`] until the copy set aside is removed.

pub mod local;
pub mod ops;
mod remote;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::merge::{self, Conflict, Entry, Mode, Resolution, Snapshot};
use crate::snapshot::{self, Ignores, STATE_DIR, ScanCache};
use crate::{Sandbox, SdkError};

use local::{Contents, LocalTree, Refused};
use ops::Op;

/// What a two-way sync is told.
#[derive(Debug, Clone)]
pub struct TwoWayOptions {
    pub mode: Mode,
    /// `.gitignore`-style lines of what to leave out, on both sides.
    pub exclude: Vec<String>,
    /// Whether [`snapshot::DEFAULT_EXCLUDES`] are left out too.
    pub default_excludes: bool,
}

impl Default for TwoWayOptions {
    fn default() -> Self {
        Self {
            mode: Mode::TwoWaySafe,
            exclude: Vec::new(),
            default_excludes: true,
        }
    }
}

/// What one side was changed by in a pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// Files written (new or new content).
    pub files: usize,
    pub dirs: usize,
    pub links: usize,
    /// Files and directories moved (not sent again).
    pub renames: usize,
    pub removals: usize,
    /// Permission changes alone.
    pub modes: usize,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }
}

/// What one pass did.
#[derive(Debug, Clone, Default)]
pub struct PassReport {
    pub to_local: Changes,
    pub to_remote: Changes,
    /// Conflicts this pass found, and how each was settled.
    pub conflicts: Vec<Conflict>,
    /// Paths whose change was refused because they changed while the pass ran (on the
    /// side named); the next pass merges them.
    pub changed_meanwhile: Vec<(merge::Side, String)>,
    /// Changes that failed, with why; the next pass tries again.
    pub failed: Vec<(merge::Side, String, String)>,
    /// What neither side can carry (devices, FIFOs, sockets, names not UTF-8).
    pub skipped: Vec<String>,
}

impl PassReport {
    /// Whether the pass changed nothing and left nothing for the next.
    pub fn settled(&self) -> bool {
        self.to_local.is_empty()
            && self.to_remote.is_empty()
            && self.changed_meanwhile.is_empty()
            && self.failed.is_empty()
    }
}

/// A conflict kept for `fsctl sync --conflicts`: both versions are there to look at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenConflict {
    pub path: String,
    /// Where the other version is, on both sides.
    pub aside: String,
    /// Which side's version stayed at the path (`local` or `remote`).
    pub kept: String,
    /// When it was found (RFC 3339).
    pub found: String,
}

/// What is kept between passes, beside the local tree.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    /// The sandbox directory this local directory is synced with.
    remote: String,
    ancestor: Snapshot,
    #[serde(default)]
    conflicts: Vec<OpenConflict>,
}

const STATE_FILE: &str = "state.json";
const CACHE_FILE: &str = "scan-cache.json";
const LOCK_FILE: &str = "lock";
const INCOMING_DIR: &str = "incoming";

/// A two-way sync of one local directory with one sandbox directory. Holds the local
/// directory's lock: one sync at a time.
pub struct TwoWay {
    sandbox: Sandbox,
    local: PathBuf,
    remote: String,
    options: TwoWayOptions,
    ignores: Ignores,
    _lock: std::fs::File,
}

fn invalid(message: String) -> SdkError {
    SdkError::coded(
        fsd_api::ErrorCode::ValidationFailed,
        message,
        serde_json::Value::Null,
    )
}

impl TwoWay {
    /// Opens the sync of `local` (made if missing) with `remote` (a directory in the
    /// sandbox, made if missing on the first pass).
    pub fn open(
        sandbox: Sandbox,
        local: &Path,
        remote: &str,
        options: TwoWayOptions,
    ) -> Result<Self, SdkError> {
        let ignores = Ignores::new(&options.exclude, options.default_excludes)
            .map_err(|err| invalid(format!("exclude: {err}")))?;
        let state_dir = local.join(STATE_DIR);
        std::fs::create_dir_all(&state_dir)?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(state_dir.join(LOCK_FILE))?;
        if lock.try_lock().is_err() {
            return Err(invalid(format!(
                "another sync of {} is running",
                local.display()
            )));
        }
        let state = read_state(local)?;
        if !state.remote.is_empty() && state.remote != remote {
            return Err(invalid(format!(
                "{} is synced with {:?}, not {remote:?} (remove {} to start again)",
                local.display(),
                state.remote,
                state_dir.display()
            )));
        }
        Ok(Self {
            sandbox,
            local: local.to_path_buf(),
            remote: remote.to_string(),
            options,
            ignores,
            _lock: lock,
        })
    }

    pub fn local(&self) -> &Path {
        &self.local
    }

    /// One pass: both sides read, merged, and changed.
    pub async fn pass(&mut self) -> Result<PassReport, SdkError> {
        let mut state = read_state(&self.local)?;
        state.remote = self.remote.clone();
        let cache: ScanCache =
            read_json(&self.local.join(STATE_DIR).join(CACHE_FILE))?.unwrap_or_default();
        // The sandbox first: a change there during the local scan is seen next pass.
        if let Err(err) = self.sandbox.mkdir(&self.remote, true).await
            && err.code() != Some(&fsd_api::ErrorCode::FileExists)
        {
            return Err(err);
        }
        let exclude = snapshot::exclude_lines(&self.options.exclude, self.options.default_excludes);
        let (remote_now, remote_skipped) =
            remote::snapshot(&self.sandbox, &self.remote, &exclude).await?;
        let root = self.local.clone();
        let ignores = self.ignores.clone();
        let scanned = tokio::task::spawn_blocking(move || snapshot::scan(&root, &ignores, &cache))
            .await
            .map_err(std::io::Error::other)??;
        let local_now = scanned.snapshot;
        let mut cache = scanned.cache;
        let plan = merge::merge(&state.ancestor, &local_now, &remote_now, self.options.mode);
        let mut report = PassReport {
            conflicts: plan.conflicts.clone(),
            skipped: scanned.skipped.into_iter().chain(remote_skipped).collect(),
            ..PassReport::default()
        };
        let local_ops = ops::operations(&local_now, &plan.agreed);
        let remote_ops = ops::operations(&remote_now, &plan.remote_end);
        // Paths whose change did not happen: they keep their old ancestor.
        let mut undone: Vec<String> = Vec::new();

        // The local side first: what it needs from the sandbox is fetched while the
        // sandbox still holds it.
        let incoming = self.local.join(STATE_DIR).join(INCOMING_DIR);
        let _ = std::fs::remove_dir_all(&incoming);
        let mut wanted = BTreeMap::new();
        let remote_by_hash = by_hash(&remote_now);
        let local_by_hash = by_hash(&local_now);
        for op in &local_ops {
            if let Op::Put {
                entry: Entry::File { hash, .. },
                ..
            } = op
                && !local_by_hash.contains_key(hash)
                && let Some(path) = remote_by_hash.get(hash)
            {
                wanted.insert(hash.clone(), path.clone());
            }
        }
        let fetched = remote::fetch(&self.sandbox, &self.remote, wanted, &incoming).await?;
        let local_sources = Sources {
            root: self.local.clone(),
            by_hash: local_by_hash,
            fetched,
        };
        let root = self.local.clone();
        let cache_for_apply = cache.clone();
        let local_results = {
            let ops = local_ops.clone();
            tokio::task::spawn_blocking(move || {
                let tree = LocalTree {
                    root: &root,
                    cache: &cache_for_apply,
                };
                ops.iter()
                    .map(|op| tree.apply(op, &local_sources))
                    .collect::<Vec<_>>()
            })
            .await
            .map_err(std::io::Error::other)?
        };
        let _ = std::fs::remove_dir_all(&incoming);
        let mut to_local = Changes::default();
        tally(
            merge::Side::Local,
            &local_ops,
            local_results,
            &mut to_local,
            &mut report,
            &mut undone,
        );
        report.to_local = to_local;

        // Then the sandbox, its new content read from the local side as it is now.
        let remote_sources = Sources {
            root: self.local.clone(),
            by_hash: by_hash(&plan.agreed),
            fetched: BTreeMap::new(),
        };
        let remote_results =
            remote::apply(&self.sandbox, &self.remote, &remote_ops, &remote_sources).await?;
        let mut to_remote = Changes::default();
        tally(
            merge::Side::Remote,
            &remote_ops,
            remote_results,
            &mut to_remote,
            &mut report,
            &mut undone,
        );
        report.to_remote = to_remote;

        // The next ancestor: what both agree on, except where a change did not happen.
        let mut ancestor = plan.agreed.clone();
        for path in &undone {
            let prefix = format!("{path}/");
            let keys: Vec<String> = ancestor
                .keys()
                .chain(state.ancestor.keys())
                .filter(|key| *key == path || key.starts_with(&prefix))
                .cloned()
                .collect();
            for key in keys {
                match state.ancestor.get(&key) {
                    Some(entry) => ancestor.insert(key, entry.clone()),
                    None => ancestor.remove(&key),
                };
            }
        }
        state.ancestor = ancestor;
        let found = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        for conflict in &plan.conflicts {
            if let Resolution::KeptBoth { aside, kept } = &conflict.resolution {
                state.conflicts.push(OpenConflict {
                    path: conflict.path.clone(),
                    aside: aside.clone(),
                    kept: match kept {
                        merge::Side::Local => "local".into(),
                        merge::Side::Remote => "remote".into(),
                    },
                    found: found.clone(),
                });
            }
        }
        // A conflict is open while the copy set aside is there.
        state
            .conflicts
            .retain(|open| self.local.join(&open.aside).symlink_metadata().is_ok());
        // Records of files the pass wrote are taken by the next scan.
        cache.retain(|path, _| state.ancestor.contains_key(path));
        write_json(&self.local.join(STATE_DIR).join(CACHE_FILE), &cache)?;
        write_json(&self.local.join(STATE_DIR).join(STATE_FILE), &state)?;
        Ok(report)
    }
}

impl TwoWay {
    /// Passes until `stop` resolves: one at once, then one whenever either side changes
    /// (the local side's changes told through `local_changes` by the caller's watcher,
    /// e.g. the `notify` crate's; the sandbox's from a watch of the directory), and at least
    /// every `every` as a safety net. A pass that failed (the sandbox unreachable, the
    /// daemon restarting) is told to `on_pass` and tried again.
    pub async fn follow(
        &mut self,
        every: std::time::Duration,
        mut local_changes: tokio::sync::mpsc::Receiver<()>,
        mut on_pass: impl FnMut(Result<&PassReport, &SdkError>),
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<(), SdkError> {
        let (wake, mut woken) = tokio::sync::mpsc::channel::<()>(1);
        let local_wake = wake.clone();
        let forward = tokio::spawn(async move {
            while local_changes.recv().await.is_some() {
                let _ = local_wake.try_send(());
            }
        });
        let remote_watch = tokio::spawn(wake_on_remote_changes(
            self.sandbox.clone(),
            self.remote.clone(),
            wake,
        ));
        let passes = async {
            loop {
                let settled = match self.pass().await {
                    Ok(report) => {
                        on_pass(Ok(&report));
                        report.settled()
                    }
                    Err(err) => {
                        on_pass(Err(&err));
                        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                        false
                    }
                };
                if settled {
                    let _ = tokio::time::timeout(every, woken.recv()).await;
                    // Changes come in bursts (a save is several events): one pass for them.
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    while woken.try_recv().is_ok() {}
                }
            }
        };
        tokio::select! {
            () = passes => {}
            () = stop => {}
        }
        remote_watch.abort();
        forward.abort();
        Ok(())
    }
}

/// Whether a local path is the sync's own (its state directory, its temp files): a
/// watcher waking [`TwoWay::follow`] leaves those out.
pub fn is_own_path(local: &Path, path: &Path) -> bool {
    path.starts_with(local.join(STATE_DIR)) || path.to_string_lossy().ends_with(local::TEMP_SUFFIX)
}

/// Wakes a following sync on every change the sandbox reports under `remote` (and when
/// its watch ends, since changes may have been missed); watches again after a failure.
async fn wake_on_remote_changes(
    sandbox: Sandbox,
    remote: String,
    wake: tokio::sync::mpsc::Sender<()>,
) {
    use futures_util::StreamExt;
    loop {
        let request = fsd_api::watch::WatchRequest {
            path: remote.clone(),
            ..Default::default()
        };
        if let Ok(mut events) = sandbox.watch(&request).await {
            while let Some(event) = events.next().await {
                let _ = wake.try_send(());
                if event.is_err() {
                    break;
                }
            }
        }
        let _ = wake.try_send(());
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// The conflicts of the sync of `local` that are still open (both versions there).
pub fn conflicts(local: &Path) -> Result<Vec<OpenConflict>, SdkError> {
    let state = read_state(local)?;
    Ok(state
        .conflicts
        .into_iter()
        .filter(|open| local.join(&open.aside).symlink_metadata().is_ok())
        .collect())
}

/// A file path per content hash.
fn by_hash(tree: &Snapshot) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (path, entry) in tree {
        if let Entry::File { hash, .. } = entry {
            out.entry(hash.clone()).or_insert_with(|| path.clone());
        }
    }
    out
}

/// Where content is for puts: fetched from the sandbox, or a local file that had it.
struct Sources {
    root: PathBuf,
    by_hash: BTreeMap<String, String>,
    fetched: BTreeMap<String, PathBuf>,
}

impl Contents for Sources {
    fn source(&self, hash: &str) -> Option<PathBuf> {
        self.fetched
            .get(hash)
            .cloned()
            .or_else(|| self.by_hash.get(hash).map(|path| self.root.join(path)))
    }
}

/// Counts what was made, and records what was not.
fn tally(
    side: merge::Side,
    ops: &[Op],
    results: Vec<Result<(), Refused>>,
    changes: &mut Changes,
    report: &mut PassReport,
    undone: &mut Vec<String>,
) {
    for (op, result) in ops.iter().zip(results) {
        match result {
            Ok(()) => match op {
                Op::Rename { .. } => changes.renames += 1,
                Op::Remove { .. } => changes.removals += 1,
                Op::Chmod { .. } => changes.modes += 1,
                Op::Put { entry, .. } => match entry {
                    Entry::Dir { .. } => changes.dirs += 1,
                    Entry::Link { .. } => changes.links += 1,
                    Entry::File { .. } => changes.files += 1,
                },
            },
            Err(refused) => {
                undone.push(op.path().to_string());
                if let Op::Rename { to, .. } = op {
                    undone.push(to.clone());
                }
                match refused {
                    Refused::Changed => report.changed_meanwhile.push((side, op.path().into())),
                    Refused::Failed(reason) => report.failed.push((side, op.path().into(), reason)),
                }
            }
        }
    }
}

fn read_state(local: &Path) -> Result<State, SdkError> {
    Ok(read_json(&local.join(STATE_DIR).join(STATE_FILE))?.unwrap_or_default())
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, SdkError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|err| invalid(format!("{}: {err}", path.display()))),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// Written through a temp file and renamed: a crash leaves the old state or the new.
fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), SdkError> {
    let temp = path.with_extension("json.tmp");
    std::fs::write(
        &temp,
        serde_json::to_vec(value).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(&temp, path)?;
    Ok(())
}
