//! Stored webhook deliveries, processed: `POST /hook` stores each accepted
//! delivery before its 200 ([`crate::http::api::hook`]); this task reads
//! them back in the order they were stored and acts on them, in order per
//! repository (one worker per repository, deliveries of different
//! repositories side by side), and marks each processed only once its
//! effect is recorded (a push's load done, or its failure recorded). A
//! delivery stored but not processed when the daemon stopped (a crash
//! after the 200) is processed at the next start, once.
//!
//! What a delivery does:
//! - a push to a followed repository's branch: a load at the pushed commit
//!   (consecutive pushes of one repository waiting together make one load,
//!   at the newest);
//! - a push to a repository under an enabled `*` or `org` key of
//!   `in_repo_config.enabled` that bosun does not follow yet: followed from
//!   now on (the clone URI the forge sent), then loaded;
//! - GitHub's `repository` event: archived, deleted, renamed or transferred
//!   retires the repository's jobs (recorded with the reason); unarchived
//!   brings them back;
//! - pull requests, comments and pushes are also handed to the [`JobEvents`]
//!   given (the trigger: presubmits and postsubmits), in order, after the
//!   batch's loads (a push's postsubmits see the configuration it pushed);
//! - anything else (`ping`, events bosun reads nothing from, repositories
//!   bosun does not follow): processed as it is.
//!
//! Processed deliveries' bodies are dropped at once; their ids are pruned
//! after [`KEEP_IDS`] (GitHub redelivers for three days).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bosun_forge::hook::{Event, Forge, Push, RepositoryAction};
use bosun_store::StoredDelivery;
use tokio::sync::mpsc;

use super::{enabled_by, Repos, ARCHIVED};
use crate::state::Shared;

/// How long processed deliveries' ids are kept, so a redelivery is
/// acknowledged and not processed again: three days, GitHub's window, and a
/// day more.
pub const KEEP_IDS: Duration = Duration::from_secs(4 * 24 * 3600);

/// Deliveries read from the store at a time.
const BATCH: usize = 512;

/// How often processed deliveries' ids are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// What acts on the events that start jobs (pull requests, comments,
/// pushes), given each with its delivery's id.
pub trait JobEvents: Send + Sync + 'static {
    /// Acts on `event`; done when its effect is recorded.
    fn handle(
        &self,
        delivery: String,
        event: Event,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>;

    /// Acts on `events` (one repository's, in order); by default one at a
    /// time.
    fn handle_batch(
        &self,
        events: Vec<(String, Event)>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            for (delivery, event) in events {
                self.handle(delivery, event).await;
            }
        })
    }
}

/// Processes stored deliveries until `stop` (see the module's doc).
pub async fn delivery_loop(
    shared: Arc<Shared>,
    repos: Arc<Repos>,
    jobs: Arc<dyn JobEvents>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut after = 0u64;
    let mut workers: HashMap<String, mpsc::UnboundedSender<StoredDelivery>> = HashMap::new();
    let mut prune = tokio::time::interval(PRUNE_EVERY);
    loop {
        let s = shared.clone();
        let batch = tokio::task::spawn_blocking(move || s.store.pending_deliveries(after, BATCH))
            .await
            .unwrap_or_else(|e| Err(bosun_store::StoreError::Unavailable(e.to_string())));
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the stored webhook deliveries; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    _ = stop.changed() => return,
                }
            }
        };
        let full = batch.len() == BATCH;
        for d in batch {
            after = after.max(d.seq);
            let key = d.repo.clone().unwrap_or_default();
            let tx = workers.entry(key.clone()).or_insert_with(|| {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(worker(shared.clone(), repos.clone(), jobs.clone(), rx));
                tx
            });
            if let Err(mpsc::error::SendError(d)) = tx.send(d) {
                // The worker ended (a panic): a new one takes over.
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(worker(shared.clone(), repos.clone(), jobs.clone(), rx));
                let _ = tx.send(d);
                workers.insert(key, tx);
            }
        }
        if full {
            continue;
        }
        tokio::select! {
            _ = repos.deliveries_wake.notified() => {}
            _ = prune.tick() => {
                let s = shared.clone();
                let cutoff = s.clock.now() - KEEP_IDS;
                let pruned = tokio::task::spawn_blocking(move || s.store.prune_deliveries(cutoff)).await;
                if let Ok(Ok(n)) = pruned {
                    if n > 0 {
                        tracing::debug!(pruned = n, "webhook delivery ids pruned");
                    }
                }
            }
            _ = stop.changed() => return,
        }
    }
}

/// One repository's deliveries, in order.
async fn worker(
    shared: Arc<Shared>,
    repos: Arc<Repos>,
    jobs: Arc<dyn JobEvents>,
    mut rx: mpsc::UnboundedReceiver<StoredDelivery>,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while let Ok(d) = rx.try_recv() {
            batch.push(d);
        }
        let mut done: Vec<u64> = Vec::new();
        let mut received = Vec::new();
        let mut push: Option<(String, String)> = None;
        let mut for_jobs: Vec<(String, Event)> = Vec::new();
        for d in batch {
            let (action, job_event) = action(&shared, &repos, &d);
            if let Some(e) = job_event {
                for_jobs.push((d.delivery_id.clone(), e));
            }
            match action {
                Action::Load { repo, commit } => {
                    if push.as_ref().is_some_and(|(r, _)| r != &repo) {
                        flush(&shared, &repos, &mut push).await;
                    }
                    push = Some((repo, commit));
                }
                Action::Now(f) => {
                    flush(&shared, &repos, &mut push).await;
                    f(&shared, &repos);
                }
                Action::Nothing => {}
            }
            done.push(d.seq);
            received.push(d.received_at);
        }
        flush(&shared, &repos, &mut push).await;
        if !for_jobs.is_empty() {
            jobs.handle_batch(for_jobs).await;
        }
        let s = shared.clone();
        let at = s.clock.now();
        let marked = tokio::task::spawn_blocking(move || s.store.mark_processed(&done, at)).await;
        if matches!(marked, Ok(Ok(()))) {
            for r in received {
                let waited = at.duration_since(r).as_secs_f64().max(0.0);
                shared.metrics.delivery_latency.observe(waited);
            }
        } else {
            tracing::warn!("cannot mark webhook deliveries processed; they are processed again at the next start");
        }
    }
}

/// Loads the pushed repository at the newest commit pushed.
async fn flush(shared: &Arc<Shared>, repos: &Arc<Repos>, push: &mut Option<(String, String)>) {
    let Some((repo, commit)) = push.take() else {
        return;
    };
    shared.metrics.repo_push();
    match repos.refresh(shared, &repo, Some(commit), "push").await {
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(repo = %repo, error = %e, "the push could not be loaded; the resync retries")
        }
    }
}

type Now = Box<dyn FnOnce(&Shared, &Repos) + Send>;

/// What a delivery asks for.
enum Action {
    /// A load of `repo` at `commit`.
    Load { repo: String, commit: String },
    /// Something done at once (retire, revive).
    Now(Now),
    /// Nothing.
    Nothing,
}

/// What `d` asks for (see the module's doc), and the event to hand to the
/// [`JobEvents`], if it is one that starts jobs.
fn action(shared: &Shared, repos: &Repos, d: &StoredDelivery) -> (Action, Option<Event>) {
    let forge = match d.forge.as_str() {
        "gitea" => Forge::Gitea,
        "gitlab" => Forge::GitLab,
        _ => Forge::GitHub,
    };
    let event = match bosun_forge::hook::events::parse(forge, &d.event, &d.body) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(delivery = %d.delivery_id, event = %d.event, error = %e, "a webhook delivery's body cannot be read; it is dropped");
            return (Action::Nothing, None);
        }
    };
    let job_event = matches!(
        event,
        Event::Push(_) | Event::PullRequest(_) | Event::Comment(_)
    )
    .then(|| event.clone());
    (repo_action(shared, repos, d, event), job_event)
}

/// What `event` of `d` asks of the followed repositories.
fn repo_action(shared: &Shared, repos: &Repos, d: &StoredDelivery, event: Event) -> Action {
    let now = shared.clock.now();
    let store = &*shared.store;
    match event {
        Event::Push(p) => push_action(shared, repos, p),
        Event::Repository(r) => {
            repos.webhook_seen(store, &r.repo, now);
            match r.action {
                RepositoryAction::Archived => Action::Now(Box::new(move |s, repos| {
                    repos.retire(s, &r.repo, format!("{ARCHIVED} (repository webhook)"));
                })),
                RepositoryAction::Deleted => Action::Now(Box::new(move |s, repos| {
                    repos.retire(s, &r.repo, "deleted (repository webhook)".into());
                })),
                RepositoryAction::Unarchived => Action::Now(Box::new(move |s, repos| {
                    repos.revive(s, &r.repo, ARCHIVED);
                })),
                RepositoryAction::Renamed { from, to }
                | RepositoryAction::Transferred { from, to } => {
                    Action::Now(Box::new(move |s, repos| {
                        repos.retire(s, &from, format!("renamed to {to} (repository webhook)"));
                    }))
                }
            }
        }
        // Pull requests and comments are the trigger's (not wired here yet).
        Event::PullRequest(_) | Event::Comment(_) | Event::Ping | Event::Ignored(_) => {
            if let Some(repo) = &d.repo {
                repos.webhook_seen(store, repo, now);
            }
            Action::Nothing
        }
    }
}

fn push_action(shared: &Shared, repos: &Repos, p: Push) -> Action {
    let now = shared.clock.now();
    let store = &*shared.store;
    if p.deleted {
        repos.webhook_seen(store, &p.repo, now);
        return Action::Nothing;
    }
    let branch = match repos.branch(&p.repo) {
        Some(b) => b,
        None => {
            let config = shared.snapshot();
            let Some(key) = enabled_by(&config.config, &p.repo) else {
                return Action::Nothing;
            };
            if p.clone_url.is_empty() {
                return Action::Nothing;
            }
            let credentials = super::enabled_credentials(&config.config);
            repos.follow_from_webhook(store, &p.repo, &p.clone_url, &key, credentials, now);
            None
        }
    };
    repos.webhook_seen(store, &p.repo, now);
    let on_branch = match &branch {
        Some(b) => p.git_ref == format!("refs/heads/{b}"),
        // The remote's HEAD: the forge's default branch.
        None => p.git_ref == format!("refs/heads/{}", p.default_branch),
    };
    if !on_branch {
        return Action::Nothing;
    }
    Action::Load {
        repo: p.repo,
        commit: p.after,
    }
}
