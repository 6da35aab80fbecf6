//! `GET /api/metrics` and `GET /metrics`.

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use fsd_api::ErrorCode;
use fsd_api::metrics::{DurabilityMetrics, MetricsResponse, ProcessMetrics};
use fsd_api::process::ProcessStatus;
use fsd_process::{ProcessService, SessionManager};

use super::MetricsService;
use super::prometheus;
use crate::error::ApiError;
use crate::time::now_rfc3339;

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<MetricsService>: FromRef<S>,
    Arc<SessionManager>: FromRef<S>,
    Arc<ProcessService>: FromRef<S>,
{
    Router::new()
        .route("/api/metrics", get(metrics))
        .route("/metrics", get(prometheus_text))
}

async fn metrics(
    State(service): State<Arc<MetricsService>>,
    State(sessions): State<Arc<SessionManager>>,
    State(processes): State<Arc<ProcessService>>,
) -> Result<Json<MetricsResponse>, ApiError> {
    Ok(Json(gather(&service, &sessions, &processes).await?))
}

/// The same figures for scrapers, with each running process's and the request statistics.
async fn prometheus_text(
    State(service): State<Arc<MetricsService>>,
    State(sessions): State<Arc<SessionManager>>,
    State(processes): State<Arc<ProcessService>>,
) -> Result<impl IntoResponse, ApiError> {
    let metrics = gather(&service, &sessions, &processes).await?;
    let running = processes.list(Some(ProcessStatus::Running));
    let requests = service.requests.snapshot();
    let text = prometheus::render(&metrics, &running, &requests);
    Ok(([(header::CONTENT_TYPE, prometheus::CONTENT_TYPE)], text))
}

/// The machine's figures (read off the runtime's threads) and the process world's.
async fn gather(
    service: &Arc<MetricsService>,
    sessions: &SessionManager,
    processes: &ProcessService,
) -> Result<MetricsResponse, ApiError> {
    let service = Arc::clone(service);
    let world = sessions.config().world.clone();
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
            background: processes.running() as u64,
            sessions: sessions.list().await.len() as u64,
        },
        durability: DurabilityMetrics {
            mode: crate::files::durability::mode(),
            flushes: crate::files::durability::flushes(),
        },
        timestamp: now_rfc3339(),
    })
}
