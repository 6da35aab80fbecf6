//! Builds the router, binds, prints the address, serves until SIGTERM or SIGINT.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderName, Method, header};
use tokio::net::TcpListener;
use tower_http::cors::{Any, CorsLayer};
use tower_http::trace::TraceLayer;

use crate::backup::{self, BackupService};
use crate::config::{IsolationMode, RestoreDriver, Settings};
use crate::error::ApiError;
use crate::exec;
use crate::files::{self, FileService};
use crate::git;
use crate::init::command::UserCommand;
use crate::interpreter::{self, InterpreterConfig, InterpreterService};
use crate::metrics::{self, MetricsService};
use crate::mounts::{self, MountService};
use crate::paths::{PathPolicy, Paths};
use crate::ports;
use crate::process;
use crate::rpc;
use crate::search;
use crate::state::AppState;
use crate::state_lock::StateLock;
use crate::system::{self, capabilities};
use crate::terminal::{self, SessionTerminals};
use crate::tunnels;
use crate::watch::{self, WatchService};
use crate::wire::{self, auth};
use crate::ws;
use fsd_api::system::Capabilities;
use fsd_process::argv::{ArgvConfig, ArgvProcesses};
use fsd_process::{ExecConfig, ProcessService, ProcessTable, SessionManager, World, base_env};

/// The whole API: the HTTP routes, `/ws` (whose messages go through them) and `/rpc`.
pub fn router(state: AppState, token: auth::ApiToken, ws_stall: std::time::Duration) -> Router {
    let api = http_router(state.clone(), token.clone());
    let sockets = ws::router(api.clone(), ws_stall).merge(rpc::router(ws_stall));
    guarded(sockets.with_state(state), token).merge(api)
}

/// Every HTTP route, behind auth, tracing and CORS.
fn http_router(state: AppState, token: auth::ApiToken) -> Router {
    let routes = Router::new()
        .merge(system::router())
        .merge(files::router())
        .merge(exec::router())
        .merge(process::router())
        .merge(ports::router())
        .merge(watch::router())
        .merge(backup::router())
        .merge(mounts::router())
        .merge(terminal::router())
        .merge(tunnels::router())
        .merge(interpreter::router())
        .merge(git::router())
        .merge(search::router())
        .merge(metrics::router())
        .fallback(unknown_route)
        .method_not_allowed_fallback(unknown_route)
        // Per route (a layer of a router wraps each of its routes), so the route's pattern
        // is known; requests over `/ws` come through here too.
        .layer(axum::middleware::from_fn_with_state(
            state.metrics.requests.clone(),
            metrics::record,
        ));
    guarded(routes.with_state(state), token)
}

/// Unknown method or path: the reference's 404 envelope.
async fn unknown_route() -> ApiError {
    ApiError::not_found_route()
}

/// `routes` behind auth, tracing and CORS.
fn guarded(routes: Router, token: auth::ApiToken) -> Router {
    routes
        .layer(axum::middleware::from_fn_with_state(
            token,
            auth::require_token,
        ))
        .layer(TraceLayer::new_for_http())
        .layer(cors())
        .layer(axum::middleware::from_fn(wire::unread::close_if_unread))
}

/// The reference's CORS policy; preflights are answered here, before auth, unlike the
/// reference, which answers them 404.
fn cors() -> CorsLayer {
    CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            header::RANGE,
            HeaderName::from_static("x-session-id"),
            HeaderName::from_static("x-sandbox-id"),
            HeaderName::from_static("x-trace-id"),
            HeaderName::from_static("x-fsd-token"),
        ])
        .expose_headers([
            header::CONTENT_LENGTH,
            header::CONTENT_RANGE,
            header::ACCEPT_RANGES,
        ])
}

/// How long an earlier run whose bucket mount's connection was just ended may take to exit
/// and let go of the address.
const EARLIER_RUN_EXIT: Duration = Duration::from_secs(5);

/// Binds `address`; when an earlier run's stale mount was just let go of (`waited_on`),
/// waits for that run to let go of the address too.
async fn bind(address: std::net::SocketAddr, waited_on: bool) -> std::io::Result<TcpListener> {
    let deadline = tokio::time::Instant::now() + EARLIER_RUN_EXIT;
    loop {
        match wire::accept::bind(address) {
            Err(error)
                if waited_on
                    && error.kind() == std::io::ErrorKind::AddrInUse
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            bound => return bound,
        }
    }
}

/// Serves until SIGTERM or SIGINT (exit code 0), or until the image's command fails (its
/// exit code).
pub async fn run(settings: Settings) -> std::io::Result<i32> {
    let signals = ShutdownSignals::listen();
    // Read once, now: requests never consult the process environment.
    crate::config::environment();
    crate::files::durability::set(settings.durability);
    // One daemon per state directory. An earlier run killed while waiting on its own bucket
    // mount still holds the directory and the address until its mount's connection ends.
    // The stale mounts are taken away once: to unstick a dying holder, or else once the
    // lock is ours.
    let mut unstuck = None;
    let _state_lock = StateLock::take(&settings.state_dir, EARLIER_RUN_EXIT, || {
        unstuck = Some(MountService::release_stale(&settings.state_dir));
    })
    .await
    .map_err(std::io::Error::other)?;
    let stale_mounts = unstuck.unwrap_or_else(|| MountService::release_stale(&settings.state_dir));
    // Bound first: an address another server holds is said before anything starts, with
    // the address and what changes it.
    let listener = bind(settings.listen, stale_mounts > 0).await.map_err(|err| {
        std::io::Error::new(
            err.kind(),
            format!(
                "cannot listen on {}: {err} (another server there? --listen takes another address)",
                settings.listen
            ),
        )
    })?;
    let state = start_services(&settings).await?;
    let token = auth::ApiToken(settings.token.as_deref().map(Arc::from));
    wire::accept::raise_descriptor_limit(&settings.connections);
    let address = listener.local_addr()?;
    tracing::info!(
        %address,
        workspace = %settings.workspace.display(),
        auth = settings.token.is_some(),
        confine = settings.confine,
        durability = %settings.durability,
        capabilities = ?state.capabilities,
        "fsd serving"
    );
    // The sandbox's init comes up while the daemon already answers; a command waits for it.
    let world = state.sessions.config().world.clone();
    tokio::task::spawn_blocking(move || {
        let isolation = world.isolation();
        tracing::info!(
            isolation = isolation.name(),
            "the sandbox's process world is up"
        );
    });
    // One machine-readable line on stdout, for supervisors that passed port 0.
    let mut stdout = std::io::stdout();
    writeln!(stdout, "fsd listening on http://{address}")?;
    stdout.flush()?;
    let user_command = if settings.command.is_empty() {
        None
    } else {
        let started = UserCommand::start(&settings.command, &settings.workspace);
        Some(started.map_err(|error| {
            std::io::Error::other(format!("cannot start {:?}: {error}", settings.command))
        })?)
    };
    let failed_with = std::sync::OnceLock::new();
    let shutdown = async {
        let failed = async {
            match &user_command {
                Some(command) => command.failed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = signals.received() => {}
            code = failed => {
                tracing::info!(code, "the image's command failed: shutting down");
                let _ = failed_with.set(code);
            }
        }
    };
    wire::accept::serve(
        listener,
        router(state.clone(), token, settings.ws_stall),
        settings.connections,
        state.metrics.connections.clone(),
        shutdown,
    )
    .await;
    if let Some(command) = &user_command {
        command.stop().await;
    }
    stop_services(&state).await;
    tracing::info!("fsd stopped");
    Ok(failed_with.get().copied().unwrap_or(0))
}

/// Every domain's service, started (and what a crash of the last run left behind cleaned
/// up), in the state handlers share.
async fn start_services(settings: &Settings) -> std::io::Result<AppState> {
    let policy = PathPolicy::new(
        settings.workspace.clone(),
        settings.confine,
        settings.allow_roots.clone(),
    )?;
    // Temp files a crash left beside the targets of writes are removed before any new write
    // and before watches rescan their trees.
    let (scratch, swept) = files::ScratchLog::open(Some(settings.state_dir.join("scratch-dirs")));
    if swept.files > 0 {
        tracing::info!(
            files = swept.files,
            dirs = swept.dirs,
            "removed temp files a crash left beside written files"
        );
    }
    // Restores made later must reach the sandbox's mount namespace, a slave of this one: so
    // the mounts are made shared before that namespace is made from them (a container's
    // start private, and a slave of private mounts receives nothing).
    if settings.isolation == IsolationMode::Auto
        && fsd_backup::mount::kernel_available()
        && let Err(error) = fsd_backup::mount::share_mounts()
    {
        tracing::warn!(%error, "cannot make mounts shared; restores reach only new sessions");
    }
    // Backups and bucket mounts read the mount table and their state while the sandbox's
    // process world starts (a fork, two execs and a handshake): together they were most of
    // the time from start to the first answer, and they touch nothing of each other's.
    let backups = {
        let (state_dir, transfer_timeout, urls, within) = (
            settings.state_dir.clone(),
            std::time::Duration::from_secs(settings.transfer_timeout_secs),
            crate::backup::UrlRule::new(settings.http_transfer_hosts.clone()),
            policy.beneath().cloned(),
        );
        let driver = match settings.restore_driver {
            RestoreDriver::Auto => None,
            RestoreDriver::Kernel => Some(fsd_backup::mount::Driver::Kernel),
            RestoreDriver::Fuse => Some(fsd_backup::mount::Driver::Fuse),
        };
        tokio::task::spawn_blocking(move || {
            BackupService::new(&state_dir, transfer_timeout, driver, urls, within)
        })
    };
    // What a crashed run made for its mounts (taken away before the bind) is removed.
    let mounts = {
        let state_dir = settings.state_dir.clone();
        let within = policy.beneath().cloned();
        tokio::task::spawn_blocking(move || MountService::new(&state_dir, within))
    };
    // Started here, on the main thread, which lives as long as the daemon (see World::start).
    let mut world = World::start(settings.isolation == IsolationMode::Auto);
    if let Some(roots) = policy.confined_roots() {
        world = world.confined(roots.to_vec());
    }
    let world = Arc::new(world);
    let terminals = terminal::table::TerminalTable::new(terminal::table::TableConfig {
        world: world.clone(),
        dir: settings.state_dir.join("terminals"),
        base_env: base_env(&settings.pass_env),
        workspace: settings.workspace.clone(),
    });
    // Both lines' processes, in one table on disk; the next line's kept apart before it
    // are moved in.
    let process_table = ProcessTable::open(
        settings.state_dir.join("processes"),
        &[settings.state_dir.join("next-processes")],
        settings.max_process_records,
        settings.process_log_bytes,
    );
    let argv_processes = ArgvProcesses::new(
        ArgvConfig {
            base_env: base_env(&settings.pass_env),
            workspace: settings.workspace.clone(),
            world: world.clone(),
        },
        process_table.clone(),
    );
    let sessions = Arc::new(SessionManager::new(ExecConfig {
        state_dir: settings.state_dir.clone(),
        workspace: settings.workspace.clone(),
        base_env: base_env(&settings.pass_env),
        default_timeout: (settings.command_timeout_ms > 0)
            .then(|| std::time::Duration::from_millis(settings.command_timeout_ms)),
        world,
    }));
    let processes = Arc::new(ProcessService::new(sessions.clone(), process_table));
    // Retained watches of the last run come back under their ids, with what changed since.
    // A watch is of the workspace, confined or not: each starts on the directory opened
    // beneath it.
    let workspace = Arc::new(fsd_search::Within::new(std::slice::from_ref(
        &settings.workspace,
    ))?);
    let watches = Arc::new(
        WatchService::new(
            Some(settings.state_dir.join("watches")),
            settings.change_list_limit,
            settings.watch_engine,
        )
        .within(workspace),
    );
    // A restore the last stop took down is mounted again before the watches rescan their
    // trees, so what a token saw before the stop is compared with what the path shows now
    // (a mount made after an engine started is read too, but as the whole tree again).
    let backups = Arc::new(backups.await.map_err(std::io::Error::other)?);
    watches.restore();
    let maintained = Arc::downgrade(&watches);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(30));
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(watches) = maintained.upgrade() else {
                return;
            };
            watches.expire_idle();
            // Snapshots scan trees: off the async threads.
            let _ = tokio::task::spawn_blocking(move || watches.save(false)).await;
        }
    });
    let mounts = Arc::new(mounts.await.map_err(std::io::Error::other)?);
    let session_terminals = Arc::new(SessionTerminals::new(sessions.clone(), terminals.clone()));
    let interpreters = InterpreterService::new(InterpreterConfig {
        programs: interpreter::Programs::install(
            &settings.state_dir,
            settings.python.clone(),
            settings.node.clone(),
            settings.node_path.clone(),
        )?,
        world: sessions.config().world.clone(),
        base_env: sessions.config().base_env.clone(),
        workspace: settings.workspace.clone(),
        pool_size: settings.interpreter_pool,
        default_timeout: (settings.code_timeout_ms > 0)
            .then(|| std::time::Duration::from_millis(settings.code_timeout_ms)),
    });
    interpreters.warm();
    let tunnels = fsd_tunnels::Runs::new(fsd_tunnels::Config {
        binary: settings.cloudflared.clone(),
        ..fsd_tunnels::Config::default()
    });
    let paths = Paths::new(policy, sessions.clone());
    Ok(AppState {
        files: Arc::new(FileService::new(paths.clone(), scratch)),
        paths,
        sessions,
        processes,
        argv_processes,
        terminals,
        session_terminals,
        tunnels,
        watches,
        backups: backups.clone(),
        mounts,
        interpreters,
        extensions: Arc::new(crate::extensions::ExtensionHost::new(
            crate::extensions::ExtensionConfig {
                dir: settings.state_dir.join("extensions"),
                bun: settings.bun.clone(),
            },
        )),
        capabilities: Arc::new(Capabilities {
            restore_driver: backups.driver_name().to_string(),
            ..capabilities::detect(&settings.workspace, settings.confine)
        }),
        metrics: {
            let metrics =
                MetricsService::new(settings.workspace.clone(), settings.state_dir.clone());
            metrics.start_sampling();
            metrics
        },
        auth_enabled: settings.token.is_some(),
    })
}

/// Ends what the services hold: the user's processes, terminals and tunnels, then mounts
/// and restores, then the process world itself.
async fn stop_services(state: &AppState) {
    let watches = state.watches.clone();
    tokio::task::block_in_place(|| watches.shutdown());
    state.processes.kill_all().await;
    state.session_terminals.shutdown().await;
    state.tunnels.shutdown().await;
    state.mounts.release_all().await;
    let backups = state.backups.clone();
    for dir in tokio::task::block_in_place(|| backups.park_all()) {
        tracing::info!(
            dir = %dir.display(),
            "took a restore down for the stop; what was written to it is kept and it is mounted again when fsd starts"
        );
    }
    state.interpreters.shutdown();
    state.extensions.shutdown();
    state.sessions.shutdown().await;
}

/// SIGTERM and SIGINT, listened for from the start of `run`: one that arrives while the
/// daemon is still starting (a container stopped at once) shuts it down cleanly instead of
/// killing it by the default action.
struct ShutdownSignals {
    terminate: Option<tokio::signal::unix::Signal>,
    interrupt: Option<tokio::signal::unix::Signal>,
}

impl ShutdownSignals {
    fn listen() -> ShutdownSignals {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(signal) => Some(signal),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for {name}");
                None
            }
        };
        ShutdownSignals {
            terminate: listen(SignalKind::terminate(), "SIGTERM"),
            interrupt: listen(SignalKind::interrupt(), "SIGINT"),
        }
    }

    async fn received(mut self) {
        async fn next(signal: &mut Option<tokio::signal::unix::Signal>) {
            match signal {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = next(&mut self.interrupt) => tracing::info!("SIGINT: shutting down"),
            () = next(&mut self.terminate) => tracing::info!("SIGTERM: shutting down"),
        }
    }
}
