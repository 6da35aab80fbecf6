//! `fsctl tunnel PORT [--named TOKEN]`: a public URL for a sandbox port, up until Ctrl-C.

use std::process::ExitCode;

use fsd_api::tunnels::EnsureTunnelRequest;
use fsd_sdk::{Sandbox, SdkError};

use crate::interrupt::Interrupt;

#[derive(Debug, clap::Args)]
pub struct TunnelArgs {
    /// The sandbox port to expose.
    port: u32,
    /// Run the named tunnel of this token instead of a quick one (or set FSD_TUNNEL_TOKEN).
    #[arg(long, env = "FSD_TUNNEL_TOKEN", hide_env_values = true)]
    named: Option<String>,
}

pub async fn run(sandbox: &Sandbox, args: TunnelArgs, json: bool) -> Result<ExitCode, SdkError> {
    let request = EnsureTunnelRequest {
        mode: if args.named.is_some() {
            "named"
        } else {
            "quick"
        }
        .into(),
        port: args.port,
        token: args.named,
        ..EnsureTunnelRequest::default()
    };
    let interrupt = Interrupt::listen()?;
    let answer = sandbox.ensure_tunnel(&request).await?;
    let run = &answer.run;
    if json {
        println!(
            "{}",
            serde_json::to_string(run).map_err(|e| SdkError::Decode {
                status: 200,
                message: e.to_string()
            })?
        );
    } else {
        match &run.url {
            Some(url) => println!("{url}"),
            None => println!("named tunnel {} up for port {}", run.tunnel_id, run.port),
        }
    }
    say!("fsctl: the tunnel runs until Ctrl-C");
    interrupt.wait().await;
    sandbox.stop_tunnel(&run.tunnel_id, &run.run_id).await?;
    Ok(ExitCode::SUCCESS)
}
