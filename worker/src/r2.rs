//! R2 through its S3 API: the account's endpoint and keys (Worker secrets `R2_ACCOUNT_ID`,
//! `R2_ACCESS_KEY_ID`, `R2_SECRET_ACCESS_KEY`), and the Workers clock that signatures are
//! made at (the runtime has no `SystemTime::now`).
//!
//! `R2_ENDPOINT` (a var, optional) names another S3 endpoint instead of the account's: the
//! local stack (`scripts/dev-cloudflare`) points it at an S3-compatible store on the host.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fsd_s3::Upstream;
use worker::{Date, Env, Response, Result};

use crate::wire::error;

/// Secrets and vars a route needs that the deployment has not set. Answered 503
/// `NOT_CONFIGURED` naming them: the caller did nothing wrong, the Worker is not set up.
#[derive(Debug)]
pub struct Missing(pub Vec<&'static str>);

impl Missing {
    pub fn answer(&self) -> Result<Response> {
        let names = self.0.join(", ");
        error(
            503,
            "NOT_CONFIGURED",
            &format!(
                "the Worker has no {names}: set {} with `wrangler secret put NAME` (or as a var)",
                if self.0.len() == 1 { "it" } else { "them" }
            ),
        )
    }
}

/// R2's S3 endpoint for the account (or `R2_ENDPOINT`), with its keys.
pub fn upstream(env: &Env) -> std::result::Result<Upstream, Missing> {
    let value = |name: &str| {
        env.secret(name)
            .map(|value| value.to_string())
            .or_else(|_| env.var(name).map(|value| value.to_string()))
            .ok()
            .filter(|value| !value.is_empty())
    };
    let endpoint = value("R2_ENDPOINT").or_else(|| {
        value("R2_ACCOUNT_ID").map(|account| format!("https://{account}.r2.cloudflarestorage.com"))
    });
    match (
        endpoint,
        value("R2_ACCESS_KEY_ID"),
        value("R2_SECRET_ACCESS_KEY"),
    ) {
        (Some(endpoint), Some(access_key), Some(secret_key)) => Ok(Upstream {
            endpoint,
            region: "auto".into(),
            access_key,
            secret_key,
        }),
        (endpoint, access_key, secret_key) => Err(Missing(
            [
                (endpoint, "R2_ACCOUNT_ID"),
                (access_key, "R2_ACCESS_KEY_ID"),
                (secret_key, "R2_SECRET_ACCESS_KEY"),
            ]
            .into_iter()
            .filter_map(|(value, name)| value.is_none().then_some(name))
            .collect(),
        )),
    }
}

/// `host:port` of `R2_ENDPOINT` when it is plain http (a local store): fsd is told it may
/// send transfers there (`FSD_HTTP_TRANSFER_HOSTS`), as it takes http only to loopback
/// otherwise.
pub fn plain_http_host(env: &Env) -> Option<String> {
    let endpoint = env.var("R2_ENDPOINT").ok()?.to_string();
    let url = worker::Url::parse(&endpoint).ok()?;
    (url.scheme() == "http").then(|| {
        let host = url.host_str().unwrap_or_default();
        match url.port_or_known_default() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        }
    })
}

/// The bucket backups go to (the `R2_BUCKET` var).
pub fn bucket(env: &Env) -> std::result::Result<String, Missing> {
    env.var("R2_BUCKET")
        .map(|value| value.to_string())
        .ok()
        .filter(|value| !value.is_empty())
        .ok_or(Missing(vec!["R2_BUCKET"]))
}

/// The Workers clock as a `SystemTime`, for signing.
pub fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(Date::now().as_millis())
}
