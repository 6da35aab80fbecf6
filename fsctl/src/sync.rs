//! `fsctl sync REMOTE LOCAL`: mirror a sandbox directory locally, incrementally.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use fsd_sdk::{Sandbox, SdkError, SyncReport};

use crate::output;

#[derive(Debug, clap::Args)]
pub struct SyncArgs {
    /// Directory in the sandbox.
    remote: String,
    /// Local mirror; its change token is kept beside it, in `<LOCAL>.fsd-sync`.
    local: PathBuf,
    /// Keep syncing, pausing this many milliseconds between rounds.
    #[arg(long, value_name = "MS")]
    follow: Option<u64>,
}

pub async fn run(sandbox: &Sandbox, args: SyncArgs, as_json: bool) -> Result<ExitCode, SdkError> {
    let state = state_file(&args.local);
    let mut rounds = 0u64;
    loop {
        let version = std::fs::read_to_string(&state)
            .ok()
            .map(|v| v.trim().to_string());
        let report = sandbox
            .sync(&args.remote, &args.local, version.as_deref())
            .await?;
        std::fs::write(&state, &report.version)?;
        // Following, a round that found nothing to do says nothing (after the first).
        if rounds == 0 || report.mode != "unchanged" {
            print(&report, as_json);
        }
        rounds += 1;
        match args.follow {
            Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            None => return Ok(ExitCode::SUCCESS),
        }
    }
}

fn state_file(local: &Path) -> PathBuf {
    let name = local
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "mirror".into());
    local.with_file_name(format!("{name}.fsd-sync"))
}

fn print(report: &SyncReport, as_json: bool) {
    if as_json {
        output::json(&serde_json::json!({
            "mode": report.mode,
            "downloaded": report.downloaded,
            "deleted": report.deleted,
            "renamed": report.renamed,
            "links": report.links,
            "skipped": report.skipped,
            "version": report.version,
        }));
    } else {
        println!(
            "{}: {} downloaded, {} deleted, {} renamed, {} links",
            report.mode, report.downloaded, report.deleted, report.renamed, report.links
        );
        for path in &report.skipped {
            say!("fsctl sync: not mirrored (a device, FIFO or socket): {path}");
        }
    }
}
