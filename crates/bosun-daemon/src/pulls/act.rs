//! The trigger's actions carried out: presubmit and postsubmit runs created
//! through the one run-creation path ([`crate::runs::RunFactory::create_for_event`]),
//! a pull request's unfinished runs aborted through the controller, and
//! what is said to the forge (replies, labels, the in-repo configuration's
//! failure) queued in the store's outbox, delivered from there
//! ([`crate::reports`]). An outbox entry of a delivery has a key of its own
//! (`reply:DELIVERY:N`), so that processing a delivery again after a crash
//! queues nothing twice (the same key and version are stale).

use std::sync::Arc;

use bosun_config::types::JobType;
use bosun_config::Snapshot;
use bosun_forge::hook::Push;
use bosun_forge::trigger::{self, Action};
use bosun_store::{NewReport, ReportKind};
use serde_json::json;

use crate::daemon::Daemon;
use crate::runs::{blocking, EventReport};

/// The status context of the in-repo configuration's failure on a head.
pub const IN_REPO_CONTEXT: &str = "bosun/in-repo-config";

/// Carries out `actions`, in order; `snapshot` holds the jobs of their runs.
pub async fn carry_out(
    daemon: &Arc<Daemon>,
    delivery: &str,
    snapshot: &Snapshot,
    actions: Vec<Action>,
) {
    let mut said = Vec::new();
    let now = daemon.shared.clock.now();
    for (i, action) in actions.into_iter().enumerate() {
        let key = |what: &str| format!("{what}:{delivery}:{i}");
        match action {
            Action::Run {
                jobs,
                refs,
                pr_number,
                head_sha,
                retest,
            } => {
                let repo = format!("{}/{}", refs.org, refs.repo);
                for job in &jobs {
                    let report = EventReport {
                        context: job.kind.context.clone(),
                        skip_report: job.kind.skip_report,
                        optional: job.kind.optional,
                        rerun_command: job.kind.rerun_command.clone(),
                        retest,
                    };
                    let made = daemon
                        .runs
                        .create_for_event(
                            &daemon.shared,
                            &daemon.controller,
                            snapshot,
                            job,
                            JobType::Presubmit,
                            &repo,
                            &report,
                            refs.clone(),
                        )
                        .await;
                    match made {
                        Ok(run) => {
                            tracing::info!(repo, pull = pr_number, head = %head_sha, job = %job.base.name, run = %run.id, "presubmit started")
                        }
                        Err(e) => {
                            tracing::warn!(repo, pull = pr_number, job = %job.base.name, error = %e, "the presubmit could not start")
                        }
                    }
                }
            }
            Action::Abort {
                repo,
                number,
                except_head,
            } => abort(daemon, &repo, number, except_head).await,
            Action::Comment { repo, number, body } => said.push(once(
                key("reply"),
                ReportKind::Comment,
                json!({"op": "create", "repo": repo, "number": number, "body": body}),
                now,
            )),
            Action::AddLabel {
                repo,
                number,
                label,
            } => said.push(once(
                key("label"),
                ReportKind::Label,
                json!({"op": "add", "repo": repo, "number": number, "label": label}),
                now,
            )),
            Action::RemoveLabel {
                repo,
                number,
                label,
            } => said.push(once(
                key("label"),
                ReportKind::Label,
                json!({"op": "remove", "repo": repo, "number": number, "label": label}),
                now,
            )),
            Action::PruneHelpComments { repo, number } => said.push(once(
                key("prune"),
                ReportKind::Comment,
                json!({"op": "prune-help", "repo": repo, "number": number}),
                now,
            )),
            Action::InRepoConfigFailed {
                repo,
                number,
                head_sha,
                error,
            } => {
                tracing::warn!(repo, pull = number, head = %head_sha, "{error}; the central presubmits run");
                // One status and one comment per head: their keys name the
                // head, and a second of either is stale.
                said.push(once(
                    format!("status:{repo}:{head_sha}:{IN_REPO_CONTEXT}"),
                    ReportKind::Status,
                    json!({
                        "repo": repo, "sha": head_sha, "context": IN_REPO_CONTEXT,
                        "state": "error",
                        "description": bosun_forge::report::status::context_description_with_base_sha(&error, ""),
                    }),
                    now,
                ));
                said.push(once(
                    format!("in-repo-comment:{repo}:{number}:{head_sha}"),
                    ReportKind::Comment,
                    json!({"op": "create", "repo": repo, "number": number, "body": format!(
                        "The in-repo configuration of this pull request at {head_sha} could not be used, so only the centrally configured presubmits run:\n\n```\n{error}\n```"
                    )}),
                    now,
                ));
            }
            Action::ApproveWorkflowRuns { repo, .. }
            | Action::RerunFailedWorkflowRuns { repo, .. } => {
                tracing::info!(repo, "GitHub Actions workflow runs are not approved or rerun by bosun (trigger_github_workflows)");
            }
        }
    }
    if !said.is_empty() {
        let store = daemon.shared.store.clone();
        match blocking(move || store.enqueue_reports(said)).await {
            Ok(_) => daemon.reports.wake(),
            Err(e) => {
                tracing::error!(delivery, error = %e, "cannot queue the replies to the forge")
            }
        }
    }
}

/// An outbox entry said once: version 1 of its own key (queued again, it is
/// stale).
fn once(
    key: String,
    kind: ReportKind,
    payload: serde_json::Value,
    now: jiff::Timestamp,
) -> NewReport {
    NewReport {
        key,
        kind,
        run_id: None,
        version: 1,
        payload,
        created_at: now,
    }
}

/// Requests the abort of the pull request's unfinished presubmit runs (of
/// every head but `except_head`).
pub async fn abort(daemon: &Arc<Daemon>, repo: &str, number: i64, except_head: Option<String>) {
    let store = daemon.shared.store.clone();
    let r = repo.to_string();
    let runs = match blocking(move || store.active_runs_of_pull(&r, number)).await {
        Ok(runs) => runs,
        Err(e) => {
            tracing::error!(repo, pull = number, error = %e, "cannot read the pull request's runs to abort them");
            return;
        }
    };
    let ids: Vec<String> = runs
        .into_iter()
        .filter(|run| {
            let head = run
                .refs
                .as_ref()
                .and_then(|r| r.pulls.iter().find(|p| p.number == number))
                .map(|p| p.sha.as_str());
            except_head.as_deref().is_none_or(|keep| head != Some(keep))
        })
        .map(|run| run.id)
        .collect();
    if !ids.is_empty() {
        tracing::info!(
            repo,
            pull = number,
            runs = ids.len(),
            "aborting the pull request's runs"
        );
        daemon.controller.request_abort(ids);
    }
}

/// Starts `jobs`, the postsubmits `push` runs.
pub async fn run_postsubmits(
    daemon: &Arc<Daemon>,
    snapshot: &Snapshot,
    push: &Push,
    jobs: Vec<bosun_config::Postsubmit>,
) {
    let refs = trigger::push_refs(push);
    for job in &jobs {
        let report = EventReport {
            context: job.kind.context.clone(),
            skip_report: job.kind.skip_report,
            optional: false,
            rerun_command: String::new(),
            retest: false,
        };
        let made = daemon
            .runs
            .create_for_event(
                &daemon.shared,
                &daemon.controller,
                snapshot,
                job,
                JobType::Postsubmit,
                &push.repo,
                &report,
                refs.clone(),
            )
            .await;
        match made {
            Ok(run) => {
                tracing::info!(repo = %push.repo, git_ref = %push.git_ref, job = %job.base.name, run = %run.id, "postsubmit started")
            }
            Err(e) => {
                tracing::warn!(repo = %push.repo, job = %job.base.name, error = %e, "the postsubmit could not start")
            }
        }
    }
}
