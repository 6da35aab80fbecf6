//! Docker's API in front of podman's for workerd (`fsd_tests::docker_api`): started by
//! `scripts/dev-cloudflare`, which points workerd's `DOCKER_HOST` at it.
//!
//! `docker-api-proxy --listen SOCKET --upstream PODMAN_SOCKET [--idle-exit SECONDS]`

use std::path::PathBuf;
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|arg| arg == flag)
            .and_then(|at| args.get(at + 1))
    };
    let (Some(listen), Some(upstream)) = (value("--listen"), value("--upstream")) else {
        eprintln!(
            "usage: docker-api-proxy --listen SOCKET --upstream PODMAN_SOCKET [--idle-exit SECONDS]"
        );
        std::process::exit(2);
    };
    let idle = value("--idle-exit")
        .and_then(|seconds| seconds.parse().ok())
        .map(Duration::from_secs);
    fsd_tests::docker_api::serve(listen.as_ref(), PathBuf::from(upstream), idle).await
}
