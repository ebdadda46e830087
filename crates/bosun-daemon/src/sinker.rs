//! Prow's sinker for runs: every `sinker.resync_period` (default 1h), runs
//! that completed more than `sinker.max_prowjob_age` ago (default 7 days)
//! are deleted with their logs, except the latest run of each periodic.
//! The same pass drops the executors' caches nothing has used for as long
//! (the local clusters' clone mirrors).

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use crate::state::Shared;

/// Runs retention passes until `stop`.
pub async fn sinker_loop(shared: Arc<Shared>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let s = shared.clone();
        let _ = tokio::task::spawn_blocking(move || sink(&s, s.clock.now())).await;
        let period = shared
            .snapshot()
            .config
            .sinker
            .resync_period
            .map(|d| d.to_std())
            .unwrap_or(Duration::from_secs(3600));
        tokio::select! {
            _ = tokio::time::sleep(period.max(Duration::from_secs(1))) => {}
            _ = stop.changed() => return,
        }
    }
}

/// One retention pass; returns the deleted runs.
pub fn sink(shared: &Shared, now: Timestamp) -> Vec<String> {
    let age = shared
        .snapshot()
        .config
        .sinker
        .max_prowjob_age
        .map(|d| d.to_std())
        .unwrap_or(Duration::from_secs(7 * 24 * 3600));
    let Ok(cutoff) =
        now.checked_sub(jiff::SignedDuration::try_from(age).unwrap_or(jiff::SignedDuration::MAX))
    else {
        return Vec::new();
    };
    let clusters = shared.clusters();
    for (alias, exec) in &clusters.executors {
        match exec.prune_caches(cutoff) {
            Ok(removed) if !removed.is_empty() => {
                tracing::info!(cluster = %alias, removed = ?removed, "sinker removed unused clone mirrors")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(cluster = %alias, error = %e, "sinker could not prune caches"),
        }
    }
    match shared.store.delete_completed_before(cutoff) {
        Ok(ids) => {
            for id in &ids {
                for exec in clusters.executors.values() {
                    let _ = exec.remove(id);
                }
            }
            if !ids.is_empty() {
                tracing::info!(deleted = ids.len(), "sinker removed old runs");
            }
            ids
        }
        Err(e) => {
            tracing::warn!(error = %e, "sinker could not delete old runs");
            Vec::new()
        }
    }
}
