//! The gateway's server: connections accepted and each request sent where it belongs.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use fsd_control::preview;

use super::admin::error;
use super::proxy::Gateway;

/// Serves `listener` until it fails.
pub async fn serve(
    gateway: Arc<Gateway>,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    let app = Router::new().fallback(handle).with_state(gateway);
    axum::serve(listener, app).await
}

/// Every request: a preview request, the route API of a sandbox, or the admin API.
async fn handle(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if let Some(target) = gateway.preview_target(&host) {
        return super::proxy::forward(&gateway, target, host, request).await;
    }
    if !authorized(&gateway, request.headers()) {
        return error(401, "UNAUTHORIZED", "Missing or invalid token".into());
    }
    if request.uri().path().starts_with("/sandboxes/") {
        return super::api::forward(&gateway, request).await;
    }
    super::admin::admin(&gateway, request).await
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
