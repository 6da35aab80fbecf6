//! Bucket mounts with no key in the container: the object mounts an R2 bucket through fsd's
//! `POST /api/mounts` with a proxy URL on [`PROXY_HOST`], and intercepts the container's
//! outbound HTTP to that host (`interceptOutboundHttp`, which the `worker` crate does not
//! wrap). The Worker entry routes each intercepted request back to this object by the object
//! id in its path; the object finds the mount by its token, lets through what
//! `fsd_s3::forward::plan` lets through for the mount's scope (the native credential proxy
//! runs the same function), signs it with R2's keys and sends it on.
//!
//! The mounts are kept in storage for the container run they were made in; a container that
//! starts again has none (fsd's FUSE mounts end with it), so a fresh start forgets them.

use fsd_control::mounts::{PROXY_HOST, SandboxMounts, SavedMount, proxy_url, route, token};
use fsd_s3::forward::{self, Forward, Refusal};
use fsd_s3::sign::sign_headers_at;
use serde::Deserialize;
use worker::js_sys::{Function, Promise, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{Container, Fetch, Headers, Method, Request, RequestInit, Response, Result, State};

use crate::daemon::Daemon;
use crate::wire::error;

/// Storage key of the saved mounts.
const MOUNTS_KEY: &str = "mounts";

/// Whether `request` is one the container sent to the proxy host (intercepted).
pub fn intercepted(request: &Request) -> bool {
    request
        .url()
        .is_ok_and(|url| url.host_str() == Some(PROXY_HOST))
}

/// The object an intercepted request is for (its id in the path), if the path has one.
pub fn object_of(request: &Request) -> Option<String> {
    let url = request.url().ok()?;
    route(url.path()).map(|(id, _)| id.to_string())
}

async fn load(state: &State) -> Result<SandboxMounts> {
    let saved: Vec<SavedMount> = state.storage().get(MOUNTS_KEY).await?.unwrap_or_default();
    Ok(SandboxMounts::from_saved(saved))
}

async fn save(state: &State, mounts: &SandboxMounts) -> Result<()> {
    state.storage().put(MOUNTS_KEY, mounts.saved()).await
}

/// Forgets every mount (a container that starts again has none).
pub async fn forget(state: &State) -> Result<()> {
    state.storage().delete(MOUNTS_KEY).await?;
    Ok(())
}

/// `POST /mounts {bucket, mountPath, prefix?, readOnly?}`: `bucket` is a bucket of the R2
/// account whose keys the Worker holds. Answers fsd's mount answer.
pub async fn mount(
    state: &State,
    env: &worker::Env,
    container: &Container,
    daemon: &Daemon,
    mut request: Request,
) -> Result<Response> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Mount {
        bucket: String,
        mount_path: String,
        #[serde(default)]
        prefix: String,
        #[serde(default)]
        read_only: bool,
    }
    let Ok(asked) = request.json::<Mount>().await else {
        return error(
            400,
            "INVALID_MOUNT_CONFIG",
            "body: needs bucket and mountPath",
        );
    };
    // The container's requests are signed with R2's keys: without them every one would fail.
    if let Err(missing) = crate::r2::upstream(env) {
        return missing.answer();
    }
    let mut mounts = load(state).await?;
    let random = crate::random::bytes::<16>()?;
    let added = match mounts.add(
        &asked.mount_path,
        &asked.bucket,
        &asked.prefix,
        asked.read_only,
        token(random),
    ) {
        Ok(added) => added,
        Err(refused) => return error(400, "INVALID_MOUNT_CONFIG", &refused.to_string()),
    };
    if let Err(refused) = intercept(state, container).await {
        return error(500, "S3FS_MOUNT_ERROR", &refused.to_string());
    }
    let object_id = state.id().to_string();
    let body = serde_json::json!({
        "bucket": added.bucket,
        "mountPath": added.mount_path,
        "proxyUrl": proxy_url(&object_id, &added.token),
        "prefix": (!added.prefix.is_empty()).then(|| format!("/{}", added.prefix)),
        "readOnly": added.read_only,
        "provider": "r2",
    });
    let answer = daemon
        .call(Method::Post, "/api/mounts", Some(&body))
        .await?;
    if answer.status_code() == 200 {
        save(state, &mounts).await?;
    }
    Ok(answer)
}

/// `POST /unmount {mountPath}`: fsd unmounts, and the mount's token stops working.
pub async fn unmount(state: &State, daemon: &Daemon, mut request: Request) -> Result<Response> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Unmount {
        mount_path: String,
    }
    let Ok(asked) = request.json::<Unmount>().await else {
        return error(400, "INVALID_MOUNT_CONFIG", "body: needs mountPath");
    };
    let body = serde_json::json!({"mountPath": asked.mount_path});
    let answer = daemon
        .call(Method::Delete, "/api/mounts", Some(&body))
        .await?;
    let mut mounts = load(state).await?;
    if answer.status_code() == 200 && mounts.remove(&asked.mount_path).is_some() {
        save(state, &mounts).await?;
    }
    Ok(answer)
}

/// An intercepted request from the container: through the mount its token names, signed
/// with R2's keys; anything else is refused as S3 refuses (403 `AccessDenied`).
pub async fn proxy(state: &State, env: &worker::Env, request: Request) -> Result<Response> {
    let url = request.url()?;
    let mounts = load(state).await?;
    let after_object = route(url.path()).map_or("/", |(_, rest)| rest);
    let Some((mount, raw_path)) = mounts.by_token(after_object) else {
        return refused(&Refusal::UnknownMount, "/");
    };
    let upstream = match crate::r2::upstream(env) {
        Ok(upstream) => upstream,
        Err(missing) => return missing.answer(),
    };
    let method = request.method().to_string();
    let received: Vec<(String, String)> = request.headers().entries().collect();
    let planned = forward::plan(
        &mount.scope(),
        &upstream.endpoint,
        &method,
        raw_path,
        url.query(),
        received
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str())),
    );
    let Forward { url, headers } = match planned {
        Ok(planned) => planned,
        Err(denied) => return refused(&Refusal::Denied(denied), raw_path),
    };
    let signed = sign_headers_at(&upstream, &method, &url, &headers, crate::r2::now())
        .map_err(worker::Error::RustError)?;
    let outgoing = Headers::new();
    for (name, value) in headers.iter().chain(signed.iter()) {
        outgoing.set(name, value)?;
    }
    let mut init = RequestInit::new();
    init.with_method(request.method()).with_headers(outgoing);
    if let Some(body) = request.inner().body() {
        init.with_body(Some(body.into()));
    }
    Fetch::Request(Request::new_with_init(&url, &init)?)
        .send()
        .await
}

/// The answer to an intercepted request that names no object.
pub fn unknown_mount() -> Result<Response> {
    refused(&Refusal::UnknownMount, "/")
}

fn refused(refusal: &Refusal, resource: &str) -> Result<Response> {
    let (status, body) = refusal.answer(resource);
    let mut response = Response::ok(body)?.with_status(status);
    response
        .headers_mut()
        .set("content-type", "application/xml")?;
    Ok(response)
}

/// Routes the container's HTTP to [`PROXY_HOST`] to this Worker's own entry (`ctx.exports
/// .default`, compatibility date 2025-11-17 or later), which sends it back to this object.
/// `interceptOutboundHttp` has no wrapper in the `worker` crate yet: called through
/// `js_sys`.
async fn intercept(state: &State, container: &Container) -> Result<()> {
    let missing = |what: &str| worker::Error::RustError(format!("{what} is not available"));
    let exports = Reflect::get(state.as_raw(), &JsValue::from_str("exports"))?;
    let own_entry = Reflect::get(&exports, &JsValue::from_str("default"))
        .ok()
        .filter(|entry| !entry.is_undefined())
        .ok_or_else(|| missing("ctx.exports.default"))?;
    let method: Function = Reflect::get(
        container.as_ref(),
        &JsValue::from_str("interceptOutboundHttp"),
    )?
    .dyn_into()
    .map_err(|_| missing("container.interceptOutboundHttp"))?;
    let pending = method.call2(
        container.as_ref(),
        &JsValue::from_str(PROXY_HOST),
        &own_entry,
    )?;
    if let Ok(promise) = pending.dyn_into::<Promise>() {
        JsFuture::from(promise).await?;
    }
    Ok(())
}
