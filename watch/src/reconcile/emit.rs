//! A batch's changes as a sequence of events, each valid on the tree the events before it
//! left: a move waits until its target's directory exists and its name is free, a delete
//! until nothing still to move out is inside it, a create until its directory exists. A
//! cycle of moves (a swap through a name the batch never saw) is broken by telling one of
//! them as deleted and made again (its subtree made again with it), which costs a refetch
//! and keeps the list exact.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use super::batch::Batch;
use super::tree::{Kind, NodeId, ROOT, Tree};
use crate::EventKind;
use crate::report::Reporter;

/// Emits `batch` through `reporter`; `gone` are the nodes that left for good.
pub(super) fn emit(tree: &Tree, batch: &Batch, gone: &[NodeId], reporter: &Reporter) {
    let mut emitter = Emitter {
        tree,
        batch,
        reporter,
        cur: HashMap::new(),
        slots: HashMap::new(),
        recreated: HashSet::new(),
    };
    for (&id, place) in &batch.before {
        emitter.cur.insert(id, place.clone());
        if let Some(place) = place {
            emitter.slots.insert(place.clone(), id);
        }
    }
    let created = |id: NodeId| batch.before.get(&id) == Some(&None);
    let left: HashSet<NodeId> = gone.iter().copied().collect();
    let mut moves: BTreeSet<NodeId> = BTreeSet::new();
    let mut creates: BTreeSet<NodeId> = BTreeSet::new();
    for (&id, place) in &batch.before {
        if left.contains(&id) || !tree.attached(id) {
            continue;
        }
        let node = tree.node(id);
        match place {
            Some((parent, name)) if (*parent, name) != (node.parent, &node.name) => {
                moves.insert(id);
            }
            Some(_) => {}
            None if !created(node.parent) => {
                creates.insert(id);
            }
            None => {}
        }
    }
    let mut deletes: Vec<NodeId> = gone
        .iter()
        .copied()
        .filter(|&id| !created(id) && batch.before.contains_key(&id))
        .collect();
    // What moved into something made in this batch that left for good again (a tree that
    // kept moving while it was read) is told deleted where it was told: nothing else
    // tells it. The topmost such node carries what it holds.
    for &top in gone.iter().filter(|&&id| created(id)) {
        deletes.extend(emitter.topmost_taken_along(top));
    }
    deletes.sort_by_key(|&id| std::cmp::Reverse(emitter.depth(id)));

    while !(moves.is_empty() && creates.is_empty() && deletes.is_empty()) {
        let mut progress = false;
        // What must leave a directory before it can be deleted: ancestors of pending moves.
        let holding: HashSet<NodeId> = moves.iter().flat_map(|&id| emitter.ancestors(id)).collect();
        let mut along: Vec<NodeId> = Vec::new();
        deletes.retain(|&id| {
            if !emitter.present(id) {
                // Gone with a directory told deleted before it (or deleted to be made
                // again): only what it took along from elsewhere is left to tell, and its
                // name there is free (a directory made again may put another at it).
                along.extend(emitter.topmost_taken_along(id));
                emitter.vacate(id);
                emitter.cur.insert(id, None);
                progress = true;
                return false;
            }
            // What the delete tells (the node, and what it holds now at the names the
            // events gave them) must have nothing still to move out below it.
            let told = std::iter::once(id).chain(emitter.taken_along(id));
            if told.into_iter().any(|node| holding.contains(&node)) {
                return true;
            }
            emitter.delete(id);
            progress = true;
            false
        });
        if !along.is_empty() {
            deletes.extend(along);
            deletes.sort_by_key(|&id| std::cmp::Reverse(emitter.depth(id)));
        }
        let mut ready: Vec<(PathBuf, NodeId)> = moves
            .iter()
            .copied()
            .filter(|&id| emitter.can_move(id))
            .map(|id| (tree.path(id), id))
            .collect();
        // In the order of where they go, as a reader of the events expects.
        ready.sort();
        for (_, id) in ready {
            // An earlier move of this pass may have taken the slot.
            if emitter.can_move(id) {
                emitter.rename(id);
                moves.remove(&id);
                progress = true;
            }
        }
        let ready: Vec<NodeId> = creates
            .iter()
            .copied()
            .filter(|&id| emitter.can_place(id))
            .collect();
        for id in ready {
            if emitter.can_place(id) {
                creates.remove(&id);
                emitter.create(id, &moves, &creates);
                progress = true;
            }
        }
        if progress {
            continue;
        }
        // A cycle: the first move pending is told as deleted and made again, with what is
        // inside it that had yet to move out.
        let Some(&id) = moves.iter().next() else {
            // Nothing can move and nothing is left to wait for (cannot happen on a tree):
            // what remains is told as made, which is exact if redundant, shallowest first,
            // each under a directory that is there (the topmost one missing is made with
            // what it holds), so no path is told cut short.
            let mut rest: Vec<NodeId> = std::mem::take(&mut creates).into_iter().collect();
            rest.sort_by_key(|&id| tree.path(id).components().count());
            for id in rest {
                if emitter.present(id) {
                    continue;
                }
                let mut top = id;
                while tree.node(top).parent != ROOT && !emitter.present(tree.node(top).parent) {
                    top = tree.node(top).parent;
                }
                emitter.create(top, &BTreeSet::new(), &BTreeSet::new());
            }
            break;
        };
        let inside: Vec<NodeId> = moves
            .iter()
            .copied()
            .filter(|&other| other != id && emitter.under(other, id))
            .collect();
        // A delete waiting below it goes with it (see the loop above for what that delete
        // took along from elsewhere).
        emitter.unplace(id, true);
        for other in inside {
            emitter.unplace(other, false);
            moves.remove(&other);
            emitter.recreated.insert(other);
            creates.insert(other);
        }
        moves.remove(&id);
        emitter.recreated.insert(id);
        creates.insert(id);
    }

    let mut modified: Vec<(PathBuf, bool, EventKind)> = Vec::new();
    for (set, kind) in [
        (&batch.modified, EventKind::Modify),
        (&batch.attrib, EventKind::Attrib),
    ] {
        for &id in set {
            if tree.get(id).is_none()
                || !tree.attached(id)
                || created(id)
                || emitter.recreated.contains(&id)
            {
                continue;
            }
            let is_dir = tree.node(id).stat.kind == Kind::Dir;
            modified.push((tree.path(id), is_dir, kind));
        }
    }
    modified.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    for (path, is_dir, kind) in modified {
        reporter.report(kind, path, is_dir);
    }
}

struct Emitter<'a> {
    tree: &'a Tree,
    batch: &'a Batch,
    reporter: &'a Reporter,
    /// Where each node of the batch is on the tree the events so far describe (`None`:
    /// not there).
    cur: HashMap<NodeId, Option<(NodeId, OsString)>>,
    /// Which node of the batch holds each name there.
    slots: HashMap<(NodeId, OsString), NodeId>,
    /// Nodes told as deleted and made again (a cycle) or made with them.
    recreated: HashSet<NodeId>,
}

impl Emitter<'_> {
    fn place(&self, id: NodeId) -> Option<(NodeId, &OsStr)> {
        match self.cur.get(&id) {
            Some(place) => place.as_ref().map(|(p, n)| (*p, n.as_os_str())),
            None => {
                let node = self.tree.node(id);
                Some((node.parent, node.name.as_os_str()))
            }
        }
    }

    /// The node's places up to the root on the told tree, its own first, and whether the
    /// chain reaches the root (it does not when a node on the way is off the told tree).
    fn chain(&self, id: NodeId) -> (Vec<(NodeId, &OsStr)>, bool) {
        let mut chain = Vec::new();
        let mut at = id;
        while at != ROOT {
            let Some((parent, name)) = self.place(at) else {
                return (chain, false);
            };
            chain.push((parent, name));
            at = parent;
        }
        (chain, true)
    }

    /// Ancestors on the told tree, nearest first (not the node itself).
    fn ancestors(&self, id: NodeId) -> Vec<NodeId> {
        self.chain(id)
            .0
            .into_iter()
            .map(|(parent, _)| parent)
            .collect()
    }

    fn depth(&self, id: NodeId) -> usize {
        self.chain(id).0.len()
    }

    /// Whether `id` is strictly below `ancestor` on the told tree.
    fn under(&self, id: NodeId, ancestor: NodeId) -> bool {
        self.chain(id)
            .0
            .iter()
            .any(|&(parent, _)| parent == ancestor)
    }

    /// Whether the node and its ancestors are on the told tree.
    fn present(&self, id: NodeId) -> bool {
        self.chain(id).1
    }

    fn path(&self, id: NodeId) -> PathBuf {
        let mut path = self.tree.root_path().to_path_buf();
        for (_, name) in self.chain(id).0.into_iter().rev() {
            path.push(name);
        }
        path
    }

    fn is_dir(&self, id: NodeId) -> bool {
        self.tree.node(id).stat.kind == Kind::Dir
    }

    /// Whether the node's final name is free on the told tree and its directory is there.
    fn can_place(&self, id: NodeId) -> bool {
        let node = self.tree.node(id);
        let free = self
            .slots
            .get(&(node.parent, node.name.clone()))
            .is_none_or(|&holder| holder == id);
        free && self.present(node.parent)
    }

    fn can_move(&self, id: NodeId) -> bool {
        let parent = self.tree.node(id).parent;
        self.can_place(id) && parent != id && !self.under(parent, id)
    }

    /// Frees the name the node holds on the told tree.
    fn vacate(&mut self, id: NodeId) {
        if let Some(Some(old)) = self.cur.get(&id).cloned()
            && self.slots.get(&old) == Some(&id)
        {
            self.slots.remove(&old);
        }
    }

    /// Puts the node at its final place on the told tree.
    fn settle(&mut self, id: NodeId) {
        self.vacate(id);
        let node = self.tree.node(id);
        let place = (node.parent, node.name.clone());
        self.slots.insert(place.clone(), id);
        self.cur.insert(id, Some(place));
    }

    /// Takes a node off the told tree; `tell`: as a delete event.
    fn unplace(&mut self, id: NodeId, tell: bool) {
        if tell {
            let path = self.path(id);
            // A directory the filter does not report may hold entries it does: each is
            // told, or a list would keep them.
            if self.is_dir(id) && !self.reporter.tells_inside(&path) {
                for (child, relative) in self.told_subtree(id).into_iter().rev() {
                    self.reporter.report(
                        EventKind::Delete,
                        path.join(relative),
                        self.is_dir(child),
                    );
                }
            }
            self.reporter
                .report(EventKind::Delete, path, self.is_dir(id));
        }
        self.vacate(id);
        self.cur.insert(id, None);
    }

    fn rename(&mut self, id: NodeId) {
        let from = self.path(id);
        self.settle(id);
        let to = self.path(id);
        if !self.is_dir(id) || self.reporter.moves_whole(&from, &to) {
            self.reporter.renamed(from, to, self.is_dir(id));
            return;
        }
        // A directory whose move changes what the filter reports inside it (it came out
        // of an exclude, or a pattern of several segments or an include sees part of it at
        // one name only): what it holds is told entry by entry, so a list made from the
        // events has every entry the filter shows at the new names and none it hides.
        let inside = self.told_subtree(id);
        let old_seen = self.reporter.reported(&from);
        let new_seen = self.reporter.reported(&to);
        let carried = old_seen && new_seen;
        // Entries told as deleted at their old name before the move (what they hold with
        // them), and entries to tell as made after it.
        let mut dropped: HashSet<PathBuf> = HashSet::new();
        let mut made: Vec<(NodeId, PathBuf)> = Vec::new();
        for (child, relative) in inside {
            let old = self.reporter.reported(&from.join(&relative));
            let new = self.reporter.reported(&to.join(&relative));
            let with_dropped = relative.ancestors().any(|up| dropped.contains(up));
            // Whether a list still holds the entry at its old name when the move is told:
            // the directory's rename takes it along, its delete takes it away.
            let held = old && !old_seen && !with_dropped;
            let taken_along = old && carried && !with_dropped;
            if held || (taken_along && !new) {
                self.reporter
                    .report(EventKind::Delete, from.join(&relative), self.is_dir(child));
                dropped.insert(relative.clone());
            }
            if new && !taken_along {
                made.push((child, to.join(&relative)));
            }
        }
        self.reporter.renamed(from, to, true);
        for (child, path) in made {
            self.tell_made(child, path);
        }
    }

    /// What the told tree holds below `id`, parents first, with paths relative to it.
    fn told_subtree(&self, id: NodeId) -> Vec<(NodeId, PathBuf)> {
        // Nodes of the batch told in a directory that the tree does not hold them in.
        let mut elsewhere: HashMap<NodeId, Vec<(NodeId, &OsStr)>> = HashMap::new();
        for (&node, place) in &self.cur {
            if let Some((parent, name)) = place
                && !self.tree.get(node).is_some_and(|n| {
                    n.parent == *parent
                        && self.tree.node(*parent).children.get(&n.name) == Some(&node)
                })
            {
                elsewhere
                    .entry(*parent)
                    .or_default()
                    .push((node, name.as_os_str()));
            }
        }
        let mut out = Vec::new();
        let mut stack = vec![(id, PathBuf::new())];
        while let Some((dir, relative)) = stack.pop() {
            let here = self.tree.node(dir).children.values().filter_map(|&child| {
                match self.place(child) {
                    Some((parent, name)) if parent == dir => Some((child, name)),
                    _ => None,
                }
            });
            let moved_here = elsewhere.get(&dir).into_iter().flatten().copied();
            for (child, name) in here.chain(moved_here) {
                let path = relative.join(name);
                out.push((child, path.clone()));
                stack.push((child, path));
            }
        }
        out
    }

    /// Tells one node as made at `path`: a file with content as made and written, as the
    /// kernel tells it.
    fn tell_made(&self, id: NodeId, path: PathBuf) {
        let stat = self.tree.node(id).stat;
        self.reporter
            .report(EventKind::Create, path.clone(), stat.kind == Kind::Dir);
        if stat.kind == Kind::File && stat.size > 0 {
            self.reporter.report(EventKind::Modify, path, false);
        }
    }

    /// Tells the node and what it holds (that is not told on its own) as created.
    fn create(&mut self, id: NodeId, moves: &BTreeSet<NodeId>, creates: &BTreeSet<NodeId>) {
        let mut stack = vec![id];
        while let Some(next) = stack.pop() {
            self.settle(next);
            self.tell_made(next, self.path(next));
            for &child in self.tree.node(next).children.values().rev() {
                if moves.contains(&child) || creates.contains(&child) {
                    continue;
                }
                stack.push(child);
            }
        }
    }

    /// What the tree holds below a node that left for good and the told tree still has
    /// somewhere: not what was made in this batch (never told), nor what an earlier delete
    /// took with a directory it was told in.
    fn taken_along(&self, id: NodeId) -> Vec<NodeId> {
        self.tree
            .descendants(id)
            .into_iter()
            .filter(|&child| self.batch.before.get(&child) != Some(&None) && self.present(child))
            .collect()
    }

    /// What a node that is off the told tree takes along that is still on it, the topmost
    /// of each part only (a delete tells what its node holds).
    fn topmost_taken_along(&self, id: NodeId) -> Vec<NodeId> {
        let mut taken: HashSet<NodeId> = HashSet::new();
        let mut out = Vec::new();
        for node in self.taken_along(id) {
            let mut up = self.tree.node(node).parent;
            let mut inside_taken = false;
            while up != id && up != ROOT {
                inside_taken |= taken.contains(&up);
                up = self.tree.node(up).parent;
            }
            if !inside_taken {
                taken.insert(node);
                out.push(node);
            }
        }
        out
    }

    /// Tells a node that left for good, and what it held, as deleted, deepest first, each
    /// once: what the tree holds below it (at the names the events gave them: one moved in
    /// and not told so is deleted where it was told) and what the told tree holds there.
    /// A path told deleted twice would read, after a rename out of the same name, as the
    /// delete of what the rename took away.
    fn delete(&mut self, id: NodeId) {
        let path = self.path(id);
        let along = self.taken_along(id);
        let mut below: Vec<(PathBuf, bool)> = along
            .iter()
            .map(|&child| (self.path(child), self.is_dir(child)))
            .collect();
        // A directory the filter does not report may hold entries it does: each is told,
        // for the node and for every directory it takes along.
        for node in std::iter::once(id).chain(along.iter().copied()) {
            let at = self.path(node);
            if self.is_dir(node) && !self.reporter.tells_inside(&at) {
                below.extend(
                    self.told_subtree(node)
                        .into_iter()
                        .map(|(child, relative)| (at.join(relative), self.is_dir(child))),
                );
            }
        }
        let mut told = HashSet::new();
        below.retain(|(path, _)| told.insert(path.clone()));
        // Deepest first; among equals, the reverse of the order found (children after
        // their parents there).
        below.reverse();
        below.sort_by_key(|(path, _)| std::cmp::Reverse(path.components().count()));
        for (path, is_dir) in below {
            self.reporter.report(EventKind::Delete, path, is_dir);
        }
        self.reporter
            .report(EventKind::Delete, path, self.is_dir(id));
        // Off the told tree, each of them: one told in a directory that stays (moved in
        // there before it left with this node) is no longer among what that directory
        // holds when it is told moved.
        for node in std::iter::once(id).chain(along) {
            self.vacate(node);
            self.cur.insert(node, None);
        }
    }
}
