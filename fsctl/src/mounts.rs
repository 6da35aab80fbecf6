//! `fsctl mount`, `fsctl umount`, `fsctl mounts`: buckets mounted in the sandbox. By
//! default the mount goes through a credential proxy this process runs (the sandbox gets
//! no key) and `fsctl mount` stays in the foreground to serve it; `--direct` hands the
//! daemon the keys instead and returns at once.

use std::net::SocketAddr;
use std::process::ExitCode;

use fsctl::trusted::{MountOptions, mount_bucket};
use fsd_sdk::api::mounts::{BucketMountInfo, MountBucketRequest, MountCredentials};
use fsd_sdk::{Sandbox, SdkError};

use crate::backup::StoreArgs;
use crate::interrupt::Interrupt;
use crate::output;

#[derive(Debug, clap::Args)]
pub struct MountArgs {
    /// Absolute path in the sandbox; made if missing (and removed again at unmount).
    mount_path: String,
    /// Key prefix to show as the mount's root (`data` or `/data`); default: the bucket.
    #[arg(long, default_value = "")]
    prefix: String,
    #[arg(long)]
    read_only: bool,
    /// Give the daemon the store's keys instead of running a credential proxy.
    #[arg(long)]
    direct: bool,
    /// Where the credential proxy listens.
    #[arg(long, default_value = "127.0.0.1:0")]
    proxy_listen: SocketAddr,
    /// The proxy URL as the sandbox reaches it, if not the listen address.
    #[arg(long)]
    proxy_advertise: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Debug, clap::Args)]
pub struct UmountArgs {
    mount_path: String,
}

fn show(info: &BucketMountInfo, as_json: bool) {
    if as_json {
        output::json(info);
    } else {
        println!(
            "{} <- {}/{}{}{}",
            info.mount_path,
            info.bucket,
            info.prefix,
            if info.read_only { " (read-only)" } else { "" },
            if info.via_proxy {
                " via credential proxy"
            } else {
                ""
            },
        );
    }
}

pub async fn mount(
    sandbox: &Sandbox,
    args: MountArgs,
    as_json: bool,
) -> Result<ExitCode, SdkError> {
    let store = args.store.store();
    let prefix = fsd_mounts::fs::keys::normalize_prefix(&args.prefix);
    if args.direct {
        let request = MountBucketRequest {
            bucket: store.bucket.clone(),
            mount_path: args.mount_path,
            endpoint: Some(store.endpoint.clone()),
            prefix: (!prefix.is_empty()).then(|| format!("/{prefix}")),
            read_only: Some(args.read_only),
            region: Some(store.region.clone()),
            credentials: Some(MountCredentials {
                access_key_id: store.access_key.clone(),
                secret_access_key: store.secret_key.clone(),
            }),
            ..MountBucketRequest::default()
        };
        show(&sandbox.mount_bucket(&request).await?, as_json);
        return Ok(ExitCode::SUCCESS);
    }
    let options = MountOptions {
        prefix,
        read_only: args.read_only,
        listen: Some(args.proxy_listen),
        advertise: args.proxy_advertise,
    };
    let mounted = mount_bucket(sandbox, &store, &args.mount_path, &options).await?;
    let interrupt = Interrupt::listen()?;
    show(&mounted.info, as_json);
    if !as_json {
        println!(
            "serving the credential proxy at {}; Ctrl-C unmounts",
            mounted.proxy_url()
        );
    }
    interrupt.wait().await;
    mounted.unmount(sandbox).await?;
    Ok(ExitCode::SUCCESS)
}

pub async fn umount(
    sandbox: &Sandbox,
    args: UmountArgs,
    as_json: bool,
) -> Result<ExitCode, SdkError> {
    let answer = sandbox.unmount_bucket(&args.mount_path).await?;
    if as_json {
        output::json(&answer);
    } else {
        println!(
            "unmounted {}{}",
            answer.mount_path,
            if answer.removed_dir {
                " (directory removed)"
            } else {
                ""
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn list(sandbox: &Sandbox, as_json: bool) -> Result<ExitCode, SdkError> {
    let mounts = sandbox.list_bucket_mounts().await?;
    if as_json {
        output::json(&mounts);
    } else {
        for info in &mounts {
            show(info, false);
        }
    }
    Ok(ExitCode::SUCCESS)
}
