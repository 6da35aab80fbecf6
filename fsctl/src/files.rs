//! The file commands: thin wrappers over the SDK.

use std::io::Write;
use std::path::PathBuf;

use fsd_sdk::{ListOptions, Sandbox, SdkError};
use futures_util::StreamExt;
use serde_json::json;

use crate::output;

#[derive(Debug, clap::Subcommand)]
pub enum FileCommand {
    /// List a directory.
    Ls {
        #[arg(default_value = ".")]
        path: String,
        /// Descend into subdirectories.
        #[arg(short, long)]
        recursive: bool,
        /// Include entries whose name starts with a dot.
        #[arg(short = 'a', long)]
        all: bool,
    },
    /// Print a file's bytes to stdout.
    Cat { path: String },
    /// Upload a local file (`-` for stdin), replacing the remote file atomically.
    Put { local: PathBuf, remote: String },
    /// Download a remote file to a local path (`-` or none for stdout).
    Get {
        remote: String,
        local: Option<PathBuf>,
    },
    /// Delete a file or symlink.
    Rm { path: String },
    /// Move or rename.
    Mv { source: String, destination: String },
    /// Create a directory.
    Mkdir {
        path: String,
        /// Create parents as needed; no error if it exists.
        #[arg(short, long)]
        parents: bool,
    },
    /// Change a path's mode (octal such as 755, or symbolic such as u+x,go-w).
    Chmod {
        mode: String,
        path: String,
        /// Everything below a directory too (symlinks are left alone).
        #[arg(short = 'R', long)]
        recursive: bool,
    },
    /// Give a path to another owner and/or group, as chown(1): OWNER, OWNER:GROUP or
    /// :GROUP, by name or number.
    Chown {
        owner: String,
        path: String,
        /// Everything below a directory too (symlinks are left alone).
        #[arg(short = 'R', long)]
        recursive: bool,
    },
    /// Show a path's metadata.
    Stat {
        path: String,
        /// Describe what a symlink points to rather than the link.
        #[arg(short = 'L', long)]
        follow: bool,
    },
}

pub async fn run(sandbox: &Sandbox, command: FileCommand, as_json: bool) -> Result<(), SdkError> {
    match command {
        FileCommand::Ls {
            path,
            recursive,
            all,
        } => {
            let options = ListOptions {
                recursive,
                include_hidden: all,
            };
            let files = sandbox.list_files(&path, options).await?;
            if as_json {
                output::json(&files);
            } else {
                output::listing(&files, recursive);
            }
        }
        FileCommand::Cat { path } => copy_to_stdout(sandbox, &path).await?,
        FileCommand::Get { remote, local } => match local.filter(|p| p.as_os_str() != "-") {
            None => copy_to_stdout(sandbox, &remote).await?,
            Some(local) => {
                let bytes = sandbox.download_to(&remote, &local).await?;
                report(
                    as_json,
                    json!({"path": remote, "local": local, "bytes": bytes}),
                    || format!("{remote} -> {} ({bytes} bytes)", local.display()),
                );
            }
        },
        FileCommand::Put { local, remote } => {
            let reply = if local.as_os_str() == "-" {
                let stdin = tokio_util::io::ReaderStream::new(tokio::io::stdin());
                sandbox.upload(&remote, stdin).await?
            } else {
                sandbox.upload_file(&remote, &local).await?
            };
            report(
                as_json,
                serde_json::to_value(&reply).unwrap_or_default(),
                || {
                    format!(
                        "{} -> {remote} ({} bytes)",
                        local.display(),
                        reply.bytes_written
                    )
                },
            );
        }
        FileCommand::Rm { path } => {
            // The daemon's message names the SDK's calls; fsctl's user gets fsctl's words.
            if let Err(err) = sandbox.delete_file(&path).await {
                return Err(match err.code() {
                    Some(&fsd_sdk::ErrorCode::IsDirectory) => SdkError::coded(
                        fsd_sdk::ErrorCode::IsDirectory,
                        format!(
                            "{path} is a directory: `fsctl rm` removes files and links; \
                             remove a directory with `fsctl exec -- rm -r {path}`"
                        ),
                        json!({"path": path}),
                    ),
                    _ => err,
                });
            }
            report(as_json, json!({"deleted": path}), || {
                format!("deleted {path}")
            });
        }
        FileCommand::Mv {
            source,
            destination,
        } => {
            sandbox.move_file(&source, &destination).await?;
            report(as_json, json!({"from": source, "to": destination}), || {
                format!("{source} -> {destination}")
            });
        }
        FileCommand::Mkdir { path, parents } => {
            // `-p` of a directory that is there already makes nothing: said so, not
            // "created" (it printed that).
            let there = parents
                && sandbox
                    .stat(&path, true)
                    .await
                    .is_ok_and(|stat| stat.file_type == fsd_sdk::api::files::FileType::Directory);
            if there {
                report(as_json, json!({"exists": path}), || {
                    format!("{path} exists already")
                });
                return Ok(());
            }
            sandbox.mkdir(&path, parents).await?;
            report(as_json, json!({"created": path}), || {
                format!("created {path}")
            });
        }
        FileCommand::Chmod {
            mode,
            path,
            recursive,
        } => {
            let reply = sandbox.chmod(&path, &mode, recursive).await?;
            report(as_json, json!(reply), || format!("{path}: {}", reply.mode));
        }
        FileCommand::Chown {
            owner,
            path,
            recursive,
        } => {
            let (user, group) = match owner.split_once(':') {
                Some((user, group)) => (user, group),
                None => (owner.as_str(), ""),
            };
            let some = |name: &str| (!name.is_empty()).then(|| name.to_string());
            let (user, group) = (some(user), some(group));
            if user.is_none() && group.is_none() {
                return Err(SdkError::Io(std::io::Error::other(format!(
                    "{owner:?}: give OWNER, OWNER:GROUP or :GROUP"
                ))));
            }
            let reply = sandbox
                .chown(&path, user.as_deref(), group.as_deref(), recursive)
                .await?;
            report(as_json, json!(reply), || {
                format!("{path}: {}:{}", reply.uid, reply.gid)
            });
        }
        FileCommand::Stat { path, follow } => {
            let stat = sandbox.stat(&path, follow).await?;
            if as_json {
                output::json(&stat);
            } else {
                output::stat(&path, &stat);
            }
        }
    }
    Ok(())
}

/// Prints `value` with `--json`, else the human line.
fn report(as_json: bool, value: serde_json::Value, human: impl FnOnce() -> String) {
    if as_json {
        output::json(&value);
    } else {
        println!("{}", human());
    }
}

async fn copy_to_stdout(sandbox: &Sandbox, path: &str) -> Result<(), SdkError> {
    let mut stream = Box::pin(sandbox.download(path).await?);
    let mut stdout = std::io::stdout().lock();
    while let Some(chunk) = stream.next().await {
        stdout.write_all(&chunk?)?;
    }
    stdout.flush()?;
    Ok(())
}
