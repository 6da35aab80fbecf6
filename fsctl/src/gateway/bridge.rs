//! A preview request that upgrades to a WebSocket: the upgrade is made to the sandbox's
//! port first (so a refusal there is the client's answer), then the client's is accepted
//! and frames are carried both ways untouched. Close codes 1005 and 1006 (no code, an
//! abnormal end) become 1000 on the other side, as the reference's bridge does.

use axum::extract::FromRequestParts;
use axum::extract::ws::{self, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame as UpstreamClose;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message as Upstream};

/// Upgrades the client's request after upgrading to `url` in the sandbox.
pub async fn upgrade(parts: &mut Parts, url: String, host: &str, sandbox_id: &str) -> Response {
    let client = match WebSocketUpgrade::from_request_parts(parts, &()).await {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    let mut request = match url.as_str().into_client_request() {
        Ok(request) => request,
        Err(error) => return (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    };
    for (name, value) in &parts.headers {
        let name_str = name.as_str();
        if super::headers::hop_by_hop(name_str)
            || name_str == "host"
            || name_str.starts_with("sec-websocket-")
        {
            continue;
        }
        request.headers_mut().insert(name.clone(), value.clone());
    }
    let extra = [
        ("x-forwarded-host", host.to_string()),
        ("x-forwarded-proto", "http".to_string()),
        ("x-sandbox-name", sandbox_id.to_string()),
    ];
    for (name, value) in extra {
        if let Ok(value) = value.parse() {
            request.headers_mut().insert(name, value);
        }
    }
    let upstream = match tokio_tungstenite::connect_async(request).await {
        Ok((upstream, _)) => upstream,
        Err(tungstenite::Error::Http(response)) => {
            return (
                StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY),
                "the sandbox refused the WebSocket upgrade",
            )
                .into_response();
        }
        Err(error) => return (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    };
    client.on_upgrade(move |socket| carry(socket, upstream))
}

/// Carries frames both ways until either side closes.
async fn carry(
    client: WebSocket,
    upstream: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
) {
    let (mut to_client, mut from_client) = client.split();
    let (mut to_upstream, mut from_upstream) = upstream.split();
    let inbound = async {
        while let Some(Ok(message)) = from_client.next().await {
            let closing = matches!(message, ws::Message::Close(_));
            if to_upstream
                .send(to_upstream_message(message))
                .await
                .is_err()
                || closing
            {
                break;
            }
        }
        let _ = to_upstream.close().await;
    };
    let outbound = async {
        while let Some(Ok(message)) = from_upstream.next().await {
            let Some(message) = to_client_message(message) else {
                continue;
            };
            let closing = matches!(message, ws::Message::Close(_));
            if to_client.send(message).await.is_err() || closing {
                break;
            }
        }
        let _ = to_client.close().await;
    };
    tokio::select! {
        () = inbound => {}
        () = outbound => {}
    }
}

/// 1005 (no code) and 1006 (abnormal) cannot be sent on: they become 1000.
fn sendable(code: u16) -> u16 {
    if matches!(code, 1005 | 1006) {
        1000
    } else {
        code
    }
}

fn to_upstream_message(message: ws::Message) -> Upstream {
    match message {
        ws::Message::Text(text) => Upstream::Text(text.as_str().into()),
        ws::Message::Binary(bytes) => Upstream::Binary(bytes),
        ws::Message::Ping(bytes) => Upstream::Ping(bytes),
        ws::Message::Pong(bytes) => Upstream::Pong(bytes),
        ws::Message::Close(frame) => Upstream::Close(frame.map(|frame| UpstreamClose {
            code: CloseCode::from(sendable(frame.code)),
            reason: frame.reason.as_str().into(),
        })),
    }
}

fn to_client_message(message: Upstream) -> Option<ws::Message> {
    Some(match message {
        Upstream::Text(text) => ws::Message::Text(text.as_str().into()),
        Upstream::Binary(bytes) => ws::Message::Binary(bytes),
        Upstream::Ping(bytes) => ws::Message::Ping(bytes),
        Upstream::Pong(bytes) => ws::Message::Pong(bytes),
        Upstream::Close(frame) => ws::Message::Close(frame.map(|frame| ws::CloseFrame {
            code: sendable(u16::from(frame.code)),
            reason: frame.reason.as_str().into(),
        })),
        Upstream::Frame(_) => return None,
    })
}
