//! The change journal of one watched root: a cursor that ticks with every event, the recent
//! events, and whether anything was lost. A token names a cursor; `changes_since` answers
//! what changed after it, coalesced per path, or `None` when the history cannot say
//! (pruned, overflowed, or too many changes), which the caller turns into a resync.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

use fsd_watch::{Event, EventKind};

/// Events kept per root.
pub const KEPT_EVENTS: usize = 100_000;
/// Changes listed in one answer; more is a resync.
pub const MAX_CHANGES: usize = 10_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Created,
    Modified,
    Deleted,
    Renamed { from: PathBuf },
}

#[derive(Debug, Default)]
pub struct Journal {
    cursor: u64,
    /// Recent events with their cursors, oldest first.
    events: VecDeque<(u64, Event)>,
    /// History is complete for tokens at or after this cursor (older events were pruned).
    complete_from: u64,
    /// The cursor of the last overflow.
    lost_at: Option<u64>,
    /// Cursors strictly between `lo` and `hi` may have been handed out before a crash; their
    /// events were never saved. (`hi` is the first cursor after the restart.)
    unknown: Option<(u64, u64)>,
}

/// What a snapshot keeps of a journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    pub cursor: u64,
    pub events: Vec<(u64, Event)>,
    pub complete_from: u64,
    pub lost_at: Option<u64>,
}

impl Journal {
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    pub fn save(&self) -> Saved {
        Saved {
            cursor: self.cursor,
            events: self.events.iter().cloned().collect(),
            complete_from: self.complete_from,
            lost_at: self.lost_at,
        }
    }

    /// The journal continued after a restart. Cursors up to `gap` past the saved one may
    /// have been handed out before the daemon stopped without saving; tokens in that range
    /// are answered as unknown (resync). Tokens from the snapshot or before get exact answers.
    pub fn restored(saved: Saved, gap: u64) -> Self {
        Self {
            cursor: saved.cursor + gap,
            events: saved.events.into_iter().collect(),
            complete_from: saved.complete_from,
            lost_at: saved.lost_at,
            unknown: Some((saved.cursor, saved.cursor + gap)),
        }
    }

    pub fn record(&mut self, event: Event) {
        self.cursor += 1;
        if event.kind == EventKind::Overflow {
            self.lost_at = Some(self.cursor);
        }
        self.events.push_back((self.cursor, event));
        if self.events.len() > KEPT_EVENTS
            && let Some((cursor, _)) = self.events.pop_front()
        {
            self.complete_from = cursor;
        }
    }

    /// What changed after cursor `since`, one entry per path.
    pub fn changes_since(&self, since: u64) -> Option<BTreeMap<PathBuf, (Change, bool)>> {
        let in_unknown = self
            .unknown
            .is_some_and(|(lo, hi)| since > lo && since < hi);
        if since < self.complete_from || self.lost_at.is_some_and(|lost| lost > since) || in_unknown
        {
            return None;
        }
        let mut changes: BTreeMap<PathBuf, (Change, bool)> = BTreeMap::new();
        for (_, event) in self.events.iter().filter(|(cursor, _)| *cursor > since) {
            match event.kind {
                EventKind::Create => {
                    let change = match changes.get(&event.path) {
                        Some((Change::Deleted, _)) => Change::Modified,
                        Some((existing, _)) => existing.clone(),
                        None => Change::Created,
                    };
                    changes.insert(event.path.clone(), (change, event.is_dir));
                }
                EventKind::Modify | EventKind::Attrib => {
                    changes
                        .entry(event.path.clone())
                        .or_insert((Change::Modified, event.is_dir));
                }
                EventKind::Delete => delete(&mut changes, event.path.clone(), event.is_dir),
                EventKind::Rename => {
                    let Some(from) = event.from.clone() else {
                        continue;
                    };
                    // Created in this window: still just created. Renamed again: keep the origin.
                    let change = match changes.remove(&from) {
                        Some((Change::Created, _)) => Change::Created,
                        Some((Change::Renamed { from: origin }, _)) => {
                            Change::Renamed { from: origin }
                        }
                        _ => Change::Renamed { from: from.clone() },
                    };
                    if event.is_dir {
                        move_subtree(&mut changes, &from, &event.path);
                    }
                    changes.insert(event.path.clone(), (change, event.is_dir));
                }
                EventKind::Overflow => return None,
            }
            if changes.len() > MAX_CHANGES {
                return None;
            }
        }
        Some(changes)
    }
}

/// A directory renamed from `from` to `to`: the changes listed under it so far happened to
/// what now lives under `to`, so they carry the new paths (an entry renamed inside it keeps
/// an origin that is also re-pathed when it was inside, as the client moves the directory
/// first, shallower paths sorting before deeper ones).
fn move_subtree(changes: &mut BTreeMap<PathBuf, (Change, bool)>, from: &Path, to: &Path) {
    let inside: Vec<PathBuf> = changes
        .range::<Path, _>((std::ops::Bound::Excluded(from), std::ops::Bound::Unbounded))
        .take_while(|(path, _)| path.starts_with(from))
        .map(|(path, _)| path.clone())
        .collect();
    for path in inside {
        let Some((mut change, is_dir)) = changes.remove(&path) else {
            continue;
        };
        if let Change::Renamed { from: origin } = &mut change
            && let Ok(rest) = origin.strip_prefix(from)
        {
            *origin = to.join(rest);
        }
        let Ok(rest) = path.strip_prefix(from) else {
            continue;
        };
        changes.insert(to.join(rest), (change, is_dir));
    }
}

/// A delete after a create in the same window leaves nothing; after a rename, the rename's
/// origin is what disappeared.
fn delete(changes: &mut BTreeMap<PathBuf, (Change, bool)>, path: PathBuf, is_dir: bool) {
    match changes.remove(&path) {
        Some((Change::Created, _)) => {}
        Some((Change::Renamed { from }, _)) => {
            changes.insert(from, (Change::Deleted, is_dir));
        }
        _ => {
            changes.insert(path, (Change::Deleted, is_dir));
        }
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

    fn rename(from: &str, to: &str) -> Event {
        Event {
            from: Some(PathBuf::from(from)),
            ..event(EventKind::Rename, to)
        }
    }

    fn changes(journal: &Journal, since: u64) -> Vec<(String, Change)> {
        journal
            .changes_since(since)
            .unwrap()
            .into_iter()
            .map(|(p, (c, _))| (p.display().to_string(), c))
            .collect()
    }

    #[test]
    fn coalesces_per_path() {
        let mut journal = Journal::default();
        journal.record(event(EventKind::Modify, "/w/old"));
        let since = journal.cursor();
        journal.record(event(EventKind::Create, "/w/a"));
        journal.record(event(EventKind::Modify, "/w/a"));
        journal.record(event(EventKind::Create, "/w/tmp"));
        journal.record(event(EventKind::Delete, "/w/tmp"));
        journal.record(event(EventKind::Modify, "/w/b"));
        journal.record(event(EventKind::Delete, "/w/c"));
        journal.record(event(EventKind::Create, "/w/c"));
        assert_eq!(
            changes(&journal, since),
            [
                ("/w/a".to_string(), Change::Created),
                ("/w/b".into(), Change::Modified),
                ("/w/c".into(), Change::Modified),
            ]
        );
        assert!(changes(&journal, journal.cursor()).is_empty());
    }

    #[test]
    fn renames_keep_their_origin() {
        let mut journal = Journal::default();
        journal.record(rename("/w/x", "/w/y"));
        journal.record(rename("/w/y", "/w/z"));
        assert_eq!(
            changes(&journal, 0),
            [(
                "/w/z".to_string(),
                Change::Renamed {
                    from: "/w/x".into()
                }
            )]
        );
        journal.record(event(EventKind::Delete, "/w/z"));
        assert_eq!(
            changes(&journal, 0),
            [("/w/x".to_string(), Change::Deleted)]
        );
        let mut fresh = Journal::default();
        fresh.record(event(EventKind::Create, "/w/new"));
        fresh.record(rename("/w/new", "/w/moved"));
        assert_eq!(
            changes(&fresh, 0),
            [("/w/moved".to_string(), Change::Created)]
        );
    }

    fn as_dir(event: Event) -> Event {
        Event {
            is_dir: true,
            ..event
        }
    }

    #[test]
    fn changes_under_a_directory_renamed_later_carry_the_new_path() {
        // mkdir -p m/n && echo q > m/n/q && mv m mm
        let mut journal = Journal::default();
        journal.record(as_dir(event(EventKind::Create, "/w/m")));
        journal.record(as_dir(event(EventKind::Create, "/w/m/n")));
        journal.record(event(EventKind::Create, "/w/m/n/q"));
        journal.record(event(EventKind::Modify, "/w/m/n/q"));
        journal.record(as_dir(rename("/w/m", "/w/mm")));
        assert_eq!(
            changes(&journal, 0),
            [
                ("/w/mm".to_string(), Change::Created),
                ("/w/mm/n".into(), Change::Created),
                ("/w/mm/n/q".into(), Change::Created),
            ]
        );
        // A directory that existed: renamed, and what changed inside it goes along, a
        // rename inside it included; a sibling with a common name prefix stays.
        let mut journal = Journal::default();
        journal.record(event(EventKind::Modify, "/w/d/a"));
        journal.record(event(EventKind::Delete, "/w/d/gone"));
        journal.record(rename("/w/d/x", "/w/d/y"));
        journal.record(event(EventKind::Modify, "/w/d2"));
        journal.record(as_dir(rename("/w/d", "/w/e")));
        assert_eq!(
            changes(&journal, 0),
            [
                ("/w/d2".to_string(), Change::Modified),
                (
                    "/w/e".into(),
                    Change::Renamed {
                        from: "/w/d".into()
                    }
                ),
                ("/w/e/a".into(), Change::Modified),
                ("/w/e/gone".into(), Change::Deleted),
                (
                    "/w/e/y".into(),
                    Change::Renamed {
                        from: "/w/e/x".into()
                    }
                ),
            ]
        );
    }

    #[test]
    fn a_restored_journal_answers_old_tokens_and_not_the_crash_window() {
        let mut journal = Journal::default();
        journal.record(event(EventKind::Create, "/w/a"));
        let old_token = journal.cursor();
        journal.record(event(EventKind::Modify, "/w/b"));
        let saved = journal.save();
        let mut restored = Journal::restored(saved, 1000);
        restored.record(event(EventKind::Delete, "/w/c"));
        assert_eq!(
            changes(&restored, old_token),
            [
                ("/w/b".to_string(), Change::Modified),
                ("/w/c".into(), Change::Deleted)
            ]
        );
        assert!(
            restored.changes_since(old_token + 5).is_none(),
            "a token from the unsaved window"
        );
        assert_eq!(
            changes(&restored, old_token + 1001),
            [("/w/c".to_string(), Change::Deleted)]
        );
    }

    #[test]
    fn lost_history_is_none() {
        let mut journal = Journal::default();
        journal.record(event(EventKind::Create, "/w/a"));
        let before = journal.cursor();
        journal.record(event(EventKind::Overflow, "/w"));
        journal.record(event(EventKind::Create, "/w/b"));
        assert!(journal.changes_since(before).is_none());
        assert!(
            journal.changes_since(journal.cursor()).is_some(),
            "after the overflow all is known"
        );
        for i in 0..KEPT_EVENTS {
            journal.record(event(EventKind::Modify, &format!("/w/{}", i % 10)));
        }
        assert!(journal.changes_since(2).is_none(), "pruned");
    }
}
