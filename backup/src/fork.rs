//! Workspace forks: N copy-on-write branches of a directory at one instant, each a whole
//! tree, no file copied.
//!
//! The first fork of a plain directory `D` binds it (privately) under the state directory:
//! that bind is the frozen tree, the lower layer of everything after. An overlay over it
//! with a fresh upper is mounted on `D` itself, so `D` stays writable at its path, shows
//! the same names, inode numbers and times (the layers are on one filesystem) and a watch
//! of `D` sees a mount, not a changed tree; each branch is another overlay over the same
//! lower, mounted on a sibling directory `D@NAME`. A fork of a directory that already is
//! one of these overlays (`D` again, or a branch) freezes its upper instead: the new
//! overlays take it as their topmost lower, and the old mount stays covered beneath the
//! new one on `D` until a discard takes them down together. Nothing writes a
//! frozen layer again: it is reachable only beneath mounts that show it read-only, which is
//! why a fork is refused while a process has its directory, root or an open file in `D`
//! (it would write the frozen tree beneath every branch).
//!
//! The layers and what each mount is are kept in `forks.json` under the state directory;
//! mounts outlive a daemon's restart (they are adopted), and a machine that lost its mounts
//! gets them back at the next start. Kernel overlayfs only: the FUSE driver is refused.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::mount::{MntFlags, MsFlags};
use serde::{Deserialize, Serialize};

use crate::BackupError;
use crate::mount::{self, Driver};

const STATE_FILE: &str = "forks.json";
/// Where a merge shows its fork point while it runs (see [`AncestorView`]).
const MERGE_VIEWS: &str = "merging";
/// Where each pair's merge base is kept (see [`MergeSides::base_file`]).
const MERGE_BASES: &str = "merged";
/// Where the archives of received branches are mounted (see [`Forker::receive`]).
const ARCHIVE_MOUNTS: &str = "archives";

/// A short name of a path for the files named after it.
fn path_key(path: &Path) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(path.as_os_str().as_encoded_bytes());
    fsd_api::hex::lower(&digest[..8])
}

use fsd_api::mountinfo::FORK_SOURCE;

/// A directory shown by a fork overlay: a forked directory itself, or a branch of one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Layered {
    /// Where the overlay is mounted.
    pub path: PathBuf,
    /// A branch's name; `None` for a forked directory itself.
    pub branch: Option<String>,
    /// The directory this was forked from (itself, for a forked directory).
    pub forked_from: PathBuf,
    /// The frozen layers beneath, topmost first.
    pub lowers: Vec<PathBuf>,
    /// Holds `upper` (what was written here since the fork) and `work`.
    pub layer: PathBuf,
    /// Unix milliseconds of the fork that made this layer.
    pub forked_at: u64,
    /// A branch received from another sandbox: the archive of the snapshot it shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<PathBuf>,
}

impl Layered {
    pub fn upper(&self) -> PathBuf {
        self.layer.join("upper")
    }

    fn work(&self) -> PathBuf {
        self.layer.join("work")
    }
}

/// A frozen plain directory: `source` bound privately at `at`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Bind {
    source: PathBuf,
    at: PathBuf,
}

/// A snapshot's archive mounted read-only at `at`: a frozen layer of branches received
/// from another sandbox.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct ArchiveMount {
    file: PathBuf,
    at: PathBuf,
}

impl ArchiveMount {
    /// Its own hard link to the archive, beside its mount point, mounted again at a start
    /// (as a restore's, [`crate::restore::Restore::held`]): an archive removed or replaced
    /// under its name meanwhile does not take the branches built on it away.
    fn held(&self) -> PathBuf {
        let mut held = self.at.clone().into_os_string();
        held.push(".held");
        PathBuf::from(held)
    }

    fn mount(&self) -> Result<(), BackupError> {
        fs::create_dir_all(&self.at).map_err(|e| BackupError::io(&self.at, e))?;
        let held = self.held();
        let linked = held.is_file();
        let source = if linked {
            &held
        } else {
            if let Err(error) = fs::hard_link(&self.file, &held) {
                tracing::debug!(archive = %self.file.display(), %error, "a received branch mounts its archive by name");
            }
            &self.file
        };
        let mounted = mount::mount_squashfs(source, &self.at, Driver::Kernel);
        if mounted.is_err() && !linked {
            // Not kept for an archive that did not mount: the next try takes the name.
            let _ = fs::remove_file(&held);
        }
        mounted
    }

    fn unmount(&self) {
        let _ = nix::mount::umount2(&self.at, MntFlags::MNT_DETACH);
        let _ = fs::remove_dir(&self.at);
        let _ = fs::remove_file(self.held());
    }
}

/// A fork point sent through the backup store: the directory frozen, the archive made of
/// what it froze, and the frozen layers, which a snapshot built on that archive elsewhere
/// stacks on when it comes back as a branch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Sent {
    dir: PathBuf,
    archive: PathBuf,
    lowers: Vec<PathBuf>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    binds: Vec<Bind>,
    layered: Vec<Layered>,
    /// Numbers the next fork's directory under the root.
    next: u64,
    #[serde(default)]
    archives: Vec<ArchiveMount>,
    #[serde(default)]
    sent: Vec<Sent>,
    #[serde(default)]
    copies: Vec<Copied>,
}

impl State {
    /// Every frozen layer a branch stands on or a sent fork point was made of.
    fn standing(&self) -> BTreeSet<PathBuf> {
        self.layered
            .iter()
            .flat_map(|l| &l.lowers)
            .chain(self.sent.iter().flat_map(|sent| &sent.lowers))
            .cloned()
            .collect()
    }
}

/// A fork point made by copying a directory a process was working in (see
/// [`crate::frozen_copy`]): the copy, and the index of the directory as it was read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Copied {
    dir: PathBuf,
    tree: PathBuf,
    index: PathBuf,
}

/// What a fork made: the frozen layers (topmost first), the branches, and why the fork
/// point is a copy when it is one.
pub struct Forked {
    pub lowers: Vec<PathBuf>,
    pub branches: Vec<Branch>,
    /// The process that was working in the directory (`None`: frozen by a mount).
    pub copied_because: Option<String>,
}

/// A branch as listed: where it is, what it came from and what it changed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Branch {
    pub name: String,
    pub path: PathBuf,
    pub forked_from: PathBuf,
    pub forked_at: u64,
    /// Files (and links) made or changed in the branch since its fork.
    pub changed: u64,
    /// Paths deleted in the branch since its fork.
    pub deleted: u64,
    /// Bytes its own layer holds (what the branch costs on disk).
    pub bytes: u64,
    /// A branch received from another sandbox: the archive of the snapshot it shows.
    pub received: Option<PathBuf>,
}

impl Branch {
    /// `layered` as a branch (`None` for a forked directory itself), with what its layer
    /// holds: files changed, paths deleted, bytes.
    fn of(layered: &Layered, (changed, deleted, bytes): (u64, u64, u64)) -> Option<Branch> {
        Some(Branch {
            name: layered.branch.clone()?,
            path: layered.path.clone(),
            forked_from: layered.forked_from.clone(),
            forked_at: layered.forked_at,
            changed,
            deleted,
            bytes,
            received: layered.received.clone(),
        })
    }
}

/// Owns the fork mounts of one daemon.
pub struct Forker {
    root: PathBuf,
    state: Mutex<State>,
}

impl Forker {
    /// Keeps fork state under `root`; mounts again what the machine lost (a restart of the
    /// container; a restart of the daemon keeps them).
    pub fn new(root: &Path) -> Result<Forker, BackupError> {
        fs::create_dir_all(root).map_err(|e| BackupError::io(root, e))?;
        let file = root.join(STATE_FILE);
        let state = match fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| BackupError::Layer(format!("{}: {e}", file.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(BackupError::io(&file, e)),
        };
        let forker = Forker {
            root: root.to_path_buf(),
            state: Mutex::new(state),
        };
        forker.mount_what_is_missing();
        forker.take_down_merge_views();
        Ok(forker)
    }

    /// A merge's fork-point views left by a daemon that stopped in the middle of one.
    fn take_down_merge_views(&self) {
        let Ok(views) = fs::read_dir(self.root.join(MERGE_VIEWS)) else {
            return;
        };
        for view in views.flatten() {
            let _ = nix::mount::umount2(&view.path(), MntFlags::MNT_DETACH);
            let _ = fs::remove_dir(view.path());
        }
    }

    fn mount_what_is_missing(&self) {
        let Ok(state) = self.state.lock() else { return };
        let mounted = mount::mount_table();
        let is_mounted = |path: &Path, kind: Option<&str>| {
            mounted
                .iter()
                .any(|m| m.target == path && kind.is_none_or(|kind| m.fstype == kind))
        };
        for bind in &state.binds {
            if !is_mounted(&bind.at, None)
                && let Err(error) = bind_privately(&bind.source, &bind.at)
            {
                tracing::warn!(%error, at = %bind.at.display(), "could not bind a fork's frozen tree again");
            }
        }
        for archive in &state.archives {
            if !is_mounted(&archive.at, None)
                && let Err(error) = archive.mount()
            {
                tracing::warn!(%error, archive = %archive.file.display(), "could not mount a received branch's archive again");
            }
        }
        // Parents before what lies beneath them.
        let mut layered: Vec<&Layered> = state.layered.iter().collect();
        layered.sort_by_key(|l| l.path.components().count());
        for layered in layered {
            if !is_mounted(&layered.path, Some("overlay"))
                && let Err(error) = mount_layered(layered)
            {
                tracing::warn!(%error, path = %layered.path.display(), "could not mount a fork's overlay again");
            }
        }
    }

    /// Forks `dir` into branches named `names` at one instant: `dir@NAME` beside it, each
    /// showing `dir`'s whole tree as it is now, each written on its own; `dir` stays
    /// writable where it is. `busy` says which process, if any, holds something under `dir`
    /// (checked after the names, before anything is mounted): then the fork point is a
    /// copy of `dir` (see [`crate::frozen_copy`]).
    pub fn fork(
        &self,
        dir: &Path,
        names: &[String],
        driver: Option<Driver>,
        busy: impl Fn(&Path) -> Option<(u32, String)>,
    ) -> Result<Forked, BackupError> {
        let names = checked_names(names)?;
        self.forked(dir, &names, driver, busy)
    }

    /// Freezes `dir` as a fork does, with no branch: what it shows now becomes frozen
    /// layers (topmost first) beneath a fresh overlay on `dir` (or a copy of it, while a
    /// process works in it), to be archived whole and sent as a fork point (see
    /// [`Forker::record_sent`]).
    pub fn freeze(
        &self,
        dir: &Path,
        driver: Option<Driver>,
        busy: impl Fn(&Path) -> Option<(u32, String)>,
    ) -> Result<Forked, BackupError> {
        self.forked(dir, &[], driver, busy)
    }

    /// A fork of `dir` into branches named `names` (checked names; none freezes only).
    /// While a process holds something in `dir` (`busy`), the fork point is a copy of it
    /// instead of `dir` itself bound beneath an overlay, which would leave that process
    /// writing the frozen tree beneath every branch.
    fn forked(
        &self,
        dir: &Path,
        names: &[String],
        driver: Option<Driver>,
        busy: impl Fn(&Path) -> Option<(u32, String)>,
    ) -> Result<Forked, BackupError> {
        let (dir, paths) = branch_paths(dir, names, driver)?;
        let dir = dir.as_path();
        let mut state = self.locked()?;
        let own = state.layered.iter().position(|l| l.path == dir);
        let mounted = foreign_mounts(dir);
        // A whole restore on the directory: its overlay is what the directory shows, and a
        // copy of that is the fork point (the restore stays, its writes too). Forked before,
        // the directory's new overlay would cover the restore. Any other mount in it is in
        // no layer.
        if only_a_restore_on(dir, &mounted) {
            let because = format!("a restore is mounted on {}", dir.display());
            return self.forked_by_copy(&mut state, dir, names, &paths, because);
        }
        refuse_mounts(dir, &mounted, "fork a directory without mounts in it")?;
        if let Some((pid, how)) = busy(dir) {
            let because = format!("process {pid} holds {how} in {}", dir.display());
            return self.forked_by_copy(&mut state, dir, names, &paths, because);
        }
        let number = state.next;
        state.next += 1;
        let base = self.root.join(number.to_string());
        let forked_at = crate::restore::now_ms();
        // The frozen layers: a plain directory bound as it is, or the overlay's upper.
        let (lowers, bind) = match own {
            Some(index) => {
                let current = &state.layered[index];
                let mut lowers = vec![current.upper()];
                lowers.extend(current.lowers.iter().cloned());
                (lowers, None)
            }
            None => {
                let at = base.join("tree");
                fs::create_dir_all(&at).map_err(|e| BackupError::io(&at, e))?;
                bind_privately(dir, &at)?;
                (
                    vec![at.clone()],
                    Some(Bind {
                        source: dir.to_path_buf(),
                        at,
                    }),
                )
            }
        };
        let undo_bind = |bind: &Option<Bind>| {
            if let Some(bind) = bind {
                let _ = nix::mount::umount2(&bind.at, MntFlags::MNT_DETACH);
            }
            let _ = fs::remove_dir_all(&base);
        };
        let this = Layered {
            path: dir.to_path_buf(),
            branch: own.and_then(|index| state.layered[index].branch.clone()),
            forked_from: own.map_or_else(
                || dir.to_path_buf(),
                |index| state.layered[index].forked_from.clone(),
            ),
            lowers: lowers.clone(),
            received: own.and_then(|index| state.layered[index].received.clone()),
            // The directory's own layer at `self`, each branch's beneath `branches/`.
            layer: match make_layer(&base.join("self")) {
                Ok(layer) => layer,
                Err(error) => {
                    undo_bind(&bind);
                    return Err(error);
                }
            },
            forked_at,
        };
        let branches = Branches {
            base: &base,
            dir,
            lowers: &lowers,
            forked_at,
            received: None,
        };
        let made = match branches.mount(names, &paths) {
            Ok(made) => made,
            Err(error) => {
                undo_bind(&bind);
                return Err(error);
            }
        };
        // Last, `dir` itself: the new overlay on top. One it already had stays beneath,
        // covered: nothing reaches it any more (a process in it refused the fork), and
        // taking it down first would show the tree without its writes for a moment.
        if let Err(error) = mount_layered(&this) {
            take_down(&made);
            undo_bind(&bind);
            return Err(error);
        }
        match own {
            Some(index) => state.layered[index] = this,
            None => state.layered.push(this),
        }
        state.binds.extend(bind);
        state.layered.extend(made.iter().cloned());
        self.save(&state)?;
        Ok(Forked {
            lowers,
            branches: fresh(&made),
            copied_because: None,
        })
    }

    /// The fork of a directory a process works in: its copy is the frozen tree beneath the
    /// branches, and the directory is left as it is (not mounted over).
    fn forked_by_copy(
        &self,
        state: &mut State,
        dir: &Path,
        names: &[String],
        paths: &[PathBuf],
        because: String,
    ) -> Result<Forked, BackupError> {
        let number = state.next;
        state.next += 1;
        let base = self.root.join(number.to_string());
        let tree = base.join("copy");
        let index = base.join("copy.index");
        let lowers = vec![tree.clone()];
        let made = crate::frozen_copy::copy_tree(dir, &tree)
            .and_then(|copied| {
                fs::write(&index, copied.encode()?).map_err(|e| BackupError::io(&index, e))
            })
            .and_then(|()| {
                Branches {
                    base: &base,
                    dir,
                    lowers: &lowers,
                    forked_at: crate::restore::now_ms(),
                    received: None,
                }
                .mount(names, paths)
            });
        let made = match made {
            Ok(made) => made,
            Err(error) => {
                let _ = fs::remove_dir_all(&base);
                return Err(error);
            }
        };
        state.copies.push(Copied {
            dir: dir.to_path_buf(),
            tree,
            index,
        });
        state.layered.extend(made.iter().cloned());
        self.save(state)?;
        Ok(Forked {
            lowers,
            branches: fresh(&made),
            copied_because: Some(because),
        })
    }

    /// `layers` (frozen layers, topmost first) shown read-only while the answer lives: what
    /// a fork point sent through the backup store is archived from.
    pub fn show(&self, layers: &[PathBuf]) -> Result<AncestorView, BackupError> {
        AncestorView::show(&self.root, layers)
    }

    /// Records that `archive` was made of `lowers`, the frozen layers [`Forker::freeze`]
    /// made of `dir`: a snapshot built on it in another sandbox can come back here as a
    /// branch of `dir` ([`Forker::receive`]).
    pub fn record_sent(
        &self,
        dir: &Path,
        archive: &Path,
        lowers: Vec<PathBuf>,
    ) -> Result<(), BackupError> {
        let mut state = self.locked()?;
        state.sent.retain(|sent| sent.archive != archive);
        state.sent.push(Sent {
            dir: dir.to_path_buf(),
            archive: archive.to_path_buf(),
            lowers,
        });
        self.save(&state)
    }

    /// Where in `chain` (a snapshot's archives, topmost first) the first one sent from
    /// `dir` as a fork point is: the archives above it are what was done elsewhere.
    pub fn sent_point(&self, dir: &Path, chain: &[PathBuf]) -> Result<usize, BackupError> {
        let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let state = self.locked()?;
        chain
            .iter()
            .position(|archive| {
                state
                    .sent
                    .iter()
                    .any(|sent| sent.dir == dir && &sent.archive == archive)
            })
            .ok_or(BackupError::NotSentFrom(dir))
    }

    /// Branches of `dir` named `names` that show a snapshot made in another sandbox from
    /// the fork point `sent` ([`Forker::record_sent`]): `layers`, that snapshot's archives
    /// above the fork point (topmost first, here as files), mounted read-only over the
    /// frozen layers the fork point was archived from. `dir` is not touched, and a merge
    /// of such a branch back into it reads only what the archives and the two sides' own
    /// layers hold, as for a branch forked here.
    pub fn receive(
        &self,
        dir: &Path,
        names: &[String],
        sent: &Path,
        layers: &[PathBuf],
        driver: Option<Driver>,
    ) -> Result<Vec<Branch>, BackupError> {
        let names = checked_names(names)?;
        let (dir, paths) = branch_paths(dir, &names, driver)?;
        let mut state = self.locked()?;
        let point = state
            .sent
            .iter()
            .find(|point| point.dir == dir && point.archive == sent)
            .cloned()
            .ok_or_else(|| BackupError::NotSentFrom(dir.clone()))?;
        if let Some(gone) = point.lowers.iter().find(|layer| !layer.is_dir()) {
            return Err(BackupError::Layer(format!(
                "the fork point sent as {} is gone here ({} is missing)",
                sent.display(),
                gone.display()
            )));
        }
        // Each archive mounted once, however many branches show it.
        let mounted = mount::mount_table();
        let mut newly: Vec<ArchiveMount> = Vec::new();
        let undo_archives = |newly: &[ArchiveMount]| newly.iter().for_each(ArchiveMount::unmount);
        let mut lowers = Vec::with_capacity(layers.len() + point.lowers.len());
        for file in layers {
            let at = self.root.join(ARCHIVE_MOUNTS).join(path_key(file));
            let shown = state.archives.iter().any(|m| m.at == at && &m.file == file)
                && mounted.iter().any(|m| m.target == at);
            if !shown {
                let archive = ArchiveMount {
                    file: file.clone(),
                    at: at.clone(),
                };
                if let Err(error) = archive.mount() {
                    undo_archives(&newly);
                    return Err(error);
                }
                newly.push(archive);
            }
            lowers.push(at);
        }
        lowers.extend(point.lowers.iter().cloned());
        let number = state.next;
        state.next += 1;
        let base = self.root.join(number.to_string());
        let branches = Branches {
            base: &base,
            dir: &dir,
            lowers: &lowers,
            forked_at: crate::restore::now_ms(),
            received: Some(layers.first().map_or(sent, PathBuf::as_path)),
        };
        let made = match branches.mount(&names, &paths) {
            Ok(made) => made,
            Err(error) => {
                let _ = fs::remove_dir_all(&base);
                undo_archives(&newly);
                return Err(error);
            }
        };
        for archive in newly {
            state.archives.retain(|known| known.at != archive.at);
            state.archives.push(archive);
        }
        state.layered.extend(made.iter().cloned());
        self.save(&state)?;
        Ok(fresh(&made))
    }

    /// Takes down the archives of received branches no overlay shows any more, and removes
    /// the copies no branch stands on and no sent fork point was made of.
    fn release_unused(state: &mut State) {
        let standing = state.standing();
        state.copies.retain(|copied| {
            let used = standing.contains(&copied.tree);
            if !used {
                let _ = fs::remove_dir_all(&copied.tree);
                let _ = fs::remove_file(&copied.index);
            }
            used
        });
        state.archives.retain(|archive| {
            let used = standing.contains(&archive.at);
            if !used {
                archive.unmount();
            }
            used
        });
    }

    /// Every branch, with what it changed.
    pub fn branches(&self) -> Vec<Branch> {
        let Ok(state) = self.state.lock() else {
            return Vec::new();
        };
        state
            .layered
            .iter()
            // The forked directories' own layers are not walked: they are no branch.
            .filter(|layered| layered.branch.is_some())
            .filter_map(|layered| Branch::of(layered, layer_changes(&layered.upper())))
            .collect()
    }

    /// Takes the branch at `path` away with what was written in it. Layers it froze stay
    /// while a branch made from it still shows them. `busy` as for [`Forker::fork`];
    /// `release_mounts` takes away what else is mounted on or in the branch (a restore),
    /// once the branch is known to go and before its overlay comes off.
    pub fn discard(
        &self,
        path: &Path,
        busy: impl Fn(&Path) -> Option<(u32, String)>,
        release_mounts: impl FnOnce(&Path) -> Result<(), BackupError>,
    ) -> Result<Layered, BackupError> {
        let mut state = self.locked()?;
        let index = state
            .layered
            .iter()
            .position(|l| l.path == path && l.branch.is_some())
            .ok_or_else(|| BackupError::NoBranch(path.to_path_buf()))?;
        if let Some((pid, how)) = busy(path) {
            return Err(BackupError::Busy {
                path: path.to_path_buf(),
                pid,
                how,
            });
        }
        release_mounts(path)?;
        // Its overlay, and those its own forks left covered beneath it; the record goes once
        // the branch is no longer mounted (a failed unmount leaves it listed, as it is).
        nix::mount::umount2(path, MntFlags::MNT_DETACH).map_err(|e| BackupError::Unmount {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let layered = state.layered.remove(index);
        while mount::mount_table()
            .iter()
            .any(|m| m.target == path && m.fstype == "overlay")
        {
            if nix::mount::umount2(path, MntFlags::MNT_DETACH).is_err() {
                break;
            }
        }
        let _ = fs::remove_dir(path);
        self.forget_merge_bases(path);
        Self::release_unused(&mut state);
        // Its own layer, and the layers its forks froze before (its history), unless a
        // branch still here or a fork point sent stands on them. A forked directory is never
        // discarded, so what it froze stays.
        let standing = state.standing();
        let own = layered.upper();
        let frozen = layered
            .lowers
            .iter()
            .filter(|lower| lower.starts_with(&self.root) && lower.ends_with("upper"));
        for upper in std::iter::once(&own).chain(frozen) {
            if standing.contains(upper) {
                continue;
            }
            if let Some(layer) = upper.parent()
                && let Err(error) = fs::remove_dir_all(layer)
            {
                tracing::warn!(%error, layer = %layer.display(), "could not remove a discarded branch's layer");
            }
        }
        self.save(&state)?;
        Ok(layered)
    }

    /// What a merge of the branch at `branch` into `into` (by default the directory it was
    /// forked from; or another branch) reads: each side's own layers, what it wrote since
    /// the two last shared a tree, and that tree (their fork point) shown read-only.
    pub fn merge_sides(
        &self,
        branch: &Path,
        into: Option<&Path>,
    ) -> Result<MergeSides, BackupError> {
        let state = self.locked()?;
        let from = state
            .layered
            .iter()
            .find(|l| l.path == branch && l.branch.is_some())
            .ok_or_else(|| BackupError::NoBranch(branch.to_path_buf()))?;
        let into_path = into.unwrap_or(&from.forked_from);
        let to = state.layered.iter().find(|l| l.path == into_path);
        let unrelated = |reason| BackupError::Unrelated {
            branch: from.path.clone(),
            into: into_path.to_path_buf(),
            reason,
        };
        if from.path == into_path {
            return Err(unrelated("a branch is not merged into itself"));
        }
        // A branch of a copy of `into` (forked while a process worked in it): its fork
        // point is the copy, and what `into` changed since is read from the copy's index.
        let copied = from.lowers.last().and_then(|bottom| {
            state
                .copies
                .iter()
                .find(|copied| &copied.tree == bottom && copied.dir == into_path)
        });
        // The frozen layers both stand on: the longest run both lists end with.
        let shared = to.map_or(0, |to| {
            from.lowers
                .iter()
                .rev()
                .zip(to.lowers.iter().rev())
                .take_while(|(a, b)| a == b)
                .count()
        });
        let (shared, into_changed) = match (to, copied) {
            (None, None) => return Err(BackupError::NotForked(into_path.to_path_buf())),
            (_, Some(copied)) if shared == 0 => {
                let index =
                    fs::read(&copied.index).map_err(|e| BackupError::io(&copied.index, e))?;
                let index = crate::index::Index::decode(&index)?;
                (
                    1,
                    Some(crate::frozen_copy::changed_since(&index, into_path)?),
                )
            }
            _ if shared == 0 => return Err(unrelated("they were forked from different trees")),
            _ => (shared, None),
        };
        // A side with a whole restore on it and nothing else mounted is read as it shows:
        // its own layers lie beneath the restore and no longer tell what it changed, so a
        // walk of it against the fork point does (as for a copy, against the copy's index).
        let mut restored = [false, false];
        for (side, under_restore) in [&from.path, into_path].into_iter().zip(&mut restored) {
            let mounted = foreign_mounts(side);
            *under_restore = only_a_restore_on(side, &mounted);
            if !*under_restore {
                refuse_mounts(side, &mounted, "release or unmount it, then merge")?;
            }
        }
        let [branch_restored, into_restored] = restored;
        let own = |layered: &Layered| -> Vec<PathBuf> {
            std::iter::once(layered.upper())
                .chain(
                    layered.lowers[..layered.lowers.len() - shared]
                        .iter()
                        .cloned(),
                )
                .collect()
        };
        let common = &from.lowers[from.lowers.len() - shared..];
        let ancestor = AncestorView::show(&self.root, common)?;
        let walked = |side: &Path| changed_against(ancestor.path(), side);
        let branch_changes = if branch_restored {
            SideChanges::Listed(walked(&from.path)?)
        } else {
            SideChanges::Layers(own(from))
        };
        let into_changes = match (into_changed, to) {
            (Some(listed), _) => SideChanges::Listed(listed),
            (None, _) if into_restored => SideChanges::Listed(walked(into_path)?),
            (None, to) => SideChanges::Layers(to.map(own).unwrap_or_default()),
        };
        let base_file = self.root.join(MERGE_BASES).join(format!(
            "{}-{}.json",
            path_key(&from.path),
            path_key(into_path)
        ));
        Ok(MergeSides {
            branch: from.path.clone(),
            into: into_path.to_path_buf(),
            branch_changes,
            into_changes,
            ancestor,
            base_file,
        })
    }

    /// The merge bases of pairs `path` was a side of.
    fn forget_merge_bases(&self, path: &Path) {
        let key = path_key(path);
        let Ok(bases) = fs::read_dir(self.root.join(MERGE_BASES)) else {
            return;
        };
        for base in bases.flatten() {
            let name = base.file_name().to_string_lossy().into_owned();
            let sides = name.strip_suffix(".json").unwrap_or(&name);
            if sides.split('-').any(|side| side == key) {
                let _ = fs::remove_file(base.path());
            }
        }
    }

    fn locked(&self) -> Result<std::sync::MutexGuard<'_, State>, BackupError> {
        self.state
            .lock()
            .map_err(|_| BackupError::Layer("fork state poisoned".into()))
    }

    fn save(&self, state: &State) -> Result<(), BackupError> {
        let file = self.root.join(STATE_FILE);
        let bytes = serde_json::to_vec_pretty(state)
            .map_err(|e| BackupError::Layer(format!("fork state: {e}")))?;
        let temp = self.root.join(format!("{STATE_FILE}.tmp"));
        fs::write(&temp, bytes).map_err(|e| BackupError::io(&temp, e))?;
        fs::rename(&temp, &file).map_err(|e| BackupError::io(&file, e))
    }
}

/// Branches of `dir` to make, each an overlay of a layer of its own (under `base`) over
/// `lowers`.
struct Branches<'a> {
    base: &'a Path,
    dir: &'a Path,
    lowers: &'a [PathBuf],
    forked_at: u64,
    received: Option<&'a Path>,
}

impl Branches<'_> {
    /// Each of `names` at its path of `paths`: all mounted, or none (what was made is
    /// taken away again).
    fn mount(&self, names: &[String], paths: &[PathBuf]) -> Result<Vec<Layered>, BackupError> {
        let mut made: Vec<Layered> = Vec::new();
        for (name, path) in names.iter().zip(paths) {
            // Beneath `branches/`: a branch may be named anything a name allows, `self`
            // and `tree` too.
            let layer = self.base.join("branches").join(name);
            let branch = Layered {
                path: path.clone(),
                branch: Some(name.clone()),
                forked_from: self.dir.to_path_buf(),
                lowers: self.lowers.to_vec(),
                layer: layer.clone(),
                forked_at: self.forked_at,
                received: self.received.map(Path::to_path_buf),
            };
            let result = make_layer(&layer)
                .and_then(|_| fs::create_dir(path).map_err(|e| BackupError::io(path, e)))
                .and_then(|()| {
                    mount_layered(&branch).inspect_err(|_| {
                        let _ = fs::remove_dir(path);
                    })
                });
            if let Err(error) = result {
                take_down(&made);
                return Err(error);
            }
            made.push(branch);
        }
        Ok(made)
    }
}

/// A new overlay layer at `layer` (its `upper` and `work`); answers it.
fn make_layer(layer: &Path) -> Result<PathBuf, BackupError> {
    for sub in ["upper", "work"] {
        fs::create_dir_all(layer.join(sub)).map_err(|e| BackupError::io(layer, e))?;
    }
    Ok(layer.to_path_buf())
}

/// Unmounts branches just made and removes their directories.
fn take_down(made: &[Layered]) {
    for layered in made {
        let _ = nix::mount::umount2(&layered.path, MntFlags::MNT_DETACH);
        let _ = fs::remove_dir(&layered.path);
    }
}

/// Branches just made, as listed: nothing written in them yet.
fn fresh(made: &[Layered]) -> Vec<Branch> {
    made.iter()
        .filter_map(|layered| Branch::of(layered, (0, 0, 0)))
        .collect()
}

/// `dir` as the mounts name it (a directory named through a link is forked where it is,
/// and found there at the next start) and where each of `names`'s branches goes beside it,
/// none of them taken; refused without kernel overlayfs.
fn branch_paths(
    dir: &Path,
    names: &[String],
    driver: Option<Driver>,
) -> Result<(PathBuf, Vec<PathBuf>), BackupError> {
    if driver != Some(Driver::Kernel) {
        return Err(BackupError::Mount {
            what: "fork",
            reason: "forks need kernel overlayfs (root, the overlay filesystem); this \
                     machine has none"
                .into(),
        });
    }
    if !dir.is_dir() {
        return Err(BackupError::NotADirectory(dir.to_path_buf()));
    }
    let dir = fs::canonicalize(dir).map_err(|e| BackupError::io(dir, e))?;
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let dir_name = dir
        .file_name()
        .ok_or_else(|| BackupError::NotADirectory(dir.clone()))?
        .to_string_lossy()
        .into_owned();
    let paths: Vec<PathBuf> = names
        .iter()
        .map(|name| parent.join(format!("{dir_name}@{name}")))
        .collect();
    if let Some(taken) = paths.iter().find(|path| path.symlink_metadata().is_ok()) {
        return Err(BackupError::BranchExists(taken.clone()));
    }
    Ok((dir, paths))
}

/// Branch names: given, distinct, one path component of letters, digits, `-`, `_`, `.`.
fn checked_names(names: &[String]) -> Result<Vec<String>, BackupError> {
    if names.is_empty() {
        return Err(BackupError::BranchName(
            "at least one branch is needed".into(),
        ));
    }
    let mut seen = BTreeSet::new();
    for name in names {
        let fine = !name.is_empty()
            && name.len() <= 64
            && name != "."
            && name != ".."
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !fine {
            return Err(BackupError::BranchName(format!(
                "{name:?} is not a branch name (1-64 of letters, digits, '-', '_', '.')"
            )));
        }
        if !seen.insert(name) {
            return Err(BackupError::BranchName(format!("{name:?} is named twice")));
        }
    }
    Ok(names.to_vec())
}

/// The mounts at or below `dir` other than its own fork overlay.
fn foreign_mounts(dir: &Path) -> Vec<mount::MountEntry> {
    mount::mount_table()
        .into_iter()
        .filter(|m| m.target.starts_with(dir) && !(m.target == dir && m.source == FORK_SOURCE))
        .collect()
}

/// Whether `mounted` (at or below `dir`) is a whole restore's overlay on `dir` itself and
/// nothing else: a tree that a copy reads whole, as `dir` shows it.
fn only_a_restore_on(dir: &Path, mounted: &[mount::MountEntry]) -> bool {
    !mounted.is_empty()
        && mounted
            .iter()
            .all(|m| m.target == dir && mount::is_restore(&m.source))
}

/// A directory with a mount on it or beneath it that is not one of the forks' own (a
/// bucket, a restore beneath it) is neither forked nor merged: the bind would not carry what
/// those show, their writes would not be frozen, and no fork layer records what they changed.
fn refuse_mounts(
    dir: &Path,
    mounted: &[mount::MountEntry],
    advice: &'static str,
) -> Result<(), BackupError> {
    match mounted.first() {
        Some(m) => Err(BackupError::MountedIn {
            path: dir.to_path_buf(),
            mount: m.target.clone(),
            fstype: m.fstype.clone(),
            advice,
        }),
        None => Ok(()),
    }
}

fn bind_privately(source: &Path, at: &Path) -> Result<(), BackupError> {
    let fail = |e: nix::Error| BackupError::Mount {
        what: "fork's frozen tree",
        reason: e.to_string(),
    };
    nix::mount::mount(
        Some(source),
        at,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(fail)?;
    // Private, so the overlay mounted on `source` next does not show up on the bind too.
    nix::mount::mount(
        None::<&str>,
        at,
        None::<&str>,
        MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| {
        let _ = nix::mount::umount2(at, MntFlags::MNT_DETACH);
        fail(e)
    })
}

fn mount_layered(layered: &Layered) -> Result<(), BackupError> {
    mount::mount_overlay(
        &layered.lowers,
        &layered.upper(),
        &layered.work(),
        &layered.path,
        FORK_SOURCE,
        Driver::Kernel,
        None,
    )
    .map(drop)
}

/// What an overlay's upper layer says: paths written, paths deleted (whiteouts: character
/// devices 0/0) and bytes held.
fn layer_changes(upper: &Path) -> (u64, u64, u64) {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let (mut changed, mut deleted, mut bytes) = (0, 0, 0);
    let mut stack = vec![upper.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.file_type().is_char_device() && meta.rdev() == 0 {
                deleted += 1;
                continue;
            }
            bytes += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                changed += 1;
            }
        }
    }
    (changed, deleted, bytes)
}

/// The two sides of a merge and their fork point (see [`Forker::merge_sides`]).
pub struct MergeSides {
    /// Where the branch merged and the overlay merged into are mounted.
    pub branch: PathBuf,
    pub into: PathBuf,
    /// What each side changed since the fork point.
    pub branch_changes: SideChanges,
    pub into_changes: SideChanges,
    pub ancestor: AncestorView,
    /// Where the merge base of this pair is kept once the branch has been merged into
    /// `into`: what the branch held at the paths that merge took in, which stand for the
    /// fork point there at the next merge (the caller writes and reads it; a discard of
    /// either removes it).
    pub base_file: PathBuf,
}

/// Where a merge learns what a side changed since the fork point.
pub enum SideChanges {
    /// Its own layers above the fork point, topmost first (see [`changed_paths`]).
    Layers(Vec<PathBuf>),
    /// Listed by comparing it with the index of a fork point copied from it (see
    /// [`crate::frozen_copy::changed_since`]), which it has no layers of its own above, or
    /// by a walk against the fork point when a whole restore covers its layers.
    Listed(BTreeSet<String>),
}

/// The paths (relative, `/` between names) where `side` as it shows now differs from
/// `ancestor` (the fork point, shown), by a walk of both as a snapshot reads a tree (see
/// [`crate::incremental::difference`]: a restored file is not changed for its new inode).
/// A path that only looks changed costs the merge a read: it compares contents.
fn changed_against(ancestor: &Path, side: &Path) -> Result<BTreeSet<String>, BackupError> {
    use crate::incremental::{Difference, difference, scan_index};
    let options = crate::ArchiveOptions::default();
    let (was, is) = (scan_index(ancestor, &options)?, scan_index(side, &options)?);
    let relative = |path: PathBuf| path.to_string_lossy().into_owned();
    let mut changed = BTreeSet::new();
    for found in difference(&was, &is) {
        match found {
            Difference::Created(path) | Difference::Modified(path) | Difference::Deleted(path) => {
                changed.insert(relative(path));
            }
            Difference::Renamed { from, to } => {
                changed.insert(relative(from));
                changed.insert(relative(to));
            }
        }
    }
    Ok(changed)
}

/// The tree a branch and what it merges into were both forked from, read-only: the one
/// frozen directory, or a read-only overlay of the frozen layers shown while this lives.
pub struct AncestorView {
    path: PathBuf,
    mounted: bool,
}

impl AncestorView {
    fn show(root: &Path, layers: &[PathBuf]) -> Result<AncestorView, BackupError> {
        if let [tree] = layers {
            return Ok(AncestorView {
                path: tree.clone(),
                mounted: false,
            });
        }
        use std::sync::atomic::{AtomicU64, Ordering};
        static SHOWN: AtomicU64 = AtomicU64::new(0);
        let at = root.join(MERGE_VIEWS).join(format!(
            "{}-{}",
            std::process::id(),
            SHOWN.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&at).map_err(|e| BackupError::io(&at, e))?;
        let lowerdir = mount::lowerdir(layers);
        // No upper: read-only. Directories renamed in a frozen layer are followed.
        let mounted = ["redirect_dir=follow", ""].iter().any(|extra| {
            let mut data = format!("lowerdir={lowerdir}");
            if !extra.is_empty() {
                data = format!("{data},{extra}");
            }
            nix::mount::mount(
                Some(FORK_SOURCE),
                &at,
                Some("overlay"),
                MsFlags::MS_RDONLY,
                Some(data.as_str()),
            )
            .is_ok()
        });
        if !mounted {
            let _ = fs::remove_dir(&at);
            return Err(BackupError::Mount {
                what: "a merge's fork point",
                reason: format!("overlayfs refused lowerdir={lowerdir}"),
            });
        }
        Ok(AncestorView {
            path: at,
            mounted: true,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for AncestorView {
    fn drop(&mut self) {
        if self.mounted {
            let _ = nix::mount::umount2(&self.path, MntFlags::MNT_DETACH);
            let _ = fs::remove_dir(&self.path);
        }
    }
}

/// The paths (relative, `/` between names) that `layers` (a side's own upper layers) show
/// changed against `ancestor` (the fork point, mounted): each file, link and whiteout in
/// them, and each directory that is new, replaced (opaque), renamed (a redirect) or of
/// another mode there; a directory only passed through is not itself a change (a path
/// under another one changed may be named too). A merge reads what a changed directory
/// holds from the views, not from the layers.
pub fn changed_paths(layers: &[PathBuf], ancestor: &Path) -> BTreeSet<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut changed = BTreeSet::new();
    for layer in layers {
        let mut stack = vec![(layer.clone(), String::new())];
        while let Some((dir, relative)) = stack.pop() {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = if relative.is_empty() {
                    name
                } else {
                    format!("{relative}/{name}")
                };
                let Ok(meta) = entry.metadata() else { continue };
                if !meta.is_dir() || changed.contains(&path) {
                    changed.insert(path);
                    continue;
                }
                let at = entry.path();
                let replaced = crate::layer::replaces_lower(&at);
                let before = fs::symlink_metadata(ancestor.join(&path)).ok();
                let same_dir = before.is_some_and(|before| {
                    before.is_dir()
                        && before.permissions().mode() & 0o7777
                            == meta.permissions().mode() & 0o7777
                });
                if replaced || !same_dir {
                    changed.insert(path);
                } else {
                    stack.push((at, path));
                }
            }
        }
    }
    changed
}
