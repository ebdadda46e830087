//! `/api/v1/clusters`: every build cluster with its kind, health and, for a
//! trusted cluster, its allow rules.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bosun_cluster::kube::Health;
use bosun_cluster::registry::ClusterDef;

use crate::daemon::Daemon;

/// `GET /api/v1/clusters`.
pub async fn list(State(daemon): State<Arc<Daemon>>) -> Response {
    let in_force = daemon.shared.in_force();
    let out: Vec<serde_json::Value> = in_force
        .clusters
        .defs
        .iter()
        .map(|(alias, def)| {
            let health = daemon.shared.health_of(&in_force.snapshot, alias, def);
            let reason = match &health {
                Health::Unreachable(why) => Some(why.clone()),
                Health::MissingPermissions(denied) => {
                    Some(format!("denied: {}", denied.join(", ")))
                }
                _ => None,
            };
            let mut v = serde_json::json!({
                "alias": alias,
                "status": health.word(),
                "prow_status": health.prow_word(),
                "reason": reason,
                // `build_clusters.<alias>.trusted` as configured: the allow
                // rules (`jobs`, `repos`, `types`), or null for a cluster that
                // is not trusted (a kubeconfig context never is).
                "trusted": in_force
                    .snapshot
                    .config
                    .build_clusters
                    .get(alias)
                    .and_then(|c| c.trusted.as_ref()),
            });
            match def {
                ClusterDef::Local { slots } => {
                    v["kind"] = "local".into();
                    v["slots"] = (*slots).into();
                }
                ClusterDef::Kubernetes {
                    context,
                    kubeconfig,
                    slots,
                    creations,
                } => {
                    v["kind"] = "kubernetes".into();
                    v["slots"] = (*slots).into();
                    v["creations_in_flight"] = (*creations).into();
                    v["context"] = context.clone().into();
                    v["kubeconfig"] = kubeconfig.as_ref().map(|p| p.display().to_string()).into();
                }
            }
            v
        })
        .collect();
    Json(serde_json::json!({ "clusters": out })).into_response()
}
