//! The WebSocket routes: `/ws` and `/api/ws` upgrade to the transport that carries the
//! route API.

use axum::Router;
use axum::extract::{FromRequestParts, Request, State, ws::WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use fsd_api::ws::MAX_MESSAGE_BYTES;
use std::time::Duration;

use super::transport;
use crate::error::ApiError;
use crate::state::AppState;
use crate::wire::upgrade::asks_for_websocket;

/// The HTTP API that requests on a socket go through, and how long a client may leave
/// its queue unread.
#[derive(Clone)]
struct Api {
    router: Router,
    send_stall: Duration,
}

/// The WebSocket routes; `api` is the router their messages are served by.
pub fn router(api: Router, send_stall: Duration) -> Router<AppState> {
    Router::new()
        .route("/ws", get(transport_upgrade))
        .route("/api/ws", get(transport_upgrade))
        .layer(axum::Extension(Api {
            router: api,
            send_stall,
        }))
}

async fn transport_upgrade(
    State(state): State<AppState>,
    axum::Extension(api): axum::Extension<Api>,
    request: Request,
) -> Response {
    if !asks_for_websocket(request.headers()) {
        return ApiError::not_found_route().into_response();
    }
    // With auth on, a token on the upgrade serves every request that brings none.
    let inherited = state
        .auth_enabled
        .then(|| token_header(request.headers()))
        .flatten();
    let (mut parts, _) = request.into_parts();
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &state).await {
        Ok(upgrade) => upgrade,
        Err(rejection) => return ApiError::bad_upgrade(rejection.body_text()).into_response(),
    };
    upgrade
        .max_message_size(MAX_MESSAGE_BYTES)
        .on_upgrade(move |socket| {
            transport::Connection::new(api.router, inherited, api.send_stall).run(socket)
        })
}

/// The token header the upgrade presented, if any.
fn token_header(headers: &HeaderMap) -> Option<(HeaderName, HeaderValue)> {
    [
        header::AUTHORIZATION,
        HeaderName::from_static("x-fsd-token"),
    ]
    .into_iter()
    .find_map(|name| headers.get(&name).cloned().map(|value| (name, value)))
}
