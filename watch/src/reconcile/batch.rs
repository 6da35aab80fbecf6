//! What one reconciliation found, kept until it is emitted.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsString;

use super::tree::NodeId;

/// What one reconciliation changed, until it is emitted.
#[derive(Default)]
pub(crate) struct Batch {
    /// Where each node that moved, left or appeared was when the batch began (`None`: new).
    pub(super) before: HashMap<NodeId, Option<(NodeId, OsString)>>,
    /// Nodes taken out of their directory and not found again yet.
    pub(super) limbo: HashSet<NodeId>,
    pub(super) modified: BTreeSet<NodeId>,
    pub(super) attrib: BTreeSet<NodeId>,
    /// Directories that could not be listed at their recorded path (an ancestor moved):
    /// listed once found again.
    pub(super) waiting: HashSet<NodeId>,
    /// Watched directories moved to where the filter prunes them: unwatched, and what they
    /// hold forgotten, once the batch is emitted.
    pub(super) pruned: Vec<NodeId>,
    /// Directories read this batch as another filesystem's (a mount came or went over
    /// them): what they hold is matched by name, never by inode.
    pub(super) rebased: HashSet<NodeId>,
}
