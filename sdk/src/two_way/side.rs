//! One side's tree as a pass sees it: read whole, or read at a few paths only and seen
//! through the ancestor, which is looked up, not copied (a copy of the ancestor for each
//! side was a fifth of a pass that changed ten of 20,000 files).

use std::borrow::Cow;
use std::collections::BTreeSet;

use crate::merge::{self, Entries, Entry, Tree};

pub(super) enum SideTree<'a> {
    Whole(Cow<'a, Entries>),
    Patched(Patched<'a>),
}

/// The ancestor, with what was read at and below each read path in place of what the
/// ancestor holds there; what was read under something that is not a directory is not
/// held.
pub(super) struct Patched<'a> {
    ancestor: &'a Entries,
    /// The topmost paths read: what the ancestor holds at and below them is not this side's.
    tops: BTreeSet<String>,
    /// What was read, where it has a place.
    read: Entries,
}

impl<'a> SideTree<'a> {
    /// A side read at `paths` (`None`: read whole, and `read` is the tree).
    pub(super) fn new(
        ancestor: &'a Entries,
        paths: Option<&BTreeSet<String>>,
        read: Entries,
    ) -> SideTree<'a> {
        match paths {
            None => SideTree::Whole(Cow::Owned(read)),
            // A side that named nothing is the ancestor itself.
            Some(paths) if paths.is_empty() => SideTree::Whole(Cow::Borrowed(ancestor)),
            Some(paths) => SideTree::Patched(Patched::new(ancestor, paths, read)),
        }
    }

    pub(super) fn tree(&self) -> &dyn Tree {
        match self {
            SideTree::Whole(tree) => &**tree,
            SideTree::Patched(patched) => patched,
        }
    }

    /// The side as its entries whole (a copy only where it was read in part).
    pub(super) fn into_whole(self) -> Cow<'a, Entries> {
        match self {
            SideTree::Whole(tree) => tree,
            SideTree::Patched(patched) => Cow::Owned(patched.copy()),
        }
    }

    /// Whether the side holds nothing at all.
    pub(super) fn is_empty(&self) -> bool {
        match self {
            SideTree::Whole(tree) => tree.is_empty(),
            SideTree::Patched(patched) => {
                patched.read.is_empty() && patched.ancestor.keys().all(|path| !patched.kept(path))
            }
        }
    }

    /// [`Self::into_whole`], borrowed.
    pub(super) fn whole(&self) -> Cow<'_, Entries> {
        match self {
            SideTree::Whole(tree) => Cow::Borrowed(&**tree),
            SideTree::Patched(patched) => Cow::Owned(patched.copy()),
        }
    }
}

impl<'a> Patched<'a> {
    fn new(ancestor: &'a Entries, paths: &BTreeSet<String>, read: Entries) -> Patched<'a> {
        let mut patched = Patched {
            ancestor,
            tops: topmost(paths),
            read: Entries::new(),
        };
        // In path order, so a directory is placed before what it holds.
        for (path, entry) in read {
            if merge::placed(&patched, &path) {
                patched.read.insert(path, entry);
            }
        }
        patched
    }

    /// Whether `path` is at or below a path read.
    fn covered(&self, path: &str) -> bool {
        let mut at = path;
        loop {
            if self.tops.contains(at) {
                return true;
            }
            match at.rfind('/') {
                Some(end) => at = &at[..end],
                None => return false,
            }
        }
    }

    /// The ancestor's entry at `path`, where it is this side's.
    fn kept(&self, path: &str) -> bool {
        !self.covered(path) && !self.read.contains_key(path)
    }

    fn copy(&self) -> Entries {
        let mut out = Entries::new();
        self.each(&mut |path, entry| {
            out.insert(path.clone(), entry.clone());
        });
        out
    }
}

fn topmost(paths: &BTreeSet<String>) -> BTreeSet<String> {
    crate::scan::tops(paths)
        .into_iter()
        .map(String::from)
        .collect()
}

impl Tree for Patched<'_> {
    fn entry(&self, path: &str) -> Option<&Entry> {
        match self.read.get(path) {
            Some(entry) => Some(entry),
            None if self.covered(path) => None,
            None => self.ancestor.get(path),
        }
    }

    fn below(&self, dir: &str) -> Vec<&String> {
        let mut out: Vec<&String> = merge::within(&self.read, dir).map(|(p, _)| p).collect();
        if !self.covered(dir) {
            out.extend(
                merge::within(self.ancestor, dir)
                    .map(|(path, _)| path)
                    .filter(|path| self.kept(path)),
            );
        }
        out
    }

    fn each<'t>(&'t self, visit: &mut dyn FnMut(&'t String, &'t Entry)) {
        for (path, entry) in self.ancestor {
            if self.kept(path) {
                visit(path, entry);
            }
        }
        self.read
            .iter()
            .for_each(|(path, entry)| visit(path, entry));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::two_way::sample::{dir, file};

    /// What the view answers is what the ancestor patched in a copy holds, for every
    /// path, below every directory, and whole.
    #[test]
    fn a_side_read_in_part_is_the_ancestor_patched_without_a_copy() {
        let ancestor: Entries = [
            ("a", dir()),
            ("a/x", file("1")),
            ("a/y", file("2")),
            ("a-b", file("3")),
            ("b", dir()),
            ("b/c", dir()),
            ("b/c/d", file("4")),
            ("e", file("5")),
        ]
        .into_iter()
        .map(|(path, entry)| (path.to_string(), entry))
        .collect();
        // Read again: `a` (now a file), `b/c` (gone), `f` (new directory with a file), and
        // `e/z`, found under what is not a directory.
        let paths: BTreeSet<String> = ["a", "b/c", "f", "e/z"].map(String::from).into();
        let read: Entries = [("a", file("6")), ("f", dir()), ("f/g", file("7"))]
            .into_iter()
            .chain([("a/x", file("8")), ("e/z", file("9"))])
            .map(|(path, entry)| (path.to_string(), entry))
            .collect();
        let view = SideTree::new(&ancestor, Some(&paths), read.clone());
        let mut expected = ancestor.clone();
        expected.retain(|path, _| {
            !["a", "b/c", "f", "e/z"]
                .iter()
                .any(|top| path == top || path.starts_with(&format!("{top}/")))
        });
        // `a/x` and `e/z` have no place: `a` is a file now, `e` is one.
        for path in ["a", "f", "f/g"] {
            expected.insert(path.into(), read[path].clone());
        }
        assert_eq!(view.whole().into_owned(), expected);
        let tree = view.tree();
        for path in [
            "a", "a/x", "a/y", "a-b", "b", "b/c", "b/c/d", "e", "e/z", "f", "f/g",
        ] {
            assert_eq!(tree.entry(path), expected.get(path), "{path}");
        }
        for dir in ["a", "b", "f", "e", ""] {
            let mut below: Vec<&String> = tree.below(dir);
            below.sort();
            let wanted: Vec<&String> = if dir.is_empty() {
                Vec::new()
            } else {
                merge::within(&expected, dir)
                    .map(|(path, _)| path)
                    .collect()
            };
            assert_eq!(below, wanted, "below {dir}");
        }
        assert_eq!(
            SideTree::new(&ancestor, Some(&BTreeSet::new()), Entries::new())
                .whole()
                .into_owned(),
            ancestor
        );
    }
}
