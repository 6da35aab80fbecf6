//! fsd on Cloudflare: the Worker entry and the `Sandbox` Durable Object that runs fsd's
//! container image, one object and one container per sandbox id.
//!
//! - `https://<port>-<id>-<token>.<host>/…` (a preview URL) goes to that sandbox's object,
//!   which checks the token against its storage before anything wakes the container.
//! - `/sandboxes/<id>/<route>` is that sandbox's route API (HTTP, SSE, `/ws`, `/ws/pty`),
//!   for callers holding the `FSD_TOKEN` secret, which goes no further than the Worker;
//!   `/sandboxes/<id>/expose`, `/unexpose` and `/exposed` manage its preview URLs,
//!   `/status` tells whether its container runs, `/backups`, `/restore` and `/schedule` are
//!   its time machine in R2, `/mounts` and `/unmount` its bucket mounts, and `/destroy`
//!   ends it.
//! - `http://s3-credential-proxy.internal/<object id>/<token>/…` is a container's bucket
//!   mount talking to its object's credential proxy (intercepted outbound HTTP; see
//!   `mounts`).
//!
//! The rules (ids, ports, tokens, staleness, `sleepAfter`, the 503 budget) are
//! `fsd-control`'s, shared with `fsctl gateway`.

mod backups;
mod daemon;
mod mounts;
mod r2;
mod random;
mod sandbox;
mod schedule;
mod wire;

use fsd_control::preview;
use fsd_control::sandbox::{DAEMON_PORT, sandbox_id};
use worker::{Context, Env, Request, Response, Result, event};

pub use sandbox::Sandbox;
use wire::{CALLER_CREDENTIALS, PREVIEW_HEADER, SANDBOX_ID_HEADER, error};

/// The Durable Object binding (`wrangler.toml`).
pub const BINDING: &str = "SANDBOX";

#[event(fetch)]
async fn fetch(request: Request, env: Env, _ctx: Context) -> Result<Response> {
    if mounts::intercepted(&request) {
        // A container's bucket-mount request, sent back here by its object's interception.
        // A path that names no object of this namespace is refused like an unknown token.
        let namespace = env.durable_object(BINDING)?;
        let Some(object) =
            mounts::object_of(&request).and_then(|object| namespace.id_from_string(&object).ok())
        else {
            return mounts::unknown_mount();
        };
        return object.get_stub()?.fetch_with_request(request).await;
    }
    let url = request.url()?;
    let host = url.host_str().unwrap_or_default().to_string();
    let host = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    };
    if let Some(target) = preview::parse_preview_host(&host, DAEMON_PORT) {
        let preview = format!("{}:{}", target.port, target.token);
        let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
        let path = format!("{}{query}", url.path());
        // A preview request's headers are the app's, but never the Worker's own secret.
        let leaks_secret = presents_secret(&request, &env) == Some(true);
        let drop: &[&str] = if leaks_secret {
            &CALLER_CREDENTIALS
        } else {
            &[]
        };
        return to_object(
            &env,
            &target.sandbox_id,
            request,
            &path,
            Some(&preview),
            drop,
        )
        .await;
    }
    let Some(rest) = url.path().strip_prefix("/sandboxes/") else {
        return error(404, "UNKNOWN_ERROR", "The requested endpoint was not found");
    };
    if presents_secret(&request, &env) == Some(false) {
        return error(401, "UNAUTHORIZED", "Missing or invalid token");
    }
    let (name, route) = rest.split_once('/').unwrap_or((rest, ""));
    let id = match sandbox_id(name, true) {
        Ok(id) => id,
        Err(refused) => return error(400, "VALIDATION_FAILED", &refused.to_string()),
    };
    let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
    let path = format!("/{route}{query}");
    to_object(&env, &id, request, &path, None, &CALLER_CREDENTIALS).await
}

/// Whether the caller presented the `FSD_TOKEN` secret (`Authorization: Bearer` or
/// `X-Fsd-Token`); `None` when no secret is set (every caller is let in).
fn presents_secret(request: &Request, env: &Env) -> Option<bool> {
    let secret = env.secret("FSD_TOKEN").ok()?.to_string();
    let header = |name: &str| request.headers().get(name).ok().flatten();
    let presented = header("x-fsd-token").or_else(|| {
        header("authorization").and_then(|value| value.strip_prefix("Bearer ").map(str::to_string))
    });
    Some(presented.is_some_and(|got| preview::tokens_match(got.trim(), &secret)))
}

/// Sends `request` to sandbox `id`'s object as `path`, without the headers in `drop` and
/// with the Worker's own. An API call loses what authenticated it to the Worker
/// (`Authorization`, `X-Fsd-Token`: the Worker's secret, which the container never sees); a
/// preview request keeps its headers, which belong to the app behind the port.
async fn to_object(
    env: &Env,
    id: &str,
    request: Request,
    path: &str,
    preview: Option<&str>,
    drop: &[&str],
) -> Result<Response> {
    let mut set = vec![(SANDBOX_ID_HEADER, id)];
    if let Some(preview) = preview {
        set.push((PREVIEW_HEADER, preview));
    }
    let forwarded = wire::rebuild(&request, &format!("http://sandbox{path}"), drop, &set)?;
    let stub = env.durable_object(BINDING)?.id_from_name(id)?.get_stub()?;
    stub.fetch_with_request(forwarded).await
}
