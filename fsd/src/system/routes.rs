//! `GET /`, `GET /api/ping`, `GET /api/version`, `GET /api/capabilities`.

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::routing::get;
use axum::{Json, Router};
use fsd_api::system::{Capabilities, CapabilitiesResponse, PingResponse, VersionResponse};
use fsd_process::SessionManager;

use crate::time::now_rfc3339;

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Capabilities>: FromRef<S>,
    Arc<SessionManager>: FromRef<S>,
{
    Router::new()
        .route("/", get(root))
        .route("/api/ping", get(ping))
        .route("/api/version", get(version))
        .route("/api/capabilities", get(capabilities))
}

async fn root() -> &'static str {
    "fsd workspace daemon\n"
}

async fn ping() -> Json<PingResponse> {
    Json(PingResponse {
        success: true,
        status: "healthy".into(),
        message: "healthy".into(),
        timestamp: now_rfc3339(),
    })
}

/// `SANDBOX_VERSION` as the reference reports it, else fsd's own version.
/// The SDK version fsd is compatible with (the image's `SANDBOX_VERSION` when it sets one),
/// and fsd's own beside it.
async fn version() -> Json<VersionResponse> {
    Json(super::ops::version())
}

async fn capabilities(
    State(known): State<Arc<Capabilities>>,
    State(sessions): State<Arc<SessionManager>>,
) -> Json<CapabilitiesResponse> {
    let mut capabilities = (*known).clone();
    // Known at once unless the daemon has only just started (then its init is waited for).
    let world = sessions.config().world.clone();
    capabilities.command_isolation = tokio::task::spawn_blocking(move || world.isolation())
        .await
        .map_or("none", |isolation| isolation.name())
        .to_string();
    Json(CapabilitiesResponse {
        success: true,
        capabilities,
        timestamp: now_rfc3339(),
    })
}
