//! `fsctl up`: the one-machine default. Runs `fsd serve` over a local workspace with a fresh
//! token, the embedded object store, and a credential proxy through which the daemon mounts
//! the store's bucket; prints how to reach it all, and stays in the foreground until Ctrl-C
//! or SIGTERM, which it passes on to the daemon.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};

use std::sync::Arc;

use fsctl::trusted::{
    Backups, BucketAccess, EmbeddedStore, MountOptions, Round, Schedule, mount_bucket,
    start_schedule,
};
use fsd_api::mounts::BucketMountInfo;
use fsd_sdk::{Sandbox, SdkError};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::output;

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Directory to serve; created if missing.
    #[arg(long, default_value = "./workspace")]
    workspace: PathBuf,
    /// Address for the daemon (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: String,
    /// The daemon's state directory (watch tokens, mount records, archives' bookkeeping),
    /// its own: two daemons sharing one would detach each other's mounts at start.
    #[arg(long, default_value = "./fsd-state")]
    state_dir: PathBuf,
    /// Directory of the embedded object store that backups go to.
    #[arg(long, default_value = "./fsd-store")]
    store_dir: PathBuf,
    /// Address of the embedded object store (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    store_listen: std::net::SocketAddr,
    /// Where the embedded store's bucket is mounted (through a credential proxy run here).
    #[arg(long, default_value = "./fsd-bucket")]
    mount_dir: PathBuf,
    /// The key prefix the mount shows (backups stay outside it).
    #[arg(long, default_value = "files")]
    mount_prefix: String,
    /// Do not mount the bucket.
    #[arg(long)]
    no_mount: bool,
    /// Address of the preview gateway (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8787")]
    gateway_listen: std::net::SocketAddr,
    /// Do not run the preview gateway.
    #[arg(long)]
    no_gateway: bool,
    /// Make a new token and new store keys instead of the ones the last start kept in the
    /// state directory (`fsctl-up.json`), so what was handed out before stops working.
    #[arg(long)]
    new_token: bool,
    /// The fsd binary. Default: the one beside fsctl, else `fsd` on PATH.
    #[arg(long, env = "FSD_BIN")]
    fsd: Option<PathBuf>,
    /// Snapshot this sandbox directory on a schedule (`--every`), pruned by the `--keep-…`
    /// rules after each snapshot. Relative to the workspace.
    #[arg(long, requires = "every")]
    snapshot: Option<String>,
    /// How often to snapshot: `30s`, `10m`, `1h` or seconds.
    #[arg(long, value_parser = every, requires = "snapshot")]
    every: Option<std::time::Duration>,
    #[command(flatten)]
    keep: crate::backup::PolicyArgs,
}

fn every(text: &str) -> Result<std::time::Duration, String> {
    fsd_control::sandbox::parse_sleep_after(text).map_err(|error| error.to_string())
}

/// What `fsctl up` started, as it tells the user.
struct Started<'a> {
    url: &'a str,
    token: &'a str,
    workspace: &'a Path,
    pid: Option<u32>,
    kept: &'a Path,
    store_url: &'a str,
    access_key: &'a str,
    secret_key: &'a str,
    mount: Option<&'a BucketMountInfo>,
    gateway: Option<&'a str>,
}

impl Started<'_> {
    /// The document (`--json`), or what to type next in another shell.
    fn print(&self, as_json: bool) {
        let Started {
            url,
            token,
            workspace,
            pid,
            kept,
            store_url,
            access_key,
            secret_key,
            mount,
            gateway,
        } = self;
        if as_json {
            output::json(
                &json!({"url": url, "token": token, "workspace": workspace, "pid": pid, "kept": kept,
                    "store": {"endpoint": store_url, "bucket": "fsd", "accessKey": access_key, "secretKey": secret_key},
                    "mount": mount, "gateway": gateway.map(|url| json!({"url": url}))}),
            );
            return;
        }
        println!("fsd is up");
        println!("  url:       {url}");
        println!("  token:     {token}");
        println!("  workspace: {}", workspace.display());
        println!("  store:     {store_url} (bucket fsd)");
        println!(
            "  kept:      {} (the token, the store's keys and address, for the next start; \
             --new-token makes new ones)",
            kept.display()
        );
        if let Some(info) = mount {
            println!(
                "  mount:     {} (bucket fsd, prefix {})",
                info.mount_path, info.prefix
            );
        }
        if let Some(url) = gateway {
            println!("  gateway:   {url} (fsctl expose PORT --gateway {url})");
        }
        println!();
        println!("In another shell:");
        println!("  export FSD_URL={url} FSD_TOKEN={token}");
        println!(
            "  export FSD_S3_ENDPOINT={store_url} FSD_S3_BUCKET=fsd FSD_S3_ACCESS_KEY={access_key} FSD_S3_SECRET_KEY={secret_key}"
        );
        println!("  fsctl ls");
        println!("  fsctl backup create {}", workspace.display());
        println!("Stop with Ctrl-C.");
    }
}

pub async fn run(args: UpArgs, token: Option<String>, as_json: bool) -> Result<ExitCode, SdkError> {
    // Listened for before anything starts: a signal that came before the document was
    // printed would otherwise end fsctl by the default action and leave the daemon running.
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    std::fs::create_dir_all(&args.state_dir)?;
    let state_dir = std::fs::canonicalize(&args.state_dir)?;
    let kept_file = state_dir.join(KEPT_FILE);
    let kept = if args.new_token {
        None
    } else {
        Kept::read(&kept_file)
    };
    // A token given (--token, FSD_TOKEN) wins; else the one the last start kept; else new.
    let token = match (token, &kept) {
        (Some(token), _) => token,
        (None, Some(kept)) => kept.token.clone(),
        (None, None) => random_token()?,
    };
    std::fs::create_dir_all(&args.workspace)?;
    let (access_key, secret_key) = match &kept {
        Some(kept) => (kept.access_key.clone(), kept.secret_key.clone()),
        None => (random_token()?, random_token()?),
    };
    let workspace = std::fs::canonicalize(&args.workspace)?;
    let binary = args.fsd.unwrap_or_else(default_fsd_binary);
    let mut child = Command::new(&binary)
        .args(["serve", "--listen", &args.listen, "--workspace"])
        .arg(&workspace)
        .arg("--state-dir")
        .arg(&state_dir)
        .env("FSD_TOKEN", &token)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| {
            std::io::Error::new(
                err.kind(),
                format!("cannot start {}: {err}", binary.display()),
            )
        })?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("no daemon stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let url = match lines.next_line().await? {
        Some(line) => line
            .trim()
            .trim_start_matches("fsd listening on ")
            .to_string(),
        None => {
            let status = child.wait().await?;
            return Err(
                std::io::Error::other(format!("fsd exited before listening ({status})")).into(),
            );
        }
    };
    // The store once the daemon serves: a start its daemon refuses (another `fsctl up` holds
    // the state directory, say) starts no store on the running one's directory. At its last
    // address again when none was asked for, unless that is taken now.
    let last_store = kept
        .as_ref()
        .and_then(|kept| kept.store)
        .filter(|last| args.store_listen.port() == 0 && last.ip() == args.store_listen.ip());
    let start_store =
        |listen| EmbeddedStore::start(&args.store_dir, listen, "fsd", &access_key, &secret_key);
    let store = match last_store {
        Some(last) => match start_store(last).await {
            Ok(store) => store,
            Err(SdkError::Io(err)) if err.kind() == std::io::ErrorKind::AddrInUse => {
                let store = start_store(args.store_listen).await?;
                say!(
                    "fsctl up: the store's last address {last} is taken; it is at {} now",
                    store.address
                );
                store
            }
            Err(err) => return Err(err),
        },
        None => start_store(args.store_listen).await?,
    };
    let store_url = format!("http://{}", store.address);
    // Kept once the daemon serves: a start that fails (another `fsctl up` holds the state
    // directory, say) leaves what the running one kept as it was.
    Kept {
        token: token.clone(),
        access_key: access_key.clone(),
        secret_key: secret_key.clone(),
        store: Some(store.address),
    }
    .write(&kept_file)?;
    let mount = if args.no_mount {
        None
    } else {
        let sandbox = Sandbox::connect(&url, Some(&token))?;
        let object_store = BucketAccess::new(&store_url, "fsd", &access_key, &secret_key);
        let options = MountOptions {
            prefix: args.mount_prefix.clone(),
            ..MountOptions::default()
        };
        let mount_dir = std::path::absolute(&args.mount_dir)?;
        let mount_path = mount_dir.display().to_string();
        // No FUSE here (no /dev/fuse, not root): everything else still works.
        match mount_bucket(&sandbox, &object_store, &mount_path, &options).await {
            Ok(mount) => Some(mount),
            Err(err) => {
                say!("fsctl: the bucket is not mounted: {err}");
                None
            }
        }
    };
    let gateway = if args.no_gateway {
        None
    } else {
        // Beside the store's directory: what `fsctl up` keeps stays together.
        let state = std::path::absolute(args.store_dir.with_file_name("fsd-gateway.json"))?;
        let started = crate::gateway::start(
            args.gateway_listen,
            None,
            url.clone(),
            &state,
            crate::gateway::Tokens {
                callers: Some(token.clone()),
                sandbox_key: None,
            },
        )
        .await;
        // Its address taken: everything else still works, as without FUSE.
        match started {
            Ok(running) => Some(running),
            Err(err) => {
                say!(
                    "fsctl: the preview gateway is not running ({err}); \
                     --gateway-listen names another address"
                );
                None
            }
        }
    };
    let snapshots = match (&args.snapshot, args.every) {
        (Some(dir), Some(every)) => {
            let sandbox = Sandbox::connect(&url, Some(&token))?;
            let store = BucketAccess::new(&store_url, "fsd", &access_key, &secret_key);
            let schedule = Schedule {
                dir: workspace.join(dir).display().to_string(),
                every,
                policy: args.keep.policy(),
            };
            Some(start_schedule(
                sandbox,
                Arc::new(Backups::new(store)),
                schedule,
                |round| match round {
                    Round::Done { id, removed } if removed.is_empty() => {
                        say!("fsctl: snapshot {id}");
                    }
                    Round::Done { id, removed } => {
                        say!("fsctl: snapshot {id}; pruned {}", removed.join(" "));
                    }
                    Round::Failed(why) => say!("fsctl: {why}"),
                },
            ))
        }
        _ => None,
    };
    Started {
        url: &url,
        token: &token,
        workspace: &workspace,
        pid: child.id(),
        kept: &kept_file,
        store_url: &store_url,
        access_key: &access_key,
        secret_key: &secret_key,
        mount: mount.as_ref().map(|m| &m.info),
        gateway: gateway.as_ref().map(|g| g.url.as_str()),
    }
    .print(as_json);
    // Keep draining the daemon's stdout so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let status = tokio::select! {
        status = child.wait() => status?,
        _ = interrupt.recv() => stop(&mut child).await?,
        _ = terminate.recv() => stop(&mut child).await?,
    };
    drop(snapshots);
    // The daemon released the mount as it stopped; the proxy can go now.
    drop(mount);
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

/// Asks the daemon to shut down gracefully and waits for it.
async fn stop(child: &mut tokio::process::Child) -> std::io::Result<std::process::ExitStatus> {
    if let Some(pid) = child.id() {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    }
    child.wait().await
}

fn default_fsd_binary() -> PathBuf {
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("fsd")));
    match sibling {
        Some(path) if path.exists() => path,
        _ => Path::new("fsd").to_path_buf(),
    }
}

/// 128 random bits from the kernel, hex-encoded.
fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(fsd_api::hex::lower(&bytes))
}

/// Where `fsctl up` keeps what its next start reuses, in its state directory.
const KEPT_FILE: &str = "fsctl-up.json";

/// What `fsctl up` keeps between its starts, so that shells given the token and the store's
/// keys, and a running `fsctl sync --follow`, go on after a restart (each start made new
/// ones, and every one of them got UNAUTHORIZED).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kept {
    token: String,
    access_key: String,
    secret_key: String,
    store: Option<std::net::SocketAddr>,
}

impl Kept {
    /// What the last start kept; nothing when there is no file or it cannot be read.
    fn read(path: &std::path::Path) -> Option<Kept> {
        let text = std::fs::read(path).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Written private (0600: it holds secrets) through a temp file renamed into place.
    fn write(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let temp = path.with_extension("json.tmp");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(&serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    }
}
