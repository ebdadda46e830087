//! Build cluster health. Every `--health-interval` (30 s) each Kubernetes
//! cluster is probed by a task of its own, which keeps its client
//! (`/version`, then access reviews for the pod verbs, and the
//! `pipelineruns.tekton.dev` verbs for a cluster that has pipeline jobs; see
//! `bosun_cluster::kube`), so a hanging cluster only delays its own answer,
//! never another's. The results go to [`Shared::health`] and are exported as
//! `bosun_build_cluster_status`.

use bosun_base::sync::Lock;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bosun_cluster::kube::Health;
use bosun_cluster::registry::ClusterDef;

use crate::state::Shared;

/// Probes one Kubernetes cluster and records the result (a client is made
/// when there is none yet; a failure to make one counts in
/// `kubernetes_failed_client_creations`).
async fn probe_one(
    shared: &Shared,
    alias: &str,
    def: &ClusterDef,
    client: &mut Option<kube::Client>,
) {
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
                shared
                    .metrics
                    .failed_client_creations
                    .get_or_create(&vec![("cluster".into(), alias.to_string())])
                    .inc();
                record(shared, alias, bosun_cluster::kube::Probe::Failed(e));
                return;
            }
        }
    }
    let (namespace, pipelines) = {
        let snapshot = shared.snapshot();
        (
            snapshot.config.pod_namespace.clone(),
            has_pipeline_jobs(&snapshot, alias),
        )
    };
    let probe = match client {
        Some(c) => bosun_cluster::kube::probe_with_pipelines(c, &namespace, pipelines).await,
        None => return,
    };
    record(shared, alias, probe);
}

/// Whether a job of `snapshot` runs as a Tekton pipeline (`agent:
/// tekton-pipeline`) on cluster `alias`.
fn has_pipeline_jobs(snapshot: &bosun_config::model::Snapshot, alias: &str) -> bool {
    snapshot
        .jobs()
        .any(|(_, _, job)| job.agent == "tekton-pipeline" && job.cluster == alias)
}

/// Records a probe's result; a change of health wakes the controller.
pub fn record(shared: &Shared, alias: &str, probe: bosun_cluster::kube::Probe) {
    let (before, health) = {
        let mut book = shared.health.locked();
        let tracker = book.trackers.entry(alias.to_string()).or_default();
        let before = tracker.health().clone();
        (before, tracker.record(probe).clone())
    };
    if before != health {
        shared.health_changed.notify_one();
    }
    if !matches!(health, Health::Reachable) {
        tracing::warn!(cluster = %alias, status = health.word(), health = ?health, "build cluster is not healthy");
    }
    export(shared);
}

/// Sets `bosun_build_cluster_status` for every cluster in force.
fn export(shared: &Shared) {
    let in_force = shared.in_force();
    shared.metrics.cluster_status.clear();
    for (alias, def) in &in_force.clusters.defs {
        let now = shared.health_of(&in_force.snapshot, alias, def);
        for (word, prow) in [
            ("Reachable", "Reachable"),
            ("Unreachable", "Error"),
            ("MissingPermissions", "MissingPermissions"),
            ("Disabled", "No-Manager"),
        ] {
            shared
                .metrics
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

/// One Kubernetes cluster's probes, `every` so often, on a task of its own:
/// a cluster that hangs delays only its own next answer.
async fn cluster_loop(
    shared: Arc<Shared>,
    alias: String,
    def: ClusterDef,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut client = None;
    loop {
        tokio::select! {
            _ = probe_one(&shared, &alias, &def, &mut client) => {}
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
pub async fn health_loop(
    shared: Arc<Shared>,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut tasks: HashMap<String, (ClusterDef, tokio::task::JoinHandle<()>)> = HashMap::new();
    loop {
        let clusters = shared.clusters();
        tasks.retain(|alias, (def, task)| {
            let keep = clusters.defs.get(alias) == Some(def);
            if !keep {
                task.abort();
            }
            keep
        });
        {
            let mut book = shared.health.locked();
            book.trackers.retain(|a, _| tasks.contains_key(a));
        }
        for (alias, def) in &clusters.defs {
            if matches!(def, ClusterDef::Kubernetes { .. }) && !tasks.contains_key(alias) {
                let task = tokio::spawn(cluster_loop(
                    shared.clone(),
                    alias.clone(),
                    def.clone(),
                    every,
                    stop.clone(),
                ));
                tasks.insert(alias.clone(), (def.clone(), task));
            }
        }
        export(&shared);
        tokio::select! {
            _ = shared.clusters_changed.notified() => {}
            _ = stop.changed() => {
                for (_, (_, task)) in tasks.drain() {
                    task.abort();
                }
                return;
            }
        }
    }
}
