//! The three-way merge of two-way sync: what each side holds now, against what both last
//! agreed on (the ancestor), path by path. A change on one side is carried to the other;
//! the same change on both is no conflict; a side that only deleted loses to a side that
//! changed content (a directory deleted on one side with a change inside on the other
//! comes back, with that change); anything else is a conflict, which the [`Mode`] settles
//! and every mode reports: nothing is resolved silently.
//!
//! The merge is pure. [`merge`] answers a [`Plan`]: the steps that make each side what the
//! merge decided, and the state both agree on once they are applied (the next ancestor).
//! A sync applies the steps, checking first that each path is still what the merge saw
//! ([`ops`] makes them changes with what each path must hold first, moves as moves).
//! Two-way sync (in `fsd-sdk`) and the daemon's merge of a workspace fork share it.

pub mod content_hash;
pub mod kept;
pub mod ops;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::content_hash::ContentHash;

/// What a side holds at a path. Kept in a sync's state as one short string (`f644:HASH`,
/// `d755`, `l:TARGET`; see `kept`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A regular file: its content's hash and its permission bits.
    File { hash: ContentHash, mode: u32 },
    /// A directory and its permission bits (what it holds are entries of their own).
    Dir { mode: u32 },
    /// A symbolic link and its target, verbatim.
    Link { target: String },
}

impl Entry {
    pub fn is_dir(&self) -> bool {
        matches!(self, Entry::Dir { .. })
    }

    /// The entry written as [`Entry`]'s string form.
    fn parse(text: &str) -> Option<Entry> {
        let mode = |digits: &str| u32::from_str_radix(digits, 8).ok();
        match text.split_at_checked(1)? {
            ("f", rest) => {
                let (digits, hash) = rest.split_once(':')?;
                Some(Entry::File {
                    hash: ContentHash::parse(hash)?,
                    mode: mode(digits)?,
                })
            }
            ("d", digits) => Some(Entry::Dir {
                mode: mode(digits)?,
            }),
            ("l", target) => Some(Entry::Link {
                target: target.strip_prefix(':')?.to_string(),
            }),
            _ => None,
        }
    }
}

impl Entry {
    /// A daemon manifest's entry as a merge sees it; `None` for what a merge does not
    /// carry (a device, a FIFO, a socket; a file without a readable hash).
    pub fn of_manifest(entry: &fsd_api::files::ManifestEntry) -> Option<Entry> {
        use fsd_api::files::FileType;
        match (entry.file_type, &entry.sha256, &entry.target) {
            (FileType::Directory, _, _) => Some(Entry::Dir { mode: entry.mode }),
            (FileType::File, Some(hash), _) => Some(Entry::File {
                hash: ContentHash::parse(hash)?,
                mode: entry.mode,
            }),
            (FileType::Symlink, _, Some(target)) => Some(Entry::Link {
                target: target.clone(),
            }),
            _ => None,
        }
    }
}

impl Serialize for Entry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Entry::File { hash, mode } => serializer.collect_str(&format_args!("f{mode:o}:{hash}")),
            Entry::Dir { mode } => serializer.collect_str(&format_args!("d{mode:o}")),
            Entry::Link { target } => serializer.collect_str(&format_args!("l:{target}")),
        }
    }
}

/// The map form states were written in before the string form.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum EntryFields {
    File { hash: ContentHash, mode: u32 },
    Dir { mode: u32 },
    Link { target: String },
}

impl From<EntryFields> for Entry {
    fn from(fields: EntryFields) -> Entry {
        match fields {
            EntryFields::File { hash, mode } => Entry::File { hash, mode },
            EntryFields::Dir { mode } => Entry::Dir { mode },
            EntryFields::Link { target } => Entry::Link { target },
        }
    }
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        crate::kept::string_or_map::<D, Entry, EntryFields>(
            deserializer,
            "an entry (`f644:HASH`, `d755` or `l:TARGET`)",
            Entry::parse,
        )
    }
}

/// A tree: relative paths (`/` between names, no leading `/`) to entries; every path's
/// parent directory is in it too.
pub type Entries = BTreeMap<String, Entry>;

/// Who wins what, in mutagen's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Changes go both ways; a conflict keeps both versions (the remote one beside the
    /// local one, on both sides) and is reported.
    TwoWaySafe,
    /// Changes go both ways; in a conflict the local side wins (reported).
    TwoWayResolved,
    /// Local changes go to the remote side; the remote side's own changes are left as
    /// they are (never overwritten, reported when they conflict), its deletions restored.
    OneWaySafe,
    /// The remote side becomes what the local side holds.
    OneWayReplica,
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "two-way-safe" => Ok(Mode::TwoWaySafe),
            "two-way-resolved" => Ok(Mode::TwoWayResolved),
            "one-way-safe" => Ok(Mode::OneWaySafe),
            "one-way-replica" => Ok(Mode::OneWayReplica),
            _ => Err(format!(
                "unknown mode {name:?} (two-way-safe, two-way-resolved, one-way-safe, \
                 one-way-replica)"
            )),
        }
    }
}

/// One change to one side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Make `path` hold `entry`: what is there is replaced (a directory replaced by
    /// something else goes with what it holds); a directory's entries are steps of their
    /// own, after it.
    Put { path: String, entry: Entry },
    /// Remove what is at `path`, and what is under it.
    Remove { path: String },
}

/// How a conflict was settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Both versions kept on both sides: the one named `kept` stays at the path, the other
    /// is at `aside`.
    KeptBoth { aside: String, kept: Side },
    /// One side's version is at the path on both sides; the other's is gone.
    Won(Side),
    /// Each side keeps its own version (one-way-safe: the remote side's change is not
    /// overwritten).
    Left,
}

/// Which side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Local,
    Remote,
}

/// A path both sides changed differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub path: String,
    pub ancestor: Option<Entry>,
    pub local: Option<Entry>,
    pub remote: Option<Entry>,
    pub resolution: Resolution,
}

/// What a merge decided.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Steps for the local side, in order (removals, then puts parents first).
    pub local: Vec<Step>,
    /// Steps for the remote side, in the same order.
    pub remote: Vec<Step>,
    pub conflicts: Vec<Conflict>,
    /// What the sides agree on once the steps are applied: the next ancestor, and what the
    /// local side is to hold. A path each side left different (one-way-safe) is recorded as
    /// the local side has it.
    pub agreed: Entries,
    /// What the remote side is to hold.
    pub remote_end: Entries,
}

/// Merges `local` and `remote` against `ancestor` in `mode`.
pub fn merge(ancestor: &Entries, local: &Entries, remote: &Entries, mode: Mode) -> Plan {
    merge_trees(ancestor, local, remote, mode, &|_| false)
}

/// [`merge`] of only the paths in `scope`, what is above them and what is below them:
/// the same plan a whole merge makes when every path outside the scope holds the same on
/// all three trees (a sync that knows what changed since its last pass merges just that).
/// Answers the plan (its trees hold the merged paths, and the names it chose beside them
/// for conflicts) and the paths merged; what else the trees hold is left as it is.
pub fn merge_within(
    ancestor: &Entries,
    local: &dyn Tree,
    remote: &dyn Tree,
    mode: Mode,
    scope: &BTreeSet<String>,
) -> (Plan, BTreeSet<String>) {
    let trees: [&dyn Tree; 3] = [ancestor, local, remote];
    let mut merged = BTreeSet::new();
    for path in scope {
        let mut up = parent(path);
        while let Some(dir) = up {
            if !merged.insert(dir.to_string()) {
                break;
            }
            up = parent(dir);
        }
        merged.insert(path.clone());
        for tree in trees {
            merged.extend(tree.below(path).into_iter().cloned());
        }
    }
    let taken_elsewhere = |name: &str| trees.iter().any(|tree| tree.entry(name).is_some());
    let plan = merge_trees(
        &part(ancestor, &merged),
        &part(local, &merged),
        &part(remote, &merged),
        mode,
        &taken_elsewhere,
    );
    (plan, merged)
}

/// What `tree` (a tree's entries or records by path) holds below `dir`, not `dir` itself.
pub fn within<'a, T>(
    tree: &'a BTreeMap<String, T>,
    dir: &str,
) -> impl Iterator<Item = (&'a String, &'a T)> {
    let prefix = format!("{dir}/");
    tree.range(prefix.clone()..)
        .take_while(move |(path, _)| path.starts_with(&prefix))
}

/// `tree`'s entries at `paths`.
pub fn part(tree: &dyn Tree, paths: &BTreeSet<String>) -> Entries {
    paths
        .iter()
        .filter_map(|path| tree.entry(path).map(|entry| (path.clone(), entry.clone())))
        .collect()
}

/// A tree of entries by path as a scoped merge reads it: entries held whole, or a side read in
/// part seen through the ancestor (see `two_way`), which is never copied for it.
pub trait Tree {
    fn entry(&self, path: &str) -> Option<&Entry>;
    /// The paths below `dir`, not `dir` itself, in no particular order.
    fn below(&self, dir: &str) -> Vec<&String>;
    /// Each entry, in no particular order.
    fn each<'t>(&'t self, visit: &mut dyn FnMut(&'t String, &'t Entry));
}

impl Tree for Entries {
    fn entry(&self, path: &str) -> Option<&Entry> {
        self.get(path)
    }

    fn below(&self, dir: &str) -> Vec<&String> {
        within(self, dir).map(|(path, _)| path).collect()
    }

    fn each<'t>(&'t self, visit: &mut dyn FnMut(&'t String, &'t Entry)) {
        self.iter().for_each(|(path, entry)| visit(path, entry));
    }
}

/// Whether `path` has a place in `tree`: at the top, or in a directory `tree` holds.
pub fn placed(tree: &dyn Tree, path: &str) -> bool {
    parent(path).is_none_or(|up| tree.entry(up).is_some_and(Entry::is_dir))
}

/// The merge; `taken_elsewhere` tells names held outside the trees given (a scoped
/// merge's), which a conflict's copy must not take.
fn merge_trees(
    ancestor: &Entries,
    local: &Entries,
    remote: &Entries,
    mode: Mode,
    taken_elsewhere: &dyn Fn(&str) -> bool,
) -> Plan {
    let paths: BTreeSet<&String> = ancestor
        .keys()
        .chain(local.keys())
        .chain(remote.keys())
        .collect();
    // What each side is to hold at the end.
    let mut to_local = Entries::new();
    let mut to_remote = Entries::new();
    let mut conflicts = Vec::new();
    let mut taken: BTreeSet<String> = paths.iter().map(|path| (*path).clone()).collect();
    // Directories a conflict kept at their path (and the side whose they are): what the
    // other side removed inside when it replaced them stays.
    let mut kept_dirs: Vec<(String, Side)> = Vec::new();
    // Directories with a change somewhere inside, per side: one side replacing or
    // deleting such a directory is a change against a change.
    let changed_inside_local = changed_inside(ancestor, local);
    let changed_inside_remote = changed_inside(ancestor, remote);
    for path in paths {
        let (a, mut l, mut r) = (ancestor.get(path), local.get(path), remote.get(path));
        let inside = kept_dirs
            .iter()
            .find(|(dir, _)| path.starts_with(&format!("{dir}/")))
            .map(|(_, side)| *side);
        match inside {
            Some(Side::Local) if r.is_none() => r = a,
            Some(Side::Remote) if l.is_none() => l = a,
            _ => {}
        }
        let changed = (
            l != a || changed_inside_local.contains(path.as_str()),
            r != a || changed_inside_remote.contains(path.as_str()),
        );
        let (end_local, end_remote, conflict) = decide(l, r, changed, mode);
        let put = |end: Option<&Entry>, into: &mut Entries| {
            if let Some(entry) = end {
                into.insert(path.clone(), entry.clone());
            }
        };
        put(end_local, &mut to_local);
        put(end_remote, &mut to_remote);
        let Some(resolution) = conflict else { continue };
        let resolution = match resolution {
            Settle::KeepBoth => {
                // The directory keeps the path (what it holds merges as usual); between two
                // other things the local one does. The other goes beside it.
                let (kept, other) = match (l, r) {
                    (Some(_), Some(r)) if r.is_dir() => (Side::Remote, l),
                    _ => (Side::Local, r),
                };
                let label = match kept {
                    Side::Local => "remote",
                    Side::Remote => "local",
                };
                if (kept == Side::Local && l.is_some_and(Entry::is_dir)) || kept == Side::Remote {
                    kept_dirs.push((path.clone(), kept));
                }
                let aside = free_name(path, label, &|name: &str| {
                    taken.contains(name) || taken_elsewhere(name)
                });
                taken.insert(aside.clone());
                if let Some(other) = other {
                    to_local.insert(aside.clone(), other.clone());
                    to_remote.insert(aside.clone(), other.clone());
                }
                Resolution::KeptBoth { aside, kept }
            }
            Settle::Won(side) => Resolution::Won(side),
            Settle::Left => Resolution::Left,
        };
        conflicts.push(Conflict {
            path: path.clone(),
            ancestor: a.cloned(),
            local: l.cloned(),
            remote: r.cloned(),
            resolution,
        });
    }
    let sources = [local, remote, ancestor];
    settle_structure(&mut to_local, &sources);
    settle_structure(&mut to_remote, &sources);
    Plan {
        local: steps(local, &to_local),
        remote: steps(remote, &to_remote),
        conflicts,
        agreed: to_local,
        remote_end: to_remote,
    }
}

/// How a conflict is to be settled, before names are chosen.
enum Settle {
    KeepBoth,
    Won(Side),
    Left,
}

/// What the path is to hold on each side, and the conflict if there is one.
/// `changed`: whether each side changed the path or something inside it.
fn decide<'a>(
    l: Option<&'a Entry>,
    r: Option<&'a Entry>,
    (local_changed, remote_changed): (bool, bool),
    mode: Mode,
) -> (Option<&'a Entry>, Option<&'a Entry>, Option<Settle>) {
    let one_way = matches!(mode, Mode::OneWaySafe | Mode::OneWayReplica);
    if mode == Mode::OneWayReplica {
        let conflict =
            (local_changed && remote_changed && l != r).then_some(Settle::Won(Side::Local));
        return (l, l, conflict);
    }
    if l == r {
        return (l, r, None);
    }
    if !remote_changed {
        return (l, l, None);
    }
    if !local_changed {
        // Only the remote side changed.
        return match (one_way, r) {
            // One-way: its deletion is restored, its own change left in place.
            (true, None) => (l, l, None),
            (true, Some(_)) => (l, r, None),
            (false, _) => (r, r, None),
        };
    }
    // Both changed, differently.
    match (l, r) {
        // A side that only deleted loses to one that changed content.
        (None, Some(_)) if !one_way => (r, r, None),
        (Some(_), None) => (l, l, None),
        (None, Some(_)) => (l, r, Some(Settle::Left)),
        // Two directories differ only in their modes: not content; the local mode wins.
        (Some(Entry::Dir { .. }), Some(Entry::Dir { .. })) => {
            let settle = if one_way {
                Settle::Left
            } else {
                Settle::Won(Side::Local)
            };
            let end_remote = if one_way { r } else { l };
            (l, end_remote, Some(settle))
        }
        _ => match mode {
            Mode::TwoWaySafe => {
                // The directory (if one is) keeps the path on both sides.
                let kept = match r {
                    Some(entry) if entry.is_dir() => r,
                    _ => l,
                };
                (kept, kept, Some(Settle::KeepBoth))
            }
            Mode::TwoWayResolved => (l, l, Some(Settle::Won(Side::Local))),
            _ => (l, r, Some(Settle::Left)),
        },
    }
}

/// The directories (as paths) with something inside that `side` holds otherwise than
/// `ancestor`.
fn changed_inside<'a>(ancestor: &'a Entries, side: &'a Entries) -> BTreeSet<&'a str> {
    let mut out = BTreeSet::new();
    let changed = side
        .iter()
        .filter(|(path, entry)| ancestor.get(*path) != Some(*entry))
        .map(|(path, _)| path.as_str())
        .chain(
            ancestor
                .keys()
                .filter(|path| !side.contains_key(*path))
                .map(String::as_str),
        );
    for path in changed {
        let mut up = parent(path);
        while let Some(dir) = up {
            if !out.insert(dir) {
                break;
            }
            up = parent(dir);
        }
    }
    out
}

/// What a conflict's other version is named by, after its path: `PATH.sync-conflict-LABEL`.
pub const CONFLICT_MARK: &str = ".sync-conflict-";

/// A name beside `path` for the other version of a conflict, not taken by anything.
fn free_name(path: &str, label: &str, taken: &dyn Fn(&str) -> bool) -> String {
    let base = format!("{path}{CONFLICT_MARK}{label}");
    if !taken(&base) {
        return base;
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|name| !taken(name))
        .unwrap_or(base)
}

/// Makes `tree` a tree: what a side keeps inside a directory the merge dropped brings the
/// directory back (taken from the first of `sources` that has it as one); what is left
/// inside something that is no longer a directory goes.
fn settle_structure(tree: &mut Entries, sources: &[&Entries]) {
    let paths: Vec<String> = tree.keys().cloned().collect();
    for path in paths {
        if !tree.contains_key(&path) {
            continue;
        }
        let mut missing = Vec::new();
        let mut blocked = false;
        let mut at = parent(&path);
        while let Some(dir) = at {
            match tree.get(dir) {
                Some(entry) if entry.is_dir() => break,
                Some(_) => {
                    blocked = true;
                    break;
                }
                None => missing.push(dir.to_string()),
            }
            at = parent(dir);
        }
        if blocked {
            // Not a range from `path` cut at the first name not under it: `a-b` sorts
            // between `a` and `a/x`.
            let gone: Vec<String> = std::iter::once(path.clone())
                .chain(within(tree, &path).map(|(p, _)| p.clone()))
                .collect();
            for p in gone {
                tree.remove(&p);
            }
            continue;
        }
        for dir in missing {
            let entry = sources
                .iter()
                .find_map(|source| source.get(&dir).filter(|e| e.is_dir()).cloned())
                .unwrap_or(Entry::Dir { mode: 0o755 });
            tree.insert(dir, entry);
        }
    }
}

fn parent(path: &str) -> Option<&str> {
    path.rfind('/').map(|at| &path[..at])
}

/// The steps that make `now` into `end`: removals of what goes (the topmost only), then
/// puts of what is new or different, parents first.
fn steps(now: &Entries, end: &Entries) -> Vec<Step> {
    let mut out = Vec::new();
    let mut removed: BTreeSet<&str> = BTreeSet::new();
    for path in now.keys() {
        let mut up = parent(path);
        let mut under_removed = false;
        while let Some(dir) = up {
            under_removed |= removed.contains(dir);
            up = parent(dir);
        }
        if end.contains_key(path) || under_removed {
            continue;
        }
        removed.insert(path);
        out.push(Step::Remove { path: path.clone() });
    }
    for (path, entry) in end {
        if now.get(path) != Some(entry) {
            out.push(Step::Put {
                path: path.clone(),
                entry: entry.clone(),
            });
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests;
