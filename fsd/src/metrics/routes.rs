//! `GET /api/metrics` and `GET /metrics`.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use fsd_api::ErrorCode;
use fsd_api::metrics::{DurabilityMetrics, MetricsResponse, ProcessMetrics};
use fsd_api::process::ProcessStatus;

use super::prometheus;
use crate::error::ApiError;
use crate::state::AppState;
use crate::time::now_rfc3339;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/metrics", get(metrics))
        .route("/metrics", get(prometheus_text))
}

async fn metrics(State(state): State<AppState>) -> Result<Json<MetricsResponse>, ApiError> {
    Ok(Json(gather(&state).await?))
}

/// The same figures for scrapers, with each running process's and the request statistics.
async fn prometheus_text(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let metrics = gather(&state).await?;
    let running = state.processes.list(Some(ProcessStatus::Running));
    let requests = state.metrics.requests.snapshot();
    let text = prometheus::render(&metrics, &running, &requests);
    Ok(([(header::CONTENT_TYPE, prometheus::CONTENT_TYPE)], text))
}

/// The machine's figures (read off the runtime's threads) and the process world's.
async fn gather(state: &AppState) -> Result<MetricsResponse, ApiError> {
    let service = state.metrics.clone();
    let world = state.sessions.config().world.clone();
    let (snapshot, total) =
        tokio::task::spawn_blocking(move || (service.snapshot(), world.process_count()))
            .await
            .map_err(|err| {
                ApiError::new(
                    ErrorCode::InternalError,
                    format!("cannot read the figures: {err}"),
                )
            })?;
    Ok(MetricsResponse {
        success: true,
        uptime_seconds: snapshot.uptime_seconds,
        cpu: snapshot.cpu,
        memory: snapshot.memory,
        disks: snapshot.disks,
        connections: snapshot.connections,
        processes: ProcessMetrics {
            total: total as u64,
            background: state.processes.running() as u64,
            sessions: state.sessions.list().await.len() as u64,
        },
        durability: DurabilityMetrics {
            mode: crate::files::durability::mode(),
            flushes: crate::files::durability::flushes(),
        },
        timestamp: now_rfc3339(),
    })
}
