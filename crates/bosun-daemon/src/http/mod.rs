//! The HTTP layer of `bosun serve`: the router, in one place, with every
//! route of the JSON API (`api`), of the dashboard (`web`) and of the
//! dispatcher (`bosun_dispatcher::engine::router_at`, at
//! `/api/v1/dispatch`), and its two checks: the read check
//! ([`auth::read_guard`], when a read token is configured), a layer over
//! every route, and the token check of the API's mutating routes
//! (`authorize`), a layer on each of them. `auth` holds who may read and
//! act (tokens, bearer headers, sessions, CSRF), `error` the API's error
//! answers, `url` the percent-encoding of URLs, `pulls` the pull request
//! filters of run listings; `api` and `web` use them and never each other. A run's artifacts are read by both through
//! [`crate::artifacts`].

pub mod api;
pub mod auth;
pub mod error;
mod pulls;
mod url;
pub mod web;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;

use self::auth::{bearer, read_guard, same, Auth};
use self::error::ApiError;
use self::web::Web;
use crate::daemon::Daemon;

/// The HTTP layer's options.
#[derive(Default)]
pub struct Options {
    /// The token reads need (none: reads are public).
    pub read_token: Option<String>,
    /// Told when the daemon stops: the dashboard's live streams end then.
    pub stop: Option<tokio::sync::watch::Receiver<bool>>,
}

/// Every route of the API and the dashboard, reads public.
pub fn router(daemon: Arc<Daemon>) -> Router {
    router_with(daemon, Options::default())
}

/// Every route of the API and the dashboard, with `options` (the read
/// token, the daemon's stop signal).
pub fn router_with(daemon: Arc<Daemon>, options: Options) -> Router {
    let daemon_shares_store = daemon.shared_store().is_some();
    let auth = Auth::new(
        daemon.token.clone(),
        options.read_token,
        daemon.shared.store.clone(),
    );
    // A mutating route: the token is checked before its handler runs.
    let guarded = |m: MethodRouter<Arc<Daemon>>| {
        m.route_layer(middleware::from_fn_with_state(daemon.clone(), authorize))
    };
    // A run's artifacts are the job's files: every answer hardened.
    let artifacts =
        |m: MethodRouter<Arc<Daemon>>| m.layer(middleware::map_response(api::artifacts::harden));
    let api = Router::new()
        .route("/healthz", get(api::probes::healthz))
        .route("/readyz", get(api::probes::readyz))
        .route("/metrics", get(api::probes::metrics))
        .route(
            "/api/v1/runs",
            get(api::runs::list).merge(guarded(post(api::runs::create))),
        )
        .route("/api/v1/runs/{id}", get(api::runs::get))
        .route("/api/v1/runs/{id}/log", get(api::runs::log))
        .route("/api/v1/runs/{id}/reports", get(api::runs::reports))
        .route(
            "/api/v1/runs/{id}/artifacts",
            artifacts(get(api::artifacts::root)),
        )
        .route(
            "/api/v1/runs/{id}/artifacts/",
            artifacts(get(api::artifacts::root)),
        )
        .route(
            "/api/v1/runs/{id}/artifacts/{*path}",
            artifacts(get(api::artifacts::at_path)),
        )
        .route("/api/v1/runs/{id}/abort", guarded(post(api::runs::abort)))
        .route("/api/v1/runs/{id}/rerun", guarded(post(api::runs::rerun)))
        .route("/api/v1/config/status", get(api::config::status))
        .route("/api/v1/config/reload", guarded(post(api::config::reload)))
        .route("/api/v1/clusters", get(api::clusters::list))
        .route("/api/v1/leader", get(api::probes::leader))
        .route("/api/v1/repos", get(api::repos::list))
        .route("/api/v1/repos/{org}/{repo}", get(api::repos::get))
        .route(
            "/api/v1/repos/{org}/{repo}/refresh",
            guarded(post(api::repos::refresh)),
        )
        // Forges' webhooks: signed with the HMAC secret file's tokens (no
        // API token); every method answered as Prow answers it.
        .route("/hook", axum::routing::any(api::hook::receive))
        .route("/api/v1/periodics", get(api::periodics::list))
        .route(
            "/api/v1/periodics/{identity}/ticks",
            get(api::periodics::ticks),
        )
        .route(
            "/api/v1/periodics/{identity}/trigger",
            guarded(post(api::periodics::trigger)),
        )
        .route(
            "/api/v1/periodics/{identity}/pause",
            guarded(post(api::periodics::pause)),
        )
        .route(
            "/api/v1/periodics/{identity}/resume",
            guarded(post(api::periodics::resume)),
        )
        .with_state(daemon.clone());
    // The dispatcher, as the standalone service answers (lookups need no
    // token; re-plans and overrides need the API token).
    let dispatcher = bosun_dispatcher::engine::router_at(
        daemon.shared.placer.engine.clone(),
        "/api/v1/dispatch",
    );
    // The dashboard's actions are forms, checked by `web` itself
    // (`Auth::check_form`: CSRF, origin, the API token).
    let dashboard = Router::new()
        .route("/", get(web::runs::list))
        .route("/runs/trigger", post(web::runs::trigger))
        .route("/runs/{id}", get(web::runs::page))
        .route("/runs/{id}/abort", post(web::runs::abort))
        .route("/runs/{id}/rerun", post(web::runs::rerun))
        .route("/live/runs", get(web::runs::live_list))
        .route("/live/runs/{id}", get(web::runs::live_run))
        .route("/pulls/{org}/{repo}/{number}", get(web::pulls::page))
        .route("/live/pulls/{org}/{repo}/{number}", get(web::pulls::live))
        .route("/periodics", get(web::periodics::page))
        .route("/periodics/trigger", post(web::periodics::trigger))
        .route("/periodics/pause", post(web::periodics::pause))
        .route("/periodics/resume", post(web::periodics::resume))
        .route("/clusters", get(web::clusters::page))
        .route("/dispatcher", get(web::dispatcher::page))
        .route("/dispatcher/replan", post(web::dispatcher::replan))
        .route("/dispatcher/overrides", post(web::dispatcher::add_override))
        .route(
            "/dispatcher/overrides/cancel",
            post(web::dispatcher::cancel_override),
        )
        .route("/config", get(web::config::page))
        .route("/config/reload", post(web::config::reload))
        .route("/login", get(web::login::page).post(web::login::login))
        .route("/logout", post(web::login::logout))
        .route("/assets/{name}", get(web::assets::serve))
        .with_state(Web::new(daemon, auth.clone(), options.stop));
    let router = api
        .merge(dispatcher)
        .merge(dashboard)
        .layer(middleware::from_fn_with_state(auth, read_guard));
    if daemon_shares_store {
        router.layer(middleware::from_fn(answer_within))
    } else {
        router
    }
}

/// On replicas, the longest a request waits for its answer's head.
pub const ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_secs(20);

/// Answers 503 when a request's answer has not begun within
/// [`ANSWER_WITHIN`]: on replicas, a store call on a connection whose
/// other end went silent behind something that still acknowledges (a
/// proxy or a middlebox that froze: TCP's own timeouts never fire) would
/// otherwise hang the request; the caller (or its load balancer) asks
/// another replica. A body already streaming (a followed log) is not
/// bounded.
async fn answer_within(request: Request, next: Next) -> Response {
    let what = format!("{} {}", request.method(), request.uri().path());
    match tokio::time::timeout(ANSWER_WITHIN, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(request = %what, "no answer within {ANSWER_WITHIN:?}: the store may be out of reach");
            ApiError::Store(bosun_store::StoreError::Unavailable(format!(
                "{what}: no answer within {} s (is the store out of reach?)",
                ANSWER_WITHIN.as_secs()
            )))
            .into_response()
        }
    }
}

/// The token check of the API's mutating routes: `Authorization: Bearer
/// TOKEN`, compared in constant time ([`auth::same`]); no token configured,
/// no check.
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::StatusCode;
    use tower::ServiceExt;

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
