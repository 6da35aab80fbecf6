//! `fsctl proxy`: the credential proxy on its own. A sandbox sends unsigned S3 requests to
//! it; it lets through what is inside the scope (bucket, key prefix, read-only), signs them
//! with the store's keys and forwards them. The keys never leave this process.

use std::net::SocketAddr;
use std::process::ExitCode;

use fsd_control::Scope;
use fsd_s3::CredentialProxy;
use fsd_sdk::SdkError;

use crate::backup::StoreArgs;
use crate::interrupt::Interrupt;

#[derive(Debug, clap::Args)]
pub struct ProxyArgs {
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Key prefix the sandbox may use (`""`: the whole bucket).
    #[arg(long, default_value = "")]
    prefix: String,
    /// Refuse everything but GET and HEAD.
    #[arg(long)]
    read_only: bool,
    #[command(flatten)]
    store: StoreArgs,
}

/// Runs until Ctrl-C or SIGTERM. The first stdout line is `fsd proxy listening on http://ADDR`.
pub async fn run(args: ProxyArgs) -> Result<ExitCode, SdkError> {
    let store = args.store.store();
    let scope = Scope {
        bucket: store.bucket.clone(),
        prefix: args.prefix,
        read_only: args.read_only,
    };
    let upstream = store.upstream();
    let proxy = CredentialProxy::start(args.listen, scope, upstream)
        .await
        .map_err(|e| SdkError::Storage(e.to_string()))?;
    let interrupt = Interrupt::listen()?;
    println!("fsd proxy listening on {}", proxy.url());
    interrupt.wait().await;
    Ok(ExitCode::SUCCESS)
}
