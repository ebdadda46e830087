//! A new run of a configured job, as Prow makes one: Prow's labels and
//! annotations, and the job's definition kept with the run (its spec snapshot).

use bosun_config::types::{DecorationConfig, JobBase, JobSource, JobType, Refs};
use k8s_openapi::api::core::v1::PodSpec;

use crate::{NewRun, RunState};

/// What a run's spec snapshot holds.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct SpecSnapshot {
    /// The job's definition when the run was created.
    pub job: JobBase,
    /// Its pod spec with presets merged.
    pub pod_spec: Option<PodSpec>,
    /// Its decoration config resolved as Prow resolves it (the job's own over
    /// the matching `plank.default_decoration_config_entries`), as a ProwJob
    /// carries it; `None` for an undecorated job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoration: Option<DecorationConfig>,
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
    /// The job's fields that complete a run's primary refs.
    primary: PrimaryRefFields,
}

/// A job's clone settings that Prow copies onto its runs' primary refs when
/// it creates them (`pjutil.completePrimaryRefs`), and the decoration
/// config's `blobless_fetch`, which every ref without its own inherits.
#[derive(Debug, Clone, Default)]
struct PrimaryRefFields {
    path_alias: Option<String>,
    clone_uri: Option<String>,
    skip_submodules: bool,
    clone_depth: i64,
    skip_fetch_head: bool,
    blobless_fetch: Option<bool>,
}

impl PrimaryRefFields {
    fn of(base: &JobBase) -> Self {
        PrimaryRefFields {
            path_alias: base.path_alias.clone().filter(|s| !s.is_empty()),
            clone_uri: base.clone_uri.clone().filter(|s| !s.is_empty()),
            skip_submodules: base.skip_submodules,
            clone_depth: base.clone_depth,
            skip_fetch_head: base.skip_fetch_head,
            blobless_fetch: None,
        }
    }

    fn complete(&self, r: &mut Refs) {
        if self.path_alias.is_some() {
            r.path_alias.clone_from(&self.path_alias);
        }
        if self.clone_uri.is_some() {
            r.clone_uri.clone_from(&self.clone_uri);
        }
        r.skip_submodules |= self.skip_submodules;
        if self.clone_depth > 0 {
            r.clone_depth = self.clone_depth;
        }
        r.skip_fetch_head |= self.skip_fetch_head;
    }
}

impl RunTemplate {
    /// The template of `base`'s runs.
    pub fn new(
        base: &JobBase,
        job_type: JobType,
        periodic: Option<String>,
        pod_spec: Option<PodSpec>,
        decoration: Option<DecorationConfig>,
    ) -> Self {
        let primary = PrimaryRefFields {
            blobless_fetch: decoration.as_ref().and_then(|d| d.blobless_fetch),
            ..PrimaryRefFields::of(base)
        };
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
                        decoration,
                    })
                    .expect("serializable"),
                ),
                scheduled_at: None,
                attempt: 0,
                description: "Job triggered.".into(),
            },
            own_refs: None,
            primary,
        }
    }

    /// The template of a periodic's runs. An in-repo periodic's runs carry
    /// their repository's refs, `{org, repo, base_ref: branch}` (the branch
    /// its source is checked out on), as Lighthouse gives them `{org, repo}`;
    /// a central periodic's have none (Prow's: its `extra_refs` only).
    pub fn periodic(
        p: &bosun_config::Periodic,
        pod_spec: Option<PodSpec>,
        decoration: Option<DecorationConfig>,
    ) -> Self {
        let mut t = RunTemplate::new(
            &p.base,
            JobType::Periodic,
            Some(p.identity()),
            pod_spec,
            decoration,
        );
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

    /// Resolves the relative `clone_uri`s of the job's refs (`./x`, `../x`)
    /// against the directory of `file`, the file that defines the job, to
    /// `file://` URLs: a repository beside the configuration, for local
    /// clusters. (bosun's extension: a relative `clone_uri` means nothing
    /// to a pod, and Prow passes it to git as it is.)
    pub fn defined_in(mut self, file: &std::path::Path) -> Self {
        let dir = std::path::absolute(file)
            .ok()
            .and_then(|f| f.parent().map(std::path::Path::to_path_buf));
        let Some(dir) = dir else { return self };
        let resolve = |uri: &mut Option<String>| {
            if let Some(rel) = uri
                .as_deref()
                .filter(|u| u.starts_with("./") || u.starts_with("../"))
            {
                let mut path = dir.clone();
                for part in rel.split('/') {
                    match part {
                        "" | "." => {}
                        ".." => {
                            path.pop();
                        }
                        part => path.push(part),
                    }
                }
                *uri = Some(format!("file://{}", path.display()));
            }
        };
        resolve(&mut self.primary.clone_uri);
        for r in &mut self.new.extra_refs {
            resolve(&mut r.clone_uri);
        }
        self
    }

    /// The spec snapshot its runs carry.
    pub fn spec(&self) -> &crate::Spec {
        &self.new.spec
    }

    /// A run on `refs` (none given: the job's own, if it has any), with
    /// Prow's refs labels (from the refs, or else from the job's first
    /// `extra_refs`).
    pub fn run(&self, refs: Option<Refs>) -> NewRun {
        let mut refs = refs.or_else(|| self.own_refs.clone());
        let mut new = self.new.clone();
        if let Some(r) = refs.as_mut() {
            self.primary.complete(r);
        }
        if let Some(b) = self.primary.blobless_fetch {
            for r in refs.iter_mut().chain(new.extra_refs.iter_mut()) {
                r.blobless_fetch.get_or_insert(b);
            }
        }
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
    decoration: Option<DecorationConfig>,
    refs: Option<Refs>,
) -> NewRun {
    RunTemplate::new(base, job_type, periodic, pod_spec, decoration).run(refs)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn job(clone_uri: Option<&str>, extra: &[&str]) -> JobBase {
        JobBase {
            name: "j".into(),
            clone_uri: clone_uri.map(Into::into),
            extra_refs: extra
                .iter()
                .map(|u| Refs {
                    org: "o".into(),
                    repo: "r".into(),
                    clone_uri: Some(u.to_string()),
                    ..Refs::default()
                })
                .collect(),
            ..JobBase::default()
        }
    }

    #[test]
    fn relative_clone_uris_resolve_against_the_defining_file() {
        let base = job(
            Some("../repos/app"),
            &["./tools.git", "https://example.com/x.git", "/srv/y.git"],
        );
        let t = RunTemplate::new(&base, JobType::Postsubmit, None, None, None)
            .defined_in(Path::new("/etc/bosun/jobs/team/jobs.yaml"));
        let run = t.run(Some(Refs {
            org: "o".into(),
            repo: "app".into(),
            ..Refs::default()
        }));
        assert_eq!(
            run.refs.unwrap().clone_uri.as_deref(),
            Some("file:///etc/bosun/jobs/repos/app")
        );
        let uris: Vec<_> = run
            .extra_refs
            .iter()
            .map(|r| r.clone_uri.as_deref().unwrap())
            .collect();
        assert_eq!(
            uris,
            [
                "file:///etc/bosun/jobs/team/tools.git",
                "https://example.com/x.git",
                "/srv/y.git"
            ]
        );
    }

    #[test]
    fn primary_refs_get_the_jobs_clone_settings_and_blobless_default() {
        let mut base = job(None, &["file:///x"]);
        base.path_alias = Some("k8s.io/app".into());
        base.clone_depth = 1;
        let decoration = DecorationConfig {
            blobless_fetch: Some(true),
            ..DecorationConfig::default()
        };
        let run = RunTemplate::new(&base, JobType::Presubmit, None, None, Some(decoration)).run(
            Some(Refs {
                org: "o".into(),
                repo: "app".into(),
                blobless_fetch: Some(false),
                ..Refs::default()
            }),
        );
        let r = run.refs.unwrap();
        assert_eq!(r.path_alias.as_deref(), Some("k8s.io/app"));
        assert_eq!(r.clone_depth, 1);
        assert_eq!(r.blobless_fetch, Some(false), "the ref's own setting wins");
        assert_eq!(run.extra_refs[0].blobless_fetch, Some(true));
        assert_eq!(run.extra_refs[0].path_alias, None, "extra refs keep theirs");
    }
}
