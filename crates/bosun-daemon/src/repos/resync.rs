//! The resync: every followed repository's remote asked for its branch's
//! head (`git ls-remote`) every `repos.resync` (default 5 minutes), and
//! loaded when the head moved, so that a webhook that never came, or a
//! forge that sends none, is caught up. A repository just followed (at
//! start, by a reload, by a webhook) is due at once; a failed load is
//! retried with backoff ([`bosun_forge::repos::Backoff`]: 1 s doubling to 5
//! minutes), a failed first clone too. A few loads run side by side; the
//! others wait their turn.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::state::Shared;

/// Loads run side by side.
const PARALLEL: usize = 8;

/// Resyncs until `stop`.
pub async fn resync_loop(
    shared: Arc<Shared>,
    repos: Arc<super::Repos>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(PARALLEL));
    let mut running: std::collections::HashSet<String> = Default::default();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    loop {
        while let Ok(repo) = done_rx.try_recv() {
            running.remove(&repo);
        }
        let (due, next) = repos.due(Instant::now());
        for repo in due {
            if !running.insert(repo.clone()) {
                continue;
            }
            let (shared, repos, slots, done) = (
                shared.clone(),
                repos.clone(),
                slots.clone(),
                done_tx.clone(),
            );
            tokio::spawn(async move {
                let _turn = slots.acquire().await;
                let _ = repos.refresh(&shared, &repo, None, "resync").await;
                let _ = done.send(repo);
            });
        }
        for (repo, lag) in repos.lags(shared.clock.now()) {
            shared.metrics.repo_resync_lag(&repo, lag);
        }
        let wait = next
            .map(|n| n.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_secs(60))
            .clamp(Duration::from_millis(50), Duration::from_secs(60));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = repos.resync_wake.notified() => {}
            Some(repo) = done_rx.recv() => { running.remove(&repo); }
            _ = stop.changed() => return,
        }
    }
}
