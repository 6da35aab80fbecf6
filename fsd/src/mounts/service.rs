//! Owns the daemon's bucket mounts: one operation at a time (as the reference queues them),
//! a record on disk of the directories fsd made, so a crashed run's mounts are detached
//! and its directories removed at the next start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fsd_api::mounts::BucketMountInfo;
use fsd_mounts::mount::{SOURCE_PREFIX, release_dead};
use fsd_mounts::{BucketMount, MountError, MountSpec};
use fsd_search::Within;
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use super::validate::MountPlan;

#[derive(Debug, thiserror::Error)]
pub enum MountServiceError {
    #[error("{0} is already a mount point")]
    AlreadyMounted(PathBuf),
    #[error("{0} exists and is not a directory")]
    NotADirectory(PathBuf),
    #[error("no bucket is mounted at {0}")]
    NotMounted(PathBuf),
    #[error("cannot create {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Mount(#[from] MountError),
}

struct Active {
    mount: BucketMount,
    info: BucketMountInfo,
}

/// The record's file in the state directory.
const RECORD_FILE: &str = "bucket-mounts.json";

/// What must be cleaned up if the daemon dies with mounts up.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    mounted: Vec<PathBuf>,
    /// Mount directories fsd created.
    created: Vec<PathBuf>,
}

pub struct MountService {
    active: Mutex<BTreeMap<PathBuf, Active>>,
    record_path: PathBuf,
    spill_root: PathBuf,
    /// `--confine`: mount directories are made, and buckets attached, beneath these roots
    /// by descriptor.
    within: Option<Arc<Within>>,
}

impl MountService {
    /// Removes the directories a previous run made for its mounts (see
    /// [`MountService::release_stale`], which took the mounts away first). `within`
    /// (`--confine`): mount directories are made and removed, and buckets attached, beneath
    /// its roots by descriptor.
    pub fn new(state_dir: &Path, within: Option<Arc<Within>>) -> MountService {
        let service = MountService {
            active: Mutex::new(BTreeMap::new()),
            record_path: state_dir.join(RECORD_FILE),
            spill_root: state_dir.join("bucket-spill"),
            within,
        };
        service.recover();
        service
    }

    /// Takes away the bucket mounts an earlier run of `state_dir` left (see
    /// [`release_dead`]), before the daemon binds its address: that run, killed while one
    /// of its own threads waited on its own mount, may still be there, holding the mount
    /// and its listening socket, until the mount's connection ends. Answers how many there
    /// were.
    pub fn release_stale(state_dir: &Path) -> usize {
        let record = read_record(&state_dir.join(RECORD_FILE));
        // Only this state directory's mounts: another daemon's live mounts are not ours.
        let stale: Vec<PathBuf> = if record.mounted.is_empty() {
            Vec::new()
        } else {
            fsd_backup::mount::mount_table()
                .into_iter()
                .filter(|entry| is_bucket_mount(entry) && record.mounted.contains(&entry.target))
                .map(|entry| entry.target)
                .collect()
        };
        for path in &stale {
            match release_dead(path) {
                Ok(()) => {
                    tracing::warn!(path = %path.display(), "took away a bucket mount left by an earlier run")
                }
                Err(error) => {
                    tracing::error!(path = %path.display(), %error, "cannot take away a stale bucket mount")
                }
            }
        }
        stale.len()
    }

    fn recover(&self) {
        let record = read_record(&self.record_path);
        for dir in record.created {
            // Only an empty directory goes: whatever else is there is not ours to delete.
            self.remove_made_dir(&dir);
        }
        let _ = std::fs::remove_dir_all(&self.spill_root);
        self.write_record(&BTreeMap::new());
    }

    fn write_record(&self, active: &BTreeMap<PathBuf, Active>) {
        let record = Record {
            mounted: active.keys().cloned().collect(),
            created: active
                .iter()
                .filter(|(_, a)| a.info.created_dir)
                .map(|(path, _)| path.clone())
                .collect(),
        };
        let Ok(bytes) = serde_json::to_vec_pretty(&record) else {
            return;
        };
        if let Err(error) = crate::files::atomic::write_bytes(&self.record_path, &bytes, None) {
            tracing::warn!(?error, "cannot save the bucket mount record");
        }
    }

    pub async fn mount(&self, plan: MountPlan) -> Result<BucketMountInfo, MountServiceError> {
        let mut active = self.active.lock().await;
        let path = plan.mount_path.clone();
        if active.contains_key(&path) || is_mount_point(&path) {
            return Err(MountServiceError::AlreadyMounted(path));
        }
        let created_dir = match self.existing_dir(&path) {
            Ok(meta) if meta.is_dir() => false,
            Ok(_) => return Err(MountServiceError::NotADirectory(path)),
            Err(_) => {
                let made = match &self.within {
                    Some(within) => within.create_dir_all(&path).map(drop).map_err(Into::into),
                    None => std::fs::create_dir_all(&path),
                };
                made.map_err(|source| MountServiceError::CreateDir {
                    path: path.clone(),
                    source,
                })?;
                true
            }
        };
        let via_proxy = plan.credentials.is_none();
        let spec = MountSpec {
            endpoint: plan.endpoint.clone(),
            bucket: plan.bucket.clone(),
            prefix: plan.prefix.clone(),
            read_only: plan.read_only,
            credentials: plan.credentials,
            cache_ttl: Duration::from_millis(plan.cache_ttl_ms),
            uid: 0,
            gid: 0,
            spill_dir: self.spill_root.join(spill_name(&path)),
        };
        let mount = match BucketMount::mount(&spec, &path, self.within.clone()).await {
            Ok(mount) => {
                // Lookups beneath it are made off the workers from the next request on.
                crate::paths::refresh_mount_table();
                mount
            }
            Err(error) => {
                if created_dir {
                    self.remove_made_dir(&path);
                }
                return Err(error.into());
            }
        };
        let info = BucketMountInfo {
            mount_path: path.display().to_string(),
            bucket: plan.bucket,
            prefix: plan.prefix,
            read_only: plan.read_only,
            endpoint: plan.endpoint,
            provider: plan.provider,
            via_proxy,
            created_dir,
            mounted_at: crate::time::now_rfc3339(),
        };
        active.insert(
            path,
            Active {
                mount,
                info: info.clone(),
            },
        );
        self.write_record(&active);
        Ok(info)
    }

    /// Removes a mount directory fsd made, if empty; confined, by its name beneath its
    /// parent's descriptor. Answers whether it went.
    fn remove_made_dir(&self, path: &Path) -> bool {
        match &self.within {
            Some(within) => within.remove_dir(path).is_ok(),
            None => std::fs::remove_dir(path).is_ok(),
        }
    }

    /// Whether a bucket is mounted at `path` (as named when mounted).
    pub async fn is_mounted(&self, path: &Path) -> bool {
        self.active.lock().await.contains_key(path)
    }

    /// What `path` is (links followed); confined, opened beneath the roots.
    fn existing_dir(&self, path: &Path) -> std::io::Result<std::fs::Metadata> {
        match &self.within {
            Some(within) => Ok(within.metadata(path)?),
            None => std::fs::metadata(path),
        }
    }

    /// Unmounts `path`; returns whether the directory was removed.
    pub async fn unmount(&self, path: &Path) -> Result<bool, MountServiceError> {
        let mut active = self.active.lock().await;
        let Some(entry) = active.remove(path) else {
            return Err(MountServiceError::NotMounted(path.to_path_buf()));
        };
        let created_dir = entry.info.created_dir;
        let mut mount = entry.mount;
        // Busy a moment (the daemon's own reads through it: a watch's listing, an archive
        // being written, a download, a file just replaced through it and not yet let go of by
        // the files' releaser) is tried again for a second before it is an answer.
        let mut tries = 0;
        loop {
            match mount.unmount().await {
                Ok(()) => break,
                Err((error, still)) if error.is_busy() && tries < 10 => {
                    tries += 1;
                    mount = still;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err((error, still)) => {
                    // Still mounted (busy): keep it listed, so it can be unmounted later.
                    active.insert(
                        path.to_path_buf(),
                        Active {
                            mount: still,
                            info: entry.info,
                        },
                    );
                    return Err(error.into());
                }
            }
        }
        let removed = created_dir && self.remove_made_dir(path);
        self.write_record(&active);
        Ok(removed)
    }

    pub async fn list(&self) -> Vec<BucketMountInfo> {
        self.active
            .lock()
            .await
            .values()
            .map(|a| a.info.clone())
            .collect()
    }

    /// At shutdown: every mount goes (detached if busy), and the directories fsd made.
    pub async fn release_all(&self) {
        let mut active = self.active.lock().await;
        for (path, entry) in std::mem::take(&mut *active) {
            if let Err((error, mount)) = entry.mount.unmount().await {
                tracing::warn!(path = %path.display(), %error, "busy at shutdown: detaching");
                drop(mount);
            }
            if entry.info.created_dir {
                self.remove_made_dir(&path);
            }
        }
        self.write_record(&active);
    }
}

/// A directory name for `path`'s spill files.
fn spill_name(path: &Path) -> String {
    path.display()
        .to_string()
        .trim_start_matches('/')
        .replace('/', "_")
}

/// What a state directory's record of its mounts says, or nothing.
fn read_record(path: &Path) -> Record {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

fn is_bucket_mount(entry: &fsd_backup::mount::MountEntry) -> bool {
    entry.fstype.starts_with("fuse") && entry.source.starts_with(SOURCE_PREFIX)
}

fn is_mount_point(path: &Path) -> bool {
    fsd_backup::mount::mount_table()
        .iter()
        .any(|entry| entry.target == path)
}
