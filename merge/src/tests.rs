//! The merge proven: a seeded simulation of two sides edited at random from one ancestor
//! (creates, content and mode changes, deletes of files and of whole directories, type
//! changes), merged in every mode, the plan applied to both; the sides must come out equal
//! (two-way), trees, and in two-way-safe every edit must be there or kept beside its path
//! as a reported conflict. `FSD_MERGE_SEED` replays one seed.

use super::*;

/// splitmix64: a seed replays its trees exactly.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const NAMES: &[&str] = &["a", "a-b", "b", "c.txt", "d"];

pub(crate) fn file(hash: &str) -> Entry {
    Entry::File {
        hash: crate::content_hash::ContentHash::of(hash.as_bytes()),
        mode: 0o644,
    }
}

pub(crate) fn dir() -> Entry {
    Entry::Dir { mode: 0o755 }
}

/// A random entry; `n` makes contents distinct.
fn random_entry(rng: &mut Rng, n: &mut u64) -> Entry {
    *n += 1;
    match rng.below(10) {
        0..=4 => file(&format!("h{n}")),
        5..=7 => dir(),
        _ => Entry::Link {
            target: format!("t{n}"),
        },
    }
}

/// Puts `entry` at `path`, replacing what is there (and what a replaced directory held).
fn put(tree: &mut Entries, path: &str, entry: Entry) {
    if !entry.is_dir() || !tree.get(path).is_some_and(Entry::is_dir) {
        remove(tree, path);
    }
    tree.insert(path.to_string(), entry);
}

fn remove(tree: &mut Entries, path: &str) {
    let gone: Vec<String> = tree
        .keys()
        .filter(|p| *p == path || p.starts_with(&format!("{path}/")))
        .cloned()
        .collect();
    for p in gone {
        tree.remove(&p);
    }
}

fn apply(tree: &mut Entries, steps: &[Step]) {
    for step in steps {
        match step {
            Step::Remove { path } => {
                assert!(
                    tree.contains_key(path),
                    "a removal of {path}, which is not there"
                );
                remove(tree, path);
            }
            Step::Put { path, entry } => {
                if let Some(up) = parent(path) {
                    assert!(
                        tree.get(up).is_some_and(Entry::is_dir),
                        "a put of {path} outside a directory"
                    );
                }
                put(tree, path, entry.clone());
            }
        }
    }
}

fn is_tree(tree: &Entries) -> bool {
    tree.keys()
        .all(|path| parent(path).is_none_or(|up| tree.get(up).is_some_and(Entry::is_dir)))
}

/// A random tree of a few levels.
fn random_tree(rng: &mut Rng, n: &mut u64) -> Entries {
    let mut tree = Entries::new();
    let mut dirs = vec![String::new()];
    while let Some(at) = dirs.pop() {
        let depth = at.matches('/').count() + usize::from(!at.is_empty());
        for name in NAMES {
            if !rng.chance(55) || depth >= 3 {
                continue;
            }
            let path = if at.is_empty() {
                name.to_string()
            } else {
                format!("{at}/{name}")
            };
            let entry = random_entry(rng, n);
            if entry.is_dir() {
                dirs.push(path.clone());
            }
            tree.insert(path, entry);
        }
    }
    tree
}

/// A few random edits of `tree`.
fn edit(rng: &mut Rng, tree: &Entries, n: &mut u64) -> Entries {
    let mut out = tree.clone();
    for _ in 0..rng.below(5) {
        let paths: Vec<String> = out.keys().cloned().collect();
        let dirs: Vec<String> = std::iter::once(String::new())
            .chain(
                out.iter()
                    .filter(|(_, e)| e.is_dir())
                    .map(|(p, _)| p.clone()),
            )
            .collect();
        match rng.below(5) {
            // Something new in a directory.
            0 => {
                let at = &dirs[rng.below(dirs.len())];
                let name = NAMES[rng.below(NAMES.len())];
                let path = if at.is_empty() {
                    name.to_string()
                } else {
                    format!("{at}/{name}")
                };
                let entry = random_entry(rng, n);
                put(&mut out, &path, entry);
            }
            // Content or mode changed.
            1 | 2 if !paths.is_empty() => {
                let path = paths[rng.below(paths.len())].clone();
                let changed = match out[&path].clone() {
                    Entry::File { hash, mode } if rng.chance(30) => Entry::File {
                        hash,
                        mode: mode ^ 0o100,
                    },
                    Entry::Dir { mode } => Entry::Dir { mode: mode ^ 0o020 },
                    _ => {
                        *n += 1;
                        file(&format!("h{n}"))
                    }
                };
                put(&mut out, &path, changed);
            }
            // Deleted, with what it holds.
            3 if !paths.is_empty() => {
                let path = paths[rng.below(paths.len())].clone();
                remove(&mut out, &path);
            }
            // Replaced by another kind of thing.
            _ if !paths.is_empty() => {
                let path = paths[rng.below(paths.len())].clone();
                let entry = if out[&path].is_dir() {
                    *n += 1;
                    file(&format!("h{n}"))
                } else {
                    dir()
                };
                put(&mut out, &path, entry);
            }
            _ => {}
        }
    }
    out
}

/// Whether `entry` (a side's edit) survives in `end`: at its path, or beside it where a
/// conflict kept it. Files compare by content (a mode is not content).
fn survives(entry: &Entry, path: &str, end: &Entries, conflicts: &[Conflict]) -> bool {
    let same = |other: Option<&Entry>| match (entry, other) {
        (Entry::File { hash, .. }, Some(Entry::File { hash: other, .. })) => hash == other,
        (Entry::Dir { .. }, Some(Entry::Dir { .. })) => true,
        (_, other) => other == Some(entry),
    };
    same(end.get(path)) || conflicts.iter().any(|c| {
        c.path == path
            && matches!(&c.resolution, Resolution::KeptBoth { aside, .. } if same(end.get(aside)))
    })
}

fn run(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed);
    let mut n = 0;
    let ancestor = random_tree(&mut rng, &mut n);
    let local = edit(&mut rng, &ancestor, &mut n);
    let remote = edit(&mut rng, &ancestor, &mut n);
    for mode in [
        Mode::TwoWaySafe,
        Mode::TwoWayResolved,
        Mode::OneWaySafe,
        Mode::OneWayReplica,
    ] {
        let fail = |what: String| {
            format!(
                "FSD_MERGE_SEED={seed} {mode:?}: {what}\nancestor {ancestor:?}\nlocal {local:?}\nremote {remote:?}"
            )
        };
        let plan = merge(&ancestor, &local, &remote, mode);
        // A merge of only what changed (and an unchanged path or none) makes the same plan.
        let mut scope: BTreeSet<String> = ancestor
            .keys()
            .chain(local.keys())
            .chain(remote.keys())
            .filter(|p| ancestor.get(*p) != local.get(*p) || ancestor.get(*p) != remote.get(*p))
            .cloned()
            .collect();
        if let Some(extra) = ancestor.keys().nth(rng.below(ancestor.len() + 1)) {
            scope.insert(extra.clone());
        }
        let (scoped, merged) = merge_within(&ancestor, &local, &remote, mode, &scope);
        let patched = |whole: &Entries, part: &Entries| {
            let mut out = whole.clone();
            out.retain(|path, _| !merged.contains(path));
            out.extend(part.clone());
            out
        };
        if patched(&local, &scoped.agreed) != plan.agreed
            || patched(&remote, &scoped.remote_end) != plan.remote_end
            || scoped.conflicts != plan.conflicts
            || scoped.local != plan.local
            || scoped.remote != plan.remote
        {
            return Err(fail(format!(
                "the merge within {scope:?} differs: {scoped:?}, whole: {plan:?}"
            )));
        }
        let (mut l, mut r) = (local.clone(), remote.clone());
        let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            apply(&mut l, &plan.local);
            apply(&mut r, &plan.remote);
        }));
        if applied.is_err() {
            return Err(fail(format!("the plan does not apply: {plan:?}")));
        }
        if !is_tree(&l) || !is_tree(&r) {
            return Err(fail(format!("not a tree: {l:?} / {r:?}")));
        }
        match mode {
            Mode::TwoWaySafe | Mode::TwoWayResolved | Mode::OneWayReplica => {
                if l != r {
                    return Err(fail(format!("the sides differ: {l:?} / {r:?}")));
                }
                if plan.agreed != l {
                    return Err(fail(format!("agreed {:?} is not {l:?}", plan.agreed)));
                }
            }
            Mode::OneWaySafe => {
                if l != local {
                    // Only a directory the remote side changed under may come back.
                    let lost: Vec<&String> = local.keys().filter(|p| !l.contains_key(*p)).collect();
                    if !lost.is_empty() {
                        return Err(fail(format!("one-way-safe removed local {lost:?}")));
                    }
                }
            }
        }
        if mode == Mode::OneWayReplica && r != local {
            return Err(fail(format!("the replica {r:?} is not the local tree")));
        }
        // Two-way-safe loses no edit: every entry a side changed or made is there, or
        // beside its path in a reported conflict; only deletions lose (to a change).
        if mode == Mode::TwoWaySafe {
            for (side, tree) in [("local", &local), ("remote", &remote)] {
                for (path, entry) in tree.iter() {
                    let edited = ancestor.get(path) != Some(entry);
                    if edited && !survives(entry, path, &l, &plan.conflicts) {
                        return Err(fail(format!(
                            "the {side} edit {path} = {entry:?} is lost: {l:?}; conflicts {:?}",
                            plan.conflicts
                        )));
                    }
                }
            }
        }
        // A conflict is reported only where both changed a path (or inside it) differently.
        let (inside_local, inside_remote) = (
            changed_inside(&ancestor, &local),
            changed_inside(&ancestor, &remote),
        );
        for conflict in &plan.conflicts {
            let path = conflict.path.as_str();
            let (a, lo, re) = (ancestor.get(path), local.get(path), remote.get(path));
            let local_changed = lo != a || inside_local.contains(path);
            let remote_changed = re != a || inside_remote.contains(path);
            if !local_changed || !remote_changed || lo == re {
                return Err(fail(format!("{conflict:?} is not a conflict")));
            }
        }
        // Merging again changes nothing (what was agreed stays agreed).
        if mode != Mode::OneWaySafe {
            let again = merge(&plan.agreed, &l, &r, mode);
            if !again.local.is_empty() || !again.remote.is_empty() || !again.conflicts.is_empty() {
                return Err(fail(format!("a second merge is not empty: {again:?}")));
            }
        }
    }
    Ok(())
}

#[test]
fn random_edits_on_both_sides_merge_into_one_tree_and_lose_nothing_unreported() {
    let seeds: Vec<u64> = match std::env::var("FSD_MERGE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => vec![seed],
        None => {
            // From the day, as the other simulations' (see `fsd_api::seeds`).
            let day = fsd_api::seeds::day();
            eprintln!("merge: new seeds of day {day} (FSD_SEED_DAY={day} runs them again)");
            let base = day.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            (0..20_000).map(|i| base.wrapping_add(i * 7919)).collect()
        }
    };
    for seed in seeds {
        if let Err(failure) = run(seed) {
            panic!("{failure}");
        }
    }
}

#[test]
fn each_class_of_change_is_carried_or_reported() {
    let tree = |entries: &[(&str, Entry)]| -> Entries {
        entries
            .iter()
            .map(|(p, e)| (p.to_string(), e.clone()))
            .collect()
    };
    let ancestor = tree(&[("d", dir()), ("d/f", file("1")), ("g", file("1"))]);
    // One side changed: carried.
    let local = tree(&[("d", dir()), ("d/f", file("2")), ("g", file("1"))]);
    let plan = merge(&ancestor, &local, &ancestor, Mode::TwoWaySafe);
    assert_eq!(
        plan.remote,
        [Step::Put {
            path: "d/f".into(),
            entry: file("2")
        }]
    );
    assert!(plan.local.is_empty() && plan.conflicts.is_empty());
    // The same change on both: nothing to do.
    let plan = merge(&ancestor, &local, &local, Mode::TwoWaySafe);
    assert!(plan.local.is_empty() && plan.remote.is_empty() && plan.conflicts.is_empty());
    // A directory deleted on one side with a change inside on the other comes back.
    let deleted = tree(&[("g", file("1"))]);
    let plan = merge(&ancestor, &deleted, &local, Mode::TwoWaySafe);
    assert_eq!(plan.agreed, local, "{plan:?}");
    assert!(plan.conflicts.is_empty());
    // Both changed the file: both kept, the remote one beside it, reported.
    let remote = tree(&[("d", dir()), ("d/f", file("3")), ("g", file("1"))]);
    let plan = merge(&ancestor, &local, &remote, Mode::TwoWaySafe);
    assert_eq!(plan.agreed.get("d/f"), Some(&file("2")));
    assert_eq!(
        plan.agreed.get("d/f.sync-conflict-remote"),
        Some(&file("3"))
    );
    assert_eq!(plan.conflicts.len(), 1);
    // Resolved: local wins, reported.
    let plan = merge(&ancestor, &local, &remote, Mode::TwoWayResolved);
    assert_eq!(plan.agreed.get("d/f"), Some(&file("2")));
    assert_eq!(plan.conflicts[0].resolution, Resolution::Won(Side::Local));
    // A file one side replaced with a directory: the directory keeps the path.
    let replaced = tree(&[
        ("d", dir()),
        ("d/f", dir()),
        ("d/f/x", file("9")),
        ("g", file("1")),
    ]);
    let plan = merge(&ancestor, &local, &replaced, Mode::TwoWaySafe);
    assert_eq!(plan.agreed.get("d/f"), Some(&dir()));
    assert_eq!(plan.agreed.get("d/f/x"), Some(&file("9")));
    assert_eq!(plan.agreed.get("d/f.sync-conflict-local"), Some(&file("2")));
    // One-way-safe: a remote change is left, a remote deletion restored.
    let plan = merge(&ancestor, &ancestor, &remote, Mode::OneWaySafe);
    assert!(plan.remote.is_empty(), "{plan:?}");
    let plan = merge(&ancestor, &ancestor, &deleted, Mode::OneWaySafe);
    assert_eq!(plan.remote.len(), 2, "d and d/f restored: {plan:?}");
}
