//! The reconciler's record of a watched tree: every entry it has seen, keyed by node (an
//! object the reconciler follows across renames) and indexed by inode, so an entry found
//! under a new name can be told apart from a new one.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

/// An entry of the tree; ids are not reused while a batch runs.
pub(crate) type NodeId = usize;
/// The watched directory itself.
pub(crate) const ROOT: NodeId = 0;

/// What an entry is. Devices, FIFOs and sockets are `Other`: tracked, reported as files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// What `lstat` said of an entry, as far as changes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub dev: u64,
    pub ino: u64,
    pub kind: Kind,
    pub size: u64,
    pub mtime: (i64, i64),
    /// Permission bits (the type bits left out).
    pub mode: u32,
}

impl Stat {
    /// Whether `other` is the same object (device, inode, kind).
    pub fn same_object(&self, other: &Stat) -> bool {
        self.dev == other.dev && self.ino == other.ino && self.kind == other.kind
    }
}

pub(crate) struct Node {
    pub parent: NodeId,
    pub name: OsString,
    pub stat: Stat,
    pub children: BTreeMap<OsString, NodeId>,
    /// When it was recorded, if that was in the moment its mtime was set: a write in that
    /// clock tick keeps size and mtime, so a comparison without that write's event (a
    /// recrawl, a file found under a new name) cannot trust them.
    pub racy: Option<SystemTime>,
    /// A directory the backend watches and whose entries are recorded (directories
    /// excluded by the filter, and all but the root of a non-recursive watch, are leaves).
    pub watched: bool,
}

/// The tree: a slab of nodes, the root at [`ROOT`].
pub(crate) struct Tree {
    nodes: Vec<Option<Node>>,
    free: Vec<NodeId>,
    /// The node of each inode held once: nearly all of them, kept without a list each (a
    /// list per file was a tenth of a large tree's record).
    by_inode: HashMap<(u64, u64), NodeId>,
    /// Every node of each inode held more than once (hard links), which `by_inode` lacks.
    linked: HashMap<(u64, u64), Vec<NodeId>>,
    root_path: PathBuf,
}

impl Tree {
    pub fn new(root_path: PathBuf, stat: Stat) -> Self {
        let mut tree = Self {
            nodes: Vec::new(),
            free: Vec::new(),
            by_inode: HashMap::new(),
            linked: HashMap::new(),
            root_path,
        };
        tree.nodes.push(Some(Node {
            parent: ROOT,
            name: OsString::new(),
            stat,
            children: BTreeMap::new(),
            racy: None,
            watched: false,
        }));
        tree.index(ROOT);
        tree
    }

    pub fn root_path(&self) -> &Path {
        &self.root_path
    }

    pub fn get(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id).and_then(Option::as_ref)
    }

    pub fn node(&self, id: NodeId) -> &Node {
        self.get(id).expect("a live node id")
    }

    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        self.nodes
            .get_mut(id)
            .and_then(Option::as_mut)
            .expect("a live node id")
    }

    /// Lays the record out anew once a first crawl has made it: each directory's entries
    /// in full nodes (added one by one, in order, they fill half of each) and the slab
    /// without its spare room. A watch of 50,000 files held 2 MB less.
    pub fn compact(&mut self) {
        for node in self.nodes.iter_mut().flatten() {
            if node.children.len() > 1 {
                node.children = std::mem::take(&mut node.children).into_iter().collect();
            }
        }
        self.nodes.shrink_to_fit();
        self.free.shrink_to_fit();
    }

    /// Every live node id.
    pub fn ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.is_some())
            .map(|(id, _)| id)
    }

    fn index(&mut self, id: NodeId) {
        let stat = self.node(id).stat;
        let key = (stat.dev, stat.ino);
        if let Some(ids) = self.linked.get_mut(&key) {
            ids.push(id);
        } else if let Some(first) = self.by_inode.remove(&key) {
            self.linked.insert(key, vec![first, id]);
        } else {
            self.by_inode.insert(key, id);
        }
    }

    fn unindex(&mut self, id: NodeId) {
        let stat = self.node(id).stat;
        let key = (stat.dev, stat.ino);
        if let Some(ids) = self.linked.get_mut(&key) {
            ids.retain(|&other| other != id);
            if let [only] = ids[..] {
                self.linked.remove(&key);
                self.by_inode.insert(key, only);
            } else if ids.is_empty() {
                self.linked.remove(&key);
            }
        } else if self.by_inode.get(&key) == Some(&id) {
            self.by_inode.remove(&key);
        }
    }

    /// The nodes recorded with this inode (hard links share one).
    pub fn with_inode(&self, dev: u64, ino: u64) -> &[NodeId] {
        let key = (dev, ino);
        match self.linked.get(&key) {
            Some(ids) => ids,
            None => self.by_inode.get(&key).map_or(&[], std::slice::from_ref),
        }
    }

    /// A new node at `name` in `parent`.
    pub fn insert(
        &mut self,
        parent: NodeId,
        name: OsString,
        stat: Stat,
        racy: Option<SystemTime>,
    ) -> NodeId {
        let node = Node {
            parent,
            name: name.clone(),
            stat,
            children: BTreeMap::new(),
            racy,
            watched: false,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id] = Some(node);
                id
            }
            None => {
                self.nodes.push(Some(node));
                self.nodes.len() - 1
            }
        };
        self.index(id);
        self.node_mut(parent).children.insert(name, id);
        id
    }

    /// Records a new `lstat` of a node (its inode may be new: a file replaced in place).
    pub fn set_stat(&mut self, id: NodeId, stat: Stat, racy: Option<SystemTime>) {
        let old = self.node(id).stat;
        if (old.dev, old.ino) != (stat.dev, stat.ino) {
            self.unindex(id);
            self.node_mut(id).stat = stat;
            self.index(id);
        } else {
            self.node_mut(id).stat = stat;
        }
        self.node_mut(id).racy = racy;
    }

    /// Takes a node (with its subtree) out of its parent; it keeps its old parent and name.
    pub fn detach(&mut self, id: NodeId) {
        let (parent, name) = {
            let node = self.node(id);
            (node.parent, node.name.clone())
        };
        let children = &mut self.node_mut(parent).children;
        if children.get(&name) == Some(&id) {
            children.remove(&name);
        }
    }

    /// Puts a detached node at `name` in `parent`.
    pub fn attach(&mut self, id: NodeId, parent: NodeId, name: OsString) {
        let node = self.node_mut(id);
        node.parent = parent;
        node.name = name.clone();
        self.node_mut(parent).children.insert(name, id);
    }

    /// Whether the node and all its ancestors hang from the root.
    pub fn attached(&self, mut id: NodeId) -> bool {
        while id != ROOT {
            let Some(node) = self.get(id) else {
                return false;
            };
            match self.get(node.parent) {
                Some(parent) if parent.children.get(&node.name) == Some(&id) => id = node.parent,
                _ => return false,
            }
        }
        true
    }

    /// Whether `ancestor` is `id` or one of the nodes it hangs from.
    pub fn within(&self, mut id: NodeId, ancestor: NodeId) -> bool {
        loop {
            if id == ancestor {
                return true;
            }
            match self.get(id) {
                Some(node) if id != ROOT && node.parent != id => id = node.parent,
                _ => return false,
            }
        }
    }

    /// Frees a node and its subtree (already detached or about to be).
    pub fn remove_subtree(&mut self, id: NodeId) -> Vec<NodeId> {
        let mut removed = Vec::new();
        let mut stack = vec![id];
        while let Some(next) = stack.pop() {
            if self.get(next).is_none() {
                continue;
            }
            stack.extend(self.node(next).children.values().copied());
            self.unindex(next);
            self.nodes[next] = None;
            self.free.push(next);
            removed.push(next);
        }
        removed
    }

    /// The node's path by its recorded ancestors (absolute).
    pub fn path(&self, id: NodeId) -> PathBuf {
        let mut names = Vec::new();
        let mut at = id;
        while at != ROOT {
            let node = self.node(at);
            names.push(node.name.as_os_str());
            at = node.parent;
        }
        let mut path = self.root_path.clone();
        for name in names.into_iter().rev() {
            path.push(name);
        }
        path
    }

    /// Nodes below `id` (not itself), parents before children.
    pub fn descendants(&self, id: NodeId) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut stack: Vec<NodeId> = self.node(id).children.values().rev().copied().collect();
        while let Some(next) = stack.pop() {
            out.push(next);
            stack.extend(self.node(next).children.values().rev().copied());
        }
        out
    }

    /// The deepest recorded node on the way to `path` (absolute), and the first name past it
    /// when the path goes further.
    pub fn nearest<'p>(&self, path: &'p Path) -> Option<(NodeId, Option<&'p OsStr>)> {
        let rest = path.strip_prefix(&self.root_path).ok()?;
        let mut at = ROOT;
        for component in rest.components() {
            let Component::Normal(name) = component else {
                return None;
            };
            match self.node(at).children.get(name) {
                Some(&child) => at = child,
                None => return Some((at, Some(name))),
            }
        }
        Some((at, None))
    }
}
