//! `fsctl backup create|list|restore|delete` against an S3-compatible store (the one
//! `fsctl up` embeds, R2, S3, …), and `fsctl store`, the embedded store on its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use fsctl::trusted::{BackupOptions, Backups, BucketAccess, EmbeddedStore, ProgressFn};
use fsd_control::retention::SnapshotPolicy;
use fsd_sdk::{Sandbox, SdkError};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::interrupt::Interrupt;
use crate::output;

/// Where backups are stored; `fsctl up` prints these for its embedded store.
#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    #[arg(long, env = "FSD_S3_ENDPOINT")]
    s3_endpoint: String,
    #[arg(long, env = "FSD_S3_BUCKET", default_value = "fsd")]
    s3_bucket: String,
    #[arg(long, env = "FSD_S3_ACCESS_KEY", hide_env_values = true)]
    s3_access_key: String,
    #[arg(long, env = "FSD_S3_SECRET_KEY", hide_env_values = true)]
    s3_secret_key: String,
    /// `auto` for R2.
    #[arg(long, env = "FSD_S3_REGION", default_value = "us-east-1")]
    s3_region: String,
}

impl StoreArgs {
    pub(crate) fn store(&self) -> BucketAccess {
        let mut store = BucketAccess::new(
            &self.s3_endpoint,
            &self.s3_bucket,
            &self.s3_access_key,
            &self.s3_secret_key,
        );
        store.region = self.s3_region.clone();
        store
    }
}

#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[command(subcommand)]
    command: BackupCommand,
}

impl BackupArgs {
    /// The exit status of a failure: 2 for `diff`, as diff(1) says trouble, else 1.
    pub fn failure_status(&self) -> u8 {
        match self.command {
            BackupCommand::Diff { .. } => 2,
            _ => 1,
        }
    }
}

#[derive(Debug, clap::Subcommand)]
enum BackupCommand {
    /// Archive a directory of the sandbox and upload it; prints the backup id.
    Create {
        dir: String,
        #[arg(long)]
        name: Option<String>,
        /// Seconds until the backup can no longer be restored (default 3 days).
        #[arg(long)]
        ttl: Option<u64>,
        /// Glob to leave out (repeatable).
        #[arg(long = "exclude")]
        excludes: Vec<String>,
        /// Leave out what git ignores.
        #[arg(long)]
        gitignore: bool,
        /// zstd (default), lz4 or gzip.
        #[arg(long)]
        compression: Option<String>,
        /// Store only what changed since DIR was restored from a backup.
        #[arg(long)]
        layer: bool,
        /// A full snapshot, even when the store holds one of DIR that an incremental
        /// snapshot could build on.
        #[arg(long, conflicts_with = "layer")]
        full: bool,
        /// A fork point to send to other sandboxes: DIR is frozen as `fsctl fork` freezes
        /// it (no branch made) and what it froze archived whole. Restore the snapshot in
        /// another sandbox, snapshot the work there with --layer, and bring that back here
        /// with `fsctl backup branch`.
        #[arg(long, conflicts_with_all = ["layer", "full"])]
        fork: bool,
    },
    /// Bring snapshot ID, made in another sandbox on a fork point DIR sent (`create
    /// --fork`), back as a branch of DIR (DIR@NAME; NAME the snapshot's first 8 characters
    /// unless given), to merge with `fsctl merge` as any branch.
    Branch {
        id: String,
        dir: String,
        /// The branch's name (repeat for more branches of the same snapshot).
        #[arg(long = "name")]
        names: Vec<String>,
    },
    /// List backups, newest first.
    List,
    /// Restore backup ID onto DIR (copy-on-write; instant when the archive is already there),
    /// or with --path only those paths, written into DIR as files are written. A whole
    /// restore lasts across a stop and start of the daemon (taken down at the stop, mounted
    /// again at the start, with what was written to it) until `fsctl backup release DIR`.
    Restore {
        id: String,
        dir: String,
        /// A file or directory of the snapshot, relative to DIR (repeatable): brought back
        /// into the live DIR, reading only the parts of the archives that hold it.
        #[arg(long = "path")]
        paths: Vec<String>,
    },
    /// The whole restores mounted now: directory, archives, since when.
    Mounts,
    /// Take the restore off DIR: DIR shows what it held before the restore, and what was
    /// written to the restore is discarded.
    Release { dir: String },
    /// The snapshots of DIR (every directory's without it) as a timeline, newest first.
    Log { dir: Option<String> },
    /// The tree of snapshot ID (under PATH), from its stored index.
    Ls { id: String, path: Option<String> },
    /// What differs from snapshot A to snapshot B, or to the live directory without B; exits
    /// as diff does: 0 the same, 1 differences listed, 2 trouble.
    Diff { a: String, b: Option<String> },
    /// Print the file PATH of snapshot ID, read from the store through ranged GETs.
    Cat { id: String, path: String },
    /// Delete a backup from the store.
    Delete { id: String },
    /// Remove DIR's backups that a retention policy does not keep (restic's `forget`
    /// rules; what a kept layer stacks on is kept).
    Forget {
        /// The directory whose snapshots the policy goes over.
        dir: String,
        #[command(flatten)]
        policy: PolicyArgs,
        /// Say what would be removed, remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// A retention policy on the command line (`unlimited` for any count).
#[derive(Debug, clap::Args)]
pub struct PolicyArgs {
    /// Keep the newest N snapshots (`unlimited`: all).
    #[arg(long, value_parser = count)]
    keep_last: Option<u32>,
    /// Keep the newest snapshot of each of the last N hours that have one (`unlimited`:
    /// of every hour).
    #[arg(long, value_parser = count)]
    keep_hourly: Option<u32>,
    /// Keep the newest snapshot of each of the last N days that have one (`unlimited`:
    /// of every day).
    #[arg(long, value_parser = count)]
    keep_daily: Option<u32>,
    /// Keep the newest snapshot of each of the last N weeks that have one (`unlimited`:
    /// of every week).
    #[arg(long, value_parser = count)]
    keep_weekly: Option<u32>,
    /// Keep the newest snapshot of each of the last N months that have one (`unlimited`:
    /// of every month).
    #[arg(long, value_parser = count)]
    keep_monthly: Option<u32>,
    /// Keep the newest snapshot of each of the last N years that have one (`unlimited`:
    /// of every year).
    #[arg(long, value_parser = count)]
    keep_yearly: Option<u32>,
    /// Keep everything within this of the newest backup (`7d`, `1m2d`, `12h`, `1y`).
    #[arg(long, value_parser = within)]
    keep_within: Option<u64>,
}

impl PolicyArgs {
    /// The rules given (none: an empty policy).
    pub fn policy(&self) -> SnapshotPolicy {
        SnapshotPolicy {
            keep_last: self.keep_last.unwrap_or(0),
            keep_hourly: self.keep_hourly.unwrap_or(0),
            keep_daily: self.keep_daily.unwrap_or(0),
            keep_weekly: self.keep_weekly.unwrap_or(0),
            keep_monthly: self.keep_monthly.unwrap_or(0),
            keep_yearly: self.keep_yearly.unwrap_or(0),
            keep_within_secs: self.keep_within,
        }
    }
}

fn count(text: &str) -> Result<u32, String> {
    if text == "unlimited" {
        return Ok(fsd_control::retention::UNLIMITED);
    }
    text.parse()
        .map_err(|_| format!("{text:?} is not a count or `unlimited`"))
}

fn within(text: &str) -> Result<u64, String> {
    fsd_control::retention::parse_within(text)
        .ok_or_else(|| format!("{text:?} is not a duration like 7d, 12h, 1m2d or 1y"))
}

/// What `fsctl backup restore` says of a whole restore.
fn print_restored(id: &str, dir: &str, restored: &fsctl::trusted::Restored, as_json: bool) {
    if as_json {
        output::json(&json!({
            "id": id,
            "dir": dir,
            "layers": restored.chain.len(),
            "processesLeftBehind": restored.processes_left_behind,
        }));
    } else {
        println!("restored {id} onto {dir}");
        warn_left_behind(
            &restored.processes_left_behind,
            "the directory the restore hid",
            dir,
        );
    }
}

/// A warning for each process a restore or a release left in `place` on `dir`.
fn warn_left_behind(processes: &[fsd_api::backup::ProcessLeftBehind], place: &str, dir: &str) {
    for process in processes {
        eprintln!(
            "warning: process {} ({}) still holds {} in {place}: start it again to work in \
             what {dir} shows",
            process.pid, process.command, process.holds
        );
    }
}

pub async fn run(sandbox: &Sandbox, args: BackupArgs, as_json: bool) -> Result<ExitCode, SdkError> {
    let backups = Backups::new(args.store.store());
    let mut command = args.command;
    match &mut command {
        BackupCommand::Create { dir, .. }
        | BackupCommand::Branch { dir, .. }
        | BackupCommand::Restore { dir, .. }
        | BackupCommand::Release { dir }
        | BackupCommand::Forget { dir, .. }
        | BackupCommand::Log { dir: Some(dir) } => {
            *dir = absolute_dir(sandbox, std::mem::take(dir)).await?;
        }
        _ => {}
    }
    match command {
        BackupCommand::Create {
            dir,
            name,
            ttl,
            excludes,
            gitignore,
            compression,
            layer,
            full,
            fork,
        } => {
            let (progress, bar) = progress_bar(as_json);
            let options = BackupOptions {
                name,
                ttl,
                excludes,
                gitignore,
                compression,
                layer,
                full,
                fork,
                progress,
            };
            let result = backups.create_backup(sandbox, &dir, options).await;
            finish(bar);
            let backup = result?;
            if as_json {
                output::json(&json!({
                    "id": backup.id,
                    "dir": backup.dir,
                    "sizeBytes": backup.size_bytes,
                    "parent": backup.parent,
                    "depth": backup.depth,
                    "changes": backup.changes,
                }));
            } else {
                println!("{}", backup.id);
                if let (Some(parent), Some(changes)) = (&backup.parent, &backup.changes) {
                    say!(
                        "incremental over {parent}: {} created, {} modified, {} deleted",
                        changes.created,
                        changes.modified,
                        changes.deleted
                    );
                }
            }
        }
        BackupCommand::Branch { id, dir, names } => {
            let received = backups.branch_from(sandbox, &id, &dir, names).await?;
            if as_json {
                output::json(&received);
            } else {
                for branch in &received.branches {
                    println!("{}", branch.path);
                }
            }
        }
        BackupCommand::List => {
            let metas = backups.list_backups().await?;
            if as_json {
                output::json(&json!({ "backups": metas }));
            } else {
                for meta in metas {
                    let expires = meta
                        .expires_at()
                        .map(|t| t.to_rfc3339())
                        .unwrap_or_default();
                    println!(
                        "{}  {:>12}  {}  {}  expires {}{}",
                        meta.id,
                        meta.size_bytes,
                        meta.created_at,
                        meta.dir,
                        expires,
                        meta.parent
                            .map(|p| format!("  layer of {p}"))
                            .unwrap_or_default()
                    );
                }
            }
        }
        BackupCommand::Restore { id, dir, paths } if !paths.is_empty() => {
            let restored = backups.restore_paths(sandbox, &id, &dir, &paths).await?;
            crate::history::restored_paths(&restored, as_json);
        }
        BackupCommand::Log { dir } => {
            crate::history::log(&backups.log(dir.as_deref()).await?, as_json);
        }
        BackupCommand::Ls { id, path } => {
            crate::history::ls(&backups.list_snapshot(&id, path.as_deref()).await?, as_json);
        }
        BackupCommand::Diff { a, b } => {
            let differences = backups.diff(&a, b.as_deref(), sandbox).await?;
            crate::history::diff(&differences, as_json);
            // As diff(1): 1 when it listed differences, 0 when there were none.
            if !differences.is_empty() {
                return Ok(ExitCode::from(1));
            }
        }
        BackupCommand::Mounts => {
            let mounts = sandbox.restore_mounts().await?;
            if as_json {
                output::json(&mounts);
            } else {
                for mount in mounts.mounts {
                    println!(
                        "{}  since {}  {}",
                        mount.dir,
                        mount.mounted_at,
                        mount.archive_paths.join(" ")
                    );
                }
            }
        }
        BackupCommand::Release { dir } => {
            let released = sandbox.release_restore(&dir).await?;
            if as_json {
                output::json(&released);
            } else {
                println!("released the restore on {dir}");
                warn_left_behind(
                    &released.processes_left_behind,
                    "the restore the release took away",
                    &dir,
                );
            }
        }
        BackupCommand::Cat { id, path } => {
            let bytes = backups.read_file(&id, &path).await?;
            std::io::Write::write_all(&mut std::io::stdout(), &bytes)
                .map_err(|e| SdkError::Storage(format!("stdout: {e}")))?;
        }
        BackupCommand::Restore { id, dir, .. } => {
            let (progress, bar) = progress_bar(as_json);
            let result = backups.restore_backup(sandbox, &id, &dir, progress).await;
            finish(bar);
            print_restored(&id, &dir, &result?, as_json);
        }
        BackupCommand::Forget {
            dir,
            policy,
            dry_run,
        } => {
            let policy = policy.policy();
            if policy.is_empty() {
                return Err(SdkError::coded(
                    fsd_sdk::ErrorCode::ValidationFailed,
                    "give at least one --keep-… rule (an empty policy removes nothing)",
                    json!({ "field": "policy" }),
                ));
            }
            let decision = backups.forget(&dir, &policy, dry_run).await?;
            if as_json {
                output::json(
                    &json!({ "dir": dir, "dryRun": dry_run, "keep": decision.keep, "remove": decision.remove }),
                );
            } else {
                for kept in &decision.keep {
                    println!("keep    {}  {}", kept.id, kept.reasons.join(", "));
                }
                let verb = if dry_run { "would remove" } else { "removed" };
                for id in &decision.remove {
                    println!("{verb} {id}");
                }
            }
        }
        BackupCommand::Delete { id } => {
            backups.delete_backup(&id).await?;
            if as_json {
                output::json(&json!({ "id": id, "deleted": true }));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A progress bar on stderr that follows the phases, unless the output is JSON.
fn progress_bar(as_json: bool) -> (Option<ProgressFn>, Option<ProgressBar>) {
    if as_json {
        return (None, None);
    }
    let bar = ProgressBar::new(0);
    let style =
        ProgressStyle::with_template("{msg:>9} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    let shown = bar.clone();
    let phase = Arc::new(Mutex::new(String::new()));
    let progress: ProgressFn = Arc::new(move |name: &str, done: u64, total: u64| {
        if let Ok(mut current) = phase.lock()
            && *current != name
        {
            *current = name.to_string();
            shown.set_message(name.to_string());
            shown.reset();
        }
        shown.set_length(total);
        shown.set_position(done);
    });
    (Some(progress), Some(bar))
}

fn finish(bar: Option<ProgressBar>) {
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
}

#[derive(Debug, clap::Args)]
pub struct ServeStoreArgs {
    /// Directory holding the buckets (one subdirectory each).
    #[arg(long, default_value = "./fsd-store")]
    dir: PathBuf,
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    #[arg(long, default_value = "fsd")]
    bucket: String,
    #[arg(long, env = "FSD_S3_ACCESS_KEY", hide_env_values = true)]
    access_key: String,
    #[arg(long, env = "FSD_S3_SECRET_KEY", hide_env_values = true)]
    secret_key: String,
}

/// `fsctl store`: the embedded S3-compatible store alone, until Ctrl-C. The first stdout
/// line is `fsd store listening on http://ADDR`.
pub async fn serve_store(args: ServeStoreArgs) -> Result<ExitCode, SdkError> {
    let store = EmbeddedStore::start(
        &args.dir,
        args.listen,
        &args.bucket,
        &args.access_key,
        &args.secret_key,
    )
    .await?;
    let interrupt = Interrupt::listen()?;
    println!("fsd store listening on http://{}", store.address);
    interrupt.wait().await;
    Ok(ExitCode::SUCCESS)
}

/// A directory as the daemon's backup routes take it: absolute (the reference's rule), a
/// relative one taken from the workspace, so `fsctl backup create proj` works as `fsctl ls
/// proj` does.
async fn absolute_dir(sandbox: &Sandbox, dir: String) -> Result<String, SdkError> {
    if dir.starts_with('/') {
        return Ok(dir);
    }
    let workspace = sandbox.capabilities().await?.workspace;
    let joined: std::path::PathBuf = std::path::Path::new(&workspace)
        .join(&dir)
        .components()
        .collect();
    Ok(joined.display().to_string())
}
