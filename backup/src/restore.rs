//! Copy-on-write restores: archives mounted read-only as lower layers, a fresh upper, an
//! overlay on the target directory. The state of each restore is kept beside its mounts, so
//! a restarted daemon adopts live restores. A stopping daemon takes its restores down but
//! keeps their upper layers (the user's writes), and the next start mounts them again; only
//! a release (or a restore over the same directory) discards what was written.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use fsd_search::Within;
use serde::{Deserialize, Serialize};

use crate::BackupError;
use crate::mount::{self, Driver, OVERLAY_SOURCE};

const STATE_FILE: &str = "restore.json";

/// One active restore.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Restore {
    /// The directory the overlay is mounted on.
    pub dir: PathBuf,
    /// The archives mounted as lower layers, topmost first (one unless it is a layer chain).
    pub archives: Vec<PathBuf>,
    /// Where its lower, upper and work directories live.
    pub base: PathBuf,
    pub driver: Driver,
    /// Unix milliseconds.
    pub mounted_at: u64,
}

impl Restore {
    pub fn lowers(&self) -> Vec<PathBuf> {
        (0..self.archives.len())
            .map(|i| self.base.join(format!("lower{i}")))
            .collect()
    }

    /// The restore's own link to archive `i` (made where the archives and the state share a
    /// filesystem): what it mounts again at a start, so that an archive removed or replaced
    /// under its name meanwhile (a cleanup of `/var/backups`, a new archive at the path)
    /// does not take the restore, and the writes on it, out of view.
    pub fn held(&self, i: usize) -> PathBuf {
        self.base.join(format!("archive{i}.sqsh"))
    }

    pub fn upper(&self) -> PathBuf {
        self.base.join("upper")
    }

    fn work(&self) -> PathBuf {
        self.base.join("work")
    }
}

/// Owns the restore mounts of one daemon.
pub struct Restorer {
    root: PathBuf,
    driver: Option<Driver>,
    active: Mutex<BTreeMap<PathBuf, Restore>>,
    /// `--confine`: restores are attached to and detached from directories opened beneath
    /// the roots (see [`mount::mount_overlay`]).
    within: Option<Arc<Within>>,
    /// Overlays attached by descriptor, by directory: released by their root, wherever
    /// the directory has moved since.
    attached: Mutex<BTreeMap<PathBuf, fsd_search::Attached>>,
    /// Restores a stop took down, found at start: [`Restorer::resume`] mounts them again.
    parked: Mutex<Vec<Restore>>,
}

/// What became of a restore a stop took down, when the daemon started again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resumed {
    /// Mounted again on its directory with everything written to it.
    Mounted(Restore),
    /// Could not be mounted again (its archive is gone, a mount failed): its writes are
    /// kept in `upper` and nothing else is done with them.
    Kept { restore: Restore, reason: String },
}

impl Restorer {
    /// Keeps mount state under `root`; adopts restores whose overlay is still mounted and
    /// releases what a crash left behind. `preferred` forces a driver (if this machine has
    /// it); `None` takes the kernel when allowed, else FUSE.
    pub fn new(root: &Path, preferred: Option<Driver>) -> Result<Restorer, BackupError> {
        fs::create_dir_all(root).map_err(|e| BackupError::io(root, e))?;
        let (kernel, fuse) = (mount::kernel_available(), mount::fuse_available());
        let driver = match preferred {
            Some(Driver::Kernel) => kernel.then_some(Driver::Kernel),
            Some(Driver::Fuse) => fuse.then_some(Driver::Fuse),
            None if kernel => Some(Driver::Kernel),
            None => fuse.then_some(Driver::Fuse),
        };
        let mounted = mount::mounts();
        let mut active = BTreeMap::new();
        let mut parked = Vec::new();
        let entries = fs::read_dir(root).map_err(|e| BackupError::io(root, e))?;
        for entry in entries.flatten() {
            let base = entry.path();
            let state = fs::read(base.join(STATE_FILE))
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Restore>(&bytes).ok());
            match state {
                Some(restore)
                    if overlay_mounted(&mounted, &restore.dir) && restore.base == base =>
                {
                    tracing::info!(dir = %restore.dir.display(), "adopted a live restore");
                    active.insert(restore.dir.clone(), restore);
                }
                // Taken down by a stop (or lost with the machine's mounts): its writes are
                // in its upper layer, to be mounted again.
                Some(restore) if restore.base == base && restore.upper().is_dir() => {
                    unmount_below(&base, restore.driver, &mounted);
                    parked.push(restore);
                }
                state => {
                    let driver = state.map(|s| s.driver).or(driver).unwrap_or(Driver::Kernel);
                    teardown(&base, driver, &mounted);
                }
            }
        }
        Ok(Restorer {
            root: root.to_path_buf(),
            driver,
            active: Mutex::new(active),
            within: None,
            attached: Mutex::default(),
            parked: Mutex::new(parked),
        })
    }

    /// The mount driver in use, if this machine can mount at all.
    pub fn driver(&self) -> Option<Driver> {
        self.driver
    }

    /// Active restores, by directory.
    pub fn list(&self) -> Vec<Restore> {
        self.active
            .lock()
            .map(|a| a.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Detaches the overlay on `dir`: by its root when it was attached by descriptor (it
    /// may have moved with its directory), else at the path.
    fn detach_from(&self, dir: &Path, driver: Driver) -> Result<(), BackupError> {
        let mut attached = self
            .attached
            .lock()
            .map_err(|_| BackupError::Layer("restore state poisoned".into()))?;
        match attached.get(dir) {
            Some(root) => {
                root.detach().map_err(|e| BackupError::io(dir, e))?;
                attached.remove(dir);
                Ok(())
            }
            None => mount::unmount(dir, driver, self.within.as_deref()),
        }
    }

    /// Mounts `restore`'s overlay (its archives already mounted) on its directory, and
    /// keeps the root when it was attached by descriptor.
    fn attach(&self, restore: &Restore) -> Result<(), BackupError> {
        let attached = mount::mount_overlay(
            &restore.lowers(),
            &restore.upper(),
            &restore.work(),
            &restore.dir,
            OVERLAY_SOURCE,
            restore.driver,
            self.within.as_deref(),
        )?;
        self.keep(&restore.dir, attached);
        Ok(())
    }

    /// Keeps the root of an overlay attached by descriptor on `dir`.
    fn keep(&self, dir: &Path, attached: Option<fsd_search::Attached>) {
        if let (Some(attached), Ok(mut kept)) = (attached, self.attached.lock()) {
            kept.insert(dir.to_path_buf(), attached);
        }
    }

    /// Confines where restores are attached and released to `within`'s roots.
    pub fn confined(mut self, within: Option<Arc<Within>>) -> Self {
        self.within = within;
        self
    }

    /// The active restore on `dir`, if any.
    pub fn get(&self, dir: &Path) -> Option<Restore> {
        self.active.lock().ok()?.get(dir).cloned()
    }

    /// Restores `archives` (topmost first) onto `dir`. Replaces a restore already on `dir`
    /// (its writes are discarded, its mounts released). On failure `dir` is left as it was.
    pub fn restore(&self, dir: &Path, archives: &[PathBuf]) -> Result<Restore, BackupError> {
        archives_present(archives)?;
        let driver = self.driver.ok_or_else(|| BackupError::Mount {
            what: "restore",
            reason: "this machine allows neither kernel squashfs+overlay mounts (needs root, \
                     /dev/loop-control) nor FUSE (squashfuse, fuse-overlayfs, /dev/fuse)"
                .into(),
        })?;
        let mut active = self
            .active
            .lock()
            .map_err(|_| BackupError::Layer("restore state poisoned".into()))?;
        let restore = Restore {
            dir: dir.to_path_buf(),
            archives: archives.to_vec(),
            base: self.root.join(base_name(&archives[0])),
            driver,
            mounted_at: now_ms(),
        };
        prepare(&restore).inspect_err(|_| teardown(&restore.base, driver, &mount::mounts()))?;
        let previous = active.remove(dir);
        if let Some(previous) = &previous
            && let Err(error) = self.detach_from(dir, previous.driver)
        {
            active.insert(dir.to_path_buf(), previous.clone());
            teardown(&restore.base, driver, &mount::mounts());
            return Err(error);
        }
        if let Err(error) = self.attach(&restore) {
            if let Some(previous) = previous {
                match self.attach(&previous) {
                    Ok(()) => {
                        active.insert(dir.to_path_buf(), previous);
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "could not put the previous restore back")
                    }
                }
            }
            teardown(&restore.base, driver, &mount::mounts());
            return Err(error);
        }
        if let Ok(json) = serde_json::to_vec_pretty(&restore) {
            let _ = fs::write(restore.base.join(STATE_FILE), json);
        }
        active.insert(dir.to_path_buf(), restore.clone());
        drop(active);
        if let Some(previous) = previous {
            teardown(&previous.base, previous.driver, &mount::mounts());
        }
        Ok(restore)
    }

    /// Releases the restore on `dir`: the overlay comes off (the directory shows what it held
    /// before) and the archive mounts go.
    pub fn release(&self, dir: &Path) -> Result<Restore, BackupError> {
        let mut active = self
            .active
            .lock()
            .map_err(|_| BackupError::Layer("restore state poisoned".into()))?;
        let restore = active
            .remove(dir)
            .ok_or_else(|| BackupError::NotMounted(dir.to_path_buf()))?;
        if let Err(error) = self.detach_from(dir, restore.driver) {
            active.insert(dir.to_path_buf(), restore);
            return Err(error);
        }
        drop(active);
        teardown(&restore.base, restore.driver, &mount::mounts());
        Ok(restore)
    }

    /// Mounts again the restores a stop took down (call once the restorer is confined):
    /// each on its directory with its archives and the upper layer holding what was
    /// written. One that cannot be is left as it is, its writes kept.
    pub fn resume(&self) -> Vec<Resumed> {
        let parked = std::mem::take(&mut *self.parked.lock().unwrap_or_else(|p| p.into_inner()));
        parked
            .into_iter()
            .map(|restore| match self.remount(&restore) {
                Ok(()) => Resumed::Mounted(restore),
                Err(error) => Resumed::Kept {
                    reason: error.to_string(),
                    restore,
                },
            })
            .collect()
    }

    fn remount(&self, restore: &Restore) -> Result<(), BackupError> {
        // Restores made before their archives were linked, or where a link could not be
        // made, mount by name.
        if (0..restore.archives.len()).any(|i| !restore.held(i).is_file()) {
            archives_present(&restore.archives)?;
        }
        if self.driver != Some(restore.driver) {
            return Err(BackupError::Mount {
                what: "restore",
                reason: format!(
                    "it was mounted with {}, which this daemon does not use",
                    restore.driver.as_str()
                ),
            });
        }
        let mut active = self
            .active
            .lock()
            .map_err(|_| BackupError::Layer("restore state poisoned".into()))?;
        if active.contains_key(&restore.dir) {
            return Err(BackupError::Mount {
                what: "restore",
                reason: "another restore is on its directory".into(),
            });
        }
        if let Err(error) = prepare(restore).and_then(|()| self.attach(restore)) {
            unmount_below(&restore.base, restore.driver, &mount::mounts());
            return Err(error);
        }
        active.insert(restore.dir.clone(), restore.clone());
        Ok(())
    }

    /// Takes every restore down for a stop, keeping what was written to it: the overlay
    /// comes off its directory and the archives are unmounted, but the upper layer and the
    /// restore's state stay, so the next start mounts it again ([`Restorer::resume`]).
    /// Returns the restores taken down.
    pub fn park_all(&self) -> Vec<Restore> {
        let mut parked = Vec::new();
        for restore in self.list() {
            let Ok(mut active) = self.active.lock() else {
                break;
            };
            if let Err(error) = self.detach_from(&restore.dir, restore.driver) {
                tracing::warn!(dir = %restore.dir.display(), %error, "could not take a restore down; it stays mounted");
                continue;
            }
            active.remove(&restore.dir);
            drop(active);
            unmount_below(&restore.base, restore.driver, &mount::mounts());
            parked.push(restore);
        }
        parked
    }
}

/// Every archive is a file; else the first missing one.
fn archives_present(archives: &[PathBuf]) -> Result<(), BackupError> {
    match archives.iter().find(|archive| !archive.is_file()) {
        Some(missing) => Err(BackupError::ArchiveMissing(missing.clone())),
        None => Ok(()),
    }
}

/// Creates the restore's directories and mounts its archives; nothing touches `dir` yet.
fn prepare(restore: &Restore) -> Result<(), BackupError> {
    for path in [restore.upper(), restore.work()]
        .into_iter()
        .chain(restore.lowers())
    {
        fs::create_dir_all(&path).map_err(|e| BackupError::io(&path, e))?;
    }
    fs::create_dir_all(&restore.dir).map_err(|e| BackupError::io(&restore.dir, e))?;
    for (i, (archive, lower)) in restore.archives.iter().zip(restore.lowers()).enumerate() {
        // Linked when the restore is made (mounted by the name it was given, which its
        // errors name); mounted again from the link after.
        let held = restore.held(i);
        let source = if held.is_file() {
            &held
        } else {
            if let Err(error) = fs::hard_link(archive, &held) {
                tracing::debug!(archive = %archive.display(), %error, "a restore mounts its archive by name");
            }
            archive
        };
        mount::mount_squashfs(source, &lower, restore.driver)?;
    }
    Ok(())
}

/// Unmounts whatever is mounted under `base` and removes it.
fn teardown(base: &Path, driver: Driver, mounted: &[(PathBuf, String)]) {
    unmount_below(base, driver, mounted);
    if let Err(error) = fs::remove_dir_all(base)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(base = %base.display(), %error, "could not remove restore directory");
    }
}

/// Unmounts whatever is mounted under `base` (its archives), deepest first.
fn unmount_below(base: &Path, driver: Driver, mounted: &[(PathBuf, String)]) {
    let mut below: Vec<&PathBuf> = mounted
        .iter()
        .map(|(target, _)| target)
        .filter(|t| t.starts_with(base))
        .collect();
    below.sort_by(|a, b| b.cmp(a));
    below.dedup();
    for target in below {
        if let Err(error) = mount::unmount(target, driver, None) {
            tracing::warn!(%error, "leftover mount");
        }
    }
}

fn overlay_mounted(mounted: &[(PathBuf, String)], dir: &Path) -> bool {
    mounted
        .iter()
        .any(|(target, source)| target == dir && mount::is_restore(source))
}

/// `<archive stem>_<ms>_<6 hex>`, as the reference names its mount bases.
fn base_name(archive: &Path) -> String {
    let stem = archive
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let salt = (nanos ^ std::process::id().rotate_left(20)) & 0xff_ffff;
    format!("{stem}_{}_{salt:06x}", now_ms())
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
