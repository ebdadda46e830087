//! `/api/v1/config`: the configuration's status (the snapshot in force, the
//! last load's errors with file and line) and a reload on request.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::daemon::Daemon;
use crate::http::error::ApiResult;
use crate::runs::blocking;

/// `GET /api/v1/config/status`.
pub async fn status(State(daemon): State<Arc<Daemon>>) -> Response {
    Json(daemon.shared.config_status()).into_response()
}

/// `POST /api/v1/config/reload`: reloads now; answers with the status (200
/// when the configuration was valid, 422 when the last good one stays).
pub async fn reload(State(daemon): State<Arc<Daemon>>) -> ApiResult {
    let d = daemon.clone();
    let ok = blocking(move || crate::reload::reload(&d, "API")).await;
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    Ok((status, Json(daemon.shared.config_status())).into_response())
}
