//! Sinker for pods: deletes bosun's finished pods `sinker.terminated_pod_ttl`
//! after they ended, once their log is copied (never in a cluster of
//! `sinker.exclude_clusters`; the executor does not start it there).
//!
//! It knows nothing of runs: it reads the watch's cache and asks the log
//! copier, and deletes pods through the cluster's connection, only while
//! the process may act on the cluster (a replica that leads, inside its
//! trust window: followers and a stale leader delete nothing).

use std::time::Duration;

use super::client::Connection;
use super::logs::LogCopier;
use super::watch::{PodCache, Seen};

/// Deletes the finished pods of `cache` `ttl` after they ended, once
/// `logs` has their log, while `may_act` says so (checked before each
/// deletion), until the runtime ends.
pub(crate) async fn sink(
    conn: &Connection,
    cache: &PodCache,
    logs: &LogCopier,
    ttl: Duration,
    may_act: impl Fn() -> bool,
) {
    let every = (ttl / 2).clamp(Duration::from_millis(200), Duration::from_secs(60));
    loop {
        tokio::time::sleep(every).await;
        if !may_act() {
            continue;
        }
        let now = jiff::Timestamp::now();
        let done = cache.names_where(|name, pod| {
            let ended = finished_at(pod);
            ended.is_some_and(|t| now.duration_since(t).unsigned_abs() > ttl)
                && logs.is_copied(name)
        });
        let Ok(api) = conn.pods().await else {
            continue;
        };
        for name in done {
            if !may_act() {
                break;
            }
            // Only the pod that ended: never a revived run's new pod.
            let uid = cache
                .with_pod(&name, |p| p.uid.as_deref().map(str::to_string))
                .flatten();
            let params = kube::api::DeleteParams {
                preconditions: uid.map(|uid| kube::api::Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..Default::default()
            };
            let _ = api.delete(&name, &params).await;
        }
    }
}

/// When a finished pod's last container ended (none while it runs; its
/// creation when no container says).
pub(crate) fn finished_at(pod: &Seen) -> Option<jiff::Timestamp> {
    if !pod.is_final() {
        return None;
    }
    pod.ends()
        .filter_map(|e| e.finished_at)
        .max()
        .or(pod.created)
}
