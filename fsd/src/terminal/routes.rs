//! The terminal routes: `GET /ws/pty` upgrades to a WebSocket on the session's PTY, and
//! `GET /ws/terminal` to one on a terminal of the SDK next line's, by id.

use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRef, FromRequestParts, Query, Request, State, ws::WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::table::TerminalTable;
use super::{SessionTerminals, connection, output_socket, pty};
use crate::error::ApiError;

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<SessionTerminals>: FromRef<S>,
    Arc<TerminalTable>: FromRef<S>,
{
    Router::new()
        .route("/ws/pty", get(upgrade))
        .route("/ws/terminal", get(next_upgrade))
}

/// The query of `/ws/terminal`.
#[derive(Debug, Deserialize)]
struct TerminalQuery {
    #[serde(rename = "terminalId")]
    terminal_id: Option<String>,
    #[serde(rename = "runtimeIncarnationID")]
    runtime_incarnation_id: Option<String>,
    cursor: Option<String>,
    cols: Option<String>,
    rows: Option<String>,
}

/// `GET /ws/terminal`: refusals are plain text, as the reference's (400 without a
/// terminal id, 409 for another runtime's socket).
async fn next_upgrade(State(table): State<Arc<TerminalTable>>, request: Request) -> Response {
    use axum::http::StatusCode;
    if !crate::wire::upgrade::asks_for_websocket(request.headers()) {
        return ApiError::not_found_route().into_response();
    }
    let (mut parts, _) = request.into_parts();
    let query = Query::<TerminalQuery>::from_request_parts(&mut parts, &())
        .await
        .map(|Query(query)| query)
        .ok();
    let Some(query) = query else {
        return (
            StatusCode::BAD_REQUEST,
            "terminalId query parameter required",
        )
            .into_response();
    };
    let Some(terminal_id) = query.terminal_id.filter(|id| !id.is_empty()) else {
        return (
            StatusCode::BAD_REQUEST,
            "terminalId query parameter required",
        )
            .into_response();
    };
    if query.runtime_incarnation_id.as_deref() != Some(crate::system::ops::incarnation()) {
        return (StatusCode::CONFLICT, "Runtime incarnation mismatch").into_response();
    }
    let dimension =
        |value: Option<String>| value.and_then(|v| v.parse::<u16>().ok()).filter(|&v| v > 0);
    let size = dimension(query.cols).zip(dimension(query.rows));
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(upgrade) => upgrade,
        Err(_) => {
            return (StatusCode::SERVICE_UNAVAILABLE, "WebSocket upgrade failed").into_response();
        }
    };
    let opening = output_socket::Opening {
        terminal_id,
        cursor: query.cursor.filter(|cursor| !cursor.is_empty()),
        size,
    };
    upgrade.on_upgrade(move |socket| output_socket::serve(socket, table, opening))
}

/// The query of `/ws/pty`; cols, rows and shell matter only when the terminal starts.
#[derive(Debug, Deserialize)]
struct PtyQuery {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
    cols: Option<String>,
    rows: Option<String>,
    shell: Option<String>,
}

async fn upgrade(State(terminals): State<Arc<SessionTerminals>>, request: Request) -> Response {
    if !crate::wire::upgrade::asks_for_websocket(request.headers()) {
        return ApiError::not_found_route().into_response();
    }
    let (mut parts, _) = request.into_parts();
    let Ok(Query(query)) = Query::<PtyQuery>::from_request_parts(&mut parts, &()).await else {
        return ApiError::terminal_query("the query is not readable").into_response();
    };
    let Some(session_id) = query.session_id.filter(|id| !id.is_empty()) else {
        return ApiError::terminal_query("sessionId query parameter required").into_response();
    };
    let dimension = |value: Option<String>, default: u16| {
        value
            .and_then(|v| v.parse::<u16>().ok())
            .filter(|&v| v > 0)
            .unwrap_or(default)
    };
    let size = pty::Size {
        cols: dimension(query.cols, 80),
        rows: dimension(query.rows, 24),
    };
    let shell = query
        .shell
        .filter(|shell| !shell.is_empty())
        .unwrap_or_else(|| "bash".into());
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(upgrade) => upgrade,
        Err(rejection) => return ApiError::bad_upgrade(rejection.body_text()).into_response(),
    };
    upgrade.on_upgrade(move |socket| async move {
        match terminals.get_or_start(&session_id, size, &shell).await {
            Ok(terminal) => connection::serve(socket, terminals.table().clone(), terminal).await,
            Err(error) => connection::refuse(socket, error.to_string()).await,
        }
    })
}
