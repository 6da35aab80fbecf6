//! The planner proven: random trees edited at random (moves of files and directories
//! among them), the operations applied to a strict model of a filesystem (each checked
//! against what its path holds, renames only onto free names, directories replaced or
//! removed only when empty); the result must be the end tree. `FSD_OPS_SEED` replays one.

use super::*;
use crate::tests::Rng;

const NAMES: &[&str] = &["a", "b", "c", "a.b"];

fn file(hash: &str, mode: u32) -> Entry {
    Entry::File {
        hash: crate::content_hash::ContentHash::of(hash.as_bytes()),
        mode,
    }
}

fn random_tree(rng: &mut Rng) -> Entries {
    let mut tree = Entries::new();
    let mut dirs = vec![String::new()];
    while let Some(at) = dirs.pop() {
        let depth = at.matches('/').count() + usize::from(!at.is_empty());
        for name in NAMES {
            if rng.below(100) < 40 || depth >= 3 {
                continue;
            }
            let path = if at.is_empty() {
                name.to_string()
            } else {
                format!("{at}/{name}")
            };
            let entry = match rng.below(10) {
                0..=4 => file(&format!("h{}", rng.below(6)), 0o644),
                5..=7 => {
                    dirs.push(path.clone());
                    Entry::Dir { mode: 0o755 }
                }
                _ => Entry::Link {
                    target: format!("t{}", rng.below(3)),
                },
            };
            tree.insert(path, entry);
        }
    }
    tree
}

fn subtree(tree: &Entries, path: &str) -> Vec<(String, Entry)> {
    tree.iter()
        .filter(|(p, _)| *p == path || p.starts_with(&format!("{path}/")))
        .map(|(p, e)| (p.clone(), e.clone()))
        .collect()
}

/// `end`: `now` with some moves, puts, mode changes and removals.
fn edited(rng: &mut Rng, now: &Entries) -> Entries {
    let mut out = now.clone();
    for _ in 0..1 + rng.below(5) {
        let paths: Vec<String> = out.keys().cloned().collect();
        let pick = paths.get(rng.below(paths.len())).cloned();
        match (rng.below(5), pick) {
            (0, Some(from)) => {
                // A move to a free name in a directory (or the top).
                let dirs: Vec<String> = std::iter::once(String::new())
                    .chain(
                        out.iter()
                            .filter(|(_, e)| e.is_dir())
                            .map(|(p, _)| p.clone()),
                    )
                    .filter(|d| *d != from && !d.starts_with(&format!("{from}/")))
                    .collect();
                let dir = &dirs[rng.below(dirs.len())];
                let name = format!("m{}", rng.below(3));
                let to = if dir.is_empty() {
                    name
                } else {
                    format!("{dir}/{name}")
                };
                if out.contains_key(&to) {
                    continue;
                }
                for (p, e) in subtree(&out, &from) {
                    out.remove(&p);
                    out.insert(format!("{to}{}", &p[from.len()..]), e);
                }
            }
            (1, Some(path)) => {
                for (p, _) in subtree(&out, &path) {
                    out.remove(&p);
                }
            }
            (2, Some(path)) => {
                let mode = 0o600 + rng.below(2) as u32 * 0o100;
                let changed = match out[&path].clone() {
                    Entry::File { hash, mode: _ } => Entry::File { hash, mode },
                    Entry::Dir { .. } => Entry::Dir { mode },
                    link => link,
                };
                out.insert(path, changed);
            }
            (3, Some(path)) => {
                // A type change: what was there (and under it) replaced.
                for (p, _) in subtree(&out, &path) {
                    out.remove(&p);
                }
                let entry = match rng.below(3) {
                    0 => file(&format!("h{}", rng.below(6)), 0o644),
                    1 => Entry::Dir { mode: 0o755 },
                    _ => Entry::Link { target: "x".into() },
                };
                out.insert(path, entry);
            }
            _ => {
                let more = random_tree(rng);
                let dirs: Vec<String> = out
                    .iter()
                    .filter(|(_, e)| e.is_dir())
                    .map(|(p, _)| p.clone())
                    .collect();
                if let Some(dir) = dirs.get(rng.below(dirs.len())) {
                    for (p, e) in more {
                        out.entry(format!("{dir}/n{p}")).or_insert(e);
                    }
                }
            }
        }
    }
    // Still a tree: drop what lost its directory.
    let paths: Vec<String> = out.keys().cloned().collect();
    for p in paths {
        if parent(&p).is_some_and(|up| !out.get(up).is_some_and(Entry::is_dir)) {
            out.remove(&p);
        }
    }
    out
}

/// Applies `op` as a filesystem would, refusing what one would refuse.
fn apply(fs: &mut Entries, op: &Op) -> Result<(), String> {
    let parent_is_dir = |fs: &Entries, path: &str| {
        parent(path).is_none_or(|up| fs.get(up).is_some_and(Entry::is_dir))
    };
    let empty = |fs: &Entries, path: &str| under(fs, path).next().is_none();
    match op {
        Op::Rename { from, to, expect } => {
            if fs.get(from) != Some(expect) {
                return Err(format!("rename: {from} is not {expect:?}"));
            }
            if fs.contains_key(to) || !parent_is_dir(fs, to) {
                return Err(format!("rename onto {to}, taken or without a directory"));
            }
            for (p, e) in subtree(fs, from) {
                fs.remove(&p);
                fs.insert(format!("{to}{}", &p[from.len()..]), e);
            }
        }
        Op::Put {
            path,
            expect,
            entry,
        } => {
            if fs.get(path) != expect.as_ref() {
                return Err(format!("put: {path} is {:?}, not {expect:?}", fs.get(path)));
            }
            if !parent_is_dir(fs, path) {
                return Err(format!("put: {path} has no directory"));
            }
            if expect.as_ref().is_some_and(Entry::is_dir) && !empty(fs, path) {
                return Err(format!("put: {path} replaces a directory not empty"));
            }
            fs.insert(path.clone(), entry.clone());
        }
        Op::Chmod { path, expect, mode } => {
            if fs.get(path) != Some(expect) {
                return Err(format!("chmod: {path} is not {expect:?}"));
            }
            let changed = match expect {
                Entry::File { hash, .. } => Entry::File {
                    hash: *hash,
                    mode: *mode,
                },
                Entry::Dir { .. } => Entry::Dir { mode: *mode },
                Entry::Link { .. } => return Err(format!("chmod of the link {path}")),
            };
            fs.insert(path.clone(), changed);
        }
        Op::Remove { path, expect } => {
            if fs.get(path) != Some(expect) {
                return Err(format!("remove: {path} is not {expect:?}"));
            }
            if expect.is_dir() && !empty(fs, path) {
                return Err(format!("remove: {path} is not empty"));
            }
            fs.remove(path);
        }
    }
    Ok(())
}

/// Runs one seed; answers how many renames its plan made.
fn run(seed: u64) -> Result<usize, String> {
    let mut rng = Rng(seed);
    let now = random_tree(&mut rng);
    let end = edited(&mut rng, &now);
    let ops = operations(&now, &end);
    let mut fs = now.clone();
    for (index, op) in ops.iter().enumerate() {
        apply(&mut fs, op).map_err(|failure| {
            format!("op {index} of {ops:#?}: {failure}\nnow {now:#?}\nend {end:#?}")
        })?;
    }
    if fs != end {
        return Err(format!("ended as {fs:#?}\nnot {end:#?}\nops {ops:#?}"));
    }
    Ok(ops
        .iter()
        .filter(|op| matches!(op, Op::Rename { .. }))
        .count())
}

#[test]
fn random_edits_are_reached_by_checked_operations() {
    let seeds: Vec<u64> = match std::env::var("FSD_OPS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => vec![seed],
        None => (0..20_000).collect(),
    };
    let (mut plans, mut renames) = (0, 0);
    for seed in seeds {
        match run(seed) {
            Ok(made) => {
                plans += 1;
                renames += made;
            }
            Err(failure) => panic!("FSD_OPS_SEED={seed}: {failure}"),
        }
    }
    // The workload moves things: the plans carry many of them as renames.
    assert!(
        plans < 100 || renames * 4 > plans,
        "{renames} renames in {plans} plans"
    );
}

#[test]
fn a_moved_directory_is_renamed_and_a_moved_file_too() {
    let dir = Entry::Dir { mode: 0o755 };
    let now = Entries::from([
        ("src".to_string(), dir.clone()),
        ("src/a.rs".to_string(), file("h1", 0o644)),
        ("src/b.rs".to_string(), file("h2", 0o644)),
        ("notes.txt".to_string(), file("h3", 0o644)),
    ]);
    let end = Entries::from([
        ("lib".to_string(), dir.clone()),
        ("lib/core".to_string(), dir.clone()),
        ("lib/core/a.rs".to_string(), file("h1", 0o644)),
        ("lib/core/b.rs".to_string(), file("h2", 0o644)),
        ("lib/core/c.rs".to_string(), file("h4", 0o644)),
        ("docs".to_string(), dir.clone()),
        ("docs/notes.txt".to_string(), file("h3", 0o644)),
    ]);
    let ops = operations(&now, &end);
    assert_eq!(
        ops,
        vec![
            Op::Put {
                path: "lib".into(),
                expect: None,
                entry: dir.clone()
            },
            Op::Rename {
                from: "src".into(),
                to: "lib/core".into(),
                expect: dir.clone()
            },
            Op::Put {
                path: "docs".into(),
                expect: None,
                entry: dir.clone()
            },
            Op::Rename {
                from: "notes.txt".into(),
                to: "docs/notes.txt".into(),
                expect: file("h3", 0o644)
            },
            Op::Put {
                path: "lib/core/c.rs".into(),
                expect: None,
                entry: file("h4", 0o644)
            },
        ]
    );
}
