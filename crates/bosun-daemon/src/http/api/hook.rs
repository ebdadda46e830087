//! `POST /hook`: forges' webhooks, as Prow's hook takes them
//! (`bosun_forge::hook::Intake`: its checks, status codes and texts, a cap
//! on the body, the signature or token against Prow's HMAC secret file), for
//! GitHub, Gitea/Forgejo and GitLab on the one path. An accepted delivery is
//! stored before its 200 ([`bosun_store::Store::accept_delivery`]), so an
//! answered delivery is never lost; a delivery id stored already is
//! answered 200 again and not processed twice. Processing is
//! [`crate::repos::hook`]'s.
//!
//! The secret file's tokens and the intake's settings are
//! [`crate::repos::webhooks::Webhooks`].

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bosun_forge::hook::Reply;
use bosun_store::{Accepted, NewDelivery};
use futures_util::StreamExt;

use crate::daemon::Daemon;

/// `POST /hook` (any other method is answered 405, as Prow does).
pub async fn receive(
    State(daemon): State<Arc<Daemon>>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (reply, event) = take(&daemon, method, headers, body).await;
    daemon
        .shared
        .metrics
        .webhook(reply.status.as_u16(), event.as_deref());
    (reply.status, reply.headers(), reply.body).into_response()
}

/// The answer to a request, and its event when it was accepted.
async fn take(
    daemon: &Arc<Daemon>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> (Reply, Option<String>) {
    let hooks = &daemon.webhooks;
    let intake = hooks.intake();
    let head = match intake.check_head(&method, &headers) {
        Ok(h) => h,
        Err(r) => return (r, None),
    };
    // Read no more than one byte past the cap.
    let mut stream = body.into_data_stream();
    let mut bytes: Vec<u8> = Vec::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(c) => {
                bytes.extend_from_slice(&c);
                if bytes.len() as u64 > intake.max_body() {
                    return (intake.too_large(), None);
                }
            }
            Err(_) => return (Reply::read_failed(), None),
        }
    }
    let Some(secrets) = hooks.secrets() else {
        return (
            Reply::error(
                StatusCode::FORBIDDEN,
                "403 Forbidden: no HMAC secret is configured (bosun serve --hmac-secret-file)",
            ),
            None,
        );
    };
    let delivery = match intake.check_body(head, bytes, &secrets) {
        Ok(d) => d,
        Err(r) => return (r, None),
    };
    let event = delivery.event.clone();
    let shared = daemon.shared.clone();
    let new = NewDelivery {
        forge: delivery.forge.name().to_string(),
        event: delivery.event.clone(),
        delivery_id: delivery.delivery_id.clone(),
        repo: delivery.repo.clone(),
        body: delivery.body,
        received_at: shared.clock.now(),
    };
    let s = shared.clone();
    let stored = tokio::task::spawn_blocking(move || s.store.accept_delivery(new)).await;
    match stored {
        Ok(Ok(Accepted::New { .. })) => {
            daemon.repos.deliveries_wake.notify_one();
            (Reply::accepted(), Some(event))
        }
        Ok(Ok(Accepted::Duplicate { seq, processed })) => {
            tracing::info!(delivery = %delivery.delivery_id, seq, processed, "a delivery received before: acknowledged, not processed again");
            (Reply::accepted(), Some(event))
        }
        Ok(Err(e)) => {
            tracing::error!(delivery = %delivery.delivery_id, error = %e, "cannot store a webhook delivery; it is refused so that the forge shows it failed");
            (
                Reply::error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("503 Service Unavailable: cannot record the delivery: {e}"),
                ),
                None,
            )
        }
        Err(e) => (
            Reply::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("500 Internal Server Error: {e}"),
            ),
            None,
        ),
    }
}
