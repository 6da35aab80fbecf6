//! WebSocket upgrades: whether a request asks for one (`/ws`, `/rpc` and `/ws/pty` ask),
//! and the upgrade of the routes that carry the API over a socket.

use axum::extract::{FromRequestParts, Request, ws::WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::auth::presented_token;
use crate::error::ApiError;

/// `Upgrade: websocket` in any case, as the reference checks (and nothing else).
pub fn asks_for_websocket(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.eq_ignore_ascii_case("websocket"))
}

/// The HTTP API the messages of a socket go through, and how long its peer may leave what
/// is sent to it unread (`--ws-stall-secs`); the socket routes carry it as an extension.
#[derive(Clone)]
pub struct SocketApi {
    pub router: axum::Router,
    pub send_stall: std::time::Duration,
}

/// A socket that carries the API: the upgrade, and the token it passed auth with, which
/// serves every request its messages make (with auth on). A request that is no upgrade is
/// an unknown route, as in the reference; a malformed handshake is named.
pub struct ApiSocket {
    pub upgrade: WebSocketUpgrade,
    pub token: Option<(HeaderName, HeaderValue)>,
}

impl ApiSocket {
    pub async fn accept<S: Send + Sync>(
        request: Request,
        state: &S,
        auth_enabled: bool,
    ) -> Result<ApiSocket, Response> {
        if !asks_for_websocket(request.headers()) {
            return Err(ApiError::not_found_route().into_response());
        }
        let token = auth_enabled
            .then(|| presented_token(request.headers()))
            .flatten();
        let (mut parts, _) = request.into_parts();
        match WebSocketUpgrade::from_request_parts(&mut parts, state).await {
            Ok(upgrade) => Ok(ApiSocket { upgrade, token }),
            Err(rejection) => Err(ApiError::bad_upgrade(rejection.body_text()).into_response()),
        }
    }
}
