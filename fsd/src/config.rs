//! Command line and environment: what `fsd serve` accepts, and the checks made before start.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};

/// `fsd serve [FLAGS] [COMMAND…]`, or with no subcommand the same as `serve`: an image that
/// has fsd as its entry point and a `CMD` of its own (the reference's standalone way) runs
/// `fsd CMD…`.
#[derive(Debug, Parser)]
#[command(name = "fsd", version, about = "Workspace daemon for sandboxes")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// The name the reference's runtime has in its images (`/container-server/sandbox`), which
/// its standalone images copy (`COPY --from=… /container-server/sandbox /sandbox`).
const REFERENCE_NAME: &str = "sandbox";
/// Where the reference's runtime listens: every interface, port 3000.
const REFERENCE_LISTEN: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::UNSPECIFIED,
    3000,
));

impl Cli {
    /// Parses `args` (the program's name first). Run under the reference's name with no
    /// subcommand, fsd serves as the reference's runtime does: on every interface at port
    /// 3000 and without a token, unless the flags or the environment say otherwise, so an
    /// image that copies it where the reference's goes works without fsd's settings.
    pub fn parse_invoked(
        args: impl IntoIterator<Item = std::ffi::OsString>,
    ) -> Result<Cli, clap::Error> {
        use clap::parser::ValueSource;
        use clap::{CommandFactory, FromArgMatches};
        let args: Vec<std::ffi::OsString> = args.into_iter().collect();
        let matches = Cli::command().try_get_matches_from(&args)?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        let as_reference = args
            .first()
            .and_then(|program| Path::new(program).file_name())
            .is_some_and(|name| name == REFERENCE_NAME);
        if as_reference && cli.command.is_none() {
            let defaulted = |id: &str| {
                matches!(
                    matches.value_source(id),
                    None | Some(ValueSource::DefaultValue)
                )
            };
            if defaulted("listen") {
                cli.serve.listen = REFERENCE_LISTEN;
            }
            if defaulted("no_auth") {
                cli.serve.no_auth = true;
            }
        }
        Ok(cli)
    }

    /// What to run: a subcommand, else serving with the flags and command given at the top.
    pub fn into_command(self) -> Command {
        self.command
            .unwrap_or_else(|| Command::Serve(Box::new(self.serve)))
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the workspace over HTTP.
    Serve(Box<ServeArgs>),
    /// Internal: run a program as a child subreaper in the sandbox's process world.
    #[command(hide = true)]
    Supervise(fsd_process::supervisor::SuperviseArgs),
    /// Internal: the first process of the sandbox's PID namespace.
    #[command(hide = true)]
    SandboxInit(fsd_process::supervisor::SandboxInitArgs),
    /// Internal: the resident spawner of supervisors in the sandbox's process world.
    #[command(hide = true)]
    Spawner(fsd_process::spawner::SpawnerArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IsolationMode {
    Auto,
    None,
}

/// How restores are mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RestoreDriver {
    /// Kernel squashfs + overlayfs when the daemon may mount, else FUSE.
    Auto,
    Kernel,
    /// squashfuse + fuse-overlayfs.
    Fuse,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on. Port 0 picks a free port; the chosen address is printed on stdout.
    #[arg(long, env = "FSD_LISTEN", default_value = "127.0.0.1:3000")]
    pub listen: SocketAddr,

    /// Workspace root. Default: /workspace, or ./workspace when /workspace is not writable.
    #[arg(long, env = "FSD_WORKSPACE")]
    pub workspace: Option<PathBuf>,

    /// API token callers must send as `Authorization: Bearer <token>` or `X-Fsd-Token`.
    #[arg(
        long,
        env = "FSD_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,

    /// Read the API token from this file (surrounding whitespace is ignored).
    #[arg(long, env = "FSD_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,

    /// Serve without a token even on a non-loopback address (the reference's behaviour)
    /// when none is given; a token, if given, is still required (so an image can set
    /// `FSD_NO_AUTH=1` and a deployment turn auth on with `FSD_TOKEN`).
    #[arg(long, env = "FSD_NO_AUTH")]
    pub no_auth: bool,

    /// Refuse any path that resolves, symlinks included, outside the workspace and extra roots.
    #[arg(long, env = "FSD_CONFINE")]
    pub confine: bool,

    /// An extra root allowed under --confine (repeatable).
    #[arg(long = "allow-root", value_name = "DIR")]
    pub allow_roots: Vec<PathBuf>,

    /// Daemon state (session directories, process records). Default: /var/lib/fsd, or
    /// $TMPDIR/fsd-state when that is not writable.
    #[arg(long, env = "FSD_STATE_DIR")]
    pub state_dir: Option<PathBuf>,

    /// A variable of the daemon's environment that session shells inherit (repeatable).
    /// Only PATH, HOME, USER, LOGNAME, TERM, TZ and TMPDIR are passed otherwise.
    #[arg(long = "pass-env", value_name = "NAME")]
    pub pass_env: Vec<String>,

    /// Run each session in its own PID namespace (`auto`: when the host allows it) or not.
    #[arg(long, env = "FSD_ISOLATION", value_enum, default_value = "auto")]
    pub isolation: IsolationMode,

    /// Ended processes kept with their logs, both SDK lines' together (the oldest end
    /// dropped first), across restarts. 64 is what the reference's next runtime keeps.
    #[arg(long, env = "FSD_MAX_PROCESS_RECORDS", default_value_t = 64)]
    pub max_process_records: usize,

    /// Output kept per process, either line's (the latest, on disk under the state
    /// directory; stdout and stderr together).
    #[arg(long, env = "FSD_PROCESS_LOG_BYTES", default_value_t = 16 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(65_536..))]
    pub process_log_bytes: u64,

    /// Lines in one `checkChanges` change list; a window with more answers `resync`.
    #[arg(long, env = "FSD_CHANGE_LIST_LIMIT", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub change_list_limit: u64,

    /// Connections open at once; past it new connections are closed at once (logged once
    /// per 10 s). About 30 KiB each while idle.
    #[arg(long, env = "FSD_MAX_CONNECTIONS", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,

    /// Seconds a connection may take to send a request head, and may stay idle between
    /// requests, before it is closed. Requests being handled and streams are never cut.
    #[arg(long, env = "FSD_HEADER_TIMEOUT_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_secs: u64,

    /// What watches trees: `inotify` (Linux's own API, the default there) or `notify` (the
    /// portable crate, the default elsewhere; on Linux it runs the same tests through it).
    #[arg(long, env = "FSD_WATCH_ENGINE", default_value_t = fsd_watch::EngineKind::default())]
    pub watch_engine: fsd_watch::EngineKind,

    /// What a write answered as done survives: `fsync` (a power loss too: each file written
    /// is flushed to the disk before the answer) or `atomic` (the daemon's death: every
    /// write still whole or not there, nothing waits for the disk; for a disk that dies
    /// with the machine, as a container's does: the image's default).
    #[arg(long, env = "FSD_DURABILITY", default_value_t = fsd_api::metrics::Durability::default())]
    pub durability: fsd_api::metrics::Durability,

    /// The cloudflared program tunnels run (found on PATH when it has no `/`).
    #[arg(long, env = "FSD_CLOUDFLARED", default_value = "cloudflared")]
    pub cloudflared: PathBuf,

    /// The Python of code contexts (found on PATH when it has no `/`).
    #[arg(long, env = "FSD_PYTHON", default_value = "python3")]
    pub python: PathBuf,

    /// The Bun that installs and runs extension sidecars (found on PATH when it has no `/`).
    #[arg(long, env = "FSD_BUN", default_value = "bun")]
    pub bun: PathBuf,

    /// The Node of JavaScript and TypeScript code contexts (found on PATH when it has no `/`).
    #[arg(long, env = "FSD_NODE", default_value = "node")]
    pub node: PathBuf,

    /// `NODE_PATH` of Node code contexts: where `require` finds `typescript` (for
    /// TypeScript contexts) and other global packages.
    #[arg(long, env = "FSD_NODE_PATH")]
    pub node_path: Option<String>,

    /// Warm executors kept ready for new code contexts, per interpreter (Python, Node).
    #[arg(long, env = "FSD_INTERPRETER_POOL", default_value_t = 1)]
    pub interpreter_pool: usize,

    /// Code calls that name no timeout are interrupted after this many ms (0: never), as
    /// the reference reads it.
    #[arg(long, env = "INTERPRETER_EXECUTION_TIMEOUT_MS", default_value_t = 0)]
    pub code_timeout_ms: u64,

    /// Seconds a write to a WebSocket client may make no progress (the client is not
    /// reading) before the client is disconnected.
    #[arg(long, env = "FSD_WS_STALL_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub ws_stall_secs: u64,

    /// How restores are mounted: `auto` prefers the kernel and falls back to FUSE.
    #[arg(long, env = "FSD_RESTORE_DRIVER", value_enum, default_value = "auto")]
    pub restore_driver: RestoreDriver,

    /// A backup transfer request that sends or receives nothing for this long is retried.
    #[arg(long, env = "FSD_TRANSFER_TIMEOUT_SECS", default_value_t = 60)]
    pub transfer_timeout_secs: u64,

    /// A host (`HOST` or `HOST:PORT`) backup transfers may reach over plain http besides
    /// loopback (repeatable; the env var takes a comma-separated list). Presigned URLs are
    /// credentials: name only a store on a network you trust.
    #[arg(
        long = "http-transfer-host",
        env = "FSD_HTTP_TRANSFER_HOSTS",
        value_name = "HOST",
        value_delimiter = ','
    )]
    pub http_transfer_hosts: Vec<String>,

    /// Timeout of commands that name none, in ms (0: none), as the reference reads it.
    #[arg(long, env = "COMMAND_TIMEOUT_MS", default_value_t = 0)]
    pub command_timeout_ms: u64,

    /// Log filter, e.g. `info` or `fsd=debug,tower_http=debug`.
    #[arg(long, env = "FSD_LOG", default_value = "info")]
    pub log_level: String,

    #[arg(long, env = "FSD_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// The image's own command and its arguments (after fsd's flags, or after `--`):
    /// started once the API listens; if it exits with a code other than 0, fsd stops and
    /// exits with that code. Everything from its first word on is the command's.
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Everything the server needs, checked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub workspace: PathBuf,
    pub token: Option<String>,
    pub confine: bool,
    pub allow_roots: Vec<PathBuf>,
    pub state_dir: PathBuf,
    pub pass_env: Vec<String>,
    pub command_timeout_ms: u64,
    pub max_process_records: usize,
    pub process_log_bytes: u64,
    pub change_list_limit: usize,
    pub transfer_timeout_secs: u64,
    pub http_transfer_hosts: Vec<String>,
    pub restore_driver: RestoreDriver,
    pub watch_engine: fsd_watch::EngineKind,
    pub durability: fsd_api::metrics::Durability,
    pub ws_stall: std::time::Duration,
    pub cloudflared: PathBuf,
    pub python: PathBuf,
    pub bun: PathBuf,
    pub node: PathBuf,
    pub node_path: Option<String>,
    pub interpreter_pool: usize,
    pub code_timeout_ms: u64,
    pub isolation: IsolationMode,
    pub connections: crate::wire::accept::Limits,
    pub log_level: String,
    pub log_format: LogFormat,
    /// `fsd serve -- CMD…`: empty when there is none.
    pub command: Vec<String>,
}

impl ServeArgs {
    /// Checks the flags together and settles the workspace root.
    pub fn into_settings(self) -> Result<Settings, String> {
        let token = match (&self.token, &self.token_file) {
            (Some(token), _) => Some(token.trim().to_string()),
            (None, Some(file)) => Some(
                std::fs::read_to_string(file)
                    .map_err(|err| format!("cannot read --token-file {}: {err}", file.display()))?
                    .trim()
                    .to_string(),
            ),
            (None, None) => None,
        };
        if token.as_deref() == Some("") {
            return Err("the API token is empty".into());
        }
        if token.is_none() && !self.no_auth && !self.listen.ip().is_loopback() {
            return Err(format!(
                "listening on {} (not loopback) needs --token or --token-file; \
                 pass --no-auth to serve without one",
                self.listen
            ));
        }
        let workspace = settle_workspace(self.workspace.as_deref())?;
        let mut allow_roots = Vec::new();
        for root in &self.allow_roots {
            allow_roots.push(
                std::fs::canonicalize(root)
                    .map_err(|err| format!("--allow-root {}: {err}", root.display()))?,
            );
        }
        let state_dir = settle_state_dir(self.state_dir.as_deref())?;
        Ok(Settings {
            listen: self.listen,
            workspace,
            token,
            confine: self.confine,
            allow_roots,
            state_dir,
            pass_env: self.pass_env,
            command_timeout_ms: self.command_timeout_ms,
            max_process_records: self.max_process_records,
            process_log_bytes: self.process_log_bytes,
            change_list_limit: usize::try_from(self.change_list_limit).unwrap_or(usize::MAX),
            transfer_timeout_secs: self.transfer_timeout_secs.max(1),
            http_transfer_hosts: self.http_transfer_hosts,
            restore_driver: self.restore_driver,
            watch_engine: self.watch_engine,
            durability: self.durability,
            ws_stall: std::time::Duration::from_secs(self.ws_stall_secs),
            cloudflared: self.cloudflared,
            python: self.python,
            bun: self.bun,
            node: self.node,
            node_path: self.node_path,
            interpreter_pool: self.interpreter_pool,
            code_timeout_ms: self.code_timeout_ms,
            isolation: self.isolation,
            connections: crate::wire::accept::Limits {
                max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
                header_timeout: std::time::Duration::from_secs(self.header_timeout_secs),
            },
            log_level: self.log_level,
            log_format: self.log_format,
            command: self.command,
        })
    }
}

/// Creates the workspace if needed and returns its canonical path.
fn settle_workspace(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let create = |dir: &Path| -> Result<PathBuf, String> {
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::canonicalize(dir))
            .map_err(|err| format!("workspace {}: {err}", dir.display()))
    };
    if let Some(dir) = explicit {
        return create(dir);
    }
    let preferred = Path::new("/workspace");
    if let Ok(dir) = create(preferred)
        && nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK).is_ok()
    {
        return Ok(dir);
    }
    create(Path::new("./workspace"))
}

/// Creates the state directory (mode 0700: it holds command scripts and output).
fn settle_state_dir(explicit: Option<&Path>) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let create = |dir: &Path| -> Result<PathBuf, String> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .and_then(|()| std::fs::canonicalize(dir))
            .map_err(|err| format!("state dir {}: {err}", dir.display()))
    };
    if let Some(dir) = explicit {
        return create(dir);
    }
    if let Ok(dir) = create(Path::new("/var/lib/fsd"))
        && nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK).is_ok()
    {
        return Ok(dir);
    }
    create(&std::env::temp_dir().join("fsd-state"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> ServeArgs {
        let mut argv = vec!["fsd", "serve"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).unwrap().into_command() {
            Command::Serve(args) => *args,
            other => panic!("parsed as {other:?}"),
        }
    }

    /// Under the reference's name and with no subcommand, the reference's defaults (all
    /// interfaces, port 3000, no token) unless a flag says otherwise; under any other
    /// name, or with `serve`, fsd's own. (Run where `FSD_LISTEN` and `FSD_NO_AUTH` are
    /// not set, as CI runs it.)
    #[test]
    fn under_the_references_name_fsd_serves_as_the_references_runtime() {
        if std::env::var_os("FSD_LISTEN").is_some() || std::env::var_os("FSD_NO_AUTH").is_some() {
            eprintln!("skipped: FSD_LISTEN or FSD_NO_AUTH is set here");
            return;
        }
        let serve = |argv: &[&str]| match Cli::parse_invoked(argv.iter().map(Into::into))
            .unwrap()
            .into_command()
        {
            Command::Serve(args) => *args,
            other => panic!("parsed as {other:?}"),
        };
        let reference = serve(&["/sandbox"]);
        assert_eq!(reference.listen.to_string(), "0.0.0.0:3000");
        assert!(reference.no_auth);
        let with_command = serve(&["/container-server/sandbox", "sh", "-c", "true"]);
        assert_eq!(with_command.listen.to_string(), "0.0.0.0:3000");
        assert_eq!(with_command.command, ["sh", "-c", "true"]);
        let told = serve(&["/sandbox", "--listen", "127.0.0.1:4000"]);
        assert_eq!(told.listen.to_string(), "127.0.0.1:4000");
        for own in [&["/usr/local/bin/fsd"][..], &["/sandbox", "serve"]] {
            let own = serve(own);
            assert_eq!(own.listen.to_string(), "127.0.0.1:3000");
            assert!(!own.no_auth);
        }
    }

    /// The image's command, as an entry point's arguments: after `serve` or with no
    /// subcommand, with or without `--`; fsd's own flags before it stay fsd's, an unknown
    /// one is refused rather than run.
    #[test]
    fn trailing_words_are_the_images_command() {
        let parsed = |argv: &[&str]| Cli::try_parse_from(argv).map(Cli::into_command);
        for argv in [
            &["fsd", "serve", "/startup.sh", "--port", "8080"][..],
            &["fsd", "serve", "--", "/startup.sh", "--port", "8080"],
            &["fsd", "/startup.sh", "--port", "8080"],
            &["fsd", "--", "/startup.sh", "--port", "8080"],
        ] {
            match parsed(argv).unwrap() {
                Command::Serve(args) => {
                    assert_eq!(args.command, ["/startup.sh", "--port", "8080"], "{argv:?}")
                }
                other => panic!("{argv:?} parsed as {other:?}"),
            }
        }
        match parsed(&["fsd", "--listen", "127.0.0.1:9", "npm", "run", "dev"]).unwrap() {
            Command::Serve(args) => {
                assert_eq!(args.listen.port(), 9);
                assert_eq!(args.command, ["npm", "run", "dev"]);
            }
            other => panic!("parsed as {other:?}"),
        }
        match parsed(&["fsd"]).unwrap() {
            Command::Serve(args) => assert!(args.command.is_empty()),
            other => panic!("parsed as {other:?}"),
        }
        assert!(parsed(&["fsd", "--listne", "x", "cmd"]).is_err());
        assert!(parsed(&["fsd", "serve", "--bogus"]).is_err());
    }

    #[test]
    fn non_loopback_without_token_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().to_str().unwrap();
        let err = args(&["--listen", "0.0.0.0:3000", "--workspace", ws])
            .into_settings()
            .unwrap_err();
        assert!(err.contains("--no-auth"), "{err}");
        assert!(
            args(&["--listen", "0.0.0.0:3000", "--workspace", ws, "--no-auth"])
                .into_settings()
                .is_ok()
        );
        assert!(
            args(&[
                "--listen",
                "0.0.0.0:3000",
                "--workspace",
                ws,
                "--token",
                "t"
            ])
            .into_settings()
            .is_ok()
        );
        // A token given with --no-auth (an image's FSD_NO_AUTH and a deployment's
        // FSD_TOKEN) is still required.
        let both = args(&[
            "--listen",
            "0.0.0.0:3000",
            "--workspace",
            ws,
            "--no-auth",
            "--token",
            "t",
        ])
        .into_settings()
        .unwrap();
        assert_eq!(both.token.as_deref(), Some("t"));
    }

    #[test]
    fn loopback_needs_no_token() {
        let dir = tempfile::tempdir().unwrap();
        let settings = args(&["--workspace", dir.path().to_str().unwrap()])
            .into_settings()
            .unwrap();
        assert!(settings.token.is_none());
        assert_eq!(
            settings.workspace,
            std::fs::canonicalize(dir.path()).unwrap()
        );
    }

    #[test]
    fn empty_token_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().to_str().unwrap();
        assert!(
            args(&["--workspace", ws, "--token", "  "])
                .into_settings()
                .is_err()
        );
    }
}

/// What the daemon takes from its environment besides its flags, read once at start (not at
/// request time): the reference's placement id and version, and the store credentials a
/// bucket mount falls back to.
#[derive(Debug, Default, Clone)]
pub struct Environment {
    pub placement_id: Option<String>,
    pub sandbox_version: Option<String>,
    credentials: Vec<(&'static str, String)>,
}

/// The variables a bucket mount may take its keys from.
pub const CREDENTIAL_VARIABLES: [&str; 4] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "R2_ACCESS_KEY_ID",
    "R2_SECRET_ACCESS_KEY",
];

impl Environment {
    fn read() -> Self {
        let set = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Self {
            placement_id: std::env::var("CLOUDFLARE_PLACEMENT_ID").ok(),
            sandbox_version: set("SANDBOX_VERSION"),
            credentials: CREDENTIAL_VARIABLES
                .iter()
                .filter_map(|&name| std::env::var(name).ok().map(|value| (name, value)))
                .collect(),
        }
    }

    /// One of [`CREDENTIAL_VARIABLES`], as it was at start.
    pub fn credential(&self, name: &str) -> Option<String> {
        self.credentials
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, value)| value.clone())
    }
}

static ENVIRONMENT: std::sync::OnceLock<Environment> = std::sync::OnceLock::new();

/// The environment as read at start (the first call reads it).
pub fn environment() -> &'static Environment {
    ENVIRONMENT.get_or_init(Environment::read)
}
