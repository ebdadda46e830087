//! The outbox's delivery: the due entries, oldest first, sent with the
//! forge's client off the async runtime; each marked delivered once the
//! forge accepted it, or failed: for good (the forge refused it: 404,
//! 422, "No commit found for SHA", the 1,000-statuses cap; recorded with
//! its answer and never sent again, a newer entry of its key still is), or
//! for now (401, 403, 429, 5xx, no answer: due again after a backoff of
//! 1 s doubling to 5 min per entry, or when the forge's rate limit resets;
//! while the forge says it is limited, nothing is sent). An entry being
//! sent when bosun is killed stays pending and is sent again after the
//! restart (counted in `bosun_report_resent_total`).

use std::sync::Arc;
use std::time::Duration;

use bosun_forge::client::{Client, ForgeError};
use bosun_forge::report::comment::{self, CommentInput, IssueComment, JobResult};
use bosun_forge::report::status::NewStatus;
use bosun_store::{ReportFailure, ReportKind, StoredReport};
use serde_json::Value;

use super::job_state;
use crate::daemon::Daemon;
use crate::runs::{
    blocking, CONTEXT_ANNOTATION, OPTIONAL_LABEL, REPORT_ANNOTATION, RERUN_ANNOTATION,
};

/// The failed-tests comment's closing paragraph (Prow's points at the
/// Kubernetes project's guides; bosun's says what it understands).
const ABOUT: &str = "I understand these commands in a comment on this pull request: `/test NAME` (or `/test all`) runs a job, `/retest` reruns the failed jobs, `/retest-required` the failed required ones, `/test ?` lists the jobs, and a member's `/ok-to-test` lets a pull request from outside the organization run its jobs.";

/// Entries taken at a time.
const BATCH: usize = 64;
/// The longest wait for new entries without a wake-up.
const SAFETY: Duration = Duration::from_secs(60);
/// The longest wait while entries wait to be tried again.
const WAITING: Duration = Duration::from_secs(2);
/// The longest wait between attempts of one entry.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Delivers the outbox until `stop` (see the module's doc). Without a
/// forge client nothing is delivered (entries wait for one).
pub async fn outbox_loop(daemon: Arc<Daemon>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let Some(client) = daemon.pulls.client.clone() else {
        return;
    };
    let mut first = true;
    // When the earliest entry tried again is due (none: only new entries,
    // which wake the loop, are waited for).
    let mut next_retry: Option<tokio::time::Instant> = None;
    loop {
        let now = daemon.shared.clock.now();
        let store = daemon.shared.store.clone();
        let due = blocking(move || store.due_reports(now, BATCH)).await;
        let due = match due {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the report outbox; retrying");
                Vec::new()
            }
        };
        if first {
            // Entries with attempts were in flight at the last stop: sent
            // again now (a forge takes the same status twice).
            let resent = due.iter().filter(|r| r.attempts > 0).count();
            daemon.shared.metrics.reports_resent(resent as u64);
            first = false;
        }
        let full = due.len() == BATCH;
        for entry in due {
            // A leader whose trust window ended (its lease unrenewed) calls
            // the forge no more: the entries stay pending for the next one.
            if !daemon.shared.leadership.trusted() {
                next_retry = Some(tokio::time::Instant::now() + Duration::from_secs(1));
                break;
            }
            if let Some(until) = client.rate_limited_until() {
                let wait = until
                    .duration_since(std::time::SystemTime::now())
                    .unwrap_or_default();
                tracing::info!(
                    ?wait,
                    "the forge's rate limit is used up; reports wait for its reset"
                );
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.changed() => return,
                }
            }
            if let Some(wait) = deliver(&daemon, &client, entry).await {
                let at = tokio::time::Instant::now() + wait;
                next_retry = Some(next_retry.map_or(at, |n| n.min(at)));
            }
        }
        let d = daemon.clone();
        let pending = blocking(move || d.shared.metrics.set_report_counts(&*d.shared.store)).await;
        if full {
            continue;
        }
        // A new entry, the next entry tried again, or (in case a wake-up
        // was missed) a minute.
        let now = tokio::time::Instant::now();
        // Entries waiting to be tried again whose time this loop does not
        // know (queued before a restart) are looked for every few seconds.
        let longest = if pending > 0 { WAITING } else { SAFETY };
        let until = next_retry
            .filter(|t| *t > now)
            .unwrap_or(now + longest)
            .min(now + longest);
        tokio::select! {
            _ = daemon.reports.wake.notified() => {}
            _ = tokio::time::sleep_until(until) => {
                next_retry = next_retry.filter(|t| *t > tokio::time::Instant::now());
            }
            _ = stop.changed() => return,
        }
    }
}

/// Sends one entry and records how it went; when it is tried again, in how
/// long.
async fn deliver(
    daemon: &Arc<Daemon>,
    client: &Arc<Client>,
    entry: StoredReport,
) -> Option<Duration> {
    let (c, d, e) = (client.clone(), daemon.clone(), entry.clone());
    let sent = tokio::task::spawn_blocking(move || send(&d, &c, &e))
        .await
        .unwrap_or_else(|e| Err(ForgeError::unreachable(e.to_string())));
    let now = daemon.shared.clock.now();
    let mut again = None;
    let failure = match sent {
        Ok(()) => None,
        Err(e) if !e.is_retry() => {
            tracing::warn!(key = %entry.key, error = %e, "the forge refused a report for good");
            daemon.shared.metrics.report_failed("refused");
            Some(ReportFailure::Permanent {
                error: e.to_string(),
            })
        }
        Err(e) => {
            let backoff = Duration::from_secs(1u64 << entry.attempts.min(9)).min(MAX_BACKOFF);
            let wait = e.retry_after.unwrap_or(backoff).max(Duration::from_secs(1));
            tracing::warn!(key = %entry.key, error = %e, ?wait, "a report was not delivered; it is tried again");
            daemon.shared.metrics.report_failed("retry");
            again = Some(wait);
            Some(ReportFailure::Retry {
                at: now + wait,
                error: e.to_string(),
            })
        }
    };
    let store = daemon.shared.store.clone();
    let (id, version) = (entry.id, entry.version);
    let recorded = blocking(move || match failure {
        None => store.report_delivered(id, version, now),
        Some(f) => store.report_failed(id, version, f, now),
    })
    .await;
    if let Err(e) = recorded {
        tracing::warn!(key = %entry.key, error = %e, "cannot record a report's delivery; it is sent again");
        again = Some(Duration::from_secs(1));
    }
    again
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn num_of(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or_default()
}

/// Sends `entry` (blocking).
fn send(daemon: &Daemon, client: &Client, entry: &StoredReport) -> Result<(), ForgeError> {
    let p = &entry.payload;
    let repo = str_of(p, "repo");
    match (entry.kind, str_of(p, "op")) {
        (ReportKind::Status, _) => {
            let status = NewStatus {
                state: str_of(p, "state").to_string(),
                target_url: str_of(p, "target_url").to_string(),
                description: str_of(p, "description").to_string(),
                context: str_of(p, "context").to_string(),
            };
            client.create_status(repo, str_of(p, "sha"), &status)
        }
        (ReportKind::Label, "add") => {
            client.add_label(repo, num_of(p, "number"), str_of(p, "label"))
        }
        (ReportKind::Label, _) => {
            client.remove_label(repo, num_of(p, "number"), str_of(p, "label"))
        }
        (ReportKind::Comment, "create") => client
            .create_comment(repo, num_of(p, "number"), str_of(p, "body"))
            .map(drop),
        (ReportKind::Comment, "prune-help") => {
            let number = num_of(p, "number");
            let bot = daemon.pulls.bot(client).map_err(ForgeError::unreachable)?;
            for c in client.list_issue_comments(repo, number)? {
                if c.user == bot && bosun_forge::trigger::is_help_comment(&c.body) {
                    client.delete_comment(repo, c.id)?;
                }
            }
            Ok(())
        }
        (ReportKind::Comment, "failure-comment") => failure_comment(daemon, client, p),
        (kind, op) => Err(ForgeError::unexpected(
            None,
            format!("an outbox entry bosun does not know how to send: {kind} {op:?}"),
        )),
    }
}

/// The failed-tests comment of a pull request's head brought up to date,
/// from its runs as the store has them now and its comments as the forge
/// has them now.
fn failure_comment(daemon: &Daemon, client: &Client, p: &Value) -> Result<(), ForgeError> {
    let repo = str_of(p, "repo");
    let number = num_of(p, "number");
    let sha = str_of(p, "sha");
    let snapshot = daemon.shared.snapshot();
    let reporter = &snapshot.config.github_reporter;
    let (org, name) = repo.split_once('/').unwrap_or((repo, ""));
    if bosun_config::types::GitHubReporter::lists(&reporter.no_comment_repos, org, name) {
        return Ok(());
    }
    let template = match comment::ReportTemplate::for_repo(&snapshot.config.plank, org, name) {
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            tracing::warn!(repo, error = %e, "plank.report_templates: the repository's template does not parse; the comment goes without it");
            None
        }
        None => None,
    };
    let runs = daemon
        .shared
        .store
        .latest_runs_of_head(repo, number as i64, sha)
        .map_err(|e| ForgeError::unreachable(format!("the store: {e}")))?;
    let results: Vec<JobResult> = runs
        .iter()
        .map(|run| JobResult {
            name: run.job.clone(),
            context: run
                .annotations
                .get(CONTEXT_ANNOTATION)
                .cloned()
                .unwrap_or_else(|| run.job.clone()),
            job_type: run.job_type,
            skip_report: run
                .annotations
                .get(REPORT_ANNOTATION)
                .is_some_and(|v| v == "false"),
            state: job_state(run.state),
            url: daemon
                .reports
                .target_url(run, snapshot.config.plank.job_url_template.as_deref()),
            optional: Some(run.labels.get(OPTIONAL_LABEL).is_some_and(|v| v == "true")),
            rerun_command: run
                .annotations
                .get(RERUN_ANNOTATION)
                .cloned()
                .unwrap_or_else(|| format!("/test {}", run.job)),
            sha: sha.to_string(),
            prowjob: if template.is_some() {
                super::prowjob(run, &snapshot.config.prowjob_namespace)
            } else {
                Value::Null
            },
        })
        .collect();
    let bot = daemon.pulls.bot(client).map_err(ForgeError::unreachable)?;
    let comments: Vec<IssueComment> = client.list_issue_comments(repo, number)?;
    let types = reporter.job_types_to_report.clone();
    let plan = comment::plan_comment(&CommentInput {
        bot_login: &bot,
        author: str_of(p, "author"),
        comments: &comments,
        results: &results,
        job_types_to_report: &types,
        must_create: bosun_config::types::GitHubReporter::lists(
            &reporter.summary_comment_repos,
            org,
            name,
        ),
        template: template.as_ref(),
        about: ABOUT,
    })
    .map_err(|e| ForgeError::unexpected(None, e.to_string()))?;
    for id in plan.delete {
        client.delete_comment(repo, id)?;
    }
    if let Some(body) = plan.create {
        client.create_comment(repo, number, &body)?;
    }
    if let Some((id, body)) = plan.edit {
        client.edit_comment(repo, id, &body)?;
    }
    Ok(())
}
