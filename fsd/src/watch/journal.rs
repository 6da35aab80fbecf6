//! The change journal of one watched root: a cursor that ticks with every event, the recent
//! events, and whether anything was lost. A token names a cursor; `changes_since` answers
//! what changed after it, or `None` when the history cannot say (pruned, overflowed, or
//! too many changes), which the caller turns into a resync.

use std::collections::VecDeque;

use fsd_watch::{Event, EventKind};

use fsd_watch::changes::{self, Listed};

/// Events kept per root.
pub const KEPT_EVENTS: usize = 100_000;
#[derive(Debug)]
pub struct Journal {
    cursor: u64,
    /// Recent events with their cursors, oldest first.
    events: VecDeque<(u64, Event)>,
    /// History is complete for tokens at or after this cursor (older events were pruned).
    complete_from: u64,
    /// The cursor of the last overflow.
    lost_at: Option<u64>,
    /// Ranges of cursors (strictly between `lo` and `hi`) that may have been handed out
    /// before a crash, their events never saved (`hi`: the first cursor after that restart).
    /// Every restart adds one, and each is kept (saved) until pruning passes it: a token from
    /// a run that crashed stays unknown through the restarts after it.
    unknown: Vec<(u64, u64)>,
    /// Lines in one change list; more is a resync.
    max_changes: usize,
}

/// What a snapshot keeps of a journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    pub cursor: u64,
    pub events: Vec<(u64, Event)>,
    pub complete_from: u64,
    pub lost_at: Option<u64>,
    /// The unknown ranges of earlier restarts (see `Journal::unknown`).
    pub unknown: Vec<(u64, u64)>,
}

impl Journal {
    pub fn new(max_changes: usize) -> Self {
        Self {
            cursor: 0,
            events: VecDeque::new(),
            complete_from: 0,
            lost_at: None,
            unknown: Vec::new(),
            max_changes,
        }
    }

    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    pub fn save(&self) -> Saved {
        Saved {
            cursor: self.cursor,
            events: self.events.iter().cloned().collect(),
            complete_from: self.complete_from,
            lost_at: self.lost_at,
            unknown: self.unknown.clone(),
        }
    }

    /// The journal continued after a restart. Cursors up to `gap` past the saved one may
    /// have been handed out before the daemon stopped without saving; tokens in that range
    /// are answered as unknown (resync). Tokens from the snapshot or before get exact answers.
    pub fn restored(saved: Saved, gap: u64, max_changes: usize) -> Self {
        let mut unknown: Vec<(u64, u64)> = saved
            .unknown
            .into_iter()
            .filter(|&(_, hi)| hi > saved.complete_from)
            .collect();
        unknown.push((saved.cursor, saved.cursor + gap));
        Self {
            max_changes,
            cursor: saved.cursor + gap,
            events: saved.events.into_iter().collect(),
            complete_from: saved.complete_from,
            lost_at: saved.lost_at,
            unknown,
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

    /// What changed after cursor `since` (see [`fsd_watch::changes`]), or `None` when
    /// the history cannot say.
    pub fn changes_since(&self, since: u64) -> Option<Vec<Listed>> {
        changes::list(self.window(since)?, self.max_changes)
    }

    /// Every path an event after cursor `since` named (a rename's both), in path order,
    /// or `None` when the history cannot say (or names more than a change list may).
    pub fn touched_since(&self, since: u64) -> Option<Vec<std::path::PathBuf>> {
        let mut touched = std::collections::BTreeSet::new();
        for event in self.window(since)? {
            if event.kind == EventKind::Overflow {
                return None;
            }
            touched.insert(event.path.clone());
            touched.extend(event.from.clone());
            if touched.len() > self.max_changes {
                return None;
            }
        }
        Some(touched.into_iter().collect())
    }

    /// The events after cursor `since`, or `None` when the history does not hold them all.
    fn window(&self, since: u64) -> Option<impl Iterator<Item = &Event>> {
        let in_unknown = self
            .unknown
            .iter()
            .any(|&(lo, hi)| since > lo && since < hi);
        if since < self.complete_from || self.lost_at.is_some_and(|lost| lost > since) || in_unknown
        {
            return None;
        }
        Some(
            self.events
                .iter()
                .filter(move |(cursor, _)| *cursor > since)
                .map(|(_, event)| event),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsd_watch::changes::Change;

    fn event(kind: EventKind, path: &str) -> Event {
        Event {
            kind,
            path: path.into(),
            from: None,
            is_dir: false,
        }
    }

    /// The daemon's default `--change-list-limit`.
    const LIMIT: usize = 10_000;

    fn changes(journal: &Journal, since: u64) -> Vec<(String, Change)> {
        journal
            .changes_since(since)
            .unwrap()
            .into_iter()
            .map(|l| (l.path.display().to_string(), l.change))
            .collect()
    }

    #[test]
    fn a_window_starts_after_its_cursor() {
        let mut journal = Journal::new(LIMIT);
        journal.record(event(EventKind::Modify, "/w/old"));
        let since = journal.cursor();
        journal.record(event(EventKind::Create, "/w/a"));
        assert_eq!(
            changes(&journal, since),
            [("/w/a".to_string(), Change::Created)]
        );
        assert!(changes(&journal, journal.cursor()).is_empty());
    }

    #[test]
    fn a_restored_journal_answers_old_tokens_and_not_the_crash_window() {
        let mut journal = Journal::new(LIMIT);
        journal.record(event(EventKind::Create, "/w/a"));
        let old_token = journal.cursor();
        journal.record(event(EventKind::Modify, "/w/b"));
        let saved = journal.save();
        let mut restored = Journal::restored(saved, 1000, LIMIT);
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

    /// Found by the composed simulation (seed 1795856124471679347): a token handed out
    /// in a run that crashed was answered after a second restart as if its window were
    /// whole (the second restart had forgotten the first one's unknown range).
    #[test]
    fn a_crash_window_stays_unknown_through_later_restarts() {
        let mut journal = Journal::new(LIMIT);
        journal.record(event(EventKind::Create, "/w/a"));
        let old_token = journal.cursor();
        let mut first_run = Journal::restored(journal.save(), 1000, LIMIT);
        // What the first run's start saved; the run crashes after handing out a token.
        let saved_at_start = first_run.save();
        first_run.record(event(EventKind::Modify, "/w/a"));
        let lost_token = first_run.cursor();
        let mut second_run = Journal::restored(saved_at_start, 1000, LIMIT);
        second_run.record(event(EventKind::Delete, "/w/b"));
        // A clean stop, and a start again.
        let third_run = Journal::restored(second_run.save(), 1000, LIMIT);
        assert!(
            third_run.changes_since(lost_token).is_none(),
            "a token from the run that crashed"
        );
        assert!(third_run.changes_since(old_token).is_some());
    }

    #[test]
    fn lost_history_is_none() {
        let mut journal = Journal::new(LIMIT);
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
