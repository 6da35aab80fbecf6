//! The gateway's state, and preview requests checked and proxied to sandbox ports.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use fsd_control::preview::{self, Admission};
use fsd_sdk::SdkError;

use super::state::Exposures;

/// How long a sandbox's run id is trusted before it is asked again.
const RUNTIME_TTL: Duration = Duration::from_secs(1);

/// What the gateway asks of its callers, and how it reaches each daemon.
pub struct Tokens {
    /// The trusted side's token: the admin and route APIs require it; daemons are reached
    /// with it when there is no sandbox key.
    pub callers: Option<String>,
    /// Derives each sandbox's own daemon token (see `sandbox_token`).
    pub sandbox_key: Option<String>,
}

pub struct Gateway {
    pub(super) exposures: Mutex<Exposures>,
    /// A daemon URL, `{id}` standing for the sandbox id.
    template: String,
    pub(super) hostname: String,
    /// The trusted side's token: required by the admin and route APIs, and sent to
    /// daemons unless `sandbox_key` derives each one's own.
    pub(super) token: Option<String>,
    sandbox_key: Option<String>,
    pub(super) client: reqwest::Client,
    runtimes: Mutex<HashMap<String, (Option<String>, Instant)>>,
}

impl Gateway {
    pub fn new(
        exposures: Exposures,
        template: String,
        hostname: String,
        tokens: Tokens,
    ) -> Result<Arc<Gateway>, SdkError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Arc::new(Gateway {
            exposures: Mutex::new(exposures),
            template,
            hostname,
            token: tokens.callers,
            sandbox_key: tokens.sandbox_key,
            client,
            runtimes: Mutex::default(),
        }))
    }

    /// The daemon of `sandbox_id`: the template with the id in it. Only ids that are
    /// DNS labels (a-z, 0-9 and `-`) are put in, so no id can reach another host or path.
    pub fn daemon(&self, sandbox_id: &str) -> Option<String> {
        let label = (1..=63).contains(&sandbox_id.len())
            && sandbox_id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !sandbox_id.starts_with('-')
            && !sandbox_id.ends_with('-');
        label.then(|| self.template.replace("{id}", sandbox_id))
    }

    /// The token `sandbox_id`'s daemon takes: its own under the sandbox key, else the
    /// trusted side's.
    pub(super) fn daemon_token(&self, sandbox_id: &str) -> Option<String> {
        match &self.sandbox_key {
            Some(key) => Some(super::sandbox_token::derive(key, sandbox_id)),
            None => self.token.clone(),
        }
    }

    /// What a request's `Host` names, if it is a preview host. The daemon's port depends
    /// on the sandbox the host names, so it is excluded once the host is read (0 excludes
    /// nothing: no preview port is below 1024).
    pub fn preview_target(&self, host: &str) -> Option<preview::PreviewTarget> {
        preview::parse_preview_host(host, 0)
            .filter(|target| target.port != self.control_port(&target.sandbox_id))
    }

    /// Whether `target` may be forwarded now: the sandbox's host when it may, else the
    /// refusal. A wrong token is refused before anything is asked of the sandbox.
    pub async fn admit(&self, target: &preview::PreviewTarget) -> Result<String, Admission> {
        let exposures = lock(&self.exposures)
            .sandbox(&target.sandbox_id)
            .filter(|sandbox| sandbox.authorizes(target.port, &target.token))
            .cloned();
        let Some(exposures) = exposures else {
            return Err(Admission::InvalidToken);
        };
        let runtime = self.runtime(&target.sandbox_id, false).await;
        let admission = exposures.admit(target, runtime.as_deref());
        if admission != Admission::Forward {
            return Err(admission);
        }
        Ok(self
            .daemon(&target.sandbox_id)
            .and_then(|daemon| reqwest::Url::parse(&daemon).ok())
            .and_then(|url| url.host_str().map(str::to_string))
            .unwrap_or_else(|| "127.0.0.1".into()))
    }

    /// The daemon's port: the one port a preview URL may never reach.
    pub(super) fn control_port(&self, sandbox_id: &str) -> u16 {
        self.daemon(sandbox_id)
            .and_then(|daemon| reqwest::Url::parse(&daemon).ok())
            .and_then(|url| url.port_or_known_default())
            .unwrap_or(fsd_control::sandbox::DAEMON_PORT)
    }

    /// The sandbox's run now (`None`: not reachable), asked at most once a second.
    pub(super) async fn runtime(&self, sandbox_id: &str, fresh: bool) -> Option<String> {
        if !fresh
            && let Some((runtime, at)) = lock(&self.runtimes).get(sandbox_id)
            && at.elapsed() < RUNTIME_TTL
        {
            return runtime.clone();
        }
        let daemon = self.daemon(sandbox_id)?;
        let mut request = self.client.get(format!("{daemon}/api/capabilities"));
        if let Some(token) = self.daemon_token(sandbox_id) {
            request = request.bearer_auth(token);
        }
        let runtime = async {
            let body: serde_json::Value = request.send().await.ok()?.json().await.ok()?;
            Some(body["capabilities"]["runtimeId"].as_str()?.to_string())
        }
        .await;
        lock(&self.runtimes).insert(sandbox_id.to_string(), (runtime.clone(), Instant::now()));
        runtime
    }
}

/// A preview request: checked, then proxied to the sandbox port, streaming both ways.
pub async fn forward(
    gateway: &Gateway,
    target: preview::PreviewTarget,
    host: String,
    request: Request,
) -> Response {
    let sandbox_host = match gateway.admit(&target).await {
        Ok(sandbox_host) => sandbox_host,
        Err(admission) => return refusal(admission),
    };
    let (mut parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    if is_websocket(&parts.headers) {
        let url = format!("ws://{sandbox_host}:{}{path}", target.port);
        return super::bridge::upgrade(&mut parts, url, &host, &target.sandbox_id).await;
    }
    let url = format!("http://{sandbox_host}:{}{path}", target.port);
    let mut extra = HeaderMap::new();
    for (name, value) in forwarded_headers(&host, &path, &target.sandbox_id) {
        if let Ok(value) = HeaderValue::from_str(&value) {
            extra.insert(name, value);
        }
    }
    super::relay::relay(&gateway.client, &parts, body, &url, extra).await
}

/// The headers a preview request gains on its way to the sandbox, as the reference adds them.
pub fn forwarded_headers(host: &str, path: &str, sandbox_id: &str) -> [(&'static str, String); 4] {
    [
        ("x-forwarded-host", host.to_string()),
        ("x-forwarded-proto", "http".to_string()),
        ("x-original-url", format!("http://{host}{path}")),
        ("x-sandbox-name", sandbox_id.to_string()),
    ]
}

pub fn is_websocket(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.eq_ignore_ascii_case("websocket"))
}

fn refusal(admission: Admission) -> Response {
    let (status, body) = admission.refusal().unwrap_or((500, "{}"));
    let mut response = (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        body,
    )
        .into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
