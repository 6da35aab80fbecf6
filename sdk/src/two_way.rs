//! Two-way sync between a local directory and a sandbox directory: both sides read (the
//! local tree scanned, the sandbox's from the daemon's manifest), merged three ways against
//! the ancestor (what both last agreed on, kept in `LOCAL/.fsd-sync/`), and the plan made
//! on both sides with every change checked first against what the merge saw, so an edit
//! made while the sync runs is never overwritten: its change is refused, the path keeps
//! its old ancestor, and the next pass merges the edit.
//!
//! A pass is safe to cut anywhere (a disconnect, a crash, a reboot): the ancestor is
//! written only after both sides were changed, and a pass made again from the old one finds
//! the same changes on both sides, which are no conflict.
//!
//! A sync kept open ([`TwoWay::follow`]) reads each side whole once, then only what
//! changed: the sandbox's paths from its change token (the daemon's exact change list),
//! the local ones from a [`LocalWatch`] (fsctl's is fsd-watch's engine, the same one), each
//! read again from the disk, since events say where to look, not what is there. The merge
//! then takes just those paths, and the state is kept as a log of what each pass changed
//! (`journal`), so a pass costs what changed, not the size of the tree.
//!
//! A single pass in a new process ([`TwoWay::pass`]) reads the sandbox's side the same
//! way, from the change token the last pass journaled with its ancestor, and finds the
//! local side's changes by a walk of stats against the last scan's records
//! ([`scan::changed_paths`]): it reads no content that did not change. Given a watcher
//! that outlives passes ([`LocalSince`], [`TwoWay::pass_watched`]; fsctl leaves one per
//! pair), it asks that instead of walking, by a token journaled beside the sandbox's; and a
//! pass whose two tokens still hold reads only the state's head (`journal::Head`).
//!
//! Conflicts are settled by the [`Mode`] and reported; those that leave something for a
//! person to look at (both versions kept) are listed by [`conflicts`] until the copy set
//! aside is removed.

mod endpoint;
mod first;
mod journal;
pub mod local;
pub use fsd_merge::ops;
mod remote;
mod side;
mod upload;

/// Entries for the tests of this module's parts.
#[cfg(test)]
pub(crate) mod sample {
    use crate::merge::Entry;

    /// A file of mode 644 holding `content`.
    pub(crate) fn file(content: &str) -> Entry {
        Entry::File {
            hash: crate::content_hash::ContentHash::of(content.as_bytes()),
            mode: 0o644,
        }
    }

    pub(crate) fn dir() -> Entry {
        Entry::Dir { mode: 0o755 }
    }
}

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use futures_util::future::BoxFuture;

use serde::Serialize;

use crate::content_hash::ContentHash;
use crate::merge::{self, Conflict, Entries, Entry, Mode, Resolution};
use crate::scan::{self, Ignores, STATE_DIR, ScanCache};

use crate::{Sandbox, SdkError};
use fsd_api::ErrorCode;
pub use journal::OpenConflict;
use journal::{Head, Journal, State, Tracked};

use endpoint::{Endpoint, LocalSide, MOST_PATHS, SandboxSide, Steps, relative_paths};
pub use endpoint::{LocalSince, Progress, is_own_path};
use local::Refused;
use ops::{Op, put_hashes};
use side::SideTree;

/// What a two-way sync is told.
#[derive(Debug, Clone)]
pub struct TwoWayOptions {
    pub mode: Mode,
    /// `.gitignore`-style lines of what to leave out, on both sides.
    pub exclude: Vec<String>,
    /// Whether [`scan::DEFAULT_EXCLUDES`] are left out too.
    pub default_excludes: bool,
    /// Where the pairs' states are kept; `None`: [`state_root`].
    pub state_root: Option<PathBuf>,
    /// Let a pass propagate a side that holds nothing where the last pass left paths
    /// (its directory emptied or gone): by default the pass halts, changing nothing.
    pub accept_emptied: bool,
}

impl Default for TwoWayOptions {
    fn default() -> Self {
        Self {
            mode: Mode::TwoWaySafe,
            exclude: Vec::new(),
            default_excludes: true,
            state_root: None,
            accept_emptied: false,
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
    /// Whether the pass read both sides whole (else only the paths that changed on one).
    pub whole: bool,
    /// Whether it read the local side whole (else the paths a watcher told or a walk of
    /// stats found).
    pub local_whole: bool,
    /// Whether a watcher told the local side's changes (else, read in part, a walk of
    /// stats found them).
    pub local_watched: bool,
    /// Whether it read the sandbox's side whole (else the paths its change token named).
    pub remote_whole: bool,
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

const LOCK_FILE: &str = "lock";
/// Tries at the lock, 20 ms apart, before another sync is said to hold it.
const LOCK_TRIES: u32 = 50;
const INCOMING_DIR: &str = "incoming";

/// A two-way sync of one local directory with one sandbox directory. Holds the local
/// directory's lock: one sync at a time.
pub struct TwoWay {
    /// The sandbox's side: its client, its directory, what it told.
    sandbox: SandboxSide,
    local: PathBuf,
    options: TwoWayOptions,
    ignores: Ignores,
    /// What the journal holds, once read (the first pass reads it, unless it finds nothing
    /// changed from the head alone).
    state: State,
    journal: Option<Journal>,
    /// Where `state` is kept: outside both trees (see [`state_root`]).
    state_dir: PathBuf,
    /// Whether the next pass may read the sandbox's side from the token the last pass
    /// journaled (`state.tracked`; outside its `dirty`, both sides held the ancestor): not
    /// after a pass that failed, nor in one asked to read whole.
    token_trusted: bool,
    progress: Option<Progress>,
    _lock: std::fs::File,
}

/// Where a following sync learns what changed in the local tree: a watcher that tells
/// every change (fsctl's is fsd-watch's engine). What it tells are hints, where to look:
/// the paths are read again from the disk.
pub trait LocalWatch: Send {
    /// Resolves when something in the local tree may have changed.
    fn changed(&mut self) -> BoxFuture<'_, ()>;
    /// The paths (absolute) changed since the last call, every change made before this
    /// call among them; `None` when changes were lost (the tree is then read whole).
    fn take(&mut self) -> BoxFuture<'_, Option<Vec<PathBuf>>>;
}

/// How often a following sync reads both sides whole (syncthing rescans hourly too): the
/// passes between read only what the watchers and the change token name, so an idle
/// follow reads nothing whole.
pub const WHOLE_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

/// The longest a settled follow waits for an event before it looks at both sides' tokens
/// anyway (see [`TwoWay::follow`]).
pub const IDLE_LOOK_MOST: std::time::Duration = std::time::Duration::from_secs(60);

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
            .map_err(|err| SdkError::invalid(format!("exclude: {err}")))?;
        std::fs::create_dir_all(local)?;
        // Watchers tell canonical paths.
        let local = &std::fs::canonicalize(local)?;
        let root = options.state_root.clone().unwrap_or_else(state_root);
        let own = local_state(&root, local);
        std::fs::create_dir_all(&own)?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(own.join(LOCK_FILE))?;
        // A lock a sync that just ended held can outlive it for a moment: a process forked
        // meanwhile (by another thread) keeps the descriptor until it execs.
        let mut tries = 0;
        while lock.try_lock().is_err() {
            tries += 1;
            if tries == LOCK_TRIES {
                return Err(SdkError::invalid(format!(
                    "another sync of {} is running",
                    local.display()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        take_over_state_in_the_tree(&own, local)?;
        let state_dir = pair_state(&own, remote);
        std::fs::create_dir_all(&state_dir)?;
        let sandbox = SandboxSide::new(
            sandbox,
            remote,
            watch_excludes(&options),
            scan::exclude_lines(&options.exclude, options.default_excludes),
        );
        Ok(Self {
            sandbox,
            local: local.to_path_buf(),
            options,
            ignores,
            state: State::default(),
            journal: None,
            state_dir,
            token_trusted: false,
            progress: None,
            _lock: lock,
        })
    }

    /// Where this sync keeps its state (see [`state_root`]).
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// Tells `progress` how far each pass's changes have come (a long first sync).
    pub fn set_progress(&mut self, progress: Option<Progress>) {
        self.progress = progress;
    }

    pub fn local(&self) -> &Path {
        &self.local
    }

    /// One pass, as a new process makes it: the local side walked whole (a stat of each
    /// entry against the last scan's records; only a file whose stat changed is read), the
    /// sandbox's side from the change token the last pass kept (only what changed there
    /// since is read; the first pass, and one whose token the daemon no longer knows,
    /// read it whole). Merged, and changed on both sides.
    pub async fn pass(&mut self) -> Result<PassReport, SdkError> {
        self.token_trusted = true;
        self.run(None, None).await
    }

    /// One pass as [`TwoWay::pass`] makes it, the local side's changes asked of `watcher`
    /// (since the token the last pass journaled) instead of walking the tree, where it can
    /// tell them.
    pub async fn pass_watched(
        &mut self,
        watcher: &mut dyn LocalSince,
    ) -> Result<PassReport, SdkError> {
        if self.journal.is_none() && self.nothing_changed(watcher).await {
            return Ok(PassReport {
                local_watched: true,
                ..PassReport::default()
            });
        }
        self.token_trusted = true;
        let report = self.run(None, Some(&mut *watcher)).await;
        watcher.passed();
        report
    }

    /// Whether, by the head alone (the state not read), neither side changed since the
    /// last pass, which left nothing to read again: both tokens it journaled still the
    /// tokens now. Anything else is for a pass to find.
    async fn nothing_changed(&mut self, watcher: &mut dyn LocalSince) -> bool {
        let exclude = scan::exclude_lines(&self.options.exclude, self.options.default_excludes);
        let Some(head) = Head::read(&self.state_dir) else {
            return false;
        };
        let Some(local) = head.tracked.local.as_deref() else {
            return false;
        };
        if !head.clean || head.tracked.exclude != exclude {
            return false;
        }
        let remote_unchanged = remote::unchanged_since(
            &self.sandbox.client,
            &self.sandbox.dir,
            &head.tracked.version,
            &self.watch_excludes(),
        )
        .await;
        if !remote_unchanged.unwrap_or(false) {
            return false;
        }
        watcher
            .since(Some(local))
            .await
            .is_some_and(|(token, paths)| token == local && paths.is_some())
    }

    /// One pass that reads both sides whole.
    pub async fn pass_whole(&mut self) -> Result<PassReport, SdkError> {
        self.token_trusted = false;
        self.run(None, None).await
    }

    /// One pass that reads only what changed since the last pass of this sync: the
    /// sandbox's side from its change token, the local side's paths from `local_changed`
    /// (absolute paths a watcher told, every change since the last pass among them;
    /// `None`: not known, read whole). The first pass, and one after the sandbox's change
    /// list was lost, reads that side whole.
    pub async fn pass_changed(
        &mut self,
        local_changed: Option<Vec<PathBuf>>,
    ) -> Result<PassReport, SdkError> {
        let local_changed = local_changed.and_then(|paths| relative_paths(&self.local, paths));
        self.run(local_changed, None).await
    }

    /// The globs the change watches on both sides leave out: the defaults (when the sync
    /// leaves them out) and the sync's own files. What the sync's own patterns leave out
    /// is still told, and dropped when read.
    pub fn watch_excludes(&self) -> Vec<String> {
        watch_excludes(&self.options)
    }

    /// Where a watcher of this pair's local directory that outlives passes answers (see
    /// [`LocalSince`]): in the pair's state, one per set of [`TwoWay::watch_excludes`] (a
    /// watcher leaving out other paths would not tell them).
    pub fn watcher_socket(&self) -> PathBuf {
        let excludes = self.watch_excludes().join("\n");
        self.state_dir
            .join(format!("watch-{}.sock", short_hash(excludes.as_bytes())))
    }

    /// A pass, in phases: both sides asked what changed ([`TwoWay::ask_sides`]), read
    /// there ([`TwoWay::read_sides`]), merged ([`merge_read`]), each side made to hold its
    /// share of the plan ([`apply_sides`]), and what both now agree on kept
    /// ([`TwoWay::keep_pass`]). It journals the sandbox's change token for the next pass,
    /// and reads only what changed where the last one's is trusted (`token_trusted`) and
    /// was read with the same excludes.
    async fn run(
        &mut self,
        local_changed: Option<BTreeSet<String>>,
        watcher: Option<&mut dyn LocalSince>,
    ) -> Result<PassReport, SdkError> {
        let stash = self.state_dir.join(INCOMING_DIR);
        let mut local = LocalSide::new(&self.local, &self.ignores, watcher, stash);
        let Asked {
            known,
            exclude,
            version,
            remote_changed,
            local_token,
            local_watched,
            local_changed,
        } = self.ask_sides(&mut local, local_changed).await?;
        // A first sync (two-way modes only: one-way ones make one side what the other
        // holds) where one side is empty has nothing to merge.
        let first_sync = known.is_none()
            && self.state.ancestor.is_empty()
            && matches!(self.options.mode, Mode::TwoWaySafe | Mode::TwoWayResolved);
        if first_sync
            && let Some(report) = self.first_pass(&version, &exclude, &local_token).await?
        {
            return Ok(report);
        }
        let (mut known, local_changed, remote_changed) = match known {
            Some(known) => (Some(known), local_changed, remote_changed),
            None => (None, None, None),
        };
        let dirty = known
            .as_mut()
            .map(|known| std::mem::take(&mut known.dirty))
            .unwrap_or_default();
        let known = known.is_some();
        // A pass that merges everything keeps what the state was, to journal the change.
        let whole = !(known && remote_changed.is_some());
        let old_state = whole.then(|| self.state.clone());
        let sides = (local_changed, remote_changed);
        let read = self.read_sides(&mut local, known, sides, &dirty).await?;
        // Nothing told, found or left on either side: nothing to merge.
        let nothing = read.local_paths.as_ref().is_some_and(BTreeSet::is_empty)
            && read.remote_paths.as_ref().is_some_and(BTreeSet::is_empty);
        if nothing && known {
            self.keep_token(Tracked {
                version,
                dirty: BTreeSet::new(),
                exclude,
                local: local_token,
            })?;
            return Ok(PassReport {
                skipped: read
                    .local
                    .skipped
                    .into_iter()
                    .chain(read.remote.skipped)
                    .collect(),
                local_watched,
                ..PassReport::default()
            });
        }
        let mut old_cache = BTreeMap::new();
        let Merged {
            plan,
            merged,
            local_now,
            remote_now,
            mut report,
        } = merge_read(
            &self.state.ancestor,
            &mut self.state.cache,
            &mut old_cache,
            read,
            Scope {
                known,
                whole,
                local_watched,
                mode: self.options.mode,
            },
        );
        self.halt_on_emptied(&local_now, &remote_now)?;
        let mut applied = Applied::default();
        // The records go with the local side for its apply and come back after it,
        // whatever either side answers.
        local.records = std::mem::take(&mut self.state.cache);
        let made = apply_sides(
            (&mut local, &mut self.sandbox),
            (&plan, merged.as_ref(), &local_now, &remote_now),
            self.progress.as_ref(),
            &mut report,
            &mut applied,
        )
        .await;
        self.state.cache = std::mem::take(&mut local.records);
        made?;
        self.keep_pass(PassEnd {
            plan: &plan,
            merged: merged.as_ref(),
            old_cache,
            old_state,
            undone: applied.undone,
            read_again: applied.read_again,
            version,
            exclude,
            local_token,
        })?;
        // Outside `dirty`, both sides are left holding the ancestor: the next pass starts
        // from it (a following sync keeps no copy of either tree).
        self.token_trusted = true;
        Ok(report)
    }

    /// Whether passes from now on carry a side emptied whole to the other
    /// ([`TwoWayOptions::accept_emptied`]).
    pub fn set_accept_emptied(&mut self, accept: bool) {
        self.options.accept_emptied = accept;
    }

    /// Halts a pass (before any change) that would carry a side emptied whole to the
    /// other, as mutagen's and unison's safety checks do: a sandbox that lost its disk (a
    /// container's is ephemeral), a directory removed to be made again, a local directory
    /// moved away: the other side's copy is all that is left of the work, and a pass would
    /// delete it. Only a side whose emptiness the mode carries over counts (in the one-way
    /// modes the sandbox's own deletions are not carried); `accept_emptied` lets it go.
    fn halt_on_emptied(&self, local: &SideTree<'_>, remote: &SideTree<'_>) -> Result<(), SdkError> {
        if self.options.accept_emptied || self.state.ancestor.is_empty() {
            return Ok(());
        }
        let two_way = matches!(self.options.mode, Mode::TwoWaySafe | Mode::TwoWayResolved);
        let (emptied, other) = if local.is_empty() && !remote.is_empty() {
            (
                format!("the local directory {}", self.local.display()),
                "the sandbox",
            )
        } else if two_way && remote.is_empty() && !local.is_empty() {
            (
                format!("the sandbox directory {}", self.sandbox.dir),
                "the local directory",
            )
        } else {
            return Ok(());
        };
        Err(SdkError::coded(
            ErrorCode::SyncHalted,
            format!(
                "halted, nothing changed: {emptied} is empty or gone, where the last pass \
                 left {} paths; a pass would delete them all from {other}. If that is \
                 what you want, run again with --accept-emptied; if not, put the directory \
                 back (or remove the sync's state to merge the two sides afresh)",
                self.state.ancestor.len()
            ),
            serde_json::json!({ "emptied": emptied, "paths": self.state.ancestor.len() }),
        ))
    }

    /// The start of a pass: the state read, and both sides asked what changed since the
    /// last pass's tokens where those are trusted (the sandbox first, its token before its
    /// tree: a change there during the local scan is seen next pass).
    async fn ask_sides(
        &mut self,
        local: &mut LocalSide<'_>,
        local_changed: Option<BTreeSet<String>>,
    ) -> Result<Asked, SdkError> {
        // The state is read on a thread of its own while both sides are asked what changed
        // (its head holds the tokens they are asked with): at 50,000 paths the read is a
        // quarter of a pass that changed ten.
        let mut reading = None;
        let tracked = if self.journal.is_some() {
            self.state.tracked.clone()
        } else {
            let dir = self.state_dir.clone();
            let read = tokio::task::spawn_blocking(move || Journal::read(&dir));
            match Head::read(&self.state_dir) {
                Some(head) => {
                    reading = Some(read);
                    Some(head.tracked)
                }
                None => {
                    self.take_journal(read.await)?;
                    self.state.tracked.clone()
                }
            }
        };
        let exclude = scan::exclude_lines(&self.options.exclude, self.options.default_excludes);
        // Whatever fails below, the next pass in this process reads both sides whole (a
        // new one takes the token journaled last).
        let known = std::mem::take(&mut self.token_trusted)
            .then_some(tracked)
            .flatten()
            .filter(|tracked| tracked.exclude == exclude);
        let since = known.as_ref().map(|known| known.version.as_str());
        let remote = self.sandbox.poll(since).await?;
        let since = known.as_ref().and_then(|known| known.local.as_deref());
        let polled = local.poll(since).await?;
        let watched = polled.changed.filter(|_| known.is_some());
        let local_watched = watched.is_some() || local_changed.is_some();
        let local_changed = local_changed.or(watched);
        if let Some(read) = reading {
            self.take_journal(read.await)?;
        }
        Ok(Asked {
            known,
            exclude,
            version: remote.token.unwrap_or_default(),
            remote_changed: remote.changed,
            local_token: polled.token,
            local_watched,
            local_changed,
        })
    }

    /// Reads both sides at once, each where it told what changed (and `dirty`, what the
    /// last pass left to read again) or whole: the local side, where no watcher told, where
    /// its walk of stats finds changes. Not `known` (no trusted tokens): both whole.
    async fn read_sides(
        &mut self,
        local: &mut LocalSide<'_>,
        known: bool,
        (local_changed, remote_changed): (Option<BTreeSet<String>>, Option<BTreeSet<String>>),
        dirty: &BTreeSet<String>,
    ) -> Result<ReadSides, SdkError> {
        let with_dirty = |paths: BTreeSet<String>| -> BTreeSet<String> {
            paths.into_iter().chain(dirty.iter().cloned()).collect()
        };
        // The records go with the local side for the read and come back after it, whatever
        // either side answers.
        local.records = std::mem::take(&mut self.state.cache);
        let (local_paths, walk_skipped) = match (known, local_changed) {
            (false, _) => (None, Vec::new()),
            (true, Some(told)) => (Some(with_dirty(told)), Vec::new()),
            (true, None) => match local.walk(&self.state.ancestor) {
                Ok((changed, skipped)) => (changed.map(with_dirty), skipped),
                Err(err) => {
                    self.state.cache = std::mem::take(&mut local.records);
                    return Err(err.into());
                }
            },
        };
        let remote_paths = remote_changed.filter(|_| known).map(with_dirty);
        let (local_read, remote_read) = tokio::join!(
            local.read(local_paths.as_ref()),
            self.sandbox.read(remote_paths.as_ref())
        );
        self.state.cache = std::mem::take(&mut local.records);
        let mut local_read = local_read?;
        local_read.skipped.extend(walk_skipped);
        Ok(ReadSides {
            local_paths,
            remote_paths,
            local: local_read,
            remote: remote_read?,
        })
    }

    /// A first sync into an empty side (two-way modes only: one-way ones make one side what
    /// the other holds) has nothing to merge: the other side's tree is copied whole. Answers
    /// `None` when neither side is empty.
    async fn first_pass(
        &mut self,
        version: &str,
        exclude: &[String],
        local_token: &Option<String>,
    ) -> Result<Option<PassReport>, SdkError> {
        // Into an empty local directory: the sandbox's tree comes in one stream, hashed as
        // it is written.
        if first::is_empty(&self.local)? {
            let brought = first::bring(
                &self.sandbox.client,
                &self.sandbox.dir,
                &self.local,
                &self.ignores,
                self.options.default_excludes,
            )
            .await?;
            let tracked = Tracked {
                version: version.to_string(),
                dirty: BTreeSet::new(),
                exclude: exclude.to_vec(),
                local: local_token.clone(),
            };
            self.keep_first_sync(brought.tree, None, tracked)?;
            return Ok(Some(PassReport {
                to_local: brought.changes,
                skipped: brought.skipped,
                whole: true,
                local_whole: true,
                remote_whole: true,
                ..PassReport::default()
            }));
        }
        // Into an empty sandbox directory: the local tree goes as it is read.
        if upload::is_empty(&self.sandbox.client, &self.sandbox.dir).await? {
            let uploaded = upload::send(
                &self.sandbox.client,
                &self.sandbox.dir,
                &self.local,
                &self.ignores,
                self.progress.clone(),
            )
            .await?;
            let made = upload::made(&uploaded);
            // What the pass made in the sandbox is read there again by the next, as below.
            let dirty = uploaded
                .ops
                .iter()
                .flat_map(Op::paths)
                .map(String::from)
                .collect();
            let upload::Uploaded {
                ops,
                results,
                cache,
                skipped,
            } = uploaded;
            let mut report = PassReport {
                skipped,
                whole: true,
                local_whole: true,
                remote_whole: true,
                ..PassReport::default()
            };
            tally(
                merge::Side::Remote,
                &ops,
                results,
                &mut report,
                &mut Vec::new(),
            );
            let tracked = Tracked {
                version: version.to_string(),
                dirty,
                exclude: exclude.to_vec(),
                local: local_token.clone(),
            };
            self.keep_first_sync(made, Some(cache), tracked)?;
            return Ok(Some(report));
        }
        Ok(None)
    }

    /// Ends a pass that found nothing to merge: only the tokens move, journaled.
    fn keep_token(&mut self, tracked: Tracked) -> Result<(), SdkError> {
        let old = State {
            remote: self.state.remote.clone(),
            conflicts: self.state.conflicts.clone(),
            tracked: self.state.tracked.clone(),
            ..State::default()
        };
        self.state.tracked = Some(tracked);
        read(&mut self.journal)?.save(&old, &self.state, Some(&BTreeSet::new()))?;
        self.token_trusted = true;
        Ok(())
    }

    /// Ends a pass that merged: the next ancestor (what both sides agree on, except where
    /// a change did not happen), the conflicts left open, what the next pass reads again,
    /// and the state journaled with the sandbox's token.
    fn keep_pass(&mut self, end: PassEnd<'_>) -> Result<(), SdkError> {
        let PassEnd {
            plan,
            merged,
            old_cache,
            old_state,
            undone,
            read_again,
            version,
            exclude,
            local_token,
        } = end;
        // The next ancestor: what both agree on, except where a change did not happen.
        let touched: Option<BTreeSet<String>> = merged.map(|merged| {
            merged
                .iter()
                .chain(plan.agreed.keys())
                .chain(plan.remote_end.keys())
                .chain(old_cache.keys())
                .cloned()
                .collect()
        });
        let old_part = touched.as_ref().map(|touched| State {
            remote: self.state.remote.clone(),
            ancestor: touched
                .iter()
                .filter_map(|path| {
                    self.state
                        .ancestor
                        .get(path)
                        .map(|entry| (path.clone(), entry.clone()))
                })
                .collect(),
            conflicts: self.state.conflicts.clone(),
            // A record read again was, before, what `old_cache` kept of it.
            cache: touched
                .iter()
                .filter_map(|path| {
                    let was = match old_cache.get(path) {
                        Some(was) => was.as_ref(),
                        None => self.state.cache.get(path),
                    };
                    was.map(|seen| (path.clone(), seen.clone()))
                })
                .collect(),
            tracked: self.state.tracked.clone(),
            ..State::default()
        });
        let mut next: BTreeMap<String, Option<Entry>> = match merged {
            Some(merged) => merged
                .iter()
                .chain(plan.agreed.keys())
                .map(|path| (path.clone(), plan.agreed.get(path).cloned()))
                .collect(),
            None => self
                .state
                .ancestor
                .keys()
                .chain(plan.agreed.keys())
                .map(|path| (path.clone(), plan.agreed.get(path).cloned()))
                .collect(),
        };
        for undone in &undone {
            let prefix = format!("{}/", undone.path);
            for (key, entry) in next.iter_mut() {
                if *key == undone.path || (undone.subtree && key.starts_with(&prefix)) {
                    *entry = self.state.ancestor.get(key).cloned();
                }
            }
        }
        for (path, entry) in next {
            match entry {
                Some(entry) => {
                    self.state.ancestor.insert(path, entry);
                }
                None => {
                    self.state.ancestor.remove(&path);
                    // Records of what is gone go with it.
                    self.state.cache.remove(&path);
                }
            }
        }
        self.state.remote = self.sandbox.dir.clone();
        let found = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        for conflict in &plan.conflicts {
            if let Resolution::KeptBoth { aside, kept } = &conflict.resolution
                && !self.state.conflicts.iter().any(|open| open.aside == *aside)
            {
                self.state.conflicts.push(OpenConflict {
                    path: conflict.path.clone(),
                    aside: aside.clone(),
                    kept: match kept {
                        merge::Side::Local => "local".into(),
                        merge::Side::Remote => "remote".into(),
                    },
                    found: found.clone(),
                    made: false,
                });
            }
        }
        // A conflict is open until the copy set aside has been made and is removed: one
        // whose copy this pass could not make stays (the next pass makes it).
        let local = self.local.clone();
        self.state.conflicts.retain_mut(|open| {
            if local.join(&open.aside).symlink_metadata().is_ok() {
                open.made = true;
                return true;
            }
            !open.made && undone.iter().any(|undone| undone.path == open.aside)
        });
        // What the next pass reads again on both sides, journaled with the token.
        let mut dirty: BTreeSet<String> = undone
            .into_iter()
            .map(|undone| undone.path)
            .chain(read_again)
            .collect();
        // A path each side left different (one-way-safe).
        for (path, entry) in &plan.remote_end {
            if plan.agreed.get(path) != Some(entry) {
                dirty.insert(path.clone());
            }
        }
        for path in plan.agreed.keys() {
            if !plan.remote_end.contains_key(path) {
                dirty.insert(path.clone());
            }
        }
        self.state.tracked = Some(Tracked {
            version,
            dirty,
            exclude,
            local: local_token,
        });
        match (&old_state, &old_part) {
            (Some(old), _) => {
                // Records of files the pass wrote are taken by the next scan.
                let ancestor = &self.state.ancestor;
                self.state
                    .cache
                    .retain(|path, _| ancestor.contains_key(path));
                read(&mut self.journal)?.save(old, &self.state, None)?;
            }
            (None, Some(old)) => {
                read(&mut self.journal)?.save(old, &self.state, touched.as_ref())?
            }
            (None, None) => {}
        }

        Ok(())
    }

    /// Keeps what a first sync left both sides holding: the ancestor, the records of the
    /// local files it read (where it read them), and the tokens it was read with.
    fn keep_first_sync(
        &mut self,
        ancestor: Entries,
        cache: Option<scan::ScanCache>,
        tracked: Tracked,
    ) -> Result<(), SdkError> {
        let old = self.state.clone();
        self.state.ancestor = ancestor;
        if let Some(cache) = cache {
            self.state.cache = cache;
        }
        self.state.remote = self.sandbox.dir.clone();
        self.state.tracked = Some(tracked);
        read(&mut self.journal)?.save(&old, &self.state, None)?;
        self.token_trusted = true;
        Ok(())
    }

    /// Takes the state a thread read.
    fn take_journal(
        &mut self,
        read: Result<Result<(State, Journal), SdkError>, tokio::task::JoinError>,
    ) -> Result<(), SdkError> {
        let (state, journal) = read.map_err(std::io::Error::other)??;
        self.state = state;
        self.journal = Some(journal);
        Ok(())
    }
}

/// The journal, read by the time a pass writes it.
fn read(journal: &mut Option<Journal>) -> Result<&mut Journal, SdkError> {
    journal
        .as_mut()
        .ok_or_else(|| SdkError::invalid("the sync's state was not read".to_string()))
}

/// The paths where `ancestor`, `local` and `remote` do not all hold the same.
fn differing(ancestor: &Entries, local: &Entries, remote: &Entries) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (path, entry) in local {
        if ancestor.get(path) != Some(entry) || remote.get(path) != Some(entry) {
            out.insert(path.clone());
        }
    }
    for path in ancestor.keys().chain(remote.keys()) {
        if !local.contains_key(path) {
            out.insert(path.clone());
        }
    }
    out
}

/// The keys of `map` at `path` and below it.
fn under_and_at<T>(map: &BTreeMap<String, T>, path: &str) -> Vec<String> {
    map.get_key_value(path)
        .into_iter()
        .chain(merge::within(map, path))
        .map(|(key, _)| key.clone())
        .collect()
}

/// A path holding each of `hashes`, looked for in `trees` in order (each without the
/// paths of its skip set, whose entries may be out of date).
fn holders(
    trees: &[(&dyn merge::Tree, Option<&BTreeSet<String>>)],
    hashes: &HashSet<ContentHash>,
) -> HashMap<ContentHash, String> {
    let mut out = HashMap::new();
    for (tree, skip) in trees {
        if out.len() == hashes.len() {
            break;
        }
        // The first holder in path order, whichever order the tree visits in.
        let mut found: HashMap<&ContentHash, String> = HashMap::new();
        tree.each(&mut |path, entry| {
            if let Entry::File { hash, .. } = entry
                && hashes.contains(hash)
                && !out.contains_key(hash)
                && !skip.is_some_and(|skip| skip.contains(path))
            {
                found
                    .entry(hash)
                    .and_modify(|held: &mut String| {
                        if path < held {
                            *held = path.clone();
                        }
                    })
                    .or_insert_with(|| path.clone());
            }
        });
        out.extend(found.into_iter().map(|(hash, path)| (*hash, path)));
    }
    out
}

impl TwoWay {
    /// Passes until `stop` resolves: one reading both sides whole at once, then one
    /// whenever either side changes, reading only what changed (the local side's changes
    /// told by `watch`, started before this is called; the sandbox's by its change token,
    /// and woken by a watch of the directory), one reading only what changed at least
    /// every `every` (a wake-up lost on the way costs no more than that), and one reading
    /// both sides whole every [`WHOLE_EVERY`]. A pass that failed (the sandbox
    /// unreachable, the daemon restarting) is told to `on_pass`, and the next reads both
    /// sides whole.
    pub async fn follow(
        &mut self,
        every: std::time::Duration,
        watch: &mut dyn LocalWatch,
        mut on_pass: impl FnMut(Result<&PassReport, &SdkError>),
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<(), SdkError> {
        let (wake, mut woken) = tokio::sync::mpsc::channel::<()>(1);
        let remote_watch = tokio::spawn(wake_on_remote_changes(
            self.sandbox.client.clone(),
            self.sandbox.dir.clone(),
            self.watch_excludes(),
            wake,
        ));
        let passes = async {
            let mut whole = true;
            let mut read_whole = tokio::time::Instant::now();
            // How long a settled follow waits for an event before it looks anyway: `every`
            // after a change, doubled each time a look found nothing, up to
            // [`IDLE_LOOK_MOST`].
            let mut idle_wait = every;
            loop {
                if read_whole.elapsed() >= WHOLE_EVERY {
                    whole = true;
                }
                if whole {
                    read_whole = tokio::time::Instant::now();
                }
                // What the watcher told before a whole read is in it.
                let changed = watch.take().await;
                let result = match whole {
                    true => self.pass_whole().await,
                    false => self.pass_changed(changed).await,
                };
                let settled = match result {
                    Ok(report) => {
                        if whole {
                            // What a following sync holds while idle is the state: laid
                            // out anew, not in the holes the pass's trees leave.
                            self.state.compact();
                        }
                        on_pass(Ok(&report));
                        whole = false;
                        if !report.settled() {
                            idle_wait = every;
                        }
                        report.settled()
                    }
                    // Halted for a side emptied: nothing to retry until a side changes
                    // (the directory put back, or filled again); then read whole.
                    Err(err) if err.code() == Some(&ErrorCode::SyncHalted) => {
                        on_pass(Err(&err));
                        whole = true;
                        true
                    }
                    Err(err) => {
                        on_pass(Err(&err));
                        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                        whole = true;
                        false
                    }
                };
                if settled {
                    let looked = tokio::select! {
                        () = watch.changed() => false,
                        _ = woken.recv() => false,
                        // A pass reading only what changed, though no event came: a
                        // safety net for an event lost on its way, never a read of
                        // either side whole. It costs a round trip and a look at both
                        // tokens, so an idle follow looks ever more rarely.
                        () = tokio::time::sleep(idle_wait) => true,
                    };
                    idle_wait = match looked {
                        true => (idle_wait * 2).min(IDLE_LOOK_MOST.max(every)),
                        false => every,
                    };
                    // Changes come in bursts (a save is several events): one pass for them.
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                    while woken.try_recv().is_ok() {}
                }
            }
        };
        tokio::select! {
            () = passes => {}
            () = stop => {}
        }
        remote_watch.abort();
        Ok(())
    }
}

/// The globs the change watches on both sides leave out: the defaults (when the sync
/// leaves them out) and the sync's own files.
fn watch_excludes(options: &TwoWayOptions) -> Vec<String> {
    // Each line is also a glob of one segment, as the watches take them.
    scan::exclude_lines(&[], options.default_excludes)
}

/// Wakes a following sync on every change the sandbox reports under `remote` (and when
/// its watch ends, since changes may have been missed); watches again after a failure.
async fn wake_on_remote_changes(
    sandbox: Sandbox,
    remote: String,
    exclude: Vec<String>,
    wake: tokio::sync::mpsc::Sender<()>,
) {
    use futures_util::StreamExt;
    loop {
        let request = fsd_api::watch::WatchRequest {
            path: remote.clone(),
            exclude: Some(exclude.clone()),
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

/// The conflicts of the syncs of `local` that are still open: both versions there, or the
/// copy set aside not made yet (a pass could not make it; the next does).
pub fn conflicts(local: &Path, state_root: &Path) -> Result<Vec<OpenConflict>, SdkError> {
    let local = std::fs::canonicalize(local)?;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(local_state(state_root, &local))
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    // A state still in the tree, not taken over by a pass yet.
    dirs.push(local.join(STATE_DIR));
    let mut open = Vec::new();
    for dir in dirs {
        let (state, _) = Journal::read(&dir)?;
        open.extend(
            state
                .conflicts
                .into_iter()
                .filter(|open| !open.made || local.join(&open.aside).symlink_metadata().is_ok()),
        );
    }
    Ok(open)
}

/// Where two-way sync keeps the state of each pair of directories it syncs (what both
/// last agreed on, the scan's records, open conflicts, the lock): outside both trees, so
/// nothing in the local directory shows it (`git status`) or removes it (`git clean
/// -fdx`), as mutagen and unison keep theirs. `$FSD_SYNC_STATE_DIR`, else
/// `$XDG_STATE_HOME/fsd/sync`, else `~/.local/state/fsd/sync`.
pub fn state_root() -> PathBuf {
    let set = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    if let Some(dir) = set("FSD_SYNC_STATE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = set("XDG_STATE_HOME") {
        return PathBuf::from(dir).join("fsd").join("sync");
    }
    match set("HOME") {
        Some(home) => PathBuf::from(home).join(".local/state/fsd/sync"),
        None => std::env::temp_dir().join("fsd-sync-state"),
    }
}

/// The first 16 hex digits of the SHA-256 of `bytes`.
fn short_hash(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    fsd_api::hex::lower(&Sha256::digest(bytes)[..8])
}

/// The state directory (under `root`) of a local directory's syncs (its lock, and a
/// directory per sandbox directory it is synced with): its name, then a hash of its
/// canonical path.
fn local_state(root: &Path, local: &Path) -> PathBuf {
    let name: String = local
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let hash = short_hash(local.as_os_str().as_encoded_bytes());
    root.join(format!("{name}-{hash}"))
}

/// The state of a sync with the sandbox directory `remote`, in its local directory's
/// (`own`): the pair's.
fn pair_state(own: &Path, remote: &str) -> PathBuf {
    own.join(format!("with-{}", short_hash(remote.as_bytes())))
}

/// Takes over a state an earlier version kept in the tree (`LOCAL/.fsd-sync`): its state
/// and log go to the pair's state directory in `own` (unless that has one), and the
/// directory in the tree is removed.
fn take_over_state_in_the_tree(own: &Path, local: &Path) -> Result<(), SdkError> {
    let old = local.join(STATE_DIR);
    if !old.is_dir() {
        return Ok(());
    }
    let (state, _) = Journal::read(&old)?;
    if !state.remote.is_empty() {
        let new = pair_state(own, &state.remote);
        std::fs::create_dir_all(&new)?;
        if !new.join(journal::BASE_FILE).exists() {
            for file in [journal::BASE_FILE, journal::CACHE_FILE, journal::LOG_FILE] {
                match std::fs::copy(old.join(file), new.join(file)) {
                    Ok(_) => {}
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                    Err(err) => return Err(err.into()),
                }
            }
        }
    }
    std::fs::remove_dir_all(&old)?;
    Ok(())
}

/// A change not made: its path (with what is under it, for a move) keeps its ancestor.
struct Undone {
    path: String,
    subtree: bool,
}

/// The local scan's records taken into `cache`, what they replaced kept in `old_cache` for
/// the journal (`None`: there was none): at `paths` and under them when the side was read
/// there, else each record that changed (none kept when the pass merges everything and
/// journals the whole state).
fn keep_records(
    cache: &mut ScanCache,
    old_cache: &mut BTreeMap<String, Option<scan::Seen>>,
    paths: Option<&BTreeSet<String>>,
    scanned: ScanCache,
    whole: bool,
) {
    match paths {
        Some(paths) => {
            for top in scan::tops(paths) {
                for key in under_and_at(cache, top) {
                    if let Some(seen) = cache.remove(&key) {
                        old_cache.insert(key, Some(seen));
                    }
                }
            }
            for (path, seen) in scanned {
                old_cache.entry(path.clone()).or_insert(None);
                cache.insert(path, seen);
            }
        }
        None => {
            if !whole {
                for (path, seen) in cache.iter() {
                    if scanned.get(path) != Some(seen) {
                        old_cache.insert(path.clone(), Some(seen.clone()));
                    }
                }
                for path in scanned.keys() {
                    if !cache.contains_key(path) {
                        old_cache.insert(path.clone(), None);
                    }
                }
            }
            *cache = scanned;
        }
    }
}

/// What to merge: what either side told (`scope`, both sides read in part), or everything.
/// Read whole, the paths where the three trees differ (a few, mostly) are merged alone: the
/// same plan as merging everything, at the cost of a comparison. Answers the plan, the
/// paths merged when the merge was scoped, and both sides (whole when read whole).
fn merge_sides<'a>(
    ancestor: &'a Entries,
    local_now: SideTree<'a>,
    remote_now: SideTree<'a>,
    scope: Option<BTreeSet<String>>,
    mode: Mode,
) -> (
    merge::Plan,
    Option<BTreeSet<String>>,
    SideTree<'a>,
    SideTree<'a>,
) {
    if let Some(scope) = scope {
        let (plan, merged) =
            merge::merge_within(ancestor, local_now.tree(), remote_now.tree(), mode, &scope);
        return (plan, Some(merged), local_now, remote_now);
    }
    let (local_now, remote_now) = (local_now.into_whole(), remote_now.into_whole());
    let differ = differing(ancestor, &local_now, &remote_now);
    let (plan, merged) = if differ.len() * 2 < local_now.len().max(remote_now.len()) {
        let (plan, merged) =
            merge::merge_within(ancestor, &*local_now, &*remote_now, mode, &differ);
        (plan, Some(merged))
    } else {
        (merge::merge(ancestor, &local_now, &remote_now, mode), None)
    };
    (
        plan,
        merged,
        SideTree::Whole(local_now),
        SideTree::Whole(remote_now),
    )
}

/// What both sides said at the start of a pass (see [`TwoWay::ask_sides`]).
struct Asked {
    /// The last pass's tokens, when they are trusted and were read with the same excludes.
    known: Option<Tracked>,
    exclude: Vec<String>,
    /// The sandbox's token now.
    version: String,
    /// What changed in the sandbox since `known`'s token (`None`: read it whole).
    remote_changed: Option<BTreeSet<String>>,
    /// The local watcher's token now, and whether it told what changed.
    local_token: Option<String>,
    local_watched: bool,
    /// What changed locally, as the caller or the watcher told it.
    local_changed: Option<BTreeSet<String>>,
}

/// Both sides as a pass read them (see [`TwoWay::read_sides`]): where (`None`: whole) and
/// what.
struct ReadSides {
    local_paths: Option<BTreeSet<String>>,
    remote_paths: Option<BTreeSet<String>>,
    local: endpoint::Read,
    remote: endpoint::Read,
}

/// How a pass's sides were read, for [`merge_read`].
struct Scope {
    /// The last pass's tokens were trusted: what was read in part is patched onto the
    /// ancestor.
    known: bool,
    /// The pass merges everything (no record of what changed is journaled).
    whole: bool,
    local_watched: bool,
    mode: Mode,
}

/// A pass's merge: its plan, the paths merged when it was scoped, both sides as the merge
/// saw them, and the report so far.
struct Merged<'a> {
    plan: merge::Plan,
    merged: Option<BTreeSet<String>>,
    local_now: SideTree<'a>,
    remote_now: SideTree<'a>,
    report: PassReport,
}

/// Merges both sides as read: each read in part is the ancestor with what was read
/// patched in (no copy). The local scan's records go into `cache`, what they replaced into
/// `old_cache` (see [`keep_records`]).
fn merge_read<'a>(
    ancestor: &'a Entries,
    cache: &mut ScanCache,
    old_cache: &mut BTreeMap<String, Option<scan::Seen>>,
    read: ReadSides,
    how: Scope,
) -> Merged<'a> {
    let ReadSides {
        local_paths,
        remote_paths,
        local,
        remote,
    } = read;
    let remote_now = SideTree::new(ancestor, remote_paths.as_ref(), remote.entries);
    keep_records(
        cache,
        old_cache,
        local_paths.as_ref(),
        local.records,
        how.whole,
    );
    let local_now = SideTree::new(ancestor, local_paths.as_ref(), local.entries);
    let scope = match (&local_paths, &remote_paths) {
        (Some(local), Some(remote)) if how.known => {
            Some(local.iter().chain(remote).cloned().collect())
        }
        _ => None,
    };
    let (plan, merged, local_now, remote_now) =
        merge_sides(ancestor, local_now, remote_now, scope, how.mode);
    let report = PassReport {
        conflicts: plan.conflicts.clone(),
        skipped: local.skipped.into_iter().chain(remote.skipped).collect(),
        whole: local_paths.is_none() && remote_paths.is_none(),
        local_whole: local_paths.is_none(),
        local_watched: how.local_watched && local_paths.is_some(),
        remote_whole: remote_paths.is_none(),
        ..PassReport::default()
    };
    Merged {
        plan,
        merged,
        local_now,
        remote_now,
        report,
    }
}

/// What applying a pass's plan leaves for its end ([`TwoWay::keep_pass`]).
#[derive(Default)]
struct Applied {
    /// Changes that did not happen: their paths keep their old ancestor (a move's, what is
    /// under them too).
    undone: Vec<Undone>,
    /// What the next pass reads again in the sandbox (its events name it too; this does
    /// not wait on them).
    read_again: BTreeSet<String>,
}

/// Makes the plan on both sides, each from where the merge left it (the whole side where
/// it merged everything). The local side first: what its steps need from the sandbox is
/// fetched while the sandbox still holds it. Then the sandbox: its new content is read
/// from the local side as it is now (`agreed`, else the local tree outside the merged
/// paths).
async fn apply_sides(
    (local, sandbox): (&mut LocalSide<'_>, &mut SandboxSide),
    (plan, merged, local_now, remote_now): (
        &merge::Plan,
        Option<&BTreeSet<String>>,
        &SideTree<'_>,
        &SideTree<'_>,
    ),
    progress: Option<&Progress>,
    report: &mut PassReport,
    applied: &mut Applied,
) -> Result<(), SdkError> {
    let (local_base, remote_base) = match merged {
        Some(merged) => (
            Cow::Owned(merge::part(local_now.tree(), merged)),
            Cow::Owned(merge::part(remote_now.tree(), merged)),
        ),
        None => (local_now.whole(), remote_now.whole()),
    };
    let (local_base, remote_base): (&Entries, &Entries) = (&local_base, &remote_base);
    let local_ops = ops::operations(local_base, &plan.agreed);
    let remote_ops = ops::operations(remote_base, &plan.remote_end);
    if !local_ops.is_empty() {
        let wanted = put_hashes(&local_ops).cloned().collect();
        let own = holders(&[(local_base, None), (local_now.tree(), merged)], &wanted);
        let from = sandbox.supply(holders(
            &[(remote_base, None), (remote_now.tree(), merged)],
            &wanted,
        ));
        let steps = Steps {
            ops: &local_ops,
            own,
            progress: progress.cloned(),
        };
        let outcomes = local.apply(steps, from).await?;
        tally(
            merge::Side::Local,
            &local_ops,
            outcomes,
            report,
            &mut applied.undone,
        );
        // What came from the sandbox is read there again by the next pass: a file made
        // and gone before the daemon's watch read its directory is named by no event,
        // and one read in that moment would stay here (the hourly whole read aside).
        if local_ops.len() <= MOST_PATHS {
            let paths = local_ops.iter().flat_map(Op::paths).map(String::from);
            applied.read_again.extend(paths);
        }
    }
    if !remote_ops.is_empty() {
        let wanted = put_hashes(&remote_ops).cloned().collect();
        let from = local.supply(holders(
            &[(&plan.agreed, None), (local_now.tree(), merged)],
            &wanted,
        ));
        let steps = Steps {
            ops: &remote_ops,
            own: HashMap::new(),
            progress: progress.cloned(),
        };
        let outcomes = sandbox.apply(steps, from).await?;
        let paths = remote_ops.iter().flat_map(Op::paths).map(String::from);
        applied.read_again.extend(paths);
        tally(
            merge::Side::Remote,
            &remote_ops,
            outcomes,
            report,
            &mut applied.undone,
        );
    }
    Ok(())
}

/// What a pass that merged leaves for [`TwoWay::keep_pass`].
struct PassEnd<'a> {
    plan: &'a merge::Plan,
    /// The paths merged, when the merge was scoped.
    merged: Option<&'a BTreeSet<String>>,
    /// The scan records the pass replaced, as they were (`None`: there was none).
    old_cache: BTreeMap<String, Option<scan::Seen>>,
    /// The whole state before the pass, when it merged everything.
    old_state: Option<State>,
    undone: Vec<Undone>,
    read_again: BTreeSet<String>,
    version: String,
    exclude: Vec<String>,
    local_token: Option<String>,
}

/// Counts what was made, and records what was not.
fn tally(
    side: merge::Side,
    ops: &[Op],
    results: Vec<Result<(), Refused>>,
    report: &mut PassReport,
    undone: &mut Vec<Undone>,
) {
    for (op, result) in ops.iter().zip(results) {
        let changes = match side {
            merge::Side::Local => &mut report.to_local,
            merge::Side::Remote => &mut report.to_remote,
        };
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
                let moved = matches!(op, Op::Rename { .. });
                undone.push(Undone {
                    path: op.path().to_string(),
                    subtree: moved,
                });
                if let Op::Rename { to, .. } = op {
                    undone.push(Undone {
                        path: to.clone(),
                        subtree: true,
                    });
                }
                match refused {
                    Refused::Changed => report.changed_meanwhile.push((side, op.path().into())),
                    Refused::Failed(reason) => report.failed.push((side, op.path().into(), reason)),
                }
            }
        }
    }
}
