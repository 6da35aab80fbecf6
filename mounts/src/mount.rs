//! Mounting a bucket: check the store answers, then serve [`BucketFs`] at a directory
//! until unmounted.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fsd_s3::{ClientError, ObjectClient, ObjectStore, Upstream};
use fsd_search::{Attached, NotUnmounted, Within};
use fuser::{Config, MountOption, SessionACL};

use crate::fs::{BucketFs, FsOptions, keys};

/// Mounts show as `fsd-bucket:<bucket>/<prefix>` in `/proc/mounts`: how a restarted daemon
/// tells its own stale mounts from others.
pub const SOURCE_PREFIX: &str = "fsd-bucket:";

/// A bucket (or a prefix of one) to mount.
#[derive(Debug, Clone)]
pub struct MountSpec {
    /// The store, or a credential proxy in front of it.
    pub endpoint: String,
    pub bucket: String,
    /// Key prefix shown as the mount's root (`/data`, `data/`, …); empty for the bucket.
    pub prefix: String,
    pub read_only: bool,
    /// Sign requests here with these keys; `None` when `endpoint` is a credential proxy.
    pub credentials: Option<Upstream>,
    pub cache_ttl: Duration,
    pub uid: u32,
    pub gid: u32,
    /// Where files open for writing are buffered.
    pub spill_dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("the bucket does not answer: {0}")]
    Store(#[from] ClientError),
    #[error("cannot mount at {path}: {source}")]
    Mount { path: PathBuf, source: io::Error },
    #[error("cannot unmount {path}: {source}")]
    Unmount { path: PathBuf, source: io::Error },
}

impl MountError {
    /// Whether an unmount failed because something uses the mount (`EBUSY`).
    pub fn is_busy(&self) -> bool {
        matches!(self, MountError::Unmount { source, .. }
            if source.raw_os_error() == Some(nix::libc::EBUSY))
    }
}

/// A mounted bucket. Dropping it unmounts (lazily, if the mount is busy).
pub struct BucketMount {
    path: PathBuf,
    /// `--confine`: the roots its directory lies beneath, and the mount's root as attached
    /// there by descriptor (see [`BucketMount::mount`]).
    confined: Option<(Arc<Within>, Attached)>,
    session: Option<fuser::BackgroundSession>,
    /// The mount's own threads for store calls: a daemon busy elsewhere (or blocked on
    /// this very mount) never starves the filesystem.
    runtime: Option<tokio::runtime::Runtime>,
}

impl BucketMount {
    /// Mounts `spec` at `path` (which must exist). Confined (`within`), the bucket is
    /// mounted at a directory of the daemon's own beside its spill directory, and a clone
    /// of that mount (`open_tree`) is attached to `path` opened beneath the roots
    /// (`move_mount` to its descriptor), so no link swapped in on the way can put the
    /// bucket over anything outside.
    pub async fn mount(
        spec: &MountSpec,
        path: &Path,
        within: Option<Arc<Within>>,
    ) -> Result<BucketMount, MountError> {
        let prefix = keys::normalize_prefix(&spec.prefix);
        let client = ObjectClient::new(&spec.endpoint, &spec.bucket, spec.credentials.clone())?;
        // A wrong endpoint, bucket or key fails here, in the store's words, not later as EIO.
        client.has_keys_under(&prefix).await?;
        let mount_error = |source| MountError::Mount {
            path: path.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(&spec.spill_dir).map_err(mount_error)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fsd-bucket")
            .enable_all()
            .build()
            .map_err(mount_error)?;
        let fs = BucketFs::new(
            client,
            FsOptions {
                prefix: prefix.clone(),
                read_only: spec.read_only,
                cache_ttl: spec.cache_ttl,
                uid: spec.uid,
                gid: spec.gid,
                spill_dir: spec.spill_dir.clone(),
            },
            runtime.handle().clone(),
        );
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName(format!("{SOURCE_PREFIX}{}/{prefix}", spec.bucket)),
            MountOption::Subtype("fsd-bucket".into()),
            MountOption::NoDev,
            MountOption::NoSuid,
            if spec.read_only {
                MountOption::RO
            } else {
                MountOption::RW
            },
        ];
        // Every user in the sandbox may use the mount, not only the daemon's.
        config.acl = SessionACL::All;
        config.n_threads = Some(2);
        config.clone_fd = true;
        let aside = staging(&spec.spill_dir);
        let target = match within {
            Some(_) => {
                std::fs::create_dir_all(&aside).map_err(mount_error)?;
                aside.clone()
            }
            None => path.to_path_buf(),
        };
        let mounted = tokio::task::spawn_blocking(move || fuser::spawn_mount(fs, &target, &config))
            .await
            .map_err(|join| io::Error::other(join.to_string()))
            .and_then(|result| result);
        let session = match mounted {
            Ok(session) => session,
            Err(source) => {
                runtime.shutdown_background();
                return Err(mount_error(source));
            }
        };
        let confined = match within {
            Some(within) => match attach_clone(&within, &aside, path) {
                Ok(attached) => Some((within, attached)),
                Err(source) => {
                    let _ = unmount_path(&aside, true);
                    drop(session);
                    runtime.shutdown_background();
                    return Err(mount_error(source));
                }
            },
            None => None,
        };
        tracing::info!(path = %path.display(), bucket = spec.bucket, prefix, "bucket mounted");
        Ok(BucketMount {
            path: path.to_path_buf(),
            confined,
            session: Some(session),
            runtime: Some(runtime),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Unmounts; a busy mount stays mounted and comes back with the error. Confined, by
    /// the directory's last name beneath its parent's descriptor, not followed (see
    /// [`Within::unmount_attached`]); a mount whose directory has moved since is detached
    /// by its root.
    pub async fn unmount(mut self) -> Result<(), (MountError, BucketMount)> {
        let unmounted = match self.confined.take() {
            Some((within, attached)) => match within.unmount_attached(attached, &self.path) {
                Ok(()) => Ok(()),
                // Moved with a parent renamed since: detached (lazily) by its root.
                Err(NotUnmounted::Elsewhere(attached)) => {
                    let detached = attached.detach();
                    if detached.is_err() {
                        self.confined = Some((within, attached));
                    }
                    detached
                }
                Err(NotUnmounted::Failed(error, attached)) => {
                    self.confined = attached.map(|attached| (within, attached));
                    Err(error)
                }
            },
            None => unmount_path(&self.path, false),
        };
        if let Err(source) = unmounted {
            let error = MountError::Unmount {
                path: self.path.clone(),
                source,
            };
            return Err((error, self));
        }
        // The mount's root held open would keep the detached mount, and so the device,
        // alive.
        self.confined = None;
        if let Some(session) = self.session.take() {
            // The session ends once the kernel lets go of the device.
            let _ = tokio::task::spawn_blocking(move || session.join()).await;
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        Ok(())
    }
}

impl Drop for BucketMount {
    fn drop(&mut self) {
        let detached = match &self.confined {
            Some((_, attached)) => attached.detach(),
            None => unmount_path(&self.path, true),
        };
        if self.session.is_some()
            && let Err(error) = detached
        {
            tracing::warn!(path = %self.path.display(), %error, "unmount at drop");
        }
        // Dropping a runtime may not block inside another one: let its threads go.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Where a confined bucket is mounted before its clone is attached at its directory.
fn staging(spill_dir: &Path) -> PathBuf {
    let mut aside = spill_dir.as_os_str().to_owned();
    aside.push(".mount");
    PathBuf::from(aside)
}

/// Attaches a clone of the mount at `aside` to `path` opened beneath `within`'s roots, then
/// detaches the mount at `aside` (the clone keeps the bucket's connection).
fn attach_clone(within: &Within, aside: &Path, path: &Path) -> io::Result<Attached> {
    use rustix::mount::{OpenTreeFlags, open_tree};
    let tree = open_tree(
        rustix::fs::CWD,
        aside,
        OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
    )?;
    let attached = within.attach(tree, path)?;
    unmount_path(aside, true)?;
    Ok(attached)
}

/// Takes away a mount whose server is gone: ends its FUSE connection (a forced unmount:
/// FUSE's `umount_begin` aborts it, so every request waiting on it fails with `ENOTCONN`),
/// then detaches it if something still uses it. A process killed while one of its own
/// threads waited on a request to the mount it served never finishes exiting otherwise,
/// since the kernel waits for an answer only that process could give.
pub fn release_dead(path: &Path) -> io::Result<()> {
    match nix::mount::umount2(path, nix::mount::MntFlags::MNT_FORCE) {
        Ok(()) => Ok(()),
        // Aborted but in use (`EBUSY`), or not forced: detached all the same.
        Err(_) => unmount_path(path, true),
    }
}

/// `umount2(path)`; with `lazy`, detached even while in use (`MNT_DETACH`).
pub fn unmount_path(path: &Path, lazy: bool) -> io::Result<()> {
    let flags = if lazy {
        nix::mount::MntFlags::MNT_DETACH
    } else {
        nix::mount::MntFlags::empty()
    };
    nix::mount::umount2(path, flags).map_err(io::Error::from)
}
