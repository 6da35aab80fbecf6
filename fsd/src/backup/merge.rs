//! A branch merged back (fsd's own, `POST /api/fork/merge`), no HTTP: what the branch
//! changed since its fork point, merged three ways into the directory it was forked from
//! (or another branch of the same tree) with two-way sync's rules (`fsd-merge`).
//!
//! Only what either side changed is read: each side's own overlay layers name those paths
//! (files, links, whiteouts, new, replaced or renamed directories; see
//! [`fsd_backup::fork::changed_paths`]), and the merge reads them, what is below them and
//! the directories above them in the branch, in `into` and at the fork point (a read-only
//! view of the frozen layers both stand on). A tree of 50,000 files with ten changed reads
//! ten. The changes to `into` go through the files domain's checked apply: each is made only
//! if its path still holds what the merge read, so a command writing in `into` meanwhile
//! loses nothing (its paths are reported and left as it made them); moves are made as moves.
//!
//! A branch merged again into the same directory is merged against what it held when last
//! merged, where that merge took it in (its merge base, kept beside the fork's state), as
//! git merges against the branch's last merged commit: work continued in the branch arrives
//! clean, and what the directory settled or changed since stays, where against the fork
//! point both would be conflicts.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use fsd_api::backup::{MergeBranchResponse, MergeChange, MergeConflict, MergeSkipped};
use fsd_api::files::{ApplyStep, StepOutcome};
use fsd_backup::fork::{MergeSides, SideChanges, changed_paths};
use fsd_merge::content_hash::ContentHash;
use fsd_merge::ops::{self, Op};
use fsd_merge::{CONFLICT_MARK, Entries, Entry, Mode, Resolution};
use serde::{Deserialize, Serialize};

use crate::files::FileService;

/// Who wins a path both sides changed differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeMode {
    /// Both versions kept: `into`'s at the path, the branch's beside it (a directory keeps
    /// the path), listed as a conflict.
    Safe,
    /// The branch's version.
    Theirs,
    /// What `into` holds.
    Ours,
}

impl MergeMode {
    /// The wire's name (`two-way-safe` when none is given), or `None` for an unknown one.
    pub fn parse(name: Option<&str>) -> Option<MergeMode> {
        match name.unwrap_or("two-way-safe") {
            "two-way-safe" => Some(MergeMode::Safe),
            "theirs" => Some(MergeMode::Theirs),
            "ours" => Some(MergeMode::Ours),
            _ => None,
        }
    }
}

/// What a merge read and decided, before anything is made.
pub struct Decided {
    /// Paths either side changed since the fork point.
    pub paths_read: u64,
    /// The changes that make `into` what the merge decided, each with what its path must
    /// hold first.
    pub ops: Vec<Op>,
    pub conflicts: Vec<MergeConflict>,
    /// Where the content of each file the changes put is read: by hash, a file in the
    /// branch (or in `into`: a version a conflict set aside).
    sources: HashMap<ContentHash, PathBuf>,
    /// The paths the merge decided, what the branch held at them, and the pair's merge
    /// base before it: the next base (see [`keep_base`]).
    merged: BTreeSet<String>,
    branch: Entries,
    base: MergeBase,
}

/// What the branch held (`None`: nothing) at each path a merge of it into one directory
/// took in: the fork point there at the next merge of the pair.
#[derive(Debug, Default, Serialize, Deserialize)]
struct MergeBase {
    held: BTreeMap<String, Option<Entry>>,
}

impl MergeBase {
    /// The pair's base kept at `file` (none yet, or unreadable: the fork point alone).
    fn read(file: &Path) -> MergeBase {
        std::fs::read(file)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// `ancestor` (the fork point, read in part) as the base has it.
    fn patch(&self, ancestor: &mut Entries) {
        for (path, held) in &self.held {
            match held {
                Some(entry) => ancestor.insert(path.clone(), entry.clone()),
                None => ancestor.remove(path),
            };
        }
    }
}

/// Reads both sides and their fork point where either changed, and merges them. Blocking.
pub fn decide(files: &FileService, sides: &MergeSides, mode: MergeMode) -> io::Result<Decided> {
    let fork_point = sides.ancestor.path();
    let base = MergeBase::read(&sides.base_file);
    let mut changed = BTreeSet::new();
    for side in [&sides.branch_changes, &sides.into_changes] {
        match side {
            SideChanges::Listed(listed) => changed.extend(listed.iter().cloned()),
            SideChanges::Layers(layers) => changed.extend(changed_paths(layers, fork_point)),
        }
    }
    // Each side's changes are found against the fork point; where the last merge took a
    // path in, the base is what the branch held then, and a side can change it without a
    // trace against the fork point (a file the branch made after the fork, merged, then
    // removed: nothing in its layers, nothing at the fork point). Those paths are read too.
    changed.extend(base.held.keys().cloned());
    let scope: BTreeSet<String> = fsd_api::files::topmost(&changed)
        .into_iter()
        .map(str::to_string)
        .collect();
    // What a conflict's copy must not be named: names taken beside each changed path.
    let wanted: Vec<String> = scope
        .iter()
        .cloned()
        .chain(taken_beside(&scope, &[&sides.into, &sides.branch]))
        .collect();
    let read = |view: &Path| read_view(files, view, &scope, &wanted);
    let mut ancestor = read(fork_point)?;
    base.patch(&mut ancestor);
    let into = read(&sides.into)?;
    let branch = read(&sides.branch)?;
    let (local, remote, rules) = match mode {
        MergeMode::Safe => (&into, &branch, Mode::TwoWaySafe),
        MergeMode::Ours => (&into, &branch, Mode::TwoWayResolved),
        MergeMode::Theirs => (&branch, &into, Mode::TwoWayResolved),
    };
    let (plan, merged) = fsd_merge::merge_within(&ancestor, local, remote, rules, &scope);
    let end = match mode {
        MergeMode::Theirs => &plan.remote_end,
        _ => &plan.agreed,
    };
    let ops = ops::operations(&fsd_merge::part(&into, &merged), end);
    let conflicts = plan
        .conflicts
        .iter()
        .map(|conflict| {
            let (resolution, aside) = match (&conflict.resolution, mode) {
                (Resolution::KeptBoth { aside, .. }, _) => ("keptBoth", Some(aside.clone())),
                (_, MergeMode::Theirs) => ("theirs", None),
                _ => ("ours", None),
            };
            MergeConflict {
                path: conflict.path.clone(),
                resolution: resolution.into(),
                aside,
            }
        })
        .collect();
    let mut sources = HashMap::new();
    for (root, tree) in [(&sides.branch, &branch), (&sides.into, &into)] {
        for (path, entry) in tree {
            if let Entry::File { hash, .. } = entry {
                sources.entry(*hash).or_insert_with(|| root.join(path));
            }
        }
    }
    Ok(Decided {
        paths_read: scope.len() as u64,
        ops,
        conflicts,
        sources,
        merged,
        branch,
        base,
    })
}

/// `view`'s entries at `wanted` and below them, and the directories above `scope`'s paths.
fn read_view(
    files: &FileService,
    view: &Path,
    scope: &BTreeSet<String>,
    wanted: &[String],
) -> io::Result<Entries> {
    let mut tree = Entries::new();
    if !wanted.is_empty() {
        for entry in files.entries_at(view, wanted)?.entries {
            if let Some(held) = Entry::of_manifest(&entry) {
                tree.insert(entry.path, held);
            }
        }
    }
    for path in scope {
        let mut up = path.rsplit_once('/').map(|(dir, _)| dir);
        while let Some(dir) = up {
            if tree.contains_key(dir) {
                break;
            }
            match std::fs::symlink_metadata(view.join(dir)) {
                Ok(meta) if meta.is_dir() => {
                    // As a manifest reports it (the permission bits, set-user-ID,
                    // set-group-ID and sticky ones among them): a directory read here at one
                    // merge and by the manifest at the next must not differ by a mask (a
                    // sticky directory's mode looked changed, and a merge made a directory
                    // `into` had removed).
                    let mode = meta.permissions().mode() & 0o7777;
                    tree.insert(dir.to_string(), Entry::Dir { mode });
                }
                _ => break,
            }
            up = dir.rsplit_once('/').map(|(dir, _)| dir);
        }
    }
    Ok(tree)
}

/// The names beside `scope`'s paths in `views` that a conflict's copy of one of them could
/// take (`PATH.sync-conflict-…`).
fn taken_beside(scope: &BTreeSet<String>, views: &[&Path]) -> BTreeSet<String> {
    let mut taken = BTreeSet::new();
    let mut by_dir: HashMap<&str, HashSet<&str>> = HashMap::new();
    for path in scope {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        by_dir.entry(dir).or_default().insert(name);
    }
    for (dir, names) in by_dir {
        for view in views {
            let Ok(listing) = std::fs::read_dir(view.join(dir)) else {
                continue;
            };
            for found in listing.flatten() {
                let found = found.file_name().to_string_lossy().into_owned();
                // The name before any mark in it is one of the paths': looked up, not
                // compared with each (a directory of 10,000 changed files lists them all).
                let beside = found
                    .match_indices(CONFLICT_MARK)
                    .any(|(at, _)| names.contains(&found[..at]));
                if beside {
                    taken.insert(if dir.is_empty() {
                        found
                    } else {
                        format!("{dir}/{found}")
                    });
                }
            }
        }
    }
    taken
}

/// The apply steps of `decided`'s changes, and the body that carries their files.
pub fn steps(decided: &Decided) -> io::Result<(Vec<ApplyStep>, Contents)> {
    let mut steps = Vec::with_capacity(decided.ops.len());
    let mut files = VecDeque::new();
    for op in &decided.ops {
        let size = match op {
            Op::Put {
                path,
                entry: Entry::File { hash, .. },
                ..
            } => {
                let source = decided.sources.get(hash).ok_or_else(|| {
                    io::Error::other(format!("{path}: its content was not read on either side"))
                })?;
                // Gone since it was read (the branch is written meanwhile): the step's
                // content will not match its hash, and it is reported, not made.
                let size = std::fs::metadata(source).map_or(0, |meta| meta.len());
                files.push_back((source.clone(), size));
                size
            }
            _ => 0,
        };
        steps.push(ops::apply_step(op, size));
    }
    Ok((
        steps,
        Contents {
            files,
            current: None,
        },
    ))
}

/// The files a merge puts, one after the other, each exactly as long as its step says: a
/// file that changed since it was read arrives cut or padded, its hash does not match, and
/// the apply leaves its path as it was.
pub struct Contents {
    files: VecDeque<(PathBuf, u64)>,
    current: Option<(Option<File>, u64)>,
}

impl Read for Contents {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.current.as_ref().is_none_or(|(_, left)| *left == 0) {
                let Some((path, size)) = self.files.pop_front() else {
                    return Ok(0);
                };
                self.current = Some((File::open(path).ok(), size));
                continue;
            }
            let Some((file, left)) = self.current.as_mut() else {
                return Ok(0);
            };
            let room = buf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
            let read = match file.as_mut().map(|file| file.read(&mut buf[..room])) {
                Some(Ok(read)) if read > 0 => read,
                Some(Err(err)) if err.kind() == io::ErrorKind::Interrupted => continue,
                // Gone or shorter than it was: the rest is zeros.
                _ => {
                    buf[..room].fill(0);
                    *file = None;
                    room
                }
            };
            *left -= read as u64;
            return Ok(read);
        }
    }
}

/// Keeps the pair's next merge base: what the branch held at each path this merge decided,
/// except where a change was not made (written meanwhile, failed), which keep the base they
/// had so that the next merge sees the branch's version there as a change again. Blocking.
pub fn keep_base(
    sides: &MergeSides,
    decided: &Decided,
    outcomes: &[StepOutcome],
) -> io::Result<()> {
    let left: Vec<&str> = decided
        .ops
        .iter()
        .zip(outcomes)
        .filter(|(_, outcome)| !matches!(outcome, StepOutcome::Applied))
        .flat_map(|(op, _)| op.paths())
        .collect();
    let is_left = |path: &str| {
        left.iter()
            .any(|at| path == *at || path.starts_with(&format!("{at}/")))
    };
    let mut base = MergeBase {
        held: decided.base.held.clone(),
    };
    for path in decided.merged.iter().filter(|path| !is_left(path)) {
        base.held
            .insert(path.clone(), decided.branch.get(path).cloned());
    }
    let file = &sides.base_file;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let temp = file.with_extension("json.tmp");
    std::fs::write(&temp, serde_json::to_vec(&base).map_err(io::Error::other)?)?;
    std::fs::rename(&temp, file)
}

/// The answer: `decided`'s changes as made (`outcomes`, one per change; `None`: a dry
/// run, nothing made).
pub fn answer(
    sides: &MergeSides,
    decided: Decided,
    outcomes: Option<Vec<StepOutcome>>,
) -> MergeBranchResponse {
    let dry_run = outcomes.is_none();
    let mut changes = Vec::new();
    let mut changed_meanwhile = Vec::new();
    let mut failed = Vec::new();
    let mut outcomes = outcomes.into_iter().flatten();
    for op in &decided.ops {
        match outcomes.next() {
            None | Some(StepOutcome::Applied) => changes.push(change(op)),
            Some(StepOutcome::Changed { .. }) => changed_meanwhile.push(op.path().to_string()),
            Some(StepOutcome::Failed { reason }) => failed.push(MergeSkipped {
                path: op.path().to_string(),
                reason,
            }),
        }
    }
    MergeBranchResponse {
        success: failed.is_empty(),
        branch: sides.branch.display().to_string(),
        into: sides.into.display().to_string(),
        dry_run,
        paths_read: decided.paths_read,
        changes,
        conflicts: decided.conflicts,
        changed_meanwhile,
        failed,
    }
}

fn change(op: &Op) -> MergeChange {
    let (name, to) = match op {
        Op::Rename { to, .. } => ("move", Some(to.clone())),
        Op::Put {
            entry: Entry::File { .. },
            ..
        } => ("put", None),
        Op::Put {
            entry: Entry::Dir { .. },
            ..
        } => ("mkdir", None),
        Op::Put {
            entry: Entry::Link { .. },
            ..
        } => ("symlink", None),
        Op::Chmod { .. } => ("chmod", None),
        Op::Remove { .. } => ("remove", None),
    };
    MergeChange {
        op: name.into(),
        path: op.path().to_string(),
        to,
    }
}
