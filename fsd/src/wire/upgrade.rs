//! Whether a request asks to become a WebSocket (`/ws` and `/ws/pty` both ask).

use axum::http::{HeaderMap, header};

/// `Upgrade: websocket` in any case, as the reference checks (and nothing else).
pub fn asks_for_websocket(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.eq_ignore_ascii_case("websocket"))
}
