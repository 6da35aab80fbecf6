//! From what a side holds to what the merge decided it should hold: the checked changes,
//! in an order that works, each with what its path must hold when it is made.
//!
//! Moves are carried as moves: a directory that went from one path to another (most of
//! what it held the same) is renamed, not removed and sent again, and so is a file whose
//! content arrives at a new path while it leaves an old one. Everything else is a put
//! (content taken by hash from wherever a side has it), a mode change, or a removal of a
//! file, link or emptied directory, deepest first. A directory that becomes something else
//! is replaced once it is empty.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use fsd_api::files::{ApplyStep, Held};

use crate::content_hash::ContentHash;
use crate::{Entries, Entry};

/// One change to one side. `expect` is what the path holds just before it (`None`:
/// nothing), given the changes before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Rename {
        from: String,
        to: String,
        expect: Entry,
    },
    Put {
        path: String,
        expect: Option<Entry>,
        entry: Entry,
    },
    Chmod {
        path: String,
        expect: Entry,
        mode: u32,
    },
    Remove {
        path: String,
        expect: Entry,
    },
}

impl Op {
    /// The path changed (a rename's origin).
    pub fn path(&self) -> &str {
        match self {
            Op::Rename { from, .. } => from,
            Op::Put { path, .. } | Op::Chmod { path, .. } | Op::Remove { path, .. } => path,
        }
    }

    /// Every path the operation changes: its path, and a rename's target too.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        let to = match self {
            Op::Rename { to, .. } => Some(to.as_str()),
            _ => None,
        };
        std::iter::once(self.path()).chain(to)
    }
}

/// What a path holding `entry` is, as a daemon's apply step expects it.
pub fn held(entry: Option<&Entry>) -> Held {
    match entry {
        None => Held::Absent,
        Some(Entry::Dir { .. }) => Held::Directory,
        Some(Entry::File { hash, .. }) => Held::File {
            sha256: hash.to_string(),
        },
        Some(Entry::Link { target }) => Held::Symlink {
            target: target.clone(),
        },
    }
}

/// The daemon's apply step that makes `op` (see `POST /api/files/apply`); a file put's
/// content is `size` bytes, sent in the request's body.
pub fn apply_step(op: &Op, size: u64) -> ApplyStep {
    match op {
        Op::Rename { from, to, expect } => ApplyStep::Rename {
            path: from.clone(),
            expect: held(Some(expect)),
            to: to.clone(),
        },
        Op::Remove { path, expect } => ApplyStep::Remove {
            path: path.clone(),
            expect: held(Some(expect)),
        },
        Op::Chmod { path, expect, mode } => ApplyStep::Chmod {
            path: path.clone(),
            expect: held(Some(expect)),
            mode: *mode,
        },
        Op::Put {
            path,
            expect,
            entry,
        } => {
            let expect = held(expect.as_ref());
            let path = path.clone();
            match entry {
                Entry::Dir { mode } => ApplyStep::Mkdir {
                    path,
                    expect,
                    mode: *mode,
                },
                Entry::Link { target } => ApplyStep::Symlink {
                    path,
                    expect,
                    target: target.clone(),
                },
                Entry::File { hash, mode } => ApplyStep::PutFile {
                    path,
                    expect,
                    size,
                    sha256: hash.to_string(),
                    mode: *mode,
                },
            }
        }
    }
}

/// The content hashes `ops` put, in their order.
pub fn put_hashes(ops: &[Op]) -> impl Iterator<Item = &ContentHash> {
    ops.iter().filter_map(|op| match op {
        Op::Put {
            entry: Entry::File { hash, .. },
            ..
        } => Some(hash),
        _ => None,
    })
}

/// The changes that make `now` into `end` (both trees).
pub fn operations(now: &Entries, end: &Entries) -> Vec<Op> {
    let mut plan = Planner {
        cur: now.clone(),
        end,
        ops: Vec::new(),
    };
    plan.directory_moves();
    plan.file_moves();
    plan.rest();
    plan.ops
}

struct Planner<'a> {
    /// What the side holds after the changes so far.
    cur: Entries,
    end: &'a Entries,
    ops: Vec<Op>,
}

fn parent(path: &str) -> Option<&str> {
    path.rfind('/').map(|at| &path[..at])
}

/// What `tree` holds below `dir`, by path relative to it.
fn under<'a>(tree: &'a Entries, dir: &'a str) -> impl Iterator<Item = (&'a str, &'a Entry)> {
    crate::within(tree, dir).map(move |(path, entry)| (&path[dir.len() + 1..], entry))
}

impl Planner<'_> {
    /// Whether `path` leaves where it is: `end` has something else there.
    fn leaving(&self, path: &str) -> bool {
        self.end.get(path) != self.cur.get(path)
    }

    /// Makes the directories above `path` that `end` has and the side lacks; `false` when
    /// one of them is something else now (the move waits for the general changes).
    fn parents_ready(&mut self, path: &str) -> bool {
        let mut missing = Vec::new();
        let mut up = parent(path);
        while let Some(dir) = up {
            match self.cur.get(dir) {
                Some(entry) if entry.is_dir() => break,
                Some(_) => return false,
                None => match self.end.get(dir) {
                    Some(entry) if entry.is_dir() => missing.push(dir.to_string()),
                    _ => return false,
                },
            }
            up = parent(dir);
        }
        for dir in missing.into_iter().rev() {
            let entry = self.end[&dir].clone();
            self.ops.push(Op::Put {
                path: dir.clone(),
                expect: None,
                entry: entry.clone(),
            });
            self.cur.insert(dir, entry);
        }
        true
    }

    /// Moves what is at and under `from` to `to` in `cur`.
    fn rename(&mut self, from: &str, to: &str) {
        let expect = self.cur[from].clone();
        let moved: Vec<(String, Entry)> = std::iter::once((String::new(), expect.clone()))
            .chain(under(&self.cur, from).map(|(rest, entry)| (format!("/{rest}"), entry.clone())))
            .collect();
        for (rest, _) in &moved {
            self.cur.remove(&format!("{from}{rest}"));
        }
        for (rest, entry) in moved {
            self.cur.insert(format!("{to}{rest}"), entry);
        }
        self.ops.push(Op::Rename {
            from: from.to_string(),
            to: to.to_string(),
            expect,
        });
    }

    /// A directory `end` has at a free path, whose content is mostly that of a directory
    /// leaving its path: the leaving one is renamed there.
    fn directory_moves(&mut self) {
        let targets: Vec<String> = self
            .end
            .iter()
            .filter(|(path, entry)| entry.is_dir() && !self.cur.contains_key(*path))
            .map(|(path, _)| path.clone())
            .collect();
        if targets.is_empty() {
            return;
        }
        // Directories leaving their path: what a target may have come from (found once;
        // one moved already is no longer in `cur` at its path, or is `used`).
        let leaving: Vec<String> = self
            .cur
            .iter()
            .filter(|(path, entry)| entry.is_dir() && self.leaving(path))
            .map(|(path, _)| path.clone())
            .collect();
        let mut used = BTreeSet::new();
        for target in targets {
            // Inside a directory moved already.
            if self.cur.contains_key(&target) {
                continue;
            }
            let wanted: BTreeMap<&str, &Entry> = under(self.end, &target).collect();
            if wanted.is_empty() {
                continue;
            }
            let mut best: Option<(usize, String)> = None;
            for path in &leaving {
                if used.contains(path)
                    || !self.cur.get(path).is_some_and(Entry::is_dir)
                    || !self.leaving(path)
                {
                    continue;
                }
                if target.starts_with(&format!("{path}/"))
                    || path.starts_with(&format!("{target}/"))
                {
                    continue;
                }
                let mut held = 0;
                let mut same = 0;
                for (rest, entry) in under(&self.cur, path) {
                    held += 1;
                    same += usize::from(wanted.get(rest) == Some(&entry));
                }
                if same * 2 > held && best.as_ref().is_none_or(|(score, _)| same > *score) {
                    best = Some((same, path.clone()));
                }
            }
            let Some((_, from)) = best else { continue };
            if !self.parents_ready(&target) {
                continue;
            }
            used.insert(from.clone());
            self.rename(&from, &target);
        }
    }

    /// A file `end` has at a free path, whose content a file leaving its path holds.
    fn file_moves(&mut self) {
        let mut leaving: HashMap<ContentHash, Vec<String>> = HashMap::new();
        for (path, entry) in &self.cur {
            if let Entry::File { hash, .. } = entry
                && self.leaving(path)
            {
                leaving.entry(*hash).or_default().push(path.clone());
            }
        }
        let targets: Vec<(String, ContentHash)> = self
            .end
            .iter()
            .filter_map(|(path, entry)| match entry {
                Entry::File { hash, .. } if !self.cur.contains_key(path) => {
                    Some((path.clone(), *hash))
                }
                _ => None,
            })
            .collect();
        for (target, hash) in targets {
            let Some(sources) = leaving.get_mut(&hash) else {
                continue;
            };
            // The same name first (a move between directories), else any.
            let name = target.rsplit('/').next().unwrap_or(&target);
            let pick = sources
                .iter()
                .position(|from| from.rsplit('/').next() == Some(name))
                .unwrap_or(0);
            let Some(from) = sources.get(pick).cloned() else {
                continue;
            };
            // Gone with a directory moved, or already taken.
            if !self.cur.contains_key(&from) || self.cur.contains_key(&target) {
                continue;
            }
            if !self.parents_ready(&target) {
                continue;
            }
            sources.remove(pick);
            self.rename(&from, &target);
        }
    }

    /// Puts and mode changes in path order (a directory that becomes something else
    /// waits), removals deepest first, then what waited.
    fn rest(&mut self) {
        let mut waiting = Vec::new();
        let wanted: Vec<(String, Entry)> = self
            .end
            .iter()
            .filter(|(path, entry)| self.cur.get(*path) != Some(*entry))
            .map(|(path, entry)| (path.clone(), entry.clone()))
            .collect();
        for (path, entry) in wanted {
            let now = self.cur.get(&path).cloned();
            let chmod = match (&now, &entry) {
                (Some(Entry::Dir { .. }), Entry::Dir { mode }) => Some(*mode),
                (Some(Entry::Dir { .. }), _) => {
                    waiting.push((path, entry));
                    continue;
                }
                (Some(Entry::File { hash: was, .. }), Entry::File { hash, mode })
                    if was == hash =>
                {
                    Some(*mode)
                }
                _ => None,
            };
            match (chmod, now) {
                (Some(mode), Some(expect)) => self.ops.push(Op::Chmod {
                    path: path.clone(),
                    expect,
                    mode,
                }),
                (_, expect) => self.ops.push(Op::Put {
                    path: path.clone(),
                    expect,
                    entry: entry.clone(),
                }),
            }
            self.cur.insert(path, entry);
        }
        let gone: Vec<(String, Entry)> = self
            .cur
            .iter()
            .rev()
            .filter(|(path, _)| !self.end.contains_key(*path))
            .map(|(path, entry)| (path.clone(), entry.clone()))
            .collect();
        for (path, expect) in gone {
            self.cur.remove(&path);
            self.ops.push(Op::Remove { path, expect });
        }
        for (path, entry) in waiting {
            self.ops.push(Op::Put {
                path: path.clone(),
                expect: self.cur.get(&path).cloned(),
                entry: entry.clone(),
            });
            self.cur.insert(path, entry);
        }
    }
}

#[cfg(test)]
mod tests;
