//! A sandbox's route API through the gateway: `/sandboxes/<id>/<route>` goes to that
//! sandbox's daemon (found by the template) as `/<route>`, with the trusted side's token in
//! place of the caller's, so one gateway fronts a fleet. Streams (SSE) pass event by event
//! and WebSocket upgrades (`/ws`, `/ws/pty`) are bridged.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;

use super::admin::error;
use super::proxy::{Gateway, is_websocket};

/// Forwards a request whose path starts with `/sandboxes/` (the caller checked the token).
pub async fn forward(gateway: &Gateway, request: Request) -> Response {
    let target = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .strip_prefix("/sandboxes/")
        .unwrap_or_default()
        .to_string();
    let (id, route) = match target.find(['/', '?']) {
        Some(at) => target.split_at(at),
        None => (target.as_str(), ""),
    };
    let route = match route {
        "" => "/".to_string(),
        query if query.starts_with('?') => format!("/{query}"),
        path => path.to_string(),
    };
    let id = id.to_ascii_lowercase();
    let Some(daemon) = gateway.daemon(&id) else {
        return error(
            400,
            "VALIDATION_FAILED",
            format!("sandboxId: {id:?} is not a sandbox id (1-63 of a-z, 0-9 and -)"),
        );
    };
    let (mut parts, body) = request.into_parts();
    parts.headers.remove(header::AUTHORIZATION);
    let mut extra = HeaderMap::new();
    if let Some(token) = gateway.daemon_token(&id)
        && let Ok(value) = HeaderValue::from_str(&format!("Bearer {token}"))
    {
        extra.insert(header::AUTHORIZATION, value);
    }
    if is_websocket(&parts.headers) {
        parts.headers.extend(extra);
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_string();
        // http → ws, https → wss.
        let url = format!("{}{route}", daemon.replacen("http", "ws", 1));
        return super::bridge::upgrade(&mut parts, url, &host, &id).await;
    }
    let url = format!("{daemon}{route}");
    super::relay::relay(&gateway.client, &parts, body, &url, extra).await
}
