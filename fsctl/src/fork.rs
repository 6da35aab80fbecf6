//! `fsctl fork`: a sandbox directory forked into copy-on-write branches, the branches
//! listed and discarded.

use std::process::ExitCode;

use fsd_sdk::api::backup::{BranchInfo, ForkRequest};
use fsd_sdk::{Sandbox, SdkError};

use crate::output;

#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("what").args(["dir", "list", "discard"]).required(true))]
pub struct ForkArgs {
    /// The directory to fork (absolute, or relative to the workspace); each branch is
    /// DIR@NAME beside it.
    dir: Option<String>,
    /// How many branches, named 1..N.
    #[arg(short = 'n', long, conflicts_with = "name")]
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
        let request = ForkRequest {
            dir,
            names: (!args.name.is_empty()).then_some(args.name),
            count: args.count,
        };
        let forked = sandbox.fork(&request).await?;
        if as_json {
            output::json(&forked);
        } else {
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
