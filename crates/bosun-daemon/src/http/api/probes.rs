//! `/healthz`, `/readyz` and `/metrics`: what liveness and readiness probes
//! and Prometheus read (no token ever needed, `http::auth`); and
//! `/api/v1/leader`, which replica leads.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::daemon::Daemon;
use crate::runs::blocking;

/// `GET /healthz`: 200 while the daemon serves.
pub async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: 200 once the daemon is ready, 503 with the reason before.
pub async fn readyz(State(daemon): State<Arc<Daemon>>) -> Response {
    match blocking(move || daemon.ready()).await {
        Ok(()) => "ok".into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

/// `GET /api/v1/leader`: this replica, whether it leads, and the lease as
/// the store has it (holder, term, since, expiry); 503 when the store does
/// not answer.
pub async fn leader(State(daemon): State<Arc<Daemon>>) -> Response {
    let leadership = daemon.shared.leadership.clone();
    match blocking(move || leadership.view()).await {
        Ok(view) => axum::Json(view).into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the store does not answer: {e}"),
        )
            .into_response(),
    }
}

/// `GET /metrics`: Prometheus' text format.
pub async fn metrics(State(daemon): State<Arc<Daemon>>) -> Response {
    let shared = daemon.shared.clone();
    let text = blocking(move || {
        let mut text = shared.metrics.render();
        // The dispatcher's and the external client's, while configured.
        let snapshot = shared.snapshot();
        let mut more = String::new();
        if snapshot.config.dispatcher.is_some() {
            more.push_str(&shared.placer.engine.service.metrics_text());
        }
        if let Some(client) = shared.placer.external(&snapshot.config) {
            more.push_str(&client.metrics_text());
        }
        for line in more.lines().filter(|l| *l != "# EOF") {
            text.push_str(line);
            text.push('\n');
        }
        text
    })
    .await;
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}
