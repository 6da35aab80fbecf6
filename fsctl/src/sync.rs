//! `fsctl sync REMOTE LOCAL`: mirror a sandbox directory locally, incrementally; with
//! `--two-way`, sync both ways (three-way merged against the last agreed state, conflicts
//! settled by `--mode` and reported); `--conflicts LOCAL` lists those still open.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use fsd_sdk::merge::{Conflict, Resolution, Side};
use fsd_sdk::two_way::{PassReport, TwoWay, TwoWayOptions};
use fsd_sdk::{Sandbox, SdkError, SyncReport};

use crate::interrupt::Interrupt;
use crate::output;

#[derive(Debug, clap::Args)]
pub struct SyncArgs {
    /// Directory in the sandbox.
    #[arg(required_unless_present = "conflicts")]
    remote: Option<String>,
    /// Local directory. One-way, its change token is kept beside it, in
    /// `<LOCAL>.fsd-sync`; two-way, its state is in `LOCAL/.fsd-sync/`.
    #[arg(required_unless_present = "conflicts")]
    local: Option<PathBuf>,
    /// Keep syncing. One-way: pausing this many milliseconds between rounds. Two-way: a
    /// pass whenever either side changes, and with no change one reading only what
    /// changed after this many milliseconds, the wait doubled while such looks find
    /// nothing, up to a minute (both sides are read whole hourly). The value only
    /// as `--follow=MS`, so `--follow REMOTE LOCAL` reads as written.
    #[arg(
        long,
        value_name = "MS",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "2000"
    )]
    follow: Option<u64>,
    /// Sync both ways: local edits go to the sandbox and the sandbox's come here, merged
    /// against what both last agreed on.
    #[arg(long)]
    two_way: bool,
    /// Two-way: who wins a conflict. `two-way-safe` keeps both versions (the other one
    /// beside the path as `<name>.sync-conflict-<side>`, on both sides) and lists it;
    /// `two-way-resolved`: the local version wins; `one-way-safe`: local changes go to the
    /// sandbox, whose own changes are kept; `one-way-replica`: the sandbox becomes a copy.
    #[arg(long, default_value = "two-way-safe", requires = "two_way")]
    mode: fsd_sdk::merge::Mode,
    /// Two-way: `.gitignore`-style patterns left out on both sides (repeatable).
    #[arg(long, value_name = "PATTERN", requires = "two_way")]
    exclude: Vec<String>,
    /// Two-way: also sync what is left out by default (.git, node_modules, .DS_Store).
    #[arg(long, requires = "two_way")]
    no_default_excludes: bool,
    /// Two-way: leave no watcher of LOCAL between passes. By default a pass leaves one (a
    /// process that ends when LOCAL goes or after 30 idle minutes) and the next asks it
    /// what changed instead of walking LOCAL.
    #[arg(long, requires = "two_way")]
    no_watcher: bool,
    /// Carry a side that holds nothing to the other, deleting what the other holds. Without
    /// it, a two-way pass where one side is empty or gone (and the last pass left paths),
    /// or a mirror's full copy of an empty sandbox directory into a mirror that holds
    /// something, halts and changes nothing: a sandbox that lost its disk (a container's is
    /// ephemeral) or a directory removed to be made again is far more often an accident
    /// than a wish.
    #[arg(long)]
    accept_emptied: bool,
    /// List the open conflicts of the two-way sync of LOCAL (both versions kept).
    #[arg(long, value_name = "LOCAL", conflicts_with_all = ["two_way", "follow"])]
    conflicts: Option<PathBuf>,
}

pub async fn run(sandbox: &Sandbox, args: SyncArgs, as_json: bool) -> Result<ExitCode, SdkError> {
    if let Some(local) = &args.conflicts {
        return list_conflicts(local, as_json);
    }
    let (Some(remote), Some(local)) = (args.remote.clone(), args.local.clone()) else {
        return Ok(ExitCode::from(2));
    };
    if args.two_way {
        return two_way(sandbox, &remote, &local, &args, as_json).await;
    }
    if !as_json {
        say!(
            "fsctl sync: leaving out {} (the sandbox's watch does not report them; \
             --two-way --no-default-excludes syncs them)",
            fsd_sdk::MIRROR_SKIPS.join(", ")
        );
    }
    let state = state_file(&local);
    let mut rounds = 0u64;
    loop {
        let version = std::fs::read_to_string(&state)
            .ok()
            .map(|v| v.trim().to_string());
        let options = fsd_sdk::MirrorOptions {
            accept_emptied: args.accept_emptied,
        };
        let report = sandbox
            .sync_with(&remote, &local, version.as_deref(), options)
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

async fn two_way(
    sandbox: &Sandbox,
    remote: &str,
    local: &Path,
    args: &SyncArgs,
    as_json: bool,
) -> Result<ExitCode, SdkError> {
    let options = TwoWayOptions {
        mode: args.mode,
        exclude: args.exclude.clone(),
        default_excludes: !args.no_default_excludes,
        state_root: None,
        accept_emptied: args.accept_emptied,
    };
    let mut sync = TwoWay::open(sandbox.clone(), local, remote, options)?;
    let bar = progress_bar(as_json);
    sync.set_progress(bar.as_ref().map(|(progress, _)| progress.clone()));
    if !args.no_default_excludes && !as_json {
        say!(
            "fsctl sync: leaving out {} (--no-default-excludes to sync them)",
            fsd_sdk::scan::DEFAULT_EXCLUDES.join(", ")
        );
    }
    let Some(every) = args.follow else {
        let report = match std::env::current_exe() {
            Ok(program) if !args.no_watcher => {
                let mut watcher = fsctl::pair_watch::PairWatcher::new(&sync, program);
                sync.pass_watched(&mut watcher).await
            }
            _ => sync.pass().await,
        };
        if let Some((_, bar)) = &bar {
            bar.finish_and_clear();
        }
        // The process ends with this pass: the state it read (an entry and a record for
        // every path) is left for the exit to free, not freed entry by entry, which was a
        // tenth of a pass over 20,000 files. The lock it holds goes with the process.
        std::mem::forget(sync);
        let report = report?;
        print_pass(&report, as_json, true);
        // A change that could not be made: exit 4 (the next pass makes it); conflicts kept
        // for a person: exit 3, so a script notices either.
        let open = report
            .conflicts
            .iter()
            .any(|c| matches!(c.resolution, Resolution::KeptBoth { .. } | Resolution::Left));
        return Ok(if !report.failed.is_empty() {
            ExitCode::from(4)
        } else if open {
            ExitCode::from(3)
        } else {
            ExitCode::SUCCESS
        });
    };
    let interrupt = Interrupt::listen()?;
    // Ended only by a signal: its status, as the one-way follow ends (Ctrl-C: 130).
    let ended_by = std::cell::Cell::new(128 + 2);
    let mut watch = fsctl::local_watch::Watched::start(local, &sync.watch_excludes())?;
    let mut first = true;
    sync.follow(
        Duration::from_millis(every),
        &mut watch,
        |result| match result {
            Ok(report) => {
                if let Some((_, bar)) = &bar {
                    bar.finish_and_clear();
                }
                print_pass(report, as_json, first);
                first = false;
                if report.local_whole || report.remote_whole || !report.settled() {
                    // A large pass's trees are freed; what stays is the ancestor and the
                    // records, so an idle follow holds only those.
                    fsctl::pair_watch::release_free_memory();
                }
            }
            Err(err) => say!("fsctl sync: {err} (trying again)"),
        },
        async { ended_by.set(interrupt.wait().await) },
    )
    .await?;
    Ok(ExitCode::from(ended_by.get()))
}

/// A progress bar on stderr for a pass's changes, when stderr is a terminal and the output
/// is not JSON; it shows once a pass has more than a few hundred changes to make.
fn progress_bar(as_json: bool) -> Option<(fsd_sdk::two_way::Progress, indicatif::ProgressBar)> {
    use std::io::IsTerminal;
    if as_json || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::hidden();
    // The rate as a whole number of changes a second (indicatif's `per_sec` printed a
    // float with four decimals and no unit).
    let rate = |state: &indicatif::ProgressState, out: &mut dyn std::fmt::Write| {
        let _ = write!(out, "{:.0} changes/s", state.per_sec());
    };
    let style = indicatif::ProgressStyle::with_template("{msg:>10} [{bar:30}] {pos}/{len} {rate}")
        .map(|style| style.progress_chars("=> ").with_key("rate", rate))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    let shown = bar.clone();
    let progress: fsd_sdk::two_way::Progress =
        std::sync::Arc::new(move |phase: &str, done: u64, total: u64| {
            if total < 500 {
                return;
            }
            if shown.is_hidden() {
                shown.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
            if shown.message() != phase {
                shown.set_message(phase.to_string());
                shown.reset();
            }
            shown.set_length(total);
            shown.set_position(done);
        });
    Some((progress, bar))
}

fn side(side: Side) -> &'static str {
    match side {
        Side::Local => "local",
        Side::Remote => "remote",
    }
}

fn describe(conflict: &Conflict) -> String {
    match &conflict.resolution {
        Resolution::KeptBoth { aside, kept } => format!(
            "both changed {}: the {} version kept there, the other at {aside}",
            conflict.path,
            side(*kept)
        ),
        Resolution::Won(winner) => format!(
            "both changed {}: the {} version won",
            conflict.path,
            side(*winner)
        ),
        Resolution::Left => format!(
            "both changed {}: each side keeps its own (one-way-safe)",
            conflict.path
        ),
    }
}

/// A pass's report; a pass that did nothing says nothing unless it is the first.
fn print_pass(report: &PassReport, as_json: bool, first: bool) {
    let quiet = report.settled() && report.conflicts.is_empty() && report.skipped.is_empty();
    if quiet && !first {
        return;
    }
    if as_json {
        output::json_line(&serde_json::json!({
            "toLocal": report.to_local,
            "toRemote": report.to_remote,
            "conflicts": report.conflicts.iter().map(|c| serde_json::json!({
                "path": c.path,
                "description": describe(c),
                "aside": match &c.resolution {
                    Resolution::KeptBoth { aside, .. } => Some(aside.clone()),
                    _ => None,
                },
            })).collect::<Vec<_>>(),
            "changedMeanwhile": report.changed_meanwhile.iter().map(|(s, p)| serde_json::json!({"side": side(*s), "path": p})).collect::<Vec<_>>(),
            "failed": report.failed.iter().map(|(s, p, why)| serde_json::json!({"side": side(*s), "path": p, "reason": why})).collect::<Vec<_>>(),
            "skipped": report.skipped,
            // What the pass read of each side: `whole`, or only what `changed`; and who
            // found the local side's changes: a `watcher`, or a `walk` of stats.
            "read": {
                "local": if report.local_whole { "whole" } else { "changed" },
                "sandbox": if report.remote_whole { "whole" } else { "changed" },
                "localFoundBy": (!report.local_whole)
                    .then_some(if report.local_watched { "watcher" } else { "walk" }),
            },
        }));
        return;
    }
    let line = |changes: &fsd_sdk::two_way::Changes| {
        format!(
            "{} files, {} dirs, {} links, {} moved, {} removed, {} modes",
            changes.files,
            changes.dirs,
            changes.links,
            changes.renames,
            changes.removals,
            changes.modes
        )
    };
    println!("to local: {}", line(&report.to_local));
    println!("to remote: {}", line(&report.to_remote));
    for conflict in &report.conflicts {
        say!("fsctl sync: conflict: {}", describe(conflict));
    }
    for (at, path) in &report.changed_meanwhile {
        say!(
            "fsctl sync: {path} changed on the {} side while syncing; the next pass takes it",
            side(*at)
        );
    }
    for (at, path, why) in &report.failed {
        say!("fsctl sync: {path} ({} side) not changed: {why}", side(*at));
    }
    for path in &report.skipped {
        say!("fsctl sync: not synced (a device, FIFO, socket or a name not UTF-8): {path}");
    }
}

fn list_conflicts(local: &Path, as_json: bool) -> Result<ExitCode, SdkError> {
    let open = fsd_sdk::two_way::conflicts(local, &fsd_sdk::two_way::state_root())?;
    if as_json {
        output::json(&open);
    } else if open.is_empty() {
        println!("no open conflicts");
    } else {
        for conflict in &open {
            println!(
                "{}\t{} version here; the other at {}\t(found {})",
                conflict.path, conflict.kept, conflict.aside, conflict.found
            );
        }
        say!(
            "to resolve one: keep the version you want at its path (copy the other over it, \
             or merge the two), remove the copy set aside, and sync again (the removal goes \
             to both sides); `--mode two-way-resolved` settles the next ones for the local side"
        );
    }
    Ok(ExitCode::SUCCESS)
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
