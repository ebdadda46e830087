//! Build cluster health. Every [`probe_interval`] (30 s) each Kubernetes
//! cluster is probed by a task of its own (`/version`, then access reviews for
//! the pod verbs; see `bosun_cluster::kube`), so a hanging cluster only delays
//! its own answer, never another's. Local clusters are always `Reachable`;
//! clusters in `disabled_clusters` are `Disabled`. The result is served by
//! `GET /api/v1/clusters` and exported as `bosun_build_cluster_status`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bosun_cluster::kube::{Health, Tracker};
use bosun_cluster::registry::ClusterDef;

use crate::serve::App;

/// How often clusters are probed: 30 s (`BOSUN_HEALTH_INTERVAL_MS` sets it,
/// for tests).
pub fn probe_interval() -> Duration {
    std::env::var("BOSUN_HEALTH_INTERVAL_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(30), Duration::from_millis)
}

/// Kubernetes clients and health trackers of the clusters probed so far.
#[derive(Default)]
pub struct HealthBook {
    trackers: HashMap<String, Tracker>,
    /// A client per cluster, kept while its definition is unchanged.
    clients: HashMap<String, (ClusterDef, kube::Client)>,
}

/// A cluster's health now.
pub fn health_of(app: &App, alias: &str, def: &ClusterDef) -> Health {
    if app
        .snapshot()
        .config
        .disabled_clusters
        .iter()
        .any(|c| c == alias)
    {
        return Health::Disabled;
    }
    match def {
        ClusterDef::Local { .. } => Health::Reachable,
        ClusterDef::Kubernetes { .. } => app
            .health
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .trackers
            .get(alias)
            .map_or_else(
                || Tracker::default().health().clone(),
                |t| t.health().clone(),
            ),
    }
}

/// Probes every Kubernetes cluster now, each on its own task; returns when all
/// have answered (each call is bounded by the API timeout).
pub async fn probe_all(app: &Arc<App>) {
    let clusters = app.clusters();
    let namespace = app.snapshot().config.pod_namespace.clone();
    let mut tasks = tokio::task::JoinSet::new();
    for (alias, def) in &clusters.defs {
        let ClusterDef::Kubernetes {
            context,
            kubeconfig,
        } = def
        else {
            continue;
        };
        let (app, alias, def) = (app.clone(), alias.clone(), def.clone());
        let (context, kubeconfig, namespace) =
            (context.clone(), kubeconfig.clone(), namespace.clone());
        tasks.spawn(async move {
            let cached = app
                .health
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clients
                .get(&alias)
                .filter(|(d, _)| *d == def)
                .map(|(_, c)| c.clone());
            let client = match cached {
                Some(c) => Ok(c),
                None => bosun_cluster::kube::client(kubeconfig.as_deref(), &context).await,
            };
            let probe = match client {
                Ok(client) => {
                    let probe = bosun_cluster::kube::probe(&client, &namespace).await;
                    app.health
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clients
                        .insert(alias.clone(), (def, client));
                    probe
                }
                Err(e) => {
                    app.metrics
                        .failed_client_creations
                        .get_or_create(&vec![("cluster".into(), alias.clone())])
                        .inc();
                    bosun_cluster::kube::Probe::Failed(e)
                }
            };
            let mut book = app.health.lock().unwrap_or_else(|e| e.into_inner());
            let health = book.trackers.entry(alias.clone()).or_default().record(probe).clone();
            if !matches!(health, Health::Reachable) {
                tracing::warn!(cluster = %alias, status = health.word(), health = ?health, "build cluster is not healthy");
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    // Forget clusters that are gone, and export the health of every cluster.
    let mut book = app.health.lock().unwrap_or_else(|e| e.into_inner());
    book.trackers.retain(|a, _| clusters.defs.contains_key(a));
    book.clients.retain(|a, _| clusters.defs.contains_key(a));
    drop(book);
    app.metrics.cluster_status.clear();
    for (alias, def) in &clusters.defs {
        let now = health_of(app, alias, def);
        for (word, prow) in [
            ("Reachable", "Reachable"),
            ("Unreachable", "Error"),
            ("MissingPermissions", "MissingPermissions"),
            ("Disabled", "No-Manager"),
        ] {
            app.metrics
                .cluster_status
                .get_or_create(&vec![
                    ("cluster".into(), alias.clone()),
                    ("status".into(), word.into()),
                    ("prow_status".into(), prow.into()),
                ])
                .set(i64::from(now.word() == word));
        }
    }
}

/// Probes the clusters every [`probe_interval`] and whenever the clusters
/// change (a reload wakes it).
pub async fn health_loop(app: Arc<App>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let every = probe_interval();
    loop {
        tokio::select! {
            _ = probe_all(&app) => {}
            _ = stop.changed() => return,
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = app.clusters_changed.notified() => {}
            _ = stop.changed() => return,
        }
    }
}

/// `GET /api/v1/clusters`: every build cluster with its kind and health.
pub async fn list(State(app): State<Arc<App>>) -> Response {
    let clusters = app.clusters();
    let out: Vec<serde_json::Value> = clusters
        .defs
        .iter()
        .map(|(alias, def)| {
            let health = health_of(&app, alias, def);
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
            });
            match def {
                ClusterDef::Local { slots } => {
                    v["kind"] = "local".into();
                    v["slots"] = (*slots).into();
                }
                ClusterDef::Kubernetes {
                    context,
                    kubeconfig,
                } => {
                    v["kind"] = "kubernetes".into();
                    v["context"] = context.clone().into();
                    v["kubeconfig"] = kubeconfig.as_ref().map(|p| p.display().to_string()).into();
                }
            }
            v
        })
        .collect();
    Json(serde_json::json!({ "clusters": out })).into_response()
}

/// Shared by the health tasks.
pub type SharedHealth = Mutex<HealthBook>;
