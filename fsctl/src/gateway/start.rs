//! `fsctl gateway`'s arguments, and starting a gateway (in the foreground, or in the
//! background for `fsctl up`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use fsd_sdk::SdkError;

use super::proxy::Tokens;

#[derive(Debug, clap::Args)]
pub struct GatewayArgs {
    /// Address to serve on (port 0 picks a free one; the line on stdout names it).
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// The hostname preview URLs are under (default: `localhost:<port>`, so they are
    /// `http://<port>-<id>-<token>.localhost:<port>/`).
    #[arg(long)]
    hostname: Option<String>,
    /// Where a sandbox's daemon is: a URL in which `{id}` stands for the sandbox id, such
    /// as `http://sandbox-{id}.sandboxes:3000` (default: the daemon of `--url`, for every
    /// id). Ids are put in only when they are DNS labels (a-z, 0-9, `-`).
    #[arg(long)]
    daemons: Option<String>,
    /// The file exposures are kept in across restarts.
    #[arg(long, default_value = "./fsd-gateway.json")]
    state: PathBuf,
    /// A key that gives each sandbox's daemon its own token (`fsctl sandbox-token ID`
    /// prints it, for that sandbox's Secret): the gateway derives the token of the sandbox
    /// it forwards to, so a sandbox that reads its own token reaches no other. Without it
    /// every daemon is reached with `--token`. Callers of the gateway still give `--token`.
    #[arg(long, env = super::sandbox_token::KEY_ENV, hide_env_values = true)]
    sandbox_token_key: Option<String>,
}

pub async fn run(
    args: GatewayArgs,
    url: &str,
    token: Option<String>,
) -> Result<ExitCode, SdkError> {
    let running = start(
        args.listen,
        args.hostname,
        args.daemons.unwrap_or_else(|| url.to_string()),
        &args.state,
        Tokens {
            callers: token,
            sandbox_key: args.sandbox_token_key,
        },
    )
    .await?;
    println!("fsctl gateway listening on {}", running.url);
    running.task.await.map_err(std::io::Error::other)??;
    Ok(ExitCode::SUCCESS)
}

/// A gateway serving in the background (`fsctl up` runs one).
pub struct Running {
    pub url: String,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Starts a gateway on `listen` for the daemons of `template`.
pub async fn start(
    listen: SocketAddr,
    hostname: Option<String>,
    template: String,
    state_file: &std::path::Path,
    tokens: Tokens,
) -> Result<Running, SdkError> {
    let exposures = super::state::Exposures::load(Some(state_file))?;
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let address = listener.local_addr()?;
    let hostname = hostname.unwrap_or_else(|| format!("localhost:{}", address.port()));
    let gateway = super::proxy::Gateway::new(exposures, template, hostname, tokens)?;
    Ok(Running {
        url: format!("http://{address}"),
        task: tokio::spawn(super::serve::serve(gateway, listener)),
    })
}
