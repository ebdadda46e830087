//! A new run of a configured job, as Prow makes one: Prow's labels and
//! annotations, and the job's definition kept with the run (its spec snapshot).

use bosun_config::types::{JobBase, JobSource, JobType, Refs};
use k8s_openapi::api::core::v1::PodSpec;

use crate::{NewRun, RunState};

/// What a run's spec snapshot holds.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct SpecSnapshot {
    /// The job's definition when the run was created.
    pub job: JobBase,
    /// Its pod spec with presets merged.
    pub pod_spec: Option<PodSpec>,
}

const MAX_LABEL: usize = 63;

/// Prow's `prow.k8s.io/job` label value: at most 63 characters, no trailing `._-`.
pub fn job_label(name: &str) -> String {
    if name.len() <= MAX_LABEL {
        return name.to_string();
    }
    name[..MAX_LABEL]
        .trim_end_matches(['.', '_', '-'])
        .to_string()
}

/// A job's runs before their refs: everything a run of the job shares (its
/// spec snapshot serialized and hashed once, its labels and annotations).
#[derive(Debug, Clone)]
pub struct RunTemplate {
    new: NewRun,
    /// The refs of a run given none: an in-repo periodic's repository.
    own_refs: Option<Refs>,
}

impl RunTemplate {
    /// The template of `base`'s runs.
    pub fn new(
        base: &JobBase,
        job_type: JobType,
        periodic: Option<String>,
        pod_spec: Option<PodSpec>,
    ) -> Self {
        let mut labels = base.labels.clone();
        labels.insert("created-by-prow".into(), "true".into());
        labels.insert("prow.k8s.io/job".into(), job_label(&base.name));
        labels.insert("prow.k8s.io/type".into(), job_type.as_str().into());
        let mut annotations = base.annotations.clone();
        annotations.insert("prow.k8s.io/job".into(), base.name.clone());
        RunTemplate {
            new: NewRun {
                job: base.name.clone(),
                job_type,
                periodic,
                configured_cluster: base.cluster.clone(),
                state: RunState::Triggered,
                refs: None,
                extra_refs: base.extra_refs.clone(),
                labels: labels.into(),
                annotations: annotations.into(),
                spec: crate::Spec::new(
                    &serde_json::to_value(SpecSnapshot {
                        job: base.clone(),
                        pod_spec,
                    })
                    .expect("serializable"),
                ),
                scheduled_at: None,
                attempt: 0,
                description: "Job triggered.".into(),
            },
            own_refs: None,
        }
    }

    /// The template of a periodic's runs. An in-repo periodic's runs carry
    /// their repository's refs, `{org, repo, base_ref: branch}` (the branch
    /// its source is checked out on), as Lighthouse gives them `{org, repo}`;
    /// a central periodic's have none (Prow's: its `extra_refs` only).
    pub fn periodic(p: &bosun_config::Periodic, pod_spec: Option<PodSpec>) -> Self {
        let mut t = RunTemplate::new(&p.base, JobType::Periodic, Some(p.identity()), pod_spec);
        if let JobSource::InRepo { repo, branch } = &p.source {
            let (org, name) = repo.split_once('/').unwrap_or((repo.as_str(), ""));
            t.own_refs = Some(Refs {
                org: org.to_string(),
                repo: name.to_string(),
                base_ref: Some(branch.clone()),
                ..Refs::default()
            });
        }
        t
    }

    /// The spec snapshot its runs carry.
    pub fn spec(&self) -> &crate::Spec {
        &self.new.spec
    }

    /// A run on `refs` (none given: the job's own, if it has any), with
    /// Prow's refs labels (from the refs, or else from the job's first
    /// `extra_refs`).
    pub fn run(&self, refs: Option<Refs>) -> NewRun {
        let refs = refs.or_else(|| self.own_refs.clone());
        let mut new = self.new.clone();
        if let Some(r) = refs.as_ref().or(new.extra_refs.first()) {
            let labels = std::sync::Arc::make_mut(&mut new.labels);
            labels.insert("prow.k8s.io/refs.org".into(), r.org.clone());
            labels.insert("prow.k8s.io/refs.repo".into(), r.repo.clone());
            if let Some(b) = &r.base_ref {
                labels.insert("prow.k8s.io/refs.base_ref".into(), b.clone());
            }
            if let Some(p) = r.pulls.first() {
                labels.insert("prow.k8s.io/refs.pull".into(), p.number.to_string());
            }
        }
        new.refs = refs;
        new
    }
}

/// The state new runs start in: `scheduling` when `scheduler.enabled` (their
/// cluster is then decided before they wait to start), else `triggered`.
pub fn initial_state(config: &bosun_config::types::ProwConfig) -> RunState {
    if config.scheduler.enabled {
        RunState::Scheduling
    } else {
        RunState::Triggered
    }
}

/// A new run of a job, with Prow's labels and annotations.
pub fn new_run(
    base: &JobBase,
    job_type: JobType,
    periodic: Option<String>,
    pod_spec: Option<PodSpec>,
    refs: Option<Refs>,
) -> NewRun {
    RunTemplate::new(base, job_type, periodic, pod_spec).run(refs)
}
