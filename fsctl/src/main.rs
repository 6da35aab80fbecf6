//! `fsctl`: the trusted-side command line for fsd.
//!
//! `fsctl up` runs a daemon over a local workspace and prints its URL and token; the other
//! commands talk to a daemon named by `--url`/`FSD_URL` and `--token`/`FSD_TOKEN`.

/// `eprintln!` that cannot panic: a stderr whose reader has gone (`fsd serve 2>&1 | tee
/// log`, then Ctrl-C) is not an error of the program's.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod backup;
mod code;
mod exec;
mod expose;
mod files;
mod fork;
mod gateway;
mod history;
mod interrupt;
mod mounts;
mod output;
mod proxy;
mod search;
mod shell;
mod sync;
mod top;
mod tunnel;
mod up;
mod watch;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fsd_sdk::{Sandbox, SdkError};

#[derive(Debug, Parser)]
#[command(name = "fsctl", version, about = "Drive an fsd workspace daemon")]
struct Cli {
    /// Daemon URL.
    #[arg(
        long,
        global = true,
        env = "FSD_URL",
        default_value = "http://127.0.0.1:3000"
    )]
    url: String,
    /// API token.
    #[arg(long, global = true, env = "FSD_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Machine-readable output on stdout: one JSON document, or for commands that stream
    /// (run, watch, grep, find) one JSON document per line as events come.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a daemon over a local workspace and print its URL and token.
    Up(up::UpArgs),
    #[command(flatten)]
    File(files::FileCommand),
    #[command(flatten)]
    Exec(exec::ExecCommand),
    /// Print changes under a path as they happen (Ctrl-C to stop).
    Watch(watch::WatchArgs),
    /// Search file contents as `rg` does (`.gitignore`, hidden and binary files honoured).
    Grep(search::GrepArgs),
    /// List files by glob as `rg --files` does.
    Find(search::FindArgs),
    /// Replace a pattern's matches in the files a grep would search (each file rewritten
    /// atomically); --dry-run prints the diff instead.
    Replace(search::ReplaceArgs),
    /// Mirror a sandbox directory into a local one, incrementally.
    Sync(sync::SyncArgs),
    /// The sandbox's CPU, memory, disks and connections, and its background processes by
    /// CPU use, refreshed until Ctrl-C (`--json`: one document per refresh).
    Top(top::TopArgs),
    /// Back up sandbox directories to an S3-compatible store and restore them.
    Backup(backup::BackupArgs),
    /// Fork a sandbox directory into copy-on-write branches (DIR@NAME beside it, each the
    /// whole tree, no copy); `--list` them, `--discard` one.
    Fork(fork::ForkArgs),
    /// Merge a branch back into the directory it was forked from (or INTO, another branch),
    /// three ways against the fork point: a true conflict keeps both versions and is listed
    /// (`--theirs`/`--ours` settle it); `--dry-run` says what would change.
    Merge(fork::MergeArgs),
    /// Run the embedded S3-compatible store alone.
    Store(backup::ServeStoreArgs),
    /// Run a credential proxy scoped to a bucket prefix (unsigned requests in, signed out).
    Proxy(proxy::ProxyArgs),
    /// Mount a bucket in the sandbox through a credential proxy run here (Ctrl-C unmounts).
    Mount(mounts::MountArgs),
    /// Unmount a bucket mounted in the sandbox.
    Umount(mounts::UmountArgs),
    /// List the buckets mounted in the sandbox.
    Mounts,
    /// Open an interactive terminal in the sandbox (the session's shell; exits with its
    /// exit code).
    Shell(shell::ShellArgs),
    /// Serve preview URLs for sandbox ports (token-guarded, proxied to the port) and the
    /// API that exposes them.
    Gateway(gateway::GatewayArgs),
    /// Print sandbox ID's daemon token under the key in $FSD_SANDBOX_TOKEN_KEY (the value
    /// of that sandbox's Secret, when the gateway runs with the same key).
    SandboxToken {
        /// The sandbox id.
        id: String,
    },
    /// Expose a sandbox port at a preview URL through the gateway (prints the URL).
    Expose(expose::ExposeArgs),
    /// End a port's preview URL.
    Unexpose(expose::UnexposeArgs),
    /// List the exposed ports and their preview URLs.
    Exposed(expose::GatewayTarget),
    /// Give a sandbox port a public URL through cloudflared, until Ctrl-C (prints the URL).
    Tunnel(tunnel::TunnelArgs),
    /// Run code in a fresh code context (python, js, ts): output as it comes, text results
    /// printed, images saved; exit 1 if it failed (`--json`: each event as a line of JSON).
    Run(code::RunArgs),
    /// Clone a git repository into the sandbox (progress on stderr).
    Clone(code::CloneArgs),
    /// The watcher a two-way sync leaves for its local directory between passes (started
    /// by `fsctl sync --two-way`, not by hand).
    #[command(hide = true)]
    SyncWatcher(fsctl::pair_watch::WatcherArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::SyncWatcher(args) = cli.command {
        // One thread: it waits on a socket and a watch.
        return match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(fsctl::pair_watch::serve(args)),
            Err(_) => ExitCode::FAILURE,
        };
    }
    if !cli.command.serves() {
        end_quietly_in_a_pipe();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            say!("fsctl: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let json = cli.json;
    let failure = cli.command.failure_status();
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(err) => {
            output::error(&err, json);
            ExitCode::from(failure)
        }
    }
}

impl Command {
    /// The exit status of a failure, as the tool the command resembles exits on trouble:
    /// 2 for `ls` (GNU ls: a path it cannot list) and `backup diff` (diff(1)), else 1.
    fn failure_status(&self) -> u8 {
        match self {
            Command::File(files::FileCommand::Ls { .. }) => 2,
            Command::Backup(args) => args.failure_status(),
            _ => 1,
        }
    }

    /// Whether the command is a server that runs until stopped (and keeps Rust's ignored
    /// SIGPIPE, so a peer going away is an error it handles, never its end).
    fn serves(&self) -> bool {
        matches!(
            self,
            Command::Up(_)
                | Command::Store(_)
                | Command::Proxy(_)
                | Command::Mount(_)
                | Command::Gateway(_)
                | Command::Tunnel(_)
                | Command::Shell(_)
        )
    }
}

/// A command whose output's reader goes away (`fsctl backup ls ID | head -3`) ends as `cat`
/// and `rg` do: killed by SIGPIPE, exit status 141, no message. Rust ignores SIGPIPE, which
/// made every `println!` after the reader left panic with a stack trace.
fn end_quietly_in_a_pipe() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: restores the default disposition before any thread starts; no handler runs.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}

async fn run(cli: Cli) -> Result<ExitCode, SdkError> {
    match cli.command {
        Command::Up(args) => up::run(args, cli.token, cli.json).await,
        Command::Store(args) => backup::serve_store(args).await,
        Command::Proxy(args) => proxy::run(args).await,
        Command::Mount(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            mounts::mount(&sandbox, args, cli.json).await
        }
        Command::Umount(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            mounts::umount(&sandbox, args, cli.json).await
        }
        Command::Run(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            code::run(&sandbox, args, cli.json).await
        }
        Command::Clone(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            code::clone(&sandbox, args, cli.json).await
        }
        Command::Mounts => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            mounts::list(&sandbox, cli.json).await
        }
        Command::Fork(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            fork::run(&sandbox, args, cli.json).await
        }
        Command::Merge(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            fork::merge(&sandbox, args, cli.json).await
        }
        Command::Backup(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            backup::run(&sandbox, args, cli.json).await
        }
        Command::File(command) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            files::run(&sandbox, command, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Exec(command) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            exec::run(&sandbox, command, cli.json).await
        }
        Command::Watch(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            watch::run(&sandbox, args, cli.json).await
        }
        Command::Grep(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            search::grep(&sandbox, args, cli.json).await
        }
        Command::Find(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            search::find(&sandbox, args, cli.json).await
        }
        Command::Replace(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            search::replace(&sandbox, args, cli.json).await
        }
        Command::Gateway(args) => gateway::run(args, &cli.url, cli.token).await,
        Command::SandboxToken { id } => {
            let Ok(key) = std::env::var(gateway::sandbox_token::KEY_ENV) else {
                say!(
                    "fsctl: {} must hold the gateway's sandbox token key",
                    gateway::sandbox_token::KEY_ENV
                );
                return Ok(ExitCode::from(2));
            };
            println!("{}", gateway::sandbox_token::derive(&key, &id));
            Ok(ExitCode::SUCCESS)
        }
        Command::Expose(args) => expose::expose(args, cli.token.as_deref(), cli.json).await,
        Command::Unexpose(args) => expose::unexpose(args, cli.token.as_deref(), cli.json).await,
        Command::Exposed(target) => expose::exposed(target, cli.token.as_deref(), cli.json).await,
        Command::Tunnel(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            tunnel::run(&sandbox, args, cli.json).await
        }
        Command::Shell(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            shell::run(&sandbox, args).await
        }
        Command::Sync(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            sync::run(&sandbox, args, cli.json).await
        }
        Command::Top(args) => {
            let sandbox = Sandbox::connect(&cli.url, cli.token.as_deref())?;
            top::run(&sandbox, args, cli.json).await
        }
        Command::SyncWatcher(args) => Ok(fsctl::pair_watch::serve(args).await),
    }
}
