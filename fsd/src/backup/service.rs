//! The backup service: builds archives, moves them through presigned URLs, owns the restore
//! mounts. Heavy work runs on the blocking pool.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fsd_api::backup::{
    CreateBackupResponse, ExtractBackupResponse, PartEtag, ProcessLeftBehind, RestoreMount,
    SnapshotBase,
};
use fsd_backup::archive::{self, ArchiveOptions};
use fsd_backup::incremental::Changed;
use fsd_backup::index::Index;
use fsd_backup::mount::Driver;
use fsd_backup::restore::{Restore, Restorer, Resumed};
use fsd_backup::stored::ChainSource;
use fsd_backup::transfer::{self, PartSpec, Transfer};
use fsd_backup::{BackupError, Phase, Progress, incremental, layer};

use super::extract::{self, ExtractSpec};
use super::pending::{Pending, PendingCreates, written_beside};
use super::validate::{BackupConfigError, UrlRule};

/// S3's and R2's smallest part (all but the last).
pub const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
/// Ranged GETs of a download.
const DOWNLOAD_CHUNK: u64 = 16 * 1024 * 1024;

/// Largest snapshot index fetched (about 3 million paths).
const MAX_INDEX_BYTES: u64 = 256 * 1024 * 1024;
/// Deepest chain an incremental snapshot may extend (its depth fits the index's byte).
pub const MAX_DEPTH: u8 = 64;

/// What to archive.
pub struct CreateSpec {
    pub dir: PathBuf,
    pub archive: PathBuf,
    pub options: ArchiveOptions,
    pub layer: bool,
    /// An incremental snapshot over the snapshot with this index.
    pub base: Option<SnapshotBase>,
    /// The directory's change token now, recorded with the snapshot.
    pub token: Option<String>,
    /// What changed since the parent's token, when the journal could say.
    pub changed: Option<Vec<Changed>>,
    /// A fork point to send: `dir` is frozen first and what it froze archived whole.
    pub fork: bool,
}

/// One archive of a download.
pub struct Source {
    pub archive: PathBuf,
    pub url: String,
    pub size: u64,
    pub sha256: Option<String>,
}

/// An upload's outcome.
pub struct Uploaded {
    pub etag: Option<String>,
    pub parts: Vec<PartEtag>,
    pub part_size: Option<u64>,
}

pub struct BackupService {
    restorer: Result<Restorer, String>,
    /// Workspace forks (`fork`): their layers and mounts.
    forker: Result<fsd_backup::fork::Forker, String>,
    transfer: Transfer,
    urls: UrlRule,
    /// Creates in progress (see `pending`).
    creating: PendingCreates,
}

impl BackupService {
    /// Keeps restore state under `state_dir/backup-mounts`.
    /// `driver`: how restores are mounted; `None` picks the kernel when allowed, else FUSE.
    /// `within` (`--confine`): restores are attached to directories opened beneath it.
    pub fn new(
        state_dir: &Path,
        transfer_timeout: std::time::Duration,
        driver: Option<Driver>,
        urls: UrlRule,
        within: Option<Arc<fsd_search::Within>>,
    ) -> BackupService {
        let restorer = Restorer::new(&state_dir.join("backup-mounts"), driver)
            .map(|restorer| restorer.confined(within))
            .map_err(|e| e.to_string());
        if let Ok(restorer) = &restorer {
            for resumed in restorer.resume() {
                match resumed {
                    Resumed::Mounted(restore) => tracing::info!(
                        dir = %restore.dir.display(),
                        "mounted again a restore the last stop took down, with what was written to it"
                    ),
                    Resumed::Kept { restore, reason } => tracing::warn!(
                        dir = %restore.dir.display(),
                        writes = %restore.upper().display(),
                        %reason,
                        "could not mount again a restore the last stop took down; what was written to it is kept"
                    ),
                }
            }
        }
        let stale = archive::remove_stale_temps(Path::new(fsd_api::backup::ARCHIVE_ROOT));
        if stale > 0 {
            tracing::info!(stale, "removed archive temp files left by a crash");
        }
        let (creating, unfinished) = PendingCreates::open(state_dir.join("backup-creating"));
        if unfinished > 0 {
            tracing::info!(
                unfinished,
                "removed the archives (with their indexes) of creates a crash cut short"
            );
        }
        if let Err(error) = &restorer {
            tracing::warn!(%error, "restores are unavailable");
        }
        let forker =
            fsd_backup::fork::Forker::new(&state_dir.join("forks")).map_err(|e| e.to_string());
        if let Err(error) = &forker {
            tracing::warn!(%error, "forks are unavailable");
        }
        let transfer = Transfer::new(transfer_timeout).unwrap_or_else(|error| {
            tracing::error!(%error, "HTTP client for transfers");
            std::process::exit(1)
        });
        BackupService {
            restorer,
            forker,
            transfer,
            urls,
            creating,
        }
    }

    /// Records a create (or create and upload) of `archive` until the answer is dropped:
    /// what it wrote is removed at the next start if the daemon dies before then.
    pub fn begin_create(&self, archive: &Path) -> Pending {
        self.creating.begin(archive)
    }

    /// Checks a transfer URL a caller gave (see [`UrlRule`]).
    pub fn check_url(&self, field: &str, value: &str) -> Result<(), BackupConfigError> {
        self.urls.check(field, value)
    }

    /// A chain of archives to fetch as the request's `field` names them (topmost first):
    /// each archive path and URL checked, a refusal naming `field[i]`'s member.
    pub fn sources(
        &self,
        field: &str,
        chain: &[fsd_api::backup::ArchiveSource],
    ) -> Result<Vec<Source>, BackupConfigError> {
        chain
            .iter()
            .enumerate()
            .map(|(i, source)| {
                let archive = super::validate::archive(
                    &format!("{field}[{i}].archivePath"),
                    &source.archive_path,
                )?;
                self.check_url(&format!("{field}[{i}].url"), &source.url)?;
                Ok(Source {
                    archive,
                    url: source.url.clone(),
                    size: source.size_bytes,
                    sha256: source.sha256.clone(),
                })
            })
            .collect()
    }

    /// How restores (and forks, which need the kernel's) are mounted here, if at all.
    fn driver(&self) -> Option<Driver> {
        self.restorer.as_ref().ok().and_then(Restorer::driver)
    }

    /// `kernel`, `fuse`, or `none`: how restores are mounted here.
    pub fn driver_name(&self) -> &'static str {
        match self.driver() {
            Some(driver) => driver.as_str(),
            None => "none",
        }
    }

    fn restorer(&self) -> Result<&Restorer, BackupError> {
        self.restorer.as_ref().map_err(|reason| BackupError::Mount {
            what: "restore",
            reason: reason.clone(),
        })
    }

    pub async fn create(
        self: &Arc<Self>,
        spec: CreateSpec,
        progress: Progress,
    ) -> Result<CreateBackupResponse, BackupError> {
        let base = match &spec.base {
            Some(base) => {
                let bytes = self
                    .transfer
                    .get_bytes(&base.index_url, MAX_INDEX_BYTES)
                    .await?;
                Some((Index::decode(&bytes)?, base.depth))
            }
            None => None,
        };
        let service = Arc::clone(self);
        blocking(move || service.create_blocking(spec, base, progress)).await
    }

    fn create_blocking(
        &self,
        spec: CreateSpec,
        base: Option<(Index, u8)>,
        progress: Progress,
    ) -> Result<CreateBackupResponse, BackupError> {
        let archive_progress = progress.phase(Phase::Archive, 0);
        let mut answer = CreateBackupResponse {
            success: true,
            archive_path: spec.archive.display().to_string(),
            ..CreateBackupResponse::default()
        };
        let summary = if spec.layer {
            let restore = self
                .restorer()?
                .get(&spec.dir)
                .ok_or_else(|| BackupError::NotMounted(spec.dir.clone()))?;
            let summary = layer::create(&restore, &spec.archive, &spec.options, archive_progress)?;
            answer.parent_archive_paths = restore
                .archives
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            summary
        } else if let Some((parent, depth)) = base {
            let depth = depth.saturating_add(1);
            let layered = match &spec.changed {
                Some(changed) => incremental::create_from_changes(
                    &spec.dir,
                    parent,
                    depth,
                    changed,
                    &spec.archive,
                    &spec.options,
                    archive_progress,
                )?,
                None => incremental::create(
                    &spec.dir,
                    &parent,
                    depth,
                    &spec.archive,
                    &spec.options,
                    archive_progress,
                )?,
            };
            let by = if spec.changed.is_some() {
                "changeToken"
            } else {
                "index"
            };
            answer.compared_by = Some(by.to_string());
            let mut index = layered.index;
            index.attach_locations(&spec.archive, depth)?;
            answer.index_path = Some(write_index(&spec.archive, &index)?);
            answer.depth = Some(depth);
            answer.changes = Some(layered.changes);
            layered.summary
        } else {
            let (summary, mut index) =
                archive::create_indexed(&spec.dir, &spec.archive, &spec.options, archive_progress)?;
            index.attach_locations(&spec.archive, 0)?;
            answer.index_path = Some(write_index(&spec.archive, &index)?);
            summary
        };
        answer.size_bytes = summary.size_bytes;
        answer.entries = summary.entries;
        answer.token = spec.token;
        Ok(answer)
    }

    /// Mounts the chain `archives` onto `dir`; answers the restore and the processes it
    /// left in the directory it hid (read just before the mount: after it, the directory
    /// hidden and the one shown have the same name), but those whose supervisor is in
    /// `following` (they follow the directory by name).
    pub async fn restore(
        self: &Arc<Self>,
        dir: PathBuf,
        archives: Vec<PathBuf>,
        following: HashSet<u32>,
    ) -> Result<(Restore, Vec<ProcessLeftBehind>), BackupError> {
        let service = Arc::clone(self);
        blocking(move || {
            let left_behind = super::holders::left_behind(&dir, None, &following);
            let restore = service.restorer()?.restore(&dir, &archives)?;
            super::holders::warn(&left_behind, &restore.dir, "the directory a restore hid");
            Ok((restore, left_behind))
        })
        .await
    }

    pub async fn release(self: &Arc<Self>, dir: PathBuf) -> Result<Restore, BackupError> {
        let service = Arc::clone(self);
        blocking(move || service.restorer()?.release(&dir)).await
    }

    /// Takes the restore off `dir`; answers it and the processes left in what it showed
    /// (as [`Self::restore`]: those on the restore's filesystem, which the release detaches).
    pub async fn release_naming(
        self: &Arc<Self>,
        dir: PathBuf,
        following: HashSet<u32>,
    ) -> Result<(Restore, Vec<ProcessLeftBehind>), BackupError> {
        let service = Arc::clone(self);
        blocking(move || {
            let on = std::fs::metadata(&dir)
                .ok()
                .map(|m| std::os::unix::fs::MetadataExt::dev(&m));
            let left_behind = super::holders::left_behind(&dir, on, &following);
            let restore = service.restorer()?.release(&dir)?;
            super::holders::warn(&left_behind, &restore.dir, "a restore taken away");
            Ok((restore, left_behind))
        })
        .await
    }

    fn forker(&self) -> Result<&fsd_backup::fork::Forker, BackupError> {
        self.forker.as_ref().map_err(|reason| BackupError::Mount {
            what: "fork",
            reason: reason.clone(),
        })
    }

    /// Forks `dir` into branches named `names` (see [`fsd_backup::fork`]); refused while
    /// `holder` names a process holding something under `dir`.
    pub async fn fork(
        self: &Arc<Self>,
        dir: PathBuf,
        names: Vec<String>,
        holder: impl Fn(&Path) -> Option<(u32, String)> + Send + 'static,
    ) -> Result<fsd_backup::fork::Forked, BackupError> {
        let service = Arc::clone(self);
        let driver = self.driver();
        blocking(move || service.forker()?.fork(&dir, &names, driver, holder)).await
    }

    /// Freezes `dir` as a fork does, with no branch (see
    /// [`fsd_backup::fork::Forker::freeze`]).
    pub async fn freeze(
        self: &Arc<Self>,
        dir: PathBuf,
        holder: impl Fn(&Path) -> Option<(u32, String)> + Send + 'static,
    ) -> Result<fsd_backup::fork::Forked, BackupError> {
        let service = Arc::clone(self);
        let driver = self.driver();
        blocking(move || service.forker()?.freeze(&dir, driver, holder)).await
    }

    /// `layers` shown read-only while the answer lives (see [`fsd_backup::fork::Forker::show`]).
    pub async fn show_frozen(
        self: &Arc<Self>,
        layers: Vec<PathBuf>,
    ) -> Result<fsd_backup::fork::AncestorView, BackupError> {
        let service = Arc::clone(self);
        blocking(move || service.forker()?.show(&layers)).await
    }

    /// Records `archive` as the fork point `lowers` of `dir` sent (see
    /// [`fsd_backup::fork::Forker::record_sent`]).
    pub async fn record_sent(
        self: &Arc<Self>,
        dir: PathBuf,
        archive: PathBuf,
        lowers: Vec<PathBuf>,
    ) -> Result<(), BackupError> {
        let service = Arc::clone(self);
        blocking(move || service.forker()?.record_sent(&dir, &archive, lowers)).await
    }

    /// Branches of `dir` named `names` showing the snapshot whose chain `sources` is
    /// (topmost first): the archives above the first fork point `dir` sent are fetched
    /// (those already here are kept) and mounted over what that fork point froze.
    pub async fn receive(
        self: &Arc<Self>,
        dir: PathBuf,
        names: Vec<String>,
        mut sources: Vec<Source>,
    ) -> Result<Vec<fsd_backup::fork::Branch>, BackupError> {
        let chain: Vec<PathBuf> = sources.iter().map(|s| s.archive.clone()).collect();
        let at = {
            let service = Arc::clone(self);
            let dir = dir.clone();
            blocking(move || service.forker()?.sent_point(&dir, &chain)).await?
        };
        sources.truncate(at + 1);
        let Some(sent) = sources.pop() else {
            return Err(BackupError::NotSentFrom(dir));
        };
        self.fetch(&sources, &Progress::none()).await?;
        let layers: Vec<PathBuf> = sources.into_iter().map(|s| s.archive).collect();
        let service = Arc::clone(self);
        let driver = self.driver();
        blocking(move || {
            service
                .forker()?
                .receive(&dir, &names, &sent.archive, &layers, driver)
        })
        .await
    }

    /// Every branch, with what it changed.
    pub async fn branches(self: &Arc<Self>) -> Result<Vec<fsd_backup::fork::Branch>, BackupError> {
        let service = Arc::clone(self);
        blocking(move || Ok(service.forker()?.branches())).await
    }

    /// Takes the branch at `path` away with what was written in it, a restore on it or in
    /// it too: left, its record would outlive the directory (never to be released, mounted
    /// again at each start) and its archives would stay mounted.
    pub async fn discard_branch(
        self: &Arc<Self>,
        path: PathBuf,
        holder: impl Fn(&Path) -> Option<(u32, String)> + Send + 'static,
    ) -> Result<fsd_backup::fork::Layered, BackupError> {
        let service = Arc::clone(self);
        blocking(move || {
            service.forker()?.discard(&path, holder, |branch| {
                let Ok(restorer) = service.restorer() else {
                    return Ok(());
                };
                for restore in restorer.list() {
                    if restore.dir.starts_with(branch) {
                        restorer.release(&restore.dir)?;
                    }
                }
                Ok(())
            })
        })
        .await
    }

    /// The two sides of a merge of the branch at `branch` into `into` (by default the
    /// directory it was forked from) and their fork point, shown while the answer lives.
    pub async fn merge_sides(
        self: &Arc<Self>,
        branch: PathBuf,
        into: Option<PathBuf>,
    ) -> Result<fsd_backup::fork::MergeSides, BackupError> {
        let service = Arc::clone(self);
        blocking(move || service.forker()?.merge_sides(&branch, into.as_deref())).await
    }

    /// Takes every restore down for a stop, keeping what was written to it (the next start
    /// mounts it again); returns their directories.
    pub fn park_all(&self) -> Vec<PathBuf> {
        match &self.restorer {
            Ok(restorer) => restorer.park_all().into_iter().map(|r| r.dir).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Whether a restore is active on `dir` (as it was named when restored).
    pub fn is_restored(&self, dir: &Path) -> bool {
        self.restorer
            .as_ref()
            .is_ok_and(|restorer| restorer.get(dir).is_some())
    }

    pub fn mounts(&self) -> Vec<RestoreMount> {
        let Ok(restorer) = &self.restorer else {
            return Vec::new();
        };
        restorer
            .list()
            .into_iter()
            .map(|r| RestoreMount {
                dir: r.dir.display().to_string(),
                archive_paths: r.archives.iter().map(|p| p.display().to_string()).collect(),
                driver: r.driver.as_str().to_string(),
                mounted_at: crate::time::unix_rfc3339(
                    (r.mounted_at / 1000) as i64,
                    ((r.mounted_at % 1000) * 1_000_000) as i64,
                ),
            })
            .collect()
    }

    pub async fn upload_parts(
        &self,
        archive: &Path,
        parts: Vec<PartSpec>,
        progress: Progress,
    ) -> Result<Vec<PartEtag>, BackupError> {
        if !archive.is_file() {
            return Err(BackupError::ArchiveMissing(archive.to_path_buf()));
        }
        let etags = self
            .transfer
            .put_parts(archive, parts, progress.phase(Phase::Upload, 0))
            .await?;
        Ok(etags
            .into_iter()
            .map(|(part_number, etag)| PartEtag { part_number, etag })
            .collect())
    }

    /// The encoded index a snapshot of `dir` would record now.
    pub async fn tree_index(
        &self,
        dir: PathBuf,
        options: ArchiveOptions,
    ) -> Result<Vec<u8>, BackupError> {
        blocking(move || incremental::scan_index(&dir, &options)?.encode()).await
    }

    /// Writes paths of a stored snapshot back into a directory (see [`super::extract`]).
    pub async fn extract(
        &self,
        dir: PathBuf,
        index_url: &str,
        archives: HashMap<u8, ChainSource>,
        paths: Vec<PathBuf>,
        within: Option<Arc<fsd_search::Within>>,
    ) -> Result<ExtractBackupResponse, BackupError> {
        let bytes = self.transfer.get_bytes(index_url, MAX_INDEX_BYTES).await?;
        let index = Index::decode(&bytes)?;
        let spec = ExtractSpec {
            dir,
            index,
            archives,
            paths,
            within,
        };
        let client = self.transfer.client()?;
        let runtime = tokio::runtime::Handle::current();
        blocking(move || extract::extract(spec, client, runtime)).await
    }

    /// PUTs a snapshot's index to its presigned URL.
    pub async fn upload_index(&self, index: &Path, url: &str) -> Result<(), BackupError> {
        self.transfer.put(index, url, Progress::none()).await?;
        Ok(())
    }

    /// Removes an archive and what is kept beside it (its index and checksum), when an
    /// upload failed and the archive is no backup's.
    pub fn discard(&self, archive: &Path) {
        for path in written_beside(archive) {
            let _ = std::fs::remove_file(path);
        }
    }

    /// The archive's SHA-256, computed on the blocking pool and recorded beside it.
    pub async fn checksum(&self, archive: &Path) -> Result<String, BackupError> {
        let path = archive.to_path_buf();
        blocking(move || {
            let sha256 = transfer::sha256_file(&path)?;
            write_sidecar(&path, &sha256);
            Ok(sha256)
        })
        .await
    }

    /// Uploads an archive to one URL, or to as many of `part_urls` as its size needs.
    pub async fn upload(
        &self,
        archive: &Path,
        url: Option<String>,
        part_urls: Vec<String>,
        min_part_size: u64,
        progress: Progress,
    ) -> Result<Uploaded, BackupError> {
        if let Some(url) = url {
            let etag = self
                .transfer
                .put(archive, &url, progress.phase(Phase::Upload, 0))
                .await?;
            return Ok(Uploaded {
                etag,
                parts: Vec::new(),
                part_size: None,
            });
        }
        let size = std::fs::metadata(archive)
            .map_err(|e| BackupError::Io {
                path: archive.to_path_buf(),
                source: e,
            })?
            .len();
        let part_size = part_size(size, part_urls.len() as u64, min_part_size);
        let count = size.div_ceil(part_size).max(1) as usize;
        if count > part_urls.len() {
            return Err(BackupError::Transfer(format!(
                "the archive needs {count} parts of {part_size} bytes but {} part URLs were given",
                part_urls.len()
            )));
        }
        let parts = part_urls
            .into_iter()
            .take(count)
            .enumerate()
            .map(|(i, url)| {
                let offset = i as u64 * part_size;
                PartSpec {
                    part_number: i as u32 + 1,
                    url,
                    offset,
                    size: part_size.min(size - offset),
                }
            })
            .collect();
        let parts = self.upload_parts(archive, parts, progress).await?;
        Ok(Uploaded {
            etag: None,
            parts,
            part_size: Some(part_size),
        })
    }

    /// Downloads an archive from ranged parts (see `Transfer::get_parts`).
    pub async fn download_parts(
        &self,
        parts: Vec<fsd_backup::transfer::RangedPart>,
        archive: &Path,
        size: u64,
    ) -> Result<(), BackupError> {
        self.transfer.get_parts(parts, archive, size).await
    }

    /// Fetches the archives not already present and restores the chain onto `dir`.
    /// Returns how many were present.
    pub async fn download(
        self: &Arc<Self>,
        dir: PathBuf,
        sources: Vec<Source>,
        progress: Progress,
        following: HashSet<u32>,
    ) -> Result<((Restore, Vec<ProcessLeftBehind>), u32), BackupError> {
        let cached = self.fetch(&sources, &progress).await?;
        progress.phase(Phase::Mount, 0).set_total(0);
        let archives = sources.into_iter().map(|s| s.archive).collect();
        Ok((self.restore(dir, archives, following).await?, cached))
    }

    /// Fetches the archives not already present (same size, and same SHA-256 when one is
    /// given). Returns how many were present.
    async fn fetch(&self, sources: &[Source], progress: &Progress) -> Result<u32, BackupError> {
        let mut cached = 0;
        for source in sources {
            if is_cached(source) {
                cached += 1;
                continue;
            }
            self.transfer
                .get(
                    &source.url,
                    &source.archive,
                    source.size,
                    source.sha256.as_deref(),
                    DOWNLOAD_CHUNK,
                    progress.phase(Phase::Download, source.size),
                )
                .await?;
            if let Some(sha) = &source.sha256 {
                write_sidecar(&source.archive, sha);
            }
        }
        Ok(cached)
    }
}

/// Equal parts (all but the last), at least `min` bytes, spread over at most `urls` parts.
pub fn part_size(size: u64, urls: u64, min: u64) -> u64 {
    let even = size.div_ceil(urls.max(1));
    // Round up to a MiB so parts line up with the reads.
    even.max(min).max(1).div_ceil(1 << 20) * (1 << 20)
}

/// Writes a snapshot's index beside its archive (`<archive>.index`) through a scratch name
/// (removed at the next start if a crash leaves it); returns its path.
fn write_index(archive: &Path, index: &Index) -> Result<String, BackupError> {
    let path = fsd_backup::with_suffix(archive, ".index");
    let temp = index_scratch(&path);
    std::fs::write(&temp, index.encode()?)
        .and_then(|()| std::fs::rename(&temp, &path))
        .map_err(|e| BackupError::Io {
            path: path.clone(),
            source: e,
        })?;
    Ok(path.display().to_string())
}

/// The scratch name an index is written under.
fn index_scratch(index: &Path) -> PathBuf {
    fsd_api::scratch::scratch_path(index, fsd_api::scratch::ScratchKind::New)
}

fn sidecar(archive: &Path) -> PathBuf {
    fsd_backup::with_suffix(archive, ".sha256")
}

fn write_sidecar(archive: &Path, sha256: &str) {
    let _ = std::fs::write(sidecar(archive), sha256);
}

fn is_cached(source: &Source) -> bool {
    let Ok(meta) = std::fs::metadata(&source.archive) else {
        return false;
    };
    if meta.len() != source.size {
        return false;
    }
    match &source.sha256 {
        None => true,
        Some(sha) => std::fs::read_to_string(sidecar(&source.archive))
            .is_ok_and(|s| s.trim().eq_ignore_ascii_case(sha)),
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, BackupError> + Send + 'static,
) -> Result<T, BackupError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| BackupError::Transfer(format!("worker failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_equal_and_at_least_the_floor() {
        let mib = 1 << 20;
        assert_eq!(part_size(3 * mib, 64, MIN_PART_SIZE), 5 * mib);
        assert_eq!(part_size(640 * mib, 64, MIN_PART_SIZE), 10 * mib);
        assert_eq!(part_size(641 * mib, 64, MIN_PART_SIZE), 11 * mib);
        assert_eq!(part_size(0, 4, MIN_PART_SIZE), 5 * mib);
    }

    #[test]
    fn an_index_is_written_under_a_scratch_name_start_up_removes() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("a.sqsh");
        let scratch = index_scratch(&fsd_backup::with_suffix(&archive, ".index"));
        let name = scratch.file_name().unwrap().to_str().unwrap();
        let parsed = fsd_api::scratch::parse(name).expect("a scratch name");
        assert_eq!(parsed.target, "a.sqsh.index");
        assert_eq!(parsed.pid, std::process::id());
        let written = write_index(&archive, &Index::default()).unwrap();
        assert!(Path::new(&written).exists());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.sqsh.index"]);
    }
}
