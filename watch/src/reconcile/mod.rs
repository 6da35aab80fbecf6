//! The reconciler: the disk is the truth, events say where to look.
//!
//! One reconciler per watched root owns a [`Tree`] of what it has seen (name, inode, kind,
//! size, mtime, mode). A backend's events never change the tree: each marks a directory
//! dirty (and the name in it, with whether it was written). Reconciling re-reads the dirty
//! directories (`readdir`, then `fstatat` relative to the directory's descriptor for the
//! names that are new, hinted or whose inode changed) and diffs them against the tree:
//! - the same inode under a new name, here or anywhere in the tree, is a rename of that
//!   object with its subtree (a directory is checked to be the same object, not a reused
//!   inode number, where the backend can tell);
//! - an inode found nowhere is a create: a new directory is watched before it is listed,
//!   so nothing made inside it in between is missed;
//! - an inode gone from everywhere is a delete; a file whose inode changed at the same name
//!   is a modify (an atomic save);
//! - a changed size, mtime or mode, or a write the backend reported, is a modify or an
//!   attribute change.
//!
//! Renames found this way need no pairing of the kernel's move events, so the order in
//! which a queue reports moves and creations, or how it splits them, does not matter. An
//! overflow is a recrawl: every directory is re-read and diffed, and the changes come out
//! exact (file contents are compared by size and mtime there, and a file recorded in the
//! same clock tick as its last write is taken as modified).
//!
//! A batch's changes are emitted as a sequence each step of which is valid on the tree the
//! steps before it left (`emit`), so the change-list replay downstream stays a replay.

mod batch;
mod emit;
mod list;
mod reconciler;
mod record;
pub(crate) mod tree;

pub use record::RecordedEntry;
pub use tree::Kind as EntryKind;

pub(crate) use reconciler::{Backend, Reconciler, WatchFailure};
