//! `fsctl grep` and `fsctl find`: search the sandbox as `rg` and `rg --files` would,
//! printing each result as the daemon finds it (`path:line:column:text`, or a path);
//! `fsctl replace` rewrites what a grep would match.

use std::process::ExitCode;

use fsd_sdk::api::search::{ReplaceRequest, SearchEvent, SearchRequest};
use fsd_sdk::{Sandbox, SdkError};
use futures_util::StreamExt;

/// What both commands share.
#[derive(Debug, clap::Args)]
pub struct Walk {
    /// Only files whose path matches this glob (repeatable; `!glob` excludes).
    #[arg(short = 'g', long = "glob")]
    globs: Vec<String>,
    /// Search hidden files and directories too.
    #[arg(long)]
    hidden: bool,
    /// Search what `.gitignore` and `.ignore` skip too.
    #[arg(long)]
    no_ignore: bool,
    /// Stop after this many results.
    #[arg(long, default_value_t = 10_000)]
    max_results: u64,
}

/// What grep and replace look for.
#[derive(Debug, clap::Args)]
pub struct Pattern {
    /// A regex (a literal with `-F`).
    pattern: String,
    /// The pattern is a literal string.
    #[arg(short = 'F', long)]
    fixed_strings: bool,
    /// Match regardless of case.
    #[arg(short = 'i', long)]
    ignore_case: bool,
}

impl Pattern {
    /// The search for this pattern on `path`, as `walk` says.
    fn search(self, path: String, walk: Walk) -> SearchRequest {
        SearchRequest {
            pattern: Some(self.pattern),
            literal: Some(self.fixed_strings),
            case_insensitive: Some(self.ignore_case),
            ..request(path, walk)
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct GrepArgs {
    #[command(flatten)]
    pattern: Pattern,
    #[arg(default_value = ".")]
    path: String,
    /// Lines of context before and after each match.
    #[arg(short = 'C', long, default_value_t = 0)]
    context: u32,
    #[command(flatten)]
    walk: Walk,
}

#[derive(Debug, clap::Args)]
pub struct ReplaceArgs {
    #[command(flatten)]
    pattern: Pattern,
    /// What each match becomes; `$1` and `${name}` name the regex's groups.
    replacement: String,
    #[arg(default_value = ".")]
    path: String,
    /// Change nothing; print the diff each file would get.
    #[arg(long)]
    dry_run: bool,
    /// Rewrite at most this many files.
    #[arg(long)]
    max_files: Option<u64>,
    #[command(flatten)]
    walk: Walk,
}

#[derive(Debug, clap::Args)]
pub struct FindArgs {
    #[arg(default_value = ".")]
    path: String,
    #[command(flatten)]
    walk: Walk,
}

pub async fn grep(sandbox: &Sandbox, args: GrepArgs, as_json: bool) -> Result<ExitCode, SdkError> {
    let request = SearchRequest {
        context: (args.context > 0).then_some(args.context),
        ..args.pattern.search(args.path, args.walk)
    };
    exits_two_on_error(print(sandbox, &request, as_json).await, as_json)
}

pub async fn find(sandbox: &Sandbox, args: FindArgs, as_json: bool) -> Result<ExitCode, SdkError> {
    let printed = print(sandbox, &request(args.path, args.walk), as_json).await;
    exits_two_on_error(printed, as_json)
}

/// Prints each file changed with its count (its diff on a dry run); exits 1 when nothing
/// matched, as `grep` would, and 2 on an error.
pub async fn replace(
    sandbox: &Sandbox,
    args: ReplaceArgs,
    as_json: bool,
) -> Result<ExitCode, SdkError> {
    let request = ReplaceRequest {
        search: args.pattern.search(args.path, args.walk),
        replacement: args.replacement,
        dry_run: Some(args.dry_run),
        max_files: args.max_files,
    };
    let replaced = sandbox.replace(&request).await.map(|reply| {
        if as_json {
            crate::output::json(&reply);
        } else {
            for file in &reply.files {
                match &file.diff {
                    Some(diff) => print!("{diff}"),
                    None => println!("{}: {} replaced", file.path, file.replacements),
                }
            }
            if reply.truncated {
                say!("fsctl: more files matched than --max-files; those were left alone");
            }
        }
        if reply.files.is_empty() {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    });
    exits_two_on_error(replaced, as_json)
}

/// An error (a bad pattern, a path refused) ends a search with 2, as `rg` exits: 1 says
/// only that nothing was found.
fn exits_two_on_error(
    result: Result<ExitCode, SdkError>,
    as_json: bool,
) -> Result<ExitCode, SdkError> {
    result.or_else(|err| {
        crate::output::error(&err, as_json);
        Ok(ExitCode::from(2))
    })
}

fn request(path: String, walk: Walk) -> SearchRequest {
    SearchRequest {
        path,
        globs: (!walk.globs.is_empty()).then_some(walk.globs),
        hidden: Some(walk.hidden),
        no_ignore: Some(walk.no_ignore),
        max_results: Some(walk.max_results),
        ..SearchRequest::default()
    }
}

/// Prints each result; exits 1 when nothing was found, as `rg` does, and says on stderr
/// when a bound stopped the search.
async fn print(
    sandbox: &Sandbox,
    request: &SearchRequest,
    as_json: bool,
) -> Result<ExitCode, SdkError> {
    let mut events = sandbox.search_stream(request).await?;
    let mut found = 0u64;
    while let Some(event) = events.next().await {
        let event = event?;
        if as_json {
            crate::output::json_line(&event);
        }
        match event {
            SearchEvent::File { path } => {
                found += 1;
                if !as_json {
                    println!("{path}");
                }
            }
            SearchEvent::Match(line) => {
                found += 1;
                if !as_json {
                    for before in &line.before {
                        println!("{}-{before}", line.path);
                    }
                    println!(
                        "{}:{}:{}:{}",
                        line.path, line.line_number, line.column, line.line
                    );
                    for after in &line.after {
                        println!("{}-{after}", line.path);
                    }
                }
            }
            SearchEvent::Complete { stopped, .. } => {
                if let Some(stopped) = stopped {
                    say!("fsctl: the search stopped early ({stopped})");
                }
            }
        }
    }
    Ok(if found > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
