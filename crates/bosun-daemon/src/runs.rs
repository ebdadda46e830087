//! Run creation: the one path every run made on request goes through — a
//! trigger (`POST /api/v1/runs`), a rerun and a periodic's manual trigger —
//! with the same checks, in this order: the job is found; its runs can run
//! on their cluster (a local cluster needs a command); a trusted cluster
//! admits the job and its refs; a presubmit has a pull request. (A periodic's
//! scheduled runs are created by the scheduler with its ticks, in one commit
//! with their outcomes: see `periodics`.)
//!
//! Run templates are kept per configuration snapshot (made on a job's first
//! trigger, dropped when another snapshot is in force).

use bosun_base::sync::Lock;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use bosun_cluster::registry::ClusterDef;
use bosun_cluster::trust;
use bosun_config::types::{JobSource, JobType, Refs};
use bosun_config::Snapshot;
use bosun_store::template::{initial_state, RunTemplate, SpecSnapshot};
use bosun_store::{Created, NewRun, Run, StoreError};
use serde::Serialize;

use crate::controller::Controller;
use crate::state::Shared;

/// The annotation holding the status context a run reports under (Prow's
/// `prow.k8s.io/context`).
pub const CONTEXT_ANNOTATION: &str = "prow.k8s.io/context";
/// The annotation `"false"` on a run that reports nothing (`skip_report`).
pub const REPORT_ANNOTATION: &str = "bosun.dev/report";
/// The label of an optional presubmit's run (Prow's `prow.k8s.io/is-optional`).
pub const OPTIONAL_LABEL: &str = "prow.k8s.io/is-optional";
/// The annotation holding the comment that reruns a presubmit's run (its
/// job's `rerun_command`), for the failure comment.
pub const RERUN_ANNOTATION: &str = "bosun.dev/rerun-command";

/// What a forge event's run reports as (its job's fields).
#[derive(Debug, Clone, Default)]
pub struct EventReport {
    /// The job's `context` (empty: its name).
    pub context: String,
    /// The job's `skip_report`.
    pub skip_report: bool,
    /// The job's `optional` (presubmits).
    pub optional: bool,
    /// The job's `rerun_command` (presubmits; empty: none).
    pub rerun_command: String,
    /// Started by `/retest` or `/retest-required`: the run gets Prow's
    /// label `prow.k8s.io/retest: "true"`.
    pub retest: bool,
}

/// What to create a run of.
#[derive(Debug)]
pub enum RunRequest {
    /// A configured job, by name (or a periodic's identity), narrowed by
    /// repository and type, on `refs`.
    Trigger {
        /// The job's name, or a periodic's identity.
        job: String,
        /// `org/repo` of a pre- or postsubmit.
        repo: Option<String>,
        /// `periodic`, `presubmit` or `postsubmit`.
        job_type: Option<String>,
        /// The refs to run on.
        refs: Option<Box<Refs>>,
    },
    /// A periodic, by identity, now (outside its schedule: no tick).
    Periodic(String),
    /// Another run of the same job on the same refs.
    Rerun(Box<Run>),
}

/// A job a trigger could mean.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    /// Its type.
    #[serde(rename = "type")]
    pub job_type: &'static str,
    /// Its repository (pre- and postsubmits).
    pub repo: Option<String>,
}

/// Why a run was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// No such job (or periodic) in the configuration in force.
    #[error("{0}")]
    NotFound(String),
    /// Several jobs have that name.
    #[error("{message}")]
    Ambiguous {
        /// What to say.
        message: String,
        /// The jobs it could mean.
        candidates: Vec<Candidate>,
    },
    /// The job's runs cannot run (on its cluster), or the request lacks
    /// what the job needs.
    #[error("{0}")]
    Unrunnable(String),
    /// A trusted cluster does not admit the job or its refs.
    #[error("{0}")]
    Forbidden(String),
    /// The run exists already (a rerun's unique key).
    #[error("{0}")]
    Exists(String),
    /// The store did not create it.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A job in the template cache: its kind, its repo (pre- and postsubmits)
/// and its place in the snapshot's list.
type TemplateKey = (JobType, Option<String>, usize);

/// A run template, the repository its job is defined for, and why its runs
/// cannot run, if they cannot.
struct JobTemplate {
    template: RunTemplate,
    repo: Option<String>,
    unrunnable: Option<String>,
}

/// The run templates of one snapshot.
#[derive(Default)]
struct Templates {
    snapshot: Option<Arc<Snapshot>>,
    by_job: HashMap<TemplateKey, Arc<JobTemplate>>,
}

/// A run ready to be checked and created.
struct Draft {
    new: NewRun,
    /// The repository its job is defined for; `None` outside: the job is no
    /// longer configured (a rerun).
    repo: Option<Option<String>>,
    unrunnable: Option<String>,
    /// A presubmit: its refs must name a pull request.
    needs_pulls: bool,
}

/// Creates runs on request.
#[derive(Default)]
pub struct RunFactory {
    templates: Mutex<Templates>,
}

impl RunFactory {
    /// Creates the run `request` asks for, after the checks; wakes the
    /// controller for it.
    pub async fn create(
        &self,
        shared: &Shared,
        controller: &Controller,
        request: RunRequest,
    ) -> Result<Run, CreateError> {
        let in_force = shared.in_force();
        let snapshot = &in_force.snapshot;
        let clusters = &in_force.clusters.defs;
        let draft = match request {
            RunRequest::Trigger {
                job,
                repo,
                job_type,
                refs,
            } => {
                let (job_type, t) = self.find(
                    snapshot,
                    clusters,
                    &job,
                    repo.as_deref(),
                    job_type.as_deref(),
                )?;
                let given = refs.is_some();
                let mut new = t.template.run(refs.map(|r| *r));
                new.state = initial_state(&snapshot.config);
                if !given {
                    shared.stamp_commits(&mut new);
                }
                Draft {
                    needs_pulls: job_type == JobType::Presubmit,
                    new,
                    repo: Some(t.repo.clone()),
                    unrunnable: t.unrunnable.clone(),
                }
            }
            RunRequest::Periodic(identity) => {
                let (i, p) = snapshot
                    .periodics
                    .iter()
                    .enumerate()
                    .find(|(_, p)| p.has_identity(&identity))
                    .ok_or_else(|| {
                        CreateError::NotFound(format!(
                            "no periodic {identity:?} in the configuration in force"
                        ))
                    })?;
                let t = self.template(snapshot, clusters, (JobType::Periodic, None, i), || {
                    (
                        RunTemplate::periodic(
                            p,
                            snapshot.pod_spec(p),
                            snapshot.periodic_decoration(p),
                        )
                        .defined_in(Path::new(&*p.origin.file)),
                        definition_repo(p),
                    )
                });
                let mut new = t.template.run(None);
                new.state = initial_state(&snapshot.config);
                shared.stamp_commits(&mut new);
                Draft {
                    new,
                    repo: Some(t.repo.clone()),
                    unrunnable: t.unrunnable.clone(),
                    needs_pulls: false,
                }
            }
            RunRequest::Rerun(old) => {
                let store = shared.store.clone();
                let hash = old.spec_hash.clone();
                let spec = blocking(move || store.spec(&hash)).await?;
                let spec = spec.unwrap_or_default();
                let unrunnable = serde_json::from_value::<SpecSnapshot>(spec.clone())
                    .ok()
                    .and_then(|s| local_refusal(clusters, &old.job, &old.configured_cluster, &s));
                Draft {
                    repo: rerun_definition_repo(snapshot, &old),
                    unrunnable,
                    needs_pulls: false,
                    new: NewRun {
                        job: old.job.clone(),
                        job_type: old.job_type,
                        periodic: old.periodic.clone(),
                        configured_cluster: old.configured_cluster.clone(),
                        state: initial_state(&snapshot.config),
                        refs: old.refs.as_deref().cloned(),
                        extra_refs: old.extra_refs.clone(),
                        labels: old.labels.clone(),
                        annotations: old.annotations.clone(),
                        spec: spec.into(),
                        scheduled_at: None,
                        attempt: 0,
                        description: format!("Rerun of {}.", old.id),
                    },
                }
            }
        };
        self.commit(shared, controller, snapshot, draft).await
    }

    /// A run of a presubmit or postsubmit an event of the forge starts (a
    /// pull request, a comment, a push), made from the job's definition in
    /// `snapshot`: the configuration in force, or for a pull request's
    /// in-repo jobs that configuration with the pull request's merged
    /// in-repo configuration composed over it. The run carries what its
    /// reports need, as Prow's jobs do: the annotation `prow.k8s.io/context`
    /// (the job's `context`), the label `prow.k8s.io/is-optional` for an
    /// optional presubmit, and `bosun.dev/report: "false"` for a job with
    /// `skip_report`. The same checks as a trigger's apply (its cluster runs
    /// it, a trusted cluster admits it and its refs, a presubmit names a
    /// pull request).
    #[allow(clippy::too_many_arguments)]
    pub async fn create_for_event<K>(
        &self,
        shared: &Shared,
        controller: &Controller,
        snapshot: &Snapshot,
        job: &bosun_config::Job<K>,
        kind: JobType,
        repo: &str,
        report: &EventReport,
        refs: Refs,
    ) -> Result<Run, CreateError> {
        let in_force = shared.in_force();
        let clusters = &in_force.clusters.defs;
        let template = RunTemplate::new(
            &job.base,
            kind,
            None,
            snapshot.pod_spec(job),
            snapshot.decoration_config(job, repo),
        )
        .defined_in(Path::new(&*job.origin.file));
        let mut new = template.run(Some(refs));
        new.state = initial_state(&snapshot.config);
        let context = if report.context.is_empty() {
            job.base.name.clone()
        } else {
            report.context.clone()
        };
        Arc::make_mut(&mut new.annotations).insert(CONTEXT_ANNOTATION.into(), context);
        if report.skip_report {
            Arc::make_mut(&mut new.annotations).insert(REPORT_ANNOTATION.into(), "false".into());
        }
        if report.optional {
            Arc::make_mut(&mut new.labels).insert(OPTIONAL_LABEL.into(), "true".into());
        }
        if report.retest {
            Arc::make_mut(&mut new.labels)
                .insert(bosun_forge::trigger::RETEST_LABEL.into(), "true".into());
        }
        if !report.rerun_command.is_empty() {
            Arc::make_mut(&mut new.annotations)
                .insert(RERUN_ANNOTATION.into(), report.rerun_command.clone());
        }
        let unrunnable = serde_json::from_str::<SpecSnapshot>(template.spec().json())
            .ok()
            .and_then(|s| local_refusal(clusters, &new.job, &new.configured_cluster, &s));
        let draft = Draft {
            needs_pulls: kind == JobType::Presubmit,
            new,
            repo: Some(Some(repo.to_string())),
            unrunnable,
        };
        self.commit(shared, controller, snapshot, draft).await
    }

    /// Checks `draft` and creates its run; wakes the controller.
    async fn commit(
        &self,
        shared: &Shared,
        controller: &Controller,
        snapshot: &Snapshot,
        draft: Draft,
    ) -> Result<Run, CreateError> {
        if let Some(why) = draft.unrunnable {
            return Err(CreateError::Unrunnable(why));
        }
        check_trust(snapshot, &draft.new, draft.repo)?;
        if draft.needs_pulls && draft.new.refs.as_ref().is_none_or(|r| r.pulls.is_empty()) {
            return Err(CreateError::Unrunnable(
                "a presubmit needs refs with at least one pull request (refs.pulls)".into(),
            ));
        }
        // The store's writer answers through a channel: no thread waits for
        // the commit.
        let (tx, rx) = tokio::sync::oneshot::channel();
        shared.store.create_run_then(
            draft.new,
            shared.clock.now(),
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        let created = rx
            .await
            .unwrap_or_else(|_| Err(StoreError::Unavailable("store stopped".into())))?;
        controller.runs_added();
        match created {
            // The store keeps this copy too (its writer's and the
            // controller's view of active runs): the caller gets its own.
            Created::New(run) => Ok(Arc::unwrap_or_clone(run)),
            Created::Existing(run) => Err(CreateError::Exists(format!(
                "the run already exists: {}",
                run.id
            ))),
        }
    }

    /// The one job of `snapshot` a trigger names.
    fn find(
        &self,
        snapshot: &Arc<Snapshot>,
        clusters: &BTreeMap<String, ClusterDef>,
        job: &str,
        repo: Option<&str>,
        job_type: Option<&str>,
    ) -> Result<(JobType, Arc<JobTemplate>), CreateError> {
        let mut found: Vec<(JobType, Option<String>, Arc<JobTemplate>)> = Vec::new();
        if job_type.is_none_or(|t| t == "periodic") && repo.is_none() {
            for (i, p) in snapshot
                .periodics
                .iter()
                .enumerate()
                .filter(|(_, p)| p.base.name == job || p.has_identity(job))
            {
                let t = self.template(snapshot, clusters, (JobType::Periodic, None, i), || {
                    (
                        RunTemplate::periodic(
                            p,
                            snapshot.pod_spec(p),
                            snapshot.periodic_decoration(p),
                        )
                        .defined_in(Path::new(&*p.origin.file)),
                        definition_repo(p),
                    )
                });
                found.push((JobType::Periodic, None, t));
            }
        }
        self.by_repo(
            snapshot,
            clusters,
            &snapshot.presubmits,
            JobType::Presubmit,
            job,
            repo,
            job_type,
            &mut found,
        );
        self.by_repo(
            snapshot,
            clusters,
            &snapshot.postsubmits,
            JobType::Postsubmit,
            job,
            repo,
            job_type,
            &mut found,
        );
        match found.len() {
            0 => Err(CreateError::NotFound(format!("no job named {job:?}"))),
            1 => {
                let (t, _, template) = found.remove(0);
                Ok((t, template))
            }
            n => Err(CreateError::Ambiguous {
                message: format!(
                    "{n} jobs are named {job:?}: say which with \"repo\" and \"type\""
                ),
                candidates: found
                    .iter()
                    .map(|(t, repo, _)| Candidate {
                        job_type: t.as_str(),
                        repo: repo.clone(),
                    })
                    .collect(),
            }),
        }
    }

    /// The jobs of one kind named `job`, narrowed by repo and type.
    #[allow(clippy::too_many_arguments)]
    fn by_repo<K>(
        &self,
        snapshot: &Arc<Snapshot>,
        clusters: &BTreeMap<String, ClusterDef>,
        jobs: &BTreeMap<String, Vec<bosun_config::Job<K>>>,
        kind: JobType,
        job: &str,
        repo: Option<&str>,
        job_type: Option<&str>,
        found: &mut Vec<(JobType, Option<String>, Arc<JobTemplate>)>,
    ) {
        if job_type.is_some_and(|t| t != kind.as_str()) {
            return;
        }
        for (r, jobs) in jobs {
            if repo.is_some_and(|want| want != r) {
                continue;
            }
            for (i, j) in jobs.iter().enumerate().filter(|(_, j)| j.base.name == job) {
                let t = self.template(snapshot, clusters, (kind, Some(r.clone()), i), || {
                    (
                        RunTemplate::new(
                            &j.base,
                            kind,
                            None,
                            snapshot.pod_spec(j),
                            snapshot.decoration_config(j, r),
                        )
                        .defined_in(Path::new(&*j.origin.file)),
                        Some(r.clone()),
                    )
                });
                found.push((kind, Some(r.clone()), t));
            }
        }
    }

    /// The run template of a job of `snapshot` (made by `make` the first
    /// time it is asked for while `snapshot` is in force).
    fn template(
        &self,
        snapshot: &Arc<Snapshot>,
        clusters: &BTreeMap<String, ClusterDef>,
        key: TemplateKey,
        make: impl FnOnce() -> (RunTemplate, Option<String>),
    ) -> Arc<JobTemplate> {
        let mut cache = self.templates.locked();
        if !cache
            .snapshot
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, snapshot))
        {
            *cache = Templates {
                snapshot: Some(snapshot.clone()),
                by_job: HashMap::new(),
            };
        }
        cache
            .by_job
            .entry(key)
            .or_insert_with(|| {
                let (template, repo) = make();
                let new = template.run(None);
                let unrunnable = serde_json::from_str::<SpecSnapshot>(template.spec().json())
                    .ok()
                    .and_then(|s| local_refusal(clusters, &new.job, &new.configured_cluster, &s));
                Arc::new(JobTemplate {
                    template,
                    repo,
                    unrunnable,
                })
            })
            .clone()
    }
}

/// Why a job cannot run on `cluster`, if that is a local cluster and the
/// job has no command it can run.
fn local_refusal(
    clusters: &BTreeMap<String, ClusterDef>,
    job: &str,
    cluster: &str,
    spec: &SpecSnapshot,
) -> Option<String> {
    let Some(ClusterDef::Local { .. }) = clusters.get(cluster) else {
        return None;
    };
    let e = bosun_cluster::local::command_of(spec.pod_spec.as_ref()?).err()?;
    Some(format!(
        "job {job} cannot run on local cluster {cluster}: {e}"
    ))
}

/// A trusted cluster takes only the jobs its rules admit, on their own refs;
/// a job no longer configured cannot be shown to be admitted.
fn check_trust(
    snapshot: &Snapshot,
    new: &NewRun,
    repo: Option<Option<String>>,
) -> Result<(), CreateError> {
    let cluster = &new.configured_cluster;
    let trusted = snapshot
        .config
        .build_clusters
        .get(cluster)
        .is_some_and(|c| c.trusted.is_some());
    let Some(repo) = repo else {
        if trusted {
            return Err(CreateError::Forbidden(format!(
                "job {} runs on trusted cluster {cluster:?} and is no longer configured",
                new.job
            )));
        }
        return Ok(());
    };
    let definition = trust::Definition {
        name: &new.job,
        job_type: new.job_type,
        repo: repo.as_deref(),
    };
    match trust::refusal(&snapshot.config, cluster, definition, new.refs.as_ref()) {
        Some(why) => Err(CreateError::Forbidden(why)),
        None => Ok(()),
    }
}

/// The repository a periodic is defined for: its in-repo source, else its
/// first `extra_refs`.
fn definition_repo(p: &bosun_config::Periodic) -> Option<String> {
    match &p.source {
        JobSource::InRepo { repo, .. } => Some(repo.clone()),
        JobSource::Central => p
            .base
            .extra_refs
            .first()
            .map(|r| format!("{}/{}", r.org, r.repo)),
    }
}

/// The configured job a run re-runs, found by its type and name (and, for a
/// pre- or postsubmit, the repository of its refs): `Some(repo it is defined
/// for)`, or `None` when no such job is configured any more.
fn rerun_definition_repo(snapshot: &Snapshot, run: &Run) -> Option<Option<String>> {
    let run_repo = run.refs.as_ref().map(|r| format!("{}/{}", r.org, r.repo));
    fn in_repos<K>(
        jobs: &BTreeMap<String, Vec<bosun_config::Job<K>>>,
        repo: Option<&str>,
        name: &str,
    ) -> Option<Option<String>> {
        let repo = repo?;
        jobs.get(repo)?
            .iter()
            .any(|j| j.base.name == name)
            .then(|| Some(repo.to_string()))
    }
    match run.job_type {
        JobType::Periodic => snapshot
            .periodics
            .iter()
            .find(|p| Some(p.identity()) == run.periodic || p.base.name == run.job)
            .map(definition_repo),
        JobType::Presubmit => in_repos(&snapshot.presubmits, run_repo.as_deref(), &run.job),
        JobType::Postsubmit => in_repos(&snapshot.postsubmits, run_repo.as_deref(), &run.job),
        _ => None,
    }
}

/// Runs blocking work (the store's synchronous calls) off the runtime's
/// worker threads.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("blocking task")
}
