//! What a watch reports: one [`Event`] per change, whichever engine saw it.

use std::path::PathBuf;

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Created (nothing was at the path).
    Create,
    /// New here, and it may have replaced what was at the path. The engines no longer
    /// tell it (a move from outside, or from where the filter hides, is found as a
    /// [`EventKind::Create`] with what it holds); journals saved before still hold it.
    MoveIn,
    Modify,
    /// Deleted, or moved out of the tree.
    Delete,
    /// Renamed within the tree: [`Event::from`] is the old path.
    Rename,
    /// Metadata (mode, owner, times) changed.
    Attrib,
    /// Events were lost (kernel queue overflow or watch limit): rescan.
    Overflow,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    /// Absolute path (the root itself for an overflow).
    pub path: PathBuf,
    /// The old path of a rename.
    pub from: Option<PathBuf>,
    pub is_dir: bool,
}
