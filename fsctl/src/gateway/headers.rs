//! Which headers a proxy passes on: not the hop-by-hop ones, which describe one connection.

use axum::http::HeaderMap;

/// Headers that belong to one connection, never forwarded.
pub fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "proxy-authorization"
            | "proxy-connection"
    )
}

/// Copies a response's headers, hop-by-hop ones left out.
pub fn copy_headers(from: &reqwest::header::HeaderMap, to: &mut HeaderMap) {
    for (name, value) in from {
        if !hop_by_hop(name.as_str()) {
            to.append(name.clone(), value.clone());
        }
    }
}
