//! `fsctl watch`: print changes under a path as they happen.

use std::process::ExitCode;

use fsd_sdk::api::watch::{WatchEvent, WatchRequest};
use fsd_sdk::{Sandbox, SdkError};
use futures_util::StreamExt;

#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    #[arg(default_value = ".")]
    path: String,
    /// Only paths matching this glob (repeatable; `*`, `**`, `?`).
    #[arg(long)]
    include: Vec<String>,
    /// Skip paths matching this glob (repeatable; default: .git, node_modules, .DS_Store).
    #[arg(long)]
    exclude: Vec<String>,
}

pub async fn run(sandbox: &Sandbox, args: WatchArgs, as_json: bool) -> Result<ExitCode, SdkError> {
    let request = WatchRequest {
        path: args.path,
        include: (!args.include.is_empty()).then_some(args.include),
        exclude: (!args.exclude.is_empty()).then_some(args.exclude),
        ..WatchRequest::default()
    };
    let mut events = sandbox.watch(&request).await?;
    while let Some(event) = events.next().await {
        let event = event?;
        if as_json {
            crate::output::json_line(&event);
            continue;
        }
        match event {
            WatchEvent::Watching { path, .. } => say!("watching {path}"),
            WatchEvent::Event {
                event_type,
                path,
                from,
                ..
            } => match from {
                Some(from) => println!("{event_type:<9} {from} -> {path}"),
                None => println!("{event_type:<9} {path}"),
            },
            WatchEvent::Resync { reason } => println!("resync    ({reason}: rescan)"),
            WatchEvent::Error { error } => return Err(SdkError::Io(std::io::Error::other(error))),
            WatchEvent::Stopped { reason } => {
                say!("stopped: {reason}");
                break;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
