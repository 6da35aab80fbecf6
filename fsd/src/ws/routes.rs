//! The WebSocket routes: `/ws` and `/api/ws` upgrade to the transport that carries the
//! route API.

use axum::Router;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::get;
use fsd_api::ws::MAX_MESSAGE_BYTES;
use std::time::Duration;

use super::transport;
use crate::state::AppState;
use crate::wire::upgrade::{ApiSocket, SocketApi};

/// The WebSocket routes; `api` is the router their messages are served by.
pub fn router(api: Router, send_stall: Duration) -> Router<AppState> {
    Router::new()
        .route("/ws", get(transport_upgrade))
        .route("/api/ws", get(transport_upgrade))
        .layer(axum::Extension(SocketApi {
            router: api,
            send_stall,
        }))
}

async fn transport_upgrade(
    State(state): State<AppState>,
    axum::Extension(api): axum::Extension<SocketApi>,
    request: Request,
) -> Response {
    // With auth on, a token on the upgrade serves every request that brings none.
    let socket = match ApiSocket::accept(request, &state, state.auth_enabled).await {
        Ok(socket) => socket,
        Err(refused) => return refused,
    };
    let inherited = socket.token;
    socket
        .upgrade
        .max_message_size(MAX_MESSAGE_BYTES)
        .on_upgrade(move |socket| {
            transport::Connection::new(api.router, inherited, api.send_stall).run(socket)
        })
}
