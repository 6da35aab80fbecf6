//! API token check, applied as one layer over every route but `GET /api/ping`.
//!
//! The token arrives as `Authorization: Bearer <token>` or `X-Fsd-Token: <token>`. CORS
//! preflights never reach this layer (the CORS layer answers them first). A WebSocket
//! transport upgrade may come without one: then every request on the socket must bring
//! its own (each goes through this layer again).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The token callers must present; `None` serves without authentication.
#[derive(Clone, Default)]
pub struct ApiToken(pub Option<Arc<str>>);

pub async fn require_token(
    State(token): State<ApiToken>,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = token.0.as_deref() else {
        return next.run(request).await;
    };
    let path = request.uri().path();
    let open_route = request.method() == Method::GET && path == "/api/ping";
    let tokenless_transport = matches!(path, "/ws" | "/api/ws")
        && request.headers().contains_key(header::UPGRADE)
        && presented(request.headers()).is_none();
    let presented_ok =
        presented(request.headers()).is_some_and(|got| constant_time_eq(got, expected));
    if open_route || tokenless_transport || presented_ok {
        next.run(request).await
    } else {
        ApiError::unauthorized().into_response()
    }
}

fn presented(headers: &HeaderMap) -> Option<&str> {
    if let Some(value) = headers.get("x-fsd-token").and_then(|v| v.to_str().ok()) {
        return Some(value.trim());
    }
    let authorization = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = authorization.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Compares without stopping at the first differing byte, so timing does not leak the token.
fn constant_time_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = a.len() ^ b.len();
    for (index, byte) in b.iter().enumerate() {
        diff |= usize::from(a.get(index).copied().unwrap_or(0) ^ byte);
    }
    diff == 0
}

/// The token header a request presented, if any (a WebSocket upgrade passes it on to the
/// requests its messages make).
pub fn presented_token(headers: &HeaderMap) -> Option<(HeaderName, HeaderValue)> {
    [
        header::AUTHORIZATION,
        HeaderName::from_static("x-fsd-token"),
    ]
    .into_iter()
    .find_map(|name| headers.get(&name).cloned().map(|value| (name, value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_tokens_exactly() {
        assert!(constant_time_eq("secret", "secret"));
        assert!(!constant_time_eq("secre", "secret"));
        assert!(!constant_time_eq("secretx", "secret"));
        assert!(!constant_time_eq("", "secret"));
        assert!(!constant_time_eq("Secret", "secret"));
    }

    #[test]
    fn reads_bearer_and_custom_header() {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(presented(&headers), Some("abc"));
        headers.insert("x-fsd-token", "xyz".parse().unwrap());
        assert_eq!(presented(&headers), Some("xyz"));
        let mut basic = HeaderMap::new();
        basic.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(presented(&basic), None);
    }
}
