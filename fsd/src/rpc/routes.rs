//! `/rpc`: the upgrade to the capnweb session that serves the Sandbox object's control
//! plane, behind the same auth as every route.

use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::get;

use super::api::Api;
use super::control::{self, Control, Route};
use super::next;
use crate::capnweb::protocol as capnweb;
use crate::capnweb::session::{self, Dispatch};
use crate::state::AppState;
use crate::wire::json::MAX_JSON_BODY_BYTES;
use crate::wire::upgrade::ApiSocket;

/// The largest frame read: a `writeFile` of the largest JSON body, with room for the call.
const MAX_FRAME_BYTES: usize = MAX_JSON_BODY_BYTES + (1 << 20);

/// The `/rpc` route; a peer that stops reading for `send_stall` is let go.
pub fn router(send_stall: Duration) -> Router<AppState> {
    Router::new().route(
        "/rpc",
        get(move |state: State<AppState>, request: Request| upgrade(state, request, send_stall)),
    )
}

async fn upgrade(
    State(state): State<AppState>,
    request: Request,
    send_stall: Duration,
) -> Response {
    let socket = match ApiSocket::accept(request, &state, state.auth_enabled).await {
        Ok(socket) => socket,
        Err(refused) => return refused,
    };
    let api = Api::new(state.clone());
    let control = std::sync::Arc::new(Control::default());
    let dispatch: Dispatch = std::sync::Arc::new(move |session, path, raw| {
        // Extensions take their arguments as sent (a tarball's bytes inside an object).
        let kept = if path.first().map(String::as_str) == Some("extensions") {
            raw.clone()
        } else {
            Vec::new()
        };
        let args = match raw
            .into_iter()
            .map(capnweb::decode)
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(args) => args,
            Err(error) => {
                let error = capnweb::js_error("TypeError", &error.to_string());
                return Box::pin(std::future::ready(Err(error)));
            }
        };
        match control.route(&path, &args) {
            Route::Answered(answer) => Box::pin(std::future::ready(answer)),
            Route::Activated(metadata) => {
                control::register_callback(&session);
                Box::pin(std::future::ready(Ok(metadata)))
            }
            Route::Current => {
                let api = api.clone();
                Box::pin(async move { api.call(&session, &path, args).await })
            }
            Route::Next { domain, method } => {
                let state = state.clone();
                Box::pin(async move {
                    next::call(&state, &session, &domain, &method, args, kept)
                        .await
                        .unwrap_or_else(|| {
                            Err(capnweb::js_error(
                                "TypeError",
                                &format!("'{domain}.{method}' is not served on the next line yet."),
                            ))
                        })
                })
            }
        }
    });
    socket
        .upgrade
        .max_message_size(MAX_FRAME_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
        .on_upgrade(move |socket| session::serve(socket, dispatch, send_stall))
}
