//! The gateway's admin API: `POST /expose`, `POST /unexpose`, `GET /exposed`, and the JSON
//! error bodies the gateway answers with.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use fsd_control::preview::{self, PreviewError};
use serde::Deserialize;
use serde_json::json;

use super::proxy::{Gateway, lock};

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
pub async fn admin(gateway: &Gateway, request: Request) -> Response {
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
                exposures.sandbox_mut(&req.sandbox_id).unexpose(port);
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
    let token = match sandbox.expose(port, req.token.as_deref(), req.name, &runtime, random) {
        Ok(token) => token,
        Err(e) => return preview_error(e),
    };
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
            sandbox.ports(runtime.as_deref()).map(|(port, token, active)| {
                json!({
                    "url": preview::preview_url(port, id, token, &gateway.hostname).unwrap_or_default(),
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
