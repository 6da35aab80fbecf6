//! The credential proxy: serves one mount's token path, lets through what
//! [`crate::forward::plan`] lets through (the mount's [`Scope`], authentication dropped),
//! signs it with SigV4 and forwards it to the real endpoint, streaming bodies both ways.
//! Refusals are 403 with an S3 `AccessDenied` XML body. The secret key stays in this process.

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

use crate::forward::{self, Forward, Refusal};
use crate::sign::{percent_decode, sign_headers};
use crate::upstream::Upstream;

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot listen: {0}")]
    Listen(#[from] std::io::Error),
    #[error("HTTP client: {0}")]
    Client(String),
}

struct Shared {
    token: String,
    scope: Scope,
    upstream: Upstream,
    client: reqwest::Client,
}

/// A running proxy; stops when dropped.
pub struct CredentialProxy {
    pub address: SocketAddr,
    token: String,
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
        let token = mount_token()?;
        let shared = Arc::new(Shared {
            token: token.clone(),
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
        Ok(CredentialProxy {
            address,
            token,
            task,
        })
    }

    /// The endpoint a client sends unsigned requests to, the mount's token its path.
    pub fn url(&self) -> String {
        format!("http://{}/{}", self.address, self.token)
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
    let full_path = parts.uri.path();
    let Some(raw_path) = forward::strip_token(full_path, &shared.token) else {
        tracing::info!(%method, "credential proxy refused a request without its token");
        return Err(refused(&Refusal::UnknownMount, "/"));
    };
    let headers = parts
        .headers
        .iter()
        .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)));
    let planned = forward::plan(
        &shared.scope,
        &shared.upstream.endpoint,
        &method,
        raw_path,
        parts.uri.query(),
        headers,
    );
    let Forward { url, headers } = match planned {
        Ok(planned) => planned,
        Err(denied) => {
            let path = percent_decode(raw_path);
            tracing::info!(%method, %path, reason = %denied, "credential proxy refused a request");
            return Err(refused(&Refusal::Denied(denied), &path));
        }
    };
    let signed = sign_headers(&shared.upstream, &method, &url, &headers).map_err(|e| {
        error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            &e,
            raw_path,
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
            raw_path,
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
                raw_path,
            )
        })
}

/// A fresh mount token: 128 random bits, hex.
fn mount_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(fsd_control::mounts::token(bytes))
}

fn copy_response_headers(from: &reqwest::header::HeaderMap, to: &mut HeaderMap) {
    for (name, value) in from {
        if forward::HOP_HEADERS.contains(&name.as_str()) {
            continue;
        }
        if let Ok(value) = HeaderValue::from_bytes(value.as_bytes()) {
            to.append(name.clone(), value);
        }
    }
}

fn refused(refusal: &Refusal, resource: &str) -> Response {
    let (status, body) = refusal.answer(resource);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN);
    (status, [("content-type", "application/xml")], body).into_response()
}

/// An S3-style XML error.
fn error_response(status: StatusCode, code: &str, message: &str, resource: &str) -> Response {
    let body = forward::error_xml(code, message, resource);
    (status, [("content-type", "application/xml")], body).into_response()
}
