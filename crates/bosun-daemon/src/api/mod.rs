//! The JSON API: the router, in one place, and the token check, a layer on
//! the mutating routes. Handlers live by resource (`runs`, `periodics`,
//! `clusters`, `config`); they translate HTTP to calls on the daemon and
//! hold no rules of their own. The dashboard (`web`) is mounted beside the
//! API, and the read check (`web::auth::read_guard`, when a read token is
//! configured) is a layer over every route.

mod artifacts;
mod clusters;
mod config;
mod error;
mod periodics;
mod runs;

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use tower::ServiceExt;

pub use error::{ApiError, ApiResult};

use crate::daemon::Daemon;
use crate::runs::blocking;
use crate::web::auth::{bearer, read_guard, same, Auth};
use crate::web::ArtifactLister;

/// Every route of the API and the dashboard, reads public.
pub fn router(daemon: Arc<Daemon>) -> Router {
    router_with(daemon, crate::web::Options::default())
}

/// Every route of the API and the dashboard, with the dashboard's
/// `options` (the read token, the daemon's stop signal).
pub fn router_with(daemon: Arc<Daemon>, options: crate::web::Options) -> Router {
    let auth = Auth::new(daemon.token.clone(), options.read_token);
    let api = api_routes(daemon.clone());
    // The dashboard lists a run's artifacts through the API's own route
    // (its checks, its answers).
    let lister: ArtifactLister = {
        let api = api.clone();
        Arc::new(move |id: String, path: String| {
            let api = api.clone();
            Box::pin(async move {
                let uri = format!(
                    "/api/v1/runs/{}/artifacts/{}",
                    crate::web::fmt::query_escape(&id),
                    crate::web::fmt::path_escape(&path)
                );
                let Ok(request) = Request::get(uri).body(Body::empty()) else {
                    return (StatusCode::BAD_REQUEST, Bytes::new());
                };
                match api.oneshot(request).await {
                    Ok(r) => {
                        let status = r.status();
                        let body = axum::body::to_bytes(r.into_body(), 64 << 20)
                            .await
                            .unwrap_or_default();
                        (status, body)
                    }
                    Err(e) => match e {},
                }
            })
        })
    };
    let web = crate::web::Web::new(daemon, auth.clone(), lister, options.stop);
    api.merge(crate::web::router(web))
        .layer(middleware::from_fn_with_state(auth, read_guard))
}

/// The API's routes.
fn api_routes(daemon: Arc<Daemon>) -> Router {
    // A mutating route: the token is checked before its handler runs.
    let guarded = |m: MethodRouter<Arc<Daemon>>| {
        m.route_layer(middleware::from_fn_with_state(daemon.clone(), authorize))
    };
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route(
            "/api/v1/runs",
            get(runs::list).merge(guarded(post(runs::create))),
        )
        .route("/api/v1/runs/{id}", get(runs::get))
        .route("/api/v1/runs/{id}/log", get(runs::log))
        .route("/api/v1/runs/{id}/artifacts", artifacts::root())
        .route("/api/v1/runs/{id}/artifacts/", artifacts::root())
        .route("/api/v1/runs/{id}/artifacts/{*path}", artifacts::at_path())
        .route("/api/v1/runs/{id}/abort", guarded(post(runs::abort)))
        .route("/api/v1/runs/{id}/rerun", guarded(post(runs::rerun)))
        .route("/api/v1/config/status", get(config::status))
        .route("/api/v1/config/reload", guarded(post(config::reload)))
        .route("/api/v1/clusters", get(clusters::list))
        .route("/api/v1/periodics", get(periodics::list))
        .route("/api/v1/periodics/{identity}/ticks", get(periodics::ticks))
        .route(
            "/api/v1/periodics/{identity}/trigger",
            guarded(post(periodics::trigger)),
        )
        .route(
            "/api/v1/periodics/{identity}/pause",
            guarded(post(periodics::pause)),
        )
        .route(
            "/api/v1/periodics/{identity}/resume",
            guarded(post(periodics::resume)),
        )
        .with_state(daemon.clone())
        // The dispatcher, as the standalone service answers (lookups need
        // no token; re-plans and overrides need the API token).
        .merge(bosun_dispatcher::engine::router_at(
            daemon.shared.placer.engine.clone(),
            "/api/v1/dispatch",
        ))
}

/// The token check of mutating routes: `Authorization: Bearer TOKEN`,
/// compared in constant time (`web::auth::same`); no token configured, no
/// check.
async fn authorize(State(daemon): State<Arc<Daemon>>, request: Request, next: Next) -> Response {
    let Some(token) = &daemon.token else {
        return next.run(request).await;
    };
    let given = bearer(request.headers()).unwrap_or_default();
    if same(given, token) {
        next.run(request).await
    } else {
        ApiError::Unauthorized.into_response()
    }
}

/// `GET /readyz`: 200 once the daemon is ready, 503 with the reason before.
async fn readyz(State(daemon): State<Arc<Daemon>>) -> Response {
    match daemon.ready() {
        Ok(()) => "ok".into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

/// `GET /metrics`: Prometheus' text format.
async fn metrics(State(daemon): State<Arc<Daemon>>) -> Response {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `/readyz` answers 503 until the scheduler has evaluated every
    /// periodic once, then 200; `/healthz` answers 200 all along.
    #[tokio::test]
    async fn readyz_waits_for_the_first_evaluation_of_every_periodic() {
        let s = crate::sim::sim("2026-03-02T00:00:30Z".parse().unwrap());
        let get = |path: &'static str| {
            let router = router(s.daemon.clone());
            async move {
                let r = router
                    .oneshot(Request::get(path).body(Body::empty()).unwrap())
                    .await
                    .unwrap();
                r.status()
            }
        };
        assert_eq!(get("/healthz").await, StatusCode::OK);
        assert_eq!(get("/readyz").await, StatusCode::SERVICE_UNAVAILABLE);
        let (stop_tx, stop) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(crate::periodics::scheduler_loop(
            s.daemon.shared.clone(),
            s.daemon.controller.clone(),
            stop,
        ));
        let mut ready = false;
        for _ in 0..500 {
            if get("/readyz").await == StatusCode::OK {
                ready = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let _ = stop_tx.send(true);
        let _ = task.await;
        assert!(ready, "ready once every periodic was evaluated");
    }
}
