//! `fsctl expose PORT`, `fsctl unexpose PORT`, `fsctl exposed`: preview URLs through the
//! gateway (`fsctl gateway`, or the one `fsctl up` runs).

use std::process::ExitCode;

use fsd_sdk::{Gateway, SdkError};

#[derive(Debug, clap::Args)]
pub struct GatewayTarget {
    /// The gateway.
    #[arg(long, env = "FSD_GATEWAY", default_value = "http://127.0.0.1:8787")]
    gateway: String,
    /// The sandbox whose port it is.
    #[arg(long, default_value = "local")]
    sandbox: String,
}

#[derive(Debug, clap::Args)]
pub struct ExposeArgs {
    port: u16,
    /// A preview token of your own (1-16 of a-z, 0-9, _); otherwise the port's or a new
    /// one. (`--token` is fsctl's API token, which the gateway also asks for.)
    #[arg(long)]
    preview_token: Option<String>,
    #[command(flatten)]
    target: GatewayTarget,
}

#[derive(Debug, clap::Args)]
pub struct UnexposeArgs {
    port: u16,
    #[command(flatten)]
    target: GatewayTarget,
}

pub async fn expose(
    args: ExposeArgs,
    token: Option<&str>,
    json: bool,
) -> Result<ExitCode, SdkError> {
    let gateway = Gateway::connect(&args.target.gateway, token);
    let exposed = gateway
        .expose_port(
            &args.target.sandbox,
            args.port,
            args.preview_token.as_deref(),
        )
        .await?;
    if json {
        print_json(&exposed)?;
    } else {
        println!("{}", exposed.url);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn unexpose(
    args: UnexposeArgs,
    token: Option<&str>,
    json: bool,
) -> Result<ExitCode, SdkError> {
    let gateway = Gateway::connect(&args.target.gateway, token);
    gateway
        .unexpose_port(&args.target.sandbox, args.port)
        .await?;
    if json {
        print_json(&serde_json::json!({"port": args.port, "exposed": false}))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn exposed(
    target: GatewayTarget,
    token: Option<&str>,
    json: bool,
) -> Result<ExitCode, SdkError> {
    let gateway = Gateway::connect(&target.gateway, token);
    let ports = gateway.exposed_ports(&target.sandbox).await?;
    if json {
        print_json(&ports)?;
    } else {
        for port in ports {
            let status = port.status.as_deref().unwrap_or("");
            println!("{:>5}  {status:<6}  {}", port.port, port.url);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_json(value: &impl serde::Serialize) -> Result<(), SdkError> {
    let text = serde_json::to_string(value).map_err(|error| SdkError::Decode {
        status: 200,
        message: error.to_string(),
    })?;
    println!("{text}");
    Ok(())
}
