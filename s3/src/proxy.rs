//! The credential proxy: takes unsigned path-style S3 requests, checks them against a
//! [`Scope`], drops whatever authentication they carry, signs them with SigV4 and forwards
//! them to the real endpoint, streaming bodies both ways. Out of scope → 403 with an S3
//! `AccessDenied` XML body. The secret key stays in this process.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::TryStreamExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use fsd_control::Scope;

use crate::sign::{encode, percent_decode, sign_headers};
use crate::upstream::Upstream;

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot listen: {0}")]
    Listen(#[from] std::io::Error),
    #[error("HTTP client: {0}")]
    Client(String),
}

/// Headers a client may send that are passed on (and signed); everything else is dropped,
/// authentication first of all.
const PASSED_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "content-md5",
    "content-encoding",
    "content-disposition",
    "cache-control",
    "expires",
    "range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "x-amz-copy-source",
    "x-amz-copy-source-range",
    "x-amz-metadata-directive",
    "x-amz-meta-",
];

struct Shared {
    scope: Scope,
    upstream: Upstream,
    client: reqwest::Client,
}

/// A running proxy; stops when dropped.
pub struct CredentialProxy {
    pub address: SocketAddr,
    task: JoinHandle<()>,
}

impl CredentialProxy {
    /// Serves on `listen` (port 0 picks one) for `scope`, forwarding to `upstream`.
    pub async fn start(
        listen: SocketAddr,
        scope: Scope,
        upstream: Upstream,
    ) -> Result<CredentialProxy, ProxyError> {
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| ProxyError::Client(e.to_string()))?;
        let shared = Arc::new(Shared {
            scope,
            upstream,
            client,
        });
        let listener = TcpListener::bind(listen).await?;
        let address = listener.local_addr()?;
        let app = axum::Router::new().fallback(forward).with_state(shared);
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::error!(%error, "credential proxy stopped");
            }
        });
        Ok(CredentialProxy { address, task })
    }

    /// The endpoint a client sends unsigned requests to.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Drop for CredentialProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    match forward_checked(&shared, request).await {
        Ok(response) => response,
        Err(response) => response,
    }
}

async fn forward_checked(shared: &Shared, request: Request) -> Result<Response, Response> {
    let (parts, body) = request.into_parts();
    let method = parts.method.as_str().to_string();
    let raw_path = parts.uri.path().to_string();
    let path = percent_decode(&raw_path);
    // Presigned-URL parameters are authentication too: dropped.
    let query: Vec<(String, String)> = parts
        .uri
        .query()
        .map(|q| {
            q.split('&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    (percent_decode(k), percent_decode(v))
                })
                .filter(|(k, _)| !k.starts_with("X-Amz-") && !k.starts_with("x-amz-"))
                .collect()
        })
        .unwrap_or_default();
    let copy_source = parts
        .headers
        .get("x-amz-copy-source")
        .and_then(|v| v.to_str().ok())
        .map(percent_decode);
    if let Err(denied) = shared
        .scope
        .check(&method, &path, &query, copy_source.as_deref())
    {
        tracing::info!(%method, %path, reason = %denied, "credential proxy refused a request");
        return Err(access_denied(&denied.to_string(), &path));
    }
    let query_string = query
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    let mut url = format!(
        "{}{}",
        shared.upstream.endpoint.trim_end_matches('/'),
        raw_path
    );
    if !query_string.is_empty() {
        url.push('?');
        url.push_str(&query_string);
    }
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter(|(name, _)| {
            let name = name.as_str();
            PASSED_HEADERS.iter().any(|p| {
                if p.ends_with('-') {
                    name.starts_with(p)
                } else {
                    name == *p
                }
            })
        })
        .filter_map(|(name, value)| {
            Some((name.as_str().to_string(), value.to_str().ok()?.to_string()))
        })
        .collect();
    let signed = sign_headers(&shared.upstream, &method, &url, &headers).map_err(|e| {
        error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            &e,
            &path,
        )
    })?;
    let mut outgoing = shared.client.request(parts.method.clone(), &url);
    for (name, value) in headers.iter().chain(signed.iter()) {
        outgoing = outgoing.header(name.as_str(), value.as_str());
    }
    // A request without a length or chunked encoding has no body: say so with
    // `content-length: 0` (S3 wants it on every write) instead of streaming nothing.
    let chunked = parts.headers.get("transfer-encoding").is_some();
    let outgoing = if parts.headers.get("content-length").is_none() && !chunked {
        outgoing.body(Vec::new())
    } else {
        let stream = body.into_data_stream().map_err(std::io::Error::other);
        outgoing.body(reqwest::Body::wrap_stream(stream))
    };
    let upstream = outgoing.send().await.map_err(|e| {
        error_response(
            StatusCode::BAD_GATEWAY,
            "InternalError",
            &format!("upstream: {e}"),
            &path,
        )
    })?;
    let mut response = Response::builder().status(upstream.status().as_u16());
    if let Some(headers) = response.headers_mut() {
        copy_response_headers(upstream.headers(), headers);
    }
    response
        .body(Body::from_stream(upstream.bytes_stream()))
        .map_err(|e| {
            error_response(
                StatusCode::BAD_GATEWAY,
                "InternalError",
                &e.to_string(),
                &path,
            )
        })
}

fn copy_response_headers(from: &reqwest::header::HeaderMap, to: &mut HeaderMap) {
    for (name, value) in from {
        if matches!(
            name.as_str(),
            "connection" | "transfer-encoding" | "keep-alive"
        ) {
            continue;
        }
        if let Ok(value) = HeaderValue::from_bytes(value.as_bytes()) {
            to.append(name.clone(), value);
        }
    }
}

fn access_denied(message: &str, resource: &str) -> Response {
    error_response(StatusCode::FORBIDDEN, "AccessDenied", message, resource)
}

/// An S3-style XML error.
fn error_response(status: StatusCode, code: &str, message: &str, resource: &str) -> Response {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{}</Message><Resource>{}</Resource></Error>",
        xml_escape(message),
        xml_escape(resource)
    );
    (status, [("content-type", "application/xml")], body).into_response()
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
