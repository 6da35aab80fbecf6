//! `fsctl run [--lang L] FILE|-`: code in a fresh context, its output as it comes, text
//! results printed, images and HTML saved to files; and `fsctl clone URL [DIR]`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use base64::Engine;
use fsd_api::git::{GitCheckoutEvent, GitCheckoutRequest};
use fsd_api::interpreter::{CodeEvent, CreateContextRequest, ExecuteCodeRequest};
use fsd_sdk::{Sandbox, SdkError};
use futures_util::StreamExt;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// python, js or ts; default from the file's extension, else python.
    #[arg(long)]
    lang: Option<String>,
    /// Where images and HTML results are saved (`result-N.png`, …).
    #[arg(long, default_value = ".")]
    out: PathBuf,
    /// Interrupt the code after this many ms.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// The code's file, or `-` for standard input.
    file: String,
}

#[derive(Debug, clap::Args)]
pub struct CloneArgs {
    /// The repository's URL (named apart from the global `--url`).
    #[arg(value_name = "URL")]
    repository: String,
    /// Default: the repository's name in the workspace.
    dir: Option<String>,
    #[arg(long)]
    branch: Option<String>,
    #[arg(long)]
    depth: Option<u64>,
}

/// Exit code 1 when the code failed (its traceback on stderr).
pub async fn run(sandbox: &Sandbox, args: RunArgs, json: bool) -> Result<ExitCode, SdkError> {
    let code = if args.file == "-" {
        let mut code = String::new();
        std::io::stdin().read_to_string(&mut code)?;
        code
    } else {
        std::fs::read_to_string(&args.file)?
    };
    let language = args.lang.clone().unwrap_or_else(|| {
        match std::path::Path::new(&args.file)
            .extension()
            .and_then(|e| e.to_str())
        {
            Some("js" | "mjs" | "cjs") => "javascript",
            Some("ts") => "typescript",
            _ => "python",
        }
        .to_string()
    });
    let context = sandbox
        .create_context(&CreateContextRequest {
            language: Some(language),
            ..CreateContextRequest::default()
        })
        .await?;
    let request = ExecuteCodeRequest {
        context_id: context.context_id.clone(),
        code,
        language: None,
        timeout_ms: args.timeout_ms,
    };
    let outcome = show_events(sandbox, &request, &args.out, json).await;
    sandbox.delete_context(&context.context_id).await?;
    outcome
}

async fn show_events(
    sandbox: &Sandbox,
    request: &ExecuteCodeRequest,
    out: &std::path::Path,
    json: bool,
) -> Result<ExitCode, SdkError> {
    let mut events = sandbox.run_code(request).await?;
    let mut failed = false;
    let mut saved = 0;
    while let Some(event) = events.next().await {
        let event = event?;
        if json {
            println!("{}", serde_json::to_string(&event).unwrap_or_default());
            failed |= matches!(event, CodeEvent::Error { .. });
            continue;
        }
        match &event {
            CodeEvent::Stdout { text } => {
                print!("{text}");
                let _ = std::io::stdout().flush();
            }
            CodeEvent::Stderr { text } => eprint!("{text}"),
            CodeEvent::Error {
                ename,
                evalue,
                traceback,
            } => {
                failed = true;
                for line in traceback {
                    say!("{line}");
                }
                if traceback.is_empty() {
                    say!("{ename}: {evalue}");
                }
            }
            CodeEvent::ExecutionComplete { .. } => {}
            CodeEvent::Result { .. } => {
                let Some((format, data)) = event.result_format() else {
                    continue;
                };
                match (format, data) {
                    ("text" | "markdown" | "latex", serde_json::Value::String(text)) => {
                        println!("{text}")
                    }
                    ("json", value) => println!("{value}"),
                    (format, serde_json::Value::String(data)) => {
                        saved += 1;
                        let path = out.join(format!("result-{saved}.{format}"));
                        let bytes = match format {
                            "png" | "jpeg" => base64::engine::general_purpose::STANDARD
                                .decode(data)
                                .unwrap_or_default(),
                            _ => data.as_bytes().to_vec(),
                        };
                        std::fs::write(&path, bytes)?;
                        say!("fsctl: {format} result saved to {}", path.display());
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Clones, with git's progress on stderr; prints the directory and branch.
pub async fn clone(sandbox: &Sandbox, args: CloneArgs, json: bool) -> Result<ExitCode, SdkError> {
    let request = GitCheckoutRequest {
        repo_url: args.repository,
        branch: args.branch,
        target_dir: args.dir,
        depth: args.depth.map(serde_json::Value::from),
        ..GitCheckoutRequest::default()
    };
    let mut events = sandbox.git_checkout_progress(&request).await?;
    while let Some(event) = events.next().await {
        match event? {
            GitCheckoutEvent::Progress { line } => {
                if !json {
                    say!("{line}");
                }
            }
            GitCheckoutEvent::Complete(done) => {
                if json {
                    println!("{}", serde_json::to_string(&done).unwrap_or_default());
                } else {
                    println!("{} ({})", done.target_dir, done.branch);
                }
                return Ok(ExitCode::SUCCESS);
            }
            GitCheckoutEvent::Error(body) => {
                let status = body.http_status;
                return Err(SdkError::Api {
                    status,
                    body: Box::new(body),
                });
            }
        }
    }
    Err(SdkError::Decode {
        status: 200,
        message: "the clone's stream ended without a result".into(),
    })
}
