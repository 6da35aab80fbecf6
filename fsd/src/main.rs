//! `fsd`: the workspace daemon that runs inside a sandbox and serves its workspace over HTTP.
//!
//! `fsd serve` with no flags serves `/workspace` (or `./workspace` when that is not writable)
//! on 127.0.0.1:3000. See docs/api.md for the routes and `fsd serve --help` for the flags.

/// `eprintln!` that cannot panic: a stderr whose reader has gone (`fsd serve 2>&1 | tee
/// log`, then Ctrl-C) is not an error of the program's.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod backup;
mod capnweb;
mod channel;
mod config;
mod error;
mod exec;
mod extensions;
mod files;
mod git;
mod init;
mod interpreter;
mod logging;
mod metrics;
mod mounts;
mod paths;
mod ports;
mod process;
mod random;
mod rpc;
mod search;
mod server;
mod state;
mod state_lock;
mod system;
mod terminal;
mod time;
mod tunnels;
mod watch;
mod wire;
mod ws;

fn main() -> std::process::ExitCode {
    let cli = config::Cli::parse_invoked(std::env::args_os()).unwrap_or_else(|err| err.exit());
    match cli.into_command() {
        config::Command::Supervise(args) => exit_code(fsd_process::supervisor::supervise(args)),
        config::Command::SandboxInit(args) => {
            exit_code(fsd_process::supervisor::sandbox_init(args))
        }
        config::Command::Spawner(args) => exit_code(fsd_process::spawner::serve(args)),
        config::Command::Serve(args) => {
            let mut settings = match args.into_settings() {
                Ok(settings) => settings,
                Err(message) => {
                    say!("fsd: {message}");
                    return std::process::ExitCode::from(2);
                }
            };
            // As a container's PID 1, the first process stays behind to reap and forward
            // signals; the daemon is its child.
            if let Some(code) = init::reaper::split_if_first(&settings.state_dir) {
                return exit_code(code);
            }
            init::descriptors::keep_inherited_from_commands();
            match init::ca::trust_intercepting_ca() {
                Ok(names) => settings.pass_env.extend(names),
                Err(message) => {
                    say!("fsd: {message}");
                    return std::process::ExitCode::FAILURE;
                }
            }
            logging::init(&settings.log_level, settings.log_format);
            wire::memory::keep_freed_buffers();
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    say!("fsd: cannot start the async runtime: {err}");
                    return std::process::ExitCode::FAILURE;
                }
            };
            // The server runs as a task on the runtime's workers, not on this thread: its
            // accept loop then hands each new connection to the worker that accepted it
            // instead of waking another, one thread hop less per connection.
            let served = runtime.block_on(async { tokio::spawn(server::run(settings)).await });
            match served.unwrap_or_else(|join| Err(std::io::Error::other(join.to_string()))) {
                Ok(code) => exit_code(code),
                Err(err) => {
                    tracing::error!(error = %err, "fsd stopped");
                    say!("fsd: {err}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
    }
}

fn exit_code(code: i32) -> std::process::ExitCode {
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(255))
}
