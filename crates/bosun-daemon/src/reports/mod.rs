//! Runs' results back to the forge, as Prow's crier reports them for
//! GitHub (and Gitea's compatible status API), through the store's
//! persisted outbox:
//!
//! - [`Policy`], installed in the store, turns every committed creation and
//!   state change of a reported run (a presubmit or postsubmit with refs,
//!   of a type `github_reporter.job_types_to_report` names, without
//!   `skip_report`) into outbox entries **in the transaction of the
//!   change**: the commit status of its context on its commit (key
//!   `status:ORG/REPO:SHA:CONTEXT`, version from the run's build id and
//!   state, so a newer run's or a later state's status supersedes an older
//!   one and an older never goes over a newer), and, for a presubmit that
//!   ended, the failure comment's update (key `comment:ORG/REPO#N`).
//! - [`outbox::outbox_loop`] delivers the due entries with the forge's
//!   client until the forge accepts each: a refusal for good (404, 422)
//!   ends that entry with the forge's answer (shown on the run), never
//!   holding back a newer one; anything else (401, 403, 429, 5xx, no
//!   answer) is tried again with backoff, and a rate limit the forge
//!   announces pauses every call until its reset.

pub mod outbox;

use std::sync::{Arc, OnceLock, Weak};

use bosun_config::types::JobType;
use bosun_forge::report::status::{self, JobState, RunStatus};
use bosun_store::{NewReport, NewRun, ReportKind, ReportPolicy, Run, RunState};
use serde_json::json;
use tokio::sync::Notify;

use crate::runs::{CONTEXT_ANNOTATION, REPORT_ANNOTATION};
use crate::state::Shared;

/// The forge's name for a run's state.
pub fn job_state(state: RunState) -> JobState {
    match state {
        RunState::Scheduling | RunState::Triggered => JobState::Triggered,
        RunState::Pending => JobState::Pending,
        RunState::Success => JobState::Success,
        RunState::Failure => JobState::Failure,
        RunState::Error => JobState::Error,
        RunState::Aborted => JobState::Aborted,
    }
}

/// A report's version: grows with the run (its build id grows with every
/// run) and, within a run, with its state.
pub fn version(run: &Run) -> u64 {
    let build: u64 = run.build_id.parse().unwrap_or(0);
    let rank = match run.state {
        RunState::Scheduling | RunState::Triggered => 0,
        RunState::Pending => 1,
        _ => 2,
    };
    build.saturating_mul(4).saturating_add(rank)
}

/// What reporting shares: where bosun is reached from outside (the runs'
/// target URLs), the daemon's state (the configuration in force), the
/// outbox worker's wake-up.
#[derive(Default)]
pub struct Reports {
    /// `--external-url`.
    pub external_url: Option<String>,
    shared: OnceLock<Weak<Shared>>,
    wake: Notify,
}

impl Reports {
    /// With bosun's external URL.
    pub fn new(external_url: Option<String>) -> Reports {
        Reports {
            external_url,
            ..Reports::default()
        }
    }

    /// Gives it the daemon's state (once, when it is made).
    pub fn attach(&self, shared: &Arc<Shared>) {
        let _ = self.shared.set(Arc::downgrade(shared));
    }

    /// New entries are in the outbox: the worker looks now.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// The configuration's `prowjob_namespace` (for the ProwJob document).
    fn namespace(&self) -> String {
        self.shared
            .get()
            .and_then(Weak::upgrade)
            .map(|s| s.snapshot().config.prowjob_namespace.clone())
            .unwrap_or_default()
    }

    /// The target URL of `run`'s status.
    pub fn target_url(&self, run: &Run, job_url_template: Option<&str>) -> String {
        let external = self.external_url.as_deref().unwrap_or_default();
        let prowjob = if job_url_template.is_some() {
            prowjob(run, &self.namespace())
        } else {
            serde_json::Value::Null
        };
        match status::target_url(external, &run.id, job_url_template, &prowjob) {
            Ok(u) => u.unwrap_or_default(),
            Err(_) => status::run_page(external, &run.id).unwrap_or_default(),
        }
    }

    /// The outbox entries `run`'s change makes (see the module's doc).
    pub fn entries(&self, run: &Run) -> Vec<NewReport> {
        if !reportable(run.job_type, run.refs.is_some()) {
            return Vec::new();
        }
        let Some(refs) = run.refs.as_ref() else {
            return Vec::new();
        };
        let Some(shared) = self.shared.get().and_then(Weak::upgrade) else {
            return Vec::new();
        };
        let snapshot = shared.snapshot();
        let config = &snapshot.config;
        let skip_report = run
            .annotations
            .get(REPORT_ANNOTATION)
            .is_some_and(|v| v == "false");
        let context = run.annotations.get(CONTEXT_ANNOTATION).cloned();
        let rs = RunStatus {
            name: run.job.clone(),
            context,
            job_type: run.job_type,
            skip_report,
            state: job_state(run.state),
            description: run.description.clone(),
            target_url: self.target_url(run, config.plank.job_url_template.as_deref()),
            base_sha: refs.base_sha.clone().unwrap_or_default(),
            pull_shas: refs.pulls.iter().map(|p| p.sha.clone()).collect(),
        };
        let types = config.github_reporter.job_types_to_report.clone();
        let Some(report) = status::status_report(&rs, &types) else {
            return Vec::new();
        };
        let repo = format!("{}/{}", refs.org, refs.repo);
        let version = version(run);
        let mut out = vec![NewReport {
            key: format!("status:{repo}:{}:{}", report.sha, report.status.context),
            kind: ReportKind::Status,
            run_id: Some(run.id.clone()),
            version,
            payload: json!({
                "repo": repo,
                "sha": report.sha,
                "state": report.status.state,
                "description": report.status.description,
                "target_url": report.status.target_url,
                "context": report.status.context,
            }),
            created_at: run
                .completed_at
                .or(run.pending_at)
                .unwrap_or(run.created_at),
        }];
        if run.job_type == JobType::Presubmit && run.state.is_final() {
            if let Some(pull) = refs.pulls.first() {
                out.push(NewReport {
                    key: format!("comment:{repo}#{}", pull.number),
                    kind: ReportKind::Comment,
                    run_id: Some(run.id.clone()),
                    version,
                    payload: json!({
                        "op": "failure-comment",
                        "repo": repo,
                        "number": pull.number,
                        "sha": pull.sha,
                        "author": pull.author,
                    }),
                    created_at: run.completed_at.unwrap_or(run.created_at),
                });
            }
        }
        out
    }
}

/// `run` as the ProwJob document templates read (bosun-job's, as a run's
/// `prowjob.json` has it), from the run alone: the job's definition is not
/// read from the store here (a report policy runs inside the store's
/// transaction), so the spec's pod and decoration fields are empty; the
/// job, its type, refs, cluster, labels, build id and state are the run's.
pub(crate) fn prowjob(run: &Run, namespace: &str) -> serde_json::Value {
    let spec = bosun_store::template::SpecSnapshot {
        job: bosun_config::types::JobBase::default(),
        pod_spec: None,
        decoration: None,
    };
    serde_json::to_value(bosun_job::prowjob::document(run, &spec, namespace)).unwrap_or_default()
}

/// After a reported run's change is committed (its reports with it), the
/// outbox's worker looks at once.
impl bosun_store::TransitionObserver for Reports {
    fn on_transition(&self, run: &Run, _from: Option<RunState>) {
        if matches!(run.job_type, JobType::Presubmit | JobType::Postsubmit) && run.refs.is_some() {
            self.wake();
        }
    }
}

/// The store's report policy: [`Reports::entries`].
pub struct Policy(pub Arc<Reports>);

impl ReportPolicy for Policy {
    fn reports(&self, run: &Run, _before: Option<RunState>) -> Vec<NewReport> {
        self.0.entries(run)
    }

    fn may_report_creation(&self, new: &NewRun) -> bool {
        reportable(new.job_type, new.refs.is_some())
    }
}

/// Whether a run of `job_type`, with refs or not, is ever reported: a
/// presubmit's or a postsubmit's with refs (what [`Reports::entries`] asks
/// first).
fn reportable(job_type: JobType, has_refs: bool) -> bool {
    matches!(job_type, JobType::Presubmit | JobType::Postsubmit) && has_refs
}
