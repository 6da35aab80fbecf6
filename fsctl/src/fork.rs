//! `fsctl fork`: a sandbox directory forked into copy-on-write branches, the branches
//! listed and discarded; `fsctl merge`: a branch merged back.

use std::process::ExitCode;

use fsd_sdk::api::backup::{BranchInfo, ForkRequest, MergeBranchRequest, MergeBranchResponse};
use fsd_sdk::{Sandbox, SdkError};

use crate::output;

#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("what").args(["dir", "list", "discard"]).required(true))]
pub struct ForkArgs {
    /// The directory to fork (absolute, or relative to the workspace); each branch is
    /// DIR@NAME beside it.
    dir: Option<String>,
    /// The branches' names (as `--name`: `fsctl fork app try-a try-b`).
    #[arg(value_name = "NAME", requires = "dir")]
    names: Vec<String>,
    /// How many branches, named 1..N.
    #[arg(short = 'n', long, conflicts_with_all = ["name", "names"])]
    count: Option<u32>,
    /// A branch's name (repeat for more).
    #[arg(long = "name", requires = "dir")]
    name: Vec<String>,
    /// List every branch, with what it changed.
    #[arg(long)]
    list: bool,
    /// Take the branch at this path away with what was written in it.
    #[arg(long, value_name = "BRANCH")]
    discard: Option<String>,
}

pub async fn run(sandbox: &Sandbox, args: ForkArgs, as_json: bool) -> Result<ExitCode, SdkError> {
    if args.list {
        let listed = sandbox.branches().await?;
        if as_json {
            output::json(&listed);
        } else {
            for branch in &listed.branches {
                show(branch);
            }
        }
    } else if let Some(path) = &args.discard {
        let discarded = sandbox.discard_branch(path).await?;
        if as_json {
            output::json(&discarded);
        } else {
            println!("discarded {}", discarded.path);
        }
    } else if let Some(dir) = args.dir {
        let names: Vec<String> = args.names.into_iter().chain(args.name).collect();
        let request = ForkRequest {
            dir,
            names: (!names.is_empty()).then_some(names),
            count: args.count,
            from: None,
        };
        let forked = sandbox.fork(&request).await?;
        if as_json {
            output::json(&forked);
        } else {
            if let Some(because) = &forked.copied_because {
                eprintln!("forked from a copy of {} ({because})", forked.dir);
            }
            for branch in &forked.branches {
                println!("{}", branch.path);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn show(branch: &BranchInfo) {
    println!(
        "{}  from {} at {}: {} changed, {} deleted, {} bytes",
        branch.path,
        branch.forked_from,
        branch.forked_at,
        branch.changed,
        branch.deleted,
        branch.bytes
    );
}

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The branch to merge (its path, DIR@NAME).
    branch: String,
    /// What to merge it into: by default the directory it was forked from; or another
    /// branch of the same tree.
    into: Option<String>,
    /// Say what would change; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// A path both changed differently takes the branch's version.
    #[arg(long, conflicts_with = "ours")]
    theirs: bool,
    /// A path both changed differently keeps what INTO holds.
    #[arg(long)]
    ours: bool,
}

/// Merges a branch back. Exits 0 when everything merged, 3 when a conflict kept both
/// versions (for a person to settle), 4 when a change was not made (a path written
/// meanwhile, or one that failed: merge again), as `fsctl sync` does.
pub async fn merge(
    sandbox: &Sandbox,
    args: MergeArgs,
    as_json: bool,
) -> Result<ExitCode, SdkError> {
    let mode = if args.theirs {
        Some("theirs")
    } else if args.ours {
        Some("ours")
    } else {
        None
    };
    let request = MergeBranchRequest {
        branch: args.branch,
        into: args.into,
        mode: mode.map(str::to_string),
        dry_run: args.dry_run,
    };
    let merged = sandbox.merge_branch(&request).await?;
    if as_json {
        output::json(&merged);
    } else {
        print_merge(&merged);
    }
    let kept_both = merged.conflicts.iter().any(|c| c.aside.is_some());
    Ok(
        if !merged.failed.is_empty() || !merged.changed_meanwhile.is_empty() {
            ExitCode::from(4)
        } else if kept_both {
            ExitCode::from(3)
        } else {
            ExitCode::SUCCESS
        },
    )
}

fn print_merge(merged: &MergeBranchResponse) {
    let verb = if merged.dry_run {
        "would merge"
    } else {
        "merged"
    };
    println!(
        "{verb} {} into {} ({} paths changed on either side since the fork):",
        merged.branch, merged.into, merged.paths_read
    );
    for change in &merged.changes {
        match &change.to {
            Some(to) => println!("  {} {} -> {to}", change.op, change.path),
            None => println!("  {} {}", change.op, change.path),
        }
    }
    for conflict in &merged.conflicts {
        match &conflict.aside {
            Some(aside) => println!(
                "conflict {}: both kept, the branch's version at {aside}",
                conflict.path
            ),
            None => println!("conflict {}: {} won", conflict.path, conflict.resolution),
        }
    }
    for path in &merged.changed_meanwhile {
        println!("left {path}: written while the merge ran (merge again to take it in)");
    }
    for skipped in &merged.failed {
        println!("failed {}: {}", skipped.path, skipped.reason);
    }
}
