//! The change list of a window of events: what turns the tree as it was at a token into the
//! tree as it is at the answer's cursor.
//!
//! Events name paths as they were when each happened, so the replay tracks, for every path
//! it has seen, which object of the token's tree is there now (its origin) or that it is new,
//! and which objects of the token's tree are gone. The list it answers is applied by a client
//! in four steps (what `fsd-sdk`'s `sync` does):
//! 1. move every `renamed` entry's `from` (a path in the token's tree) aside, deepest first;
//! 2. remove every `deleted` path (also a path in the token's tree; one under a moved origin
//!    is removed from where that origin was moved aside);
//! 3. in path order, put each moved object at its `path` and make each `created` directory,
//!    replacing whatever is there;
//! 4. fetch every `created` and `modified` file.
//!
//! Paths that a rename may have replaced are listed as deleted unless something is at the
//! path now: the kernel does not say whether the target existed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::{Event, EventKind};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Created,
    Modified,
    /// What was at the path when the token was taken is gone.
    Deleted,
    /// The object that was at `from` when the token was taken is at the path now.
    Renamed {
        from: PathBuf,
    },
}

/// One line of a change list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub path: PathBuf,
    pub change: Change,
    pub is_dir: bool,
}

/// The object at a path now.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// Where it was when the token was taken; `None`: created since.
    origin: Option<PathBuf>,
    /// Its content changed since (files only matter).
    dirty: bool,
    is_dir: bool,
}

/// The replay of one window.
#[derive(Debug, Default)]
struct Replay {
    now: BTreeMap<PathBuf, Entry>,
    /// Objects of the token's tree that are gone (path then, is a directory).
    gone: BTreeMap<PathBuf, bool>,
}

/// The change list of `events` (oldest first), or `None` when it would have more than
/// `limit` lines or events were lost.
pub fn list<'a>(events: impl IntoIterator<Item = &'a Event>, limit: usize) -> Option<Vec<Listed>> {
    let mut replay = Replay::default();
    for event in events {
        match event.kind {
            EventKind::Create => replay.create(&event.path, event.is_dir),
            EventKind::MoveIn => {
                replay.delete(&event.path, event.is_dir);
                replay.create(&event.path, event.is_dir);
            }
            EventKind::Modify | EventKind::Attrib => replay.modify(&event.path, event.is_dir),
            EventKind::Delete => replay.delete(&event.path, event.is_dir),
            EventKind::Rename => match &event.from {
                Some(from) => replay.rename(from, &event.path, event.is_dir),
                None => replay.create(&event.path, event.is_dir),
            },
            EventKind::Overflow => return None,
        }
        if replay.now.len() + replay.gone.len() > limit {
            return None;
        }
    }
    let listed = replay.answer();
    (listed.len() <= limit).then_some(listed)
}

impl Replay {
    /// What is at `path` now when it has no entry of its own: what its nearest ancestor
    /// with an entry implies, else the token's object at the same path.
    fn implied(&self, path: &Path) -> Entry {
        for ancestor in path.ancestors().skip(1) {
            if let Some(entry) = self.now.get(ancestor) {
                let origin = match (&entry.origin, path.strip_prefix(ancestor)) {
                    (Some(origin), Ok(rest)) => Some(origin.join(rest)),
                    _ => None,
                };
                return Entry {
                    dirty: origin.is_none(),
                    origin,
                    is_dir: false,
                };
            }
        }
        Entry {
            origin: Some(path.to_path_buf()),
            dirty: false,
            is_dir: false,
        }
    }

    fn resolve(&self, path: &Path) -> Entry {
        self.now
            .get(path)
            .cloned()
            .unwrap_or_else(|| self.implied(path))
    }

    /// Removes `path` and every entry below it; returns what was at `path`.
    fn take_subtree(&mut self, path: &Path) -> (Entry, Vec<(PathBuf, Entry)>) {
        let top = self.resolve(path);
        self.now.remove(path);
        let below: Vec<PathBuf> = self
            .now
            .range::<Path, _>((std::ops::Bound::Excluded(path), std::ops::Bound::Unbounded))
            .take_while(|(p, _)| p.starts_with(path))
            .map(|(p, _)| p.clone())
            .collect();
        let below = below
            .into_iter()
            .filter_map(|p| self.now.remove(&p).map(|e| (p, e)))
            .collect();
        (top, below)
    }

    fn mark_gone(&mut self, entry: &Entry) {
        if let Some(origin) = &entry.origin {
            self.gone.entry(origin.clone()).or_insert(entry.is_dir);
        }
    }

    fn create(&mut self, path: &Path, is_dir: bool) {
        // A create means nothing was there; an entry with an origin is a stale one.
        if let Some(previous) = self.now.get(path).cloned() {
            self.mark_gone(&previous);
        }
        self.now.insert(
            path.to_path_buf(),
            Entry {
                origin: None,
                dirty: true,
                is_dir,
            },
        );
    }

    fn modify(&mut self, path: &Path, is_dir: bool) {
        let mut entry = self.resolve(path);
        entry.dirty = true;
        entry.is_dir = is_dir;
        self.now.insert(path.to_path_buf(), entry);
    }

    fn delete(&mut self, path: &Path, is_dir: bool) {
        let (mut top, below) = self.take_subtree(path);
        top.is_dir = is_dir;
        self.mark_gone(&top);
        for (_, entry) in below {
            self.mark_gone(&entry);
        }
    }

    fn rename(&mut self, from: &Path, to: &Path, is_dir: bool) {
        let (mut moved, below) = self.take_subtree(from);
        moved.is_dir = is_dir;
        // Whatever was at the target is replaced (the kernel does not say whether it was).
        self.delete(to, is_dir);
        for (path, entry) in below {
            if let Ok(rest) = path.strip_prefix(from) {
                self.now.insert(to.join(rest), entry);
            }
        }
        self.now.insert(to.to_path_buf(), moved);
    }

    fn answer(self) -> Vec<Listed> {
        let origins: BTreeSet<&Path> = self
            .now
            .values()
            .filter_map(|e| e.origin.as_deref())
            .collect();
        // Origins a client moves aside first (step 1): what is below them is deleted there.
        let mut moved_origins: BTreeSet<&Path> = BTreeSet::new();
        let mut listed = Vec::new();
        for (path, entry) in &self.now {
            match &entry.origin {
                None => listed.push(Listed {
                    path: path.clone(),
                    change: Change::Created,
                    is_dir: entry.is_dir,
                }),
                Some(origin) => {
                    let moved = self.implied(path).origin.as_deref() != Some(origin);
                    if moved {
                        moved_origins.insert(origin);
                        listed.push(Listed {
                            path: path.clone(),
                            change: Change::Renamed {
                                from: origin.clone(),
                            },
                            is_dir: entry.is_dir,
                        });
                    }
                    if entry.dirty {
                        listed.push(Listed {
                            path: path.clone(),
                            change: Change::Modified,
                            is_dir: entry.is_dir,
                        });
                    }
                }
            }
        }
        // An object only thought replaced (by a rename onto its path) that lives on
        // elsewhere is not gone, and does not take what is under it along.
        let gone: BTreeMap<&Path, bool> = self
            .gone
            .iter()
            .filter(|(path, _)| !origins.contains(path.as_path()))
            .map(|(path, is_dir)| (path.as_path(), *is_dir))
            .collect();
        for (&path, &is_dir) in &gone {
            // Removing a gone ancestor removes this too, unless a moved origin between them
            // (moved aside first) holds it.
            let covered = path
                .ancestors()
                .skip(1)
                .take_while(|ancestor| !moved_origins.contains(ancestor))
                .any(|ancestor| gone.contains_key(ancestor));
            // Something at the path now replaces it, unless it waits under a moved origin
            // (then it would come back with that origin).
            let aside = path
                .ancestors()
                .skip(1)
                .any(|ancestor| moved_origins.contains(ancestor));
            if covered || (self.now.contains_key(path) && !aside) {
                continue;
            }
            listed.push(Listed {
                path: path.to_path_buf(),
                change: Change::Deleted,
                is_dir,
            });
        }
        listed.sort_by(|a, b| a.path.cmp(&b.path));
        listed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventKind, path: &str) -> Event {
        Event {
            kind,
            path: PathBuf::from(path),
            from: None,
            is_dir: false,
        }
    }

    fn dir(event: Event) -> Event {
        Event {
            is_dir: true,
            ..event
        }
    }

    fn rename(from: &str, to: &str) -> Event {
        Event {
            from: Some(PathBuf::from(from)),
            ..event(EventKind::Rename, to)
        }
    }

    fn changes(events: &[Event]) -> Vec<(String, Change)> {
        list(events, 10_000)
            .unwrap()
            .into_iter()
            .map(|l| (l.path.display().to_string(), l.change))
            .collect()
    }

    fn renamed(from: &str) -> Change {
        Change::Renamed { from: from.into() }
    }

    #[test]
    fn coalesces_per_path() {
        let events = [
            event(EventKind::Create, "/w/a"),
            event(EventKind::Modify, "/w/a"),
            event(EventKind::Create, "/w/tmp"),
            event(EventKind::Delete, "/w/tmp"),
            event(EventKind::Modify, "/w/b"),
            event(EventKind::Delete, "/w/c"),
            event(EventKind::Create, "/w/c"),
        ];
        assert_eq!(
            changes(&events),
            [
                ("/w/a".to_string(), Change::Created),
                ("/w/b".into(), Change::Modified),
                ("/w/c".into(), Change::Created),
            ]
        );
        assert!(changes(&[]).is_empty());
    }

    #[test]
    fn renames_keep_their_origin_and_say_what_they_may_have_replaced() {
        // A renamed file keeps its content: a write is its own event.
        assert_eq!(
            changes(&[rename("/w/x", "/w/y")]),
            [("/w/y".to_string(), renamed("/w/x"))]
        );
        // y was a path in between: if something was there, the first rename replaced it.
        assert_eq!(
            changes(&[rename("/w/x", "/w/y"), rename("/w/y", "/w/z")]),
            [
                ("/w/y".to_string(), Change::Deleted),
                ("/w/z".into(), renamed("/w/x")),
            ]
        );
        assert_eq!(
            changes(&[rename("/w/x", "/w/y"), event(EventKind::Delete, "/w/y")]),
            [
                ("/w/x".to_string(), Change::Deleted),
                ("/w/y".into(), Change::Deleted)
            ]
        );
        // Moved back: x is where it was; what y was may have been replaced.
        assert_eq!(
            changes(&[rename("/w/x", "/w/y"), rename("/w/y", "/w/x")]),
            [("/w/y".to_string(), Change::Deleted)]
        );
        assert_eq!(
            changes(&[
                event(EventKind::Create, "/w/new"),
                rename("/w/new", "/w/moved")
            ]),
            [("/w/moved".to_string(), Change::Created)]
        );
    }

    #[test]
    fn a_file_changed_before_or_after_its_rename_is_fetched_again() {
        for events in [
            [event(EventKind::Modify, "/w/a"), rename("/w/a", "/w/b")],
            [rename("/w/a", "/w/b"), event(EventKind::Modify, "/w/b")],
        ] {
            assert_eq!(
                changes(&events),
                [
                    ("/w/b".to_string(), renamed("/w/a")),
                    ("/w/b".into(), Change::Modified)
                ]
            );
        }
    }

    #[test]
    fn a_path_renamed_away_and_made_again_is_both() {
        let events = [
            rename("/w/a", "/w/b"),
            event(EventKind::Create, "/w/a"),
            event(EventKind::Delete, "/w/b"),
        ];
        assert_eq!(
            changes(&events),
            [
                ("/w/a".to_string(), Change::Created),
                ("/w/b".into(), Change::Deleted)
            ],
            "the old a is gone, a new a is there"
        );
    }

    #[test]
    fn changes_under_a_directory_renamed_later_carry_the_new_path() {
        // mkdir -p m/n && echo q > m/n/q && mv m mm
        let events = [
            dir(event(EventKind::Create, "/w/m")),
            dir(event(EventKind::Create, "/w/m/n")),
            event(EventKind::Create, "/w/m/n/q"),
            event(EventKind::Modify, "/w/m/n/q"),
            dir(rename("/w/m", "/w/mm")),
        ];
        assert_eq!(
            changes(&events),
            [
                ("/w/mm".to_string(), Change::Created),
                ("/w/mm/n".into(), Change::Created),
                ("/w/mm/n/q".into(), Change::Created),
            ]
        );
        // A directory that existed: renamed, and what changed inside goes along; deletions
        // name the path in the token's tree; a sibling with a common prefix stays.
        let events = [
            event(EventKind::Modify, "/w/d/a"),
            event(EventKind::Delete, "/w/d/gone"),
            rename("/w/d/x", "/w/d/y"),
            event(EventKind::Modify, "/w/d2"),
            dir(rename("/w/d", "/w/e")),
            event(EventKind::Modify, "/w/e/b"),
        ];
        assert_eq!(
            changes(&events),
            [
                ("/w/d/gone".to_string(), Change::Deleted),
                ("/w/d/y".into(), Change::Deleted),
                ("/w/d2".into(), Change::Modified),
                ("/w/e".into(), renamed("/w/d")),
                ("/w/e/a".into(), Change::Modified),
                ("/w/e/b".into(), Change::Modified),
                ("/w/e/y".into(), renamed("/w/d/x")),
            ]
        );
    }

    #[test]
    fn a_directory_deleted_and_made_again_is_emptied() {
        let events = [
            event(EventKind::Delete, "/w/d/x"),
            event(EventKind::Delete, "/w/d/y"),
            dir(event(EventKind::Delete, "/w/d")),
            dir(event(EventKind::Create, "/w/d")),
            event(EventKind::Create, "/w/d/x"),
        ];
        assert_eq!(
            changes(&events),
            [
                ("/w/d".to_string(), Change::Created),
                ("/w/d/x".into(), Change::Created),
            ],
            "a new d replaces the old one (y went with it), x is new"
        );
        // A file moved out of a directory that is then deleted survives it.
        let events = [
            rename("/w/d/x", "/w/x"),
            event(EventKind::Delete, "/w/d/y"),
            dir(event(EventKind::Delete, "/w/d")),
        ];
        assert_eq!(
            changes(&events),
            [
                ("/w/d".to_string(), Change::Deleted),
                ("/w/x".into(), renamed("/w/d/x")),
            ]
        );
    }

    #[test]
    fn a_move_in_replaces_what_was_there() {
        // mv /elsewhere/x w/a (over the old a), then rm w/a: the old a is gone.
        let events = [
            event(EventKind::MoveIn, "/w/a"),
            event(EventKind::Delete, "/w/a"),
        ];
        assert_eq!(changes(&events), [("/w/a".to_string(), Change::Deleted)]);
        // A create means nothing was there: created and deleted is not listed.
        let events = [
            event(EventKind::Create, "/w/a"),
            event(EventKind::Delete, "/w/a"),
        ];
        assert!(changes(&events).is_empty());
    }

    #[test]
    fn a_rename_onto_a_moved_origin_does_not_hide_deletions_under_it() {
        // mv d e; rm -r e/sub; mv e/f d: d's old object lives on as e, so e/sub (d/sub at
        // the token) is still deleted.
        let events = [
            dir(rename("/w/d", "/w/e")),
            dir(event(EventKind::Delete, "/w/e/sub")),
            rename("/w/e/f", "/w/d"),
        ];
        assert_eq!(
            changes(&events),
            [
                ("/w/d".to_string(), renamed("/w/d/f")),
                ("/w/d/sub".into(), Change::Deleted),
                ("/w/e".into(), renamed("/w/d")),
            ]
        );
    }

    #[test]
    fn a_deletion_inside_a_directory_moved_out_of_a_deleted_one_is_listed() {
        // mv d/sub e; rm e/f; rm -r d: e/f (d/sub/f at the token) is not removed by
        // removing d, because d/sub is moved aside first.
        let events = [
            dir(rename("/w/d/sub", "/w/e")),
            event(EventKind::Delete, "/w/e/f"),
            event(EventKind::Delete, "/w/d/x"),
            dir(event(EventKind::Delete, "/w/d")),
        ];
        assert_eq!(
            changes(&events),
            [
                ("/w/d".to_string(), Change::Deleted),
                ("/w/d/sub/f".into(), Change::Deleted),
                ("/w/e".into(), renamed("/w/d/sub")),
            ]
        );
    }

    #[test]
    fn swaps_and_overflows() {
        let events = [
            rename("/w/a", "/w/t"),
            rename("/w/b", "/w/a"),
            rename("/w/t", "/w/b"),
        ];
        assert_eq!(
            changes(&events),
            [
                ("/w/a".to_string(), renamed("/w/b")),
                ("/w/b".into(), renamed("/w/a")),
                ("/w/t".into(), Change::Deleted),
            ]
        );
        assert!(list(&[event(EventKind::Overflow, "/w")], 10).is_none());
        let many: Vec<Event> = (0..11)
            .map(|i| event(EventKind::Create, &format!("/w/{i}")))
            .collect();
        assert!(list(&many, 10).is_none());
        assert!(list(&many, 11).is_some());
    }
}
