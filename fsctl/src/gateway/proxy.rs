//! The gateway's server: preview requests proxied to sandbox ports, and the admin API.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use fsd_control::preview::{self, Activation, Admission, PreviewError};
use fsd_sdk::SdkError;
use serde::Deserialize;
use serde_json::json;

use super::state::Exposures;

/// How long a sandbox's run id is trusted before it is asked again.
const RUNTIME_TTL: Duration = Duration::from_secs(1);

pub struct Gateway {
    exposures: Mutex<Exposures>,
    /// A daemon URL, `{id}` standing for the sandbox id.
    template: String,
    hostname: String,
    /// The trusted side's token: sent to daemons, and required by the admin API.
    token: Option<String>,
    client: reqwest::Client,
    runtimes: Mutex<HashMap<String, (Option<String>, Instant)>>,
}

impl Gateway {
    pub fn new(
        exposures: Exposures,
        template: String,
        hostname: String,
        token: Option<String>,
    ) -> Result<Arc<Gateway>, SdkError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Arc::new(Gateway {
            exposures: Mutex::new(exposures),
            template,
            hostname,
            token,
            client,
            runtimes: Mutex::default(),
        }))
    }

    pub async fn serve(self: Arc<Self>, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        let app = Router::new().fallback(handle).with_state(self);
        axum::serve(listener, app).await
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

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The daemon's port: the one port a preview URL may never reach.
    fn control_port(&self, sandbox_id: &str) -> u16 {
        self.daemon(sandbox_id)
            .and_then(|daemon| reqwest::Url::parse(&daemon).ok())
            .and_then(|url| url.port_or_known_default())
            .unwrap_or(3000)
    }

    /// The sandbox's run now (`None`: not reachable), asked at most once a second.
    async fn runtime(&self, sandbox_id: &str, fresh: bool) -> Option<String> {
        if !fresh
            && let Some((runtime, at)) = lock(&self.runtimes).get(sandbox_id)
            && at.elapsed() < RUNTIME_TTL
        {
            return runtime.clone();
        }
        let daemon = self.daemon(sandbox_id)?;
        let mut request = self.client.get(format!("{daemon}/api/capabilities"));
        if let Some(token) = &self.token {
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

async fn handle(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string();
    // The daemon's port depends on the sandbox the host names, so it is excluded once
    // the host is read (0 excludes nothing: no preview port is below 1024).
    let target = preview::parse_preview_host(&host, 0)
        .filter(|target| target.port != gateway.control_port(&target.sandbox_id));
    if let Some(target) = target {
        return forward(&gateway, target, host, request).await;
    }
    if !authorized(&gateway, request.headers()) {
        return error(401, "UNAUTHORIZED", "Missing or invalid token".into());
    }
    if request.uri().path().starts_with("/sandboxes/") {
        return super::api::forward(&gateway, request).await;
    }
    admin(&gateway, request).await
}

/// Whether a request to the admin or route API carries the trusted side's token (any
/// request does when the gateway has none).
fn authorized(gateway: &Gateway, headers: &HeaderMap) -> bool {
    let Some(token) = &gateway.token else {
        return true;
    };
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .is_some_and(|got| preview::tokens_match(got, token))
}

/// A preview request: checked, then proxied to the sandbox port, streaming both ways.
async fn forward(
    gateway: &Gateway,
    target: preview::PreviewTarget,
    host: String,
    request: Request,
) -> Response {
    let exposure = lock(&gateway.exposures)
        .sandbox(&target.sandbox_id)
        .map(|sandbox| {
            (
                sandbox.tokens.clone(),
                sandbox.activations.get(&target.port).cloned(),
            )
        });
    let Some((tokens, activation)) = exposure else {
        return refusal(Admission::InvalidToken);
    };
    // A wrong token never reaches the sandbox.
    if !tokens.authorizes(target.port, &target.token) {
        return refusal(Admission::InvalidToken);
    }
    let runtime = gateway.runtime(&target.sandbox_id, false).await;
    let admission = preview::admit(&target, &tokens, activation.as_ref(), runtime.as_deref());
    if admission != Admission::Forward {
        return refusal(admission);
    }
    let sandbox_host = gateway
        .daemon(&target.sandbox_id)
        .and_then(|daemon| reqwest::Url::parse(&daemon).ok())
        .and_then(|url| url.host_str().map(str::to_string))
        .unwrap_or_else(|| "127.0.0.1".into());
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
    let added = [
        ("x-forwarded-host", host.clone()),
        ("x-forwarded-proto", "http".to_string()),
        ("x-original-url", format!("http://{host}{path}")),
        ("x-sandbox-name", target.sandbox_id.clone()),
    ];
    for (name, value) in added {
        if let Ok(value) = HeaderValue::from_str(&value) {
            extra.insert(name, value);
        }
    }
    super::relay::relay(&gateway.client, &parts, body, &url, extra).await
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

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExposeRequest {
    sandbox_id: String,
    port: u32,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

/// The admin API: `POST /expose`, `POST /unexpose`, `GET /exposed?sandboxId=…` (the
/// caller's token already checked).
async fn admin(gateway: &Gateway, request: Request) -> Response {
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or_default().to_string();
    let method = request.method().clone();
    let body = match axum::body::to_bytes(request.into_body(), 1 << 20).await {
        Ok(body) => body,
        Err(e) => return error(400, "VALIDATION_FAILED", e.to_string()),
    };
    match (method.as_str(), path.as_str()) {
        ("POST", "/expose") => {
            let Some(req) = expose_request(&body) else {
                return error(
                    400,
                    "VALIDATION_FAILED",
                    "body: needs sandboxId and port".into(),
                );
            };
            expose(gateway, req).await
        }
        ("POST", "/unexpose") => {
            let Some(req) = expose_request(&body) else {
                return error(
                    400,
                    "VALIDATION_FAILED",
                    "body: needs sandboxId and port".into(),
                );
            };
            let mut exposures = lock(&gateway.exposures);
            if let Ok(port) = u16::try_from(req.port) {
                let sandbox = exposures.sandbox_mut(&req.sandbox_id);
                sandbox.tokens.unexpose(port);
                sandbox.activations.remove(&port);
            }
            if let Err(e) = exposures.save() {
                return error(500, "INTERNAL_ERROR", e.to_string());
            }
            axum::Json(json!({"success": true})).into_response()
        }
        ("GET", "/exposed") => {
            let id = query
                .split('&')
                .find_map(|pair| pair.strip_prefix("sandboxId="))
                .unwrap_or_default()
                .to_ascii_lowercase();
            exposed(gateway, &id).await
        }
        _ => error(
            404,
            "UNKNOWN_ERROR",
            "The requested endpoint was not found".into(),
        ),
    }
}

/// An expose or unexpose body, its sandbox id lowercased as preview hosts carry it.
fn expose_request(body: &[u8]) -> Option<ExposeRequest> {
    let mut req: ExposeRequest = serde_json::from_slice(body).ok()?;
    req.sandbox_id = req.sandbox_id.to_ascii_lowercase();
    Some(req)
}

async fn expose(gateway: &Gateway, req: ExposeRequest) -> Response {
    let port = match preview::validate_port(req.port, gateway.control_port(&req.sandbox_id)) {
        Ok(port) => port,
        Err(e) => return error(400, "INVALID_PORT", e.to_string()),
    };
    if gateway.daemon(&req.sandbox_id).is_none() {
        return error(
            400,
            "VALIDATION_FAILED",
            format!(
                "sandboxId: {:?} is not a sandbox id (1-63 of a-z, 0-9 and -)",
                req.sandbox_id
            ),
        );
    }
    // The URL first: a hostname or id that cannot carry one changes nothing.
    if let Err(e) = preview::preview_url(port, &req.sandbox_id, "probe", &gateway.hostname) {
        return preview_error(e);
    }
    let Some(runtime) = gateway.runtime(&req.sandbox_id, true).await else {
        return error(
            503,
            "CONTAINER_UNAVAILABLE",
            "the sandbox's daemon does not answer".into(),
        );
    };
    let mut exposures = lock(&gateway.exposures);
    let sandbox = exposures.sandbox_mut(&req.sandbox_id);
    let random = || {
        let id = uuid::Uuid::new_v4();
        let mut bytes = [0u8; 12];
        bytes.copy_from_slice(&id.as_bytes()[..12]);
        bytes
    };
    let token = match sandbox
        .tokens
        .expose(port, req.token.as_deref(), req.name, random)
    {
        Ok(token) => token,
        Err(e) => return preview_error(e),
    };
    sandbox.activations.insert(
        port,
        Activation {
            runtime_id: runtime,
            token: token.clone(),
        },
    );
    if let Err(e) = exposures.save() {
        return error(500, "INTERNAL_ERROR", e.to_string());
    }
    drop(exposures);
    let url =
        preview::preview_url(port, &req.sandbox_id, &token, &gateway.hostname).unwrap_or_default();
    axum::Json(json!({"url": url, "port": port, "token": token})).into_response()
}

async fn exposed(gateway: &Gateway, id: &str) -> Response {
    let sandbox = lock(&gateway.exposures).sandbox(id).cloned();
    let runtime = gateway.runtime(id, false).await;
    let ports: Vec<serde_json::Value> = sandbox
        .iter()
        .flat_map(|sandbox| {
            sandbox.tokens.ports().map(|(port, exposure)| {
                let active = sandbox.activations.get(&port).is_some_and(|a| {
                    Some(a.runtime_id.as_str()) == runtime.as_deref() && a.token == exposure.token
                });
                json!({
                    "url": preview::preview_url(port, id, &exposure.token, &gateway.hostname).unwrap_or_default(),
                    "port": port,
                    "status": if active { "active" } else { "stale" },
                })
            })
        })
        .collect();
    axum::Json(json!({"ports": ports})).into_response()
}

fn preview_error(refused: PreviewError) -> Response {
    let code = match refused {
        PreviewError::CustomDomainRequired { .. } => "CUSTOM_DOMAIN_REQUIRED",
        PreviewError::InvalidPort { .. } => "INVALID_PORT",
        PreviewError::TokenInUse { .. } => "PORT_ALREADY_EXPOSED",
        _ => "VALIDATION_FAILED",
    };
    let status = if code == "PORT_ALREADY_EXPOSED" {
        409
    } else {
        400
    };
    error(status, code, refused.to_string())
}

pub fn error(status: u16, code: &str, message: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        axum::Json(json!({"code": code, "message": message})),
    )
        .into_response()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
