//! What both engines share once they know what happened: the filter, fsd's own scratch
//! files, and how a rename is told (a finished write, a rename, a move in or out).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use fsd_api::scratch::{self, ScratchKind};
use tokio::sync::mpsc;

use crate::{Event, EventKind, Filter};

/// Sends a watch's events, after deciding which are reported and how.
pub(crate) struct Reporter {
    root: PathBuf,
    filter: Filter,
    /// `None` once closed: the consumer sees the watch end.
    sender: Option<mpsc::UnboundedSender<Event>>,
}

impl Reporter {
    pub fn new(root: PathBuf, filter: Filter, sender: mpsc::UnboundedSender<Event>) -> Self {
        Self {
            root,
            filter,
            sender: Some(sender),
        }
    }

    /// Whether the consumer has gone (the watch can stop).
    pub fn closed(&self) -> bool {
        self.sender.as_ref().is_none_or(|sender| sender.is_closed())
    }

    /// Ends the channel: the consumer sees the watch end after what was sent. Done before
    /// waiting checks are let go, so a check never sees an ended watch as running.
    pub fn close(&mut self) {
        self.sender = None;
    }

    pub fn relative<'a>(&self, path: &'a Path) -> Cow<'a, str> {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .to_string_lossy()
    }

    /// Whether nothing below the directory `path` can be reported (it is not watched).
    pub fn prunes_dir(&self, path: &Path) -> bool {
        self.filter.prunes_dir(&self.relative(path))
    }

    pub fn emit(&self, kind: EventKind, path: PathBuf, from: Option<PathBuf>, is_dir: bool) {
        let Some(sender) = &self.sender else { return };
        let _ = sender.send(Event {
            kind,
            path,
            from,
            is_dir,
        });
    }

    /// Events were lost: the consumer must rescan.
    pub fn overflow(&self) {
        self.emit(EventKind::Overflow, self.root.clone(), None, true);
    }

    /// Whether events for `path` are reported: the filter lets it through, and it is not
    /// one of fsd's scratch files (their rename into place is reported as the target's).
    pub fn reported(&self, path: &Path) -> bool {
        !scratch::is_scratch(path) && self.filter.allows(&self.relative(path))
    }

    /// Whether a moved directory may hold directories that were pruned and are wanted now
    /// (see [`Filter::prunes_by_name`]).
    pub fn moves_unprune(&self) -> bool {
        !self.filter.prunes_by_name()
    }

    /// Whether a directory's move from `from` to `to` is told by its own event alone (see
    /// [`Filter::moves_whole`]); otherwise what it holds is told entry by entry.
    pub fn moves_whole(&self, from: &Path, to: &Path) -> bool {
        let reported = self.reported(from);
        reported == self.reported(to) && self.filter.moves_whole(reported)
    }

    /// Whether an event for the directory `path` speaks for what it holds: it is reported
    /// (a list takes its subtree along), or the filter hides everything below it.
    pub fn tells_inside(&self, path: &Path) -> bool {
        self.reported(path) || self.filter.moves_whole(false)
    }

    /// Emits `kind` for `path` if it is reported.
    pub fn report(&self, kind: EventKind, path: PathBuf, is_dir: bool) {
        if self.reported(&path) {
            self.emit(kind, path, None, is_dir);
        }
    }

    /// A rename inside the tree. A scratch file of fsd's renamed into place is the write it
    /// finishes: the target's `create` and `modify` when it is new, its `modify` when it
    /// replaces a file (as a shell's `echo > file` shows); returns true then. Otherwise one
    /// rename, or a delete or a create when the filter sees only one side (what the
    /// emitter tells a directory's contents with).
    pub fn renamed(&self, from: PathBuf, to: PathBuf, is_dir: bool) -> bool {
        if let Some(kind) = scratch_kind(&from) {
            if kind != ScratchKind::Replace {
                self.report(EventKind::Create, to.clone(), is_dir);
            }
            self.report(EventKind::Modify, to, is_dir);
            return true;
        }
        match (self.reported(&from), self.reported(&to)) {
            (true, true) => self.emit(EventKind::Rename, to, Some(from), is_dir),
            (true, false) => self.emit(EventKind::Delete, from, None, is_dir),
            (false, true) => self.emit(EventKind::Create, to, None, is_dir),
            (false, false) => {}
        }
        false
    }
}

/// What kind of write the scratch file `path` is, if it is one.
fn scratch_kind(path: &Path) -> Option<ScratchKind> {
    path.file_name()
        .and_then(|name| name.to_str())
        .and_then(scratch::parse)
        .map(|scratch| scratch.kind)
}
