//! Pull requests, comments and pushes start jobs, with Prow's trigger
//! rules (`bosun_forge::trigger`): the stored webhook deliveries' pull
//! request, comment and push events ([`crate::repos::hook`] hands them
//! here, in order per repository) are decided by the trigger against a
//! [`host::DaemonHost`] (the forge's answers through its client, the
//! repository's mirror for the changed files and the pull request's merge,
//! the configuration in force), and the actions carried out ([`act`]):
//! runs created through the one run-creation path, runs aborted through
//! the controller, replies and labels queued in the store's outbox.
//!
//! Which repositories: every repository when no `--plugin-config` is
//! given; else those for which Prow's `plugins.yaml` enables `trigger`,
//! with its `triggers:` settings (trusted apps, trusted org, only org
//! members, ...). The file is read again when it changes; a file that does
//! not load keeps the last good one in force, with the error logged.

pub mod act;
pub mod host;
pub mod settings;

use std::sync::Arc;

use bosun_forge::hook::{Comment, Event, PullRequest, Push};
use bosun_forge::trigger;

use crate::daemon::Daemon;

/// Carries out what `event` (of delivery `delivery`) starts; errors are
/// logged (a delivery is processed once: what the forge could not answer
/// is not retried, as Prow's trigger does not retry a webhook).
pub async fn on_event(daemon: &Arc<Daemon>, delivery: &str, event: Event) {
    match event {
        Event::PullRequest(pr) => on_pull_request(daemon, delivery, pr).await,
        Event::Comment(c) => on_comment(daemon, delivery, c).await,
        Event::Push(p) => on_push(daemon, delivery, p).await,
        _ => {}
    }
}

async fn on_pull_request(daemon: &Arc<Daemon>, delivery: &str, pr: PullRequest) {
    let Some(settings) = daemon.pulls.settings(&pr.repo) else {
        return;
    };
    let d = daemon.clone();
    let repo = pr.repo.clone();
    let number = pr.number;
    let decided = tokio::task::spawn_blocking(move || {
        let host = host::DaemonHost::new(&d, &pr.repo, &pr.clone_url)?;
        let actions = trigger::on_pull_request(&host, &settings, &pr).map_err(|e| e.to_string())?;
        Ok::<_, String>((actions, host.into_snapshot()))
    })
    .await;
    finish(daemon, delivery, &repo, number, decided).await;
}

async fn on_comment(daemon: &Arc<Daemon>, delivery: &str, c: Comment) {
    if !c.is_pull {
        return;
    }
    let Some(settings) = daemon.pulls.settings(&c.repo) else {
        return;
    };
    let d = daemon.clone();
    let repo = c.repo.clone();
    let number = c.number;
    let decided = tokio::task::spawn_blocking(move || {
        let host = host::DaemonHost::new(&d, &c.repo, &c.clone_url)?;
        let actions = trigger::on_comment(&host, &settings, &c).map_err(|e| e.to_string())?;
        Ok::<_, String>((actions, host.into_snapshot()))
    })
    .await;
    finish(daemon, delivery, &repo, number, decided).await;
}

type Decided = Result<
    Result<(Vec<trigger::Action>, Arc<bosun_config::Snapshot>), String>,
    tokio::task::JoinError,
>;

async fn finish(daemon: &Arc<Daemon>, delivery: &str, repo: &str, number: i64, decided: Decided) {
    match decided {
        Ok(Ok((actions, snapshot))) => act::carry_out(daemon, delivery, &snapshot, actions).await,
        Ok(Err(e)) => {
            tracing::warn!(repo, number, delivery, error = %e, "the trigger could not decide; nothing started")
        }
        Err(e) => tracing::error!(repo, number, delivery, error = %e, "the trigger failed"),
    }
}

async fn on_push(daemon: &Arc<Daemon>, delivery: &str, push: Push) {
    if daemon.pulls.settings(&push.repo).is_none() {
        return;
    }
    let d = daemon.clone();
    let repo = push.repo.clone();
    let decided = tokio::task::spawn_blocking(move || {
        let snapshot = d.shared.snapshot();
        let Some(postsubmits) = snapshot.postsubmits.get(&push.repo) else {
            return Ok((Vec::new(), snapshot, push));
        };
        let jobs = trigger::on_push(&push, postsubmits, || host::push_changes(&d, &push))?;
        Ok::<_, String>((jobs, snapshot.clone(), push))
    })
    .await;
    match decided {
        Ok(Ok((jobs, snapshot, push))) => {
            act::run_postsubmits(daemon, &snapshot, &push, jobs).await
        }
        Ok(Err(e)) => {
            tracing::warn!(repo, delivery, error = %e, "the push's postsubmits could not be chosen; none started")
        }
        Err(e) => tracing::error!(repo, delivery, error = %e, "the push's postsubmits failed"),
    }
}

/// The trigger as the delivery processor's [`JobEvents`].
///
/// [`JobEvents`]: crate::repos::hook::JobEvents
pub struct Events(pub Arc<Daemon>);

impl crate::repos::hook::JobEvents for Events {
    fn handle(
        &self,
        delivery: String,
        event: Event,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move { on_event(&self.0, &delivery, event).await })
    }

    /// The pull requests of the batch fetched into the mirror together
    /// first (one `git fetch` for pull requests opened or pushed at once),
    /// then each event in order.
    fn handle_batch(
        &self,
        events: Vec<(String, Event)>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let pulls: Vec<PullRequest> = events
                .iter()
                .filter_map(|(_, e)| match e {
                    Event::PullRequest(pr) if pr.open && !pr.head_sha.is_empty() => {
                        Some(pr.clone())
                    }
                    _ => None,
                })
                .collect();
            let several = pulls.len() > 1;
            if several {
                let (d, p) = (self.0.clone(), pulls.clone());
                let _ = tokio::task::spawn_blocking(move || host::prefetch(&d, &p)).await;
            }
            for (delivery, event) in events {
                on_event(&self.0, &delivery, event).await;
            }
            // What no event took (a pull request that ran nothing) is not kept.
            if several {
                for pr in &pulls {
                    self.0
                        .pulls
                        .take_prefetched(&pr.repo, pr.number, &pr.head_sha);
                }
            }
        })
    }
}
