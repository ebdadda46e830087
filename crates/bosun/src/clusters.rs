//! Build cluster health. Every [`probe_interval`] (30 s) each Kubernetes
//! cluster is probed by a task of its own, which keeps its client (`/version`,
//! then access reviews for the pod verbs; see `bosun_cluster::kube`), so a
//! hanging cluster only delays its own answer, never another's. Local clusters are always `Reachable`;
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

/// The health trackers of the Kubernetes clusters in force.
#[derive(Default)]
pub struct HealthBook {
    trackers: HashMap<String, Tracker>,
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

/// Probes one Kubernetes cluster and records the result (a client is made
/// when there is none yet; a failure to make one counts in
/// `kubernetes_failed_client_creations`).
async fn probe_one(app: &App, alias: &str, def: &ClusterDef, client: &mut Option<kube::Client>) {
    let ClusterDef::Kubernetes {
        context,
        kubeconfig,
        ..
    } = def
    else {
        return;
    };
    if client.is_none() {
        match bosun_cluster::kube::client(kubeconfig.as_deref(), context).await {
            Ok(c) => *client = Some(c),
            Err(e) => {
                app.metrics
                    .failed_client_creations
                    .get_or_create(&vec![("cluster".into(), alias.to_string())])
                    .inc();
                record(app, alias, bosun_cluster::kube::Probe::Failed(e));
                return;
            }
        }
    }
    let namespace = app.snapshot().config.pod_namespace.clone();
    let probe = match client {
        Some(c) => bosun_cluster::kube::probe(c, &namespace).await,
        None => return,
    };
    record(app, alias, probe);
}

pub(crate) fn record(app: &App, alias: &str, probe: bosun_cluster::kube::Probe) {
    let health = app
        .health
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .trackers
        .entry(alias.to_string())
        .or_default()
        .record(probe)
        .clone();
    if !matches!(health, Health::Reachable) {
        tracing::warn!(cluster = %alias, status = health.word(), health = ?health, "build cluster is not healthy");
    }
    export(app);
}

/// Sets `bosun_build_cluster_status` for every cluster in force.
fn export(app: &App) {
    let clusters = app.clusters();
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

/// One Kubernetes cluster's probes, every [`probe_interval`], on a task of
/// its own: a cluster that hangs delays only its own next answer.
async fn cluster_loop(
    app: Arc<App>,
    alias: String,
    def: ClusterDef,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let every = probe_interval();
    let mut client = None;
    loop {
        tokio::select! {
            _ = probe_one(&app, &alias, &def, &mut client) => {}
            _ = stop.changed() => return,
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Keeps one probing task per Kubernetes cluster in force: started for a new
/// or changed cluster, stopped for a removed one (a reload wakes it).
pub async fn health_loop(app: Arc<App>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut tasks: HashMap<String, (ClusterDef, tokio::task::JoinHandle<()>)> = HashMap::new();
    loop {
        let clusters = app.clusters();
        tasks.retain(|alias, (def, task)| {
            let keep = clusters.defs.get(alias) == Some(def);
            if !keep {
                task.abort();
            }
            keep
        });
        {
            let mut book = app.health.lock().unwrap_or_else(|e| e.into_inner());
            book.trackers.retain(|a, _| tasks.contains_key(a));
        }
        for (alias, def) in &clusters.defs {
            if matches!(def, ClusterDef::Kubernetes { .. }) && !tasks.contains_key(alias) {
                let task = tokio::spawn(cluster_loop(
                    app.clone(),
                    alias.clone(),
                    def.clone(),
                    stop.clone(),
                ));
                tasks.insert(alias.clone(), (def.clone(), task));
            }
        }
        export(&app);
        tokio::select! {
            _ = app.clusters_changed.notified() => {}
            _ = stop.changed() => {
                for (_, (_, task)) in tasks.drain() {
                    task.abort();
                }
                return;
            }
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
                    slots,
                } => {
                    v["kind"] = "kubernetes".into();
                    v["slots"] = (*slots).into();
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
