//! One proxied HTTP exchange: the request sent on with its headers (hop-by-hop ones and
//! `Host` left out, the caller's own added) and both bodies streamed, never buffered.

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::TryStreamExt;

use super::headers::{copy_headers, hop_by_hop};

/// Sends `parts` and `body` to `url` with `extra` headers (which replace the client's of
/// the same name) and answers with what comes back, streaming.
pub async fn relay(
    client: &reqwest::Client,
    parts: &Parts,
    body: Body,
    url: &str,
    extra: HeaderMap,
) -> Response {
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in &parts.headers {
        if !hop_by_hop(name.as_str()) && name != axum::http::header::HOST {
            headers.append(name.clone(), value.clone());
        }
    }
    for (name, value) in &extra {
        headers.insert(name.clone(), value.clone());
    }
    let stream = body.into_data_stream().map_err(std::io::Error::other);
    let sent = client
        .request(parts.method.clone(), url)
        .headers(headers)
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await;
    let upstream = match sent {
        Ok(upstream) => upstream,
        Err(error) => {
            return (
                StatusCode::BAD_GATEWAY,
                format!("Container suddenly disconnected, try again ({error})"),
            )
                .into_response();
        }
    };
    let mut response = Response::builder().status(upstream.status().as_u16());
    if let Some(headers) = response.headers_mut() {
        copy_headers(upstream.headers(), headers);
    }
    response
        .body(Body::from_stream(upstream.bytes_stream()))
        .unwrap_or_else(|error| (StatusCode::BAD_GATEWAY, error.to_string()).into_response())
}
