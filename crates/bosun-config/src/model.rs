//! The loaded configuration: jobs with their origins, and the immutable snapshot
//! every other part of bosun reads.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;

use crate::types::{
    JobBase, JobSource, JobType, PeriodicFields, PostsubmitFields, Preset, PresubmitFields,
    ProwConfig,
};
use crate::yaml::{go_fold_eq, go_key_field, go_order, Mark, Node, Value};

mod repo_jobs;

pub use repo_jobs::RepoJobs;

/// Where something was defined: the file and the start of the definition.
///
/// Positions of individual fields are not kept (that would cost memory for every
/// job of every snapshot); a diagnostic about a field re-reads the file and finds
/// the field below this mark (see [`locate`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// The file, as given or found while walking a directory.
    pub file: Arc<str>,
    /// Start of the definition.
    pub mark: Mark,
    /// Positions of the definition's own known keys (most diagnostics point at
    /// one of them, and they are cheap to keep).
    #[serde(skip)]
    pub keys: Box<[(&'static str, Mark)]>,
}

/// Every key a job may have (Prow's, Lighthouse's and bosun's), for [`Origin::keys`].
const JOB_KEYS: &[&str] = &[
    "name",
    "labels",
    "max_concurrency",
    "agent",
    "cluster",
    "namespace",
    "error_on_eviction",
    "spec",
    "pipeline_run_spec",
    "tekton_pipeline_run_spec",
    "annotations",
    "reporter_config",
    "rerun_auth_config",
    "prowjob_defaults",
    "job_queue_name",
    "hidden",
    "decorate",
    "path_alias",
    "clone_uri",
    "skip_submodules",
    "clone_depth",
    "skip_fetch_head",
    "extra_refs",
    "decoration_config",
    "source",
    "pipeline_run_params",
    "cron",
    "interval",
    "minimum_interval",
    "tags",
    "retry",
    "branch",
    "timezone",
    "concurrency_policy",
    "catch_up",
    "starting_deadline",
    "jitter",
    "always_run",
    "optional",
    "trigger",
    "rerun_command",
    "run_before_merge",
    "jenkins_spec",
    "branches",
    "skip_branches",
    "run_if_changed",
    "skip_if_only_changed",
    "context",
    "skip_report",
    "env",
    "volumes",
    "volumeMounts",
    "tolerations",
];

impl Origin {
    /// The origin of `node` in `file`.
    pub fn of(file: &Arc<str>, node: &Node<'_>) -> Origin {
        // Keys are matched as Prow matches them (`NAME` is `name`); of several
        // keys for one field, the one whose value Go keeps (the last in its order).
        let mut keys: Vec<(&'static str, Mark, &str)> = Vec::new();
        for (k, _) in node.entries() {
            let Some(text) = k.as_str() else { continue };
            let Some(field) = go_key_field(text, JOB_KEYS) else {
                continue;
            };
            match keys.iter_mut().find(|(f, ..)| *f == field) {
                Some(seen) if go_order(seen.2, text).is_lt() => *seen = (field, k.mark, text),
                Some(_) => {}
                None => keys.push((field, k.mark, text)),
            }
        }
        let keys = keys.into_iter().map(|(f, m, _)| (f, m)).collect();
        Origin {
            file: file.clone(),
            mark: node.mark,
            keys,
        }
    }

    /// The position of one of the definition's own keys.
    pub fn key(&self, key: &str) -> Option<Mark> {
        self.keys.iter().find(|(k, _)| *k == key).map(|(_, m)| *m)
    }
}

/// Finds the position of `path` (like `spec.containers[0].env[1]` or
/// `labels.example.com/x`) below the node that starts at `at` in the parsed
/// documents; the closest existing ancestor when the path goes further than the
/// YAML does. Keys may contain dots: the longest matching key wins.
pub fn locate(docs: &[Node<'_>], at: Mark, path: &str) -> Option<Mark> {
    let start = docs.iter().find_map(|d| find_mark(d, at))?;
    let mut node = start;
    // Where to point when the path goes further than the YAML: the last key or
    // item reached (a key rather than its value, which may start a line later).
    let mut reached = start.mark;
    let mut rest = path;
    loop {
        if rest.is_empty() {
            return Some(reached);
        }
        if let Some(r) = rest.strip_prefix('[') {
            let Some((idx, after)) = r.split_once(']') else {
                return Some(reached);
            };
            let Some(item) = idx.parse::<usize>().ok().and_then(|i| node.items().get(i)) else {
                return Some(reached);
            };
            node = item;
            reached = item.mark;
            rest = after.strip_prefix('.').unwrap_or(after);
            continue;
        }
        // Keys as written first; else keys equal up to case, as Prow reads
        // them (`NAME` for `name`; of several, the last in Go's order).
        let matches = |exact: bool| {
            node.entries()
                .iter()
                .filter_map(move |(k, v)| {
                    let key = k.as_str()?;
                    let after = if exact {
                        rest.strip_prefix(key)?
                    } else {
                        let n = key.chars().count();
                        let split = rest.char_indices().nth(n).map_or(rest.len(), |(i, _)| i);
                        go_fold_eq(key, &rest[..split]).then(|| &rest[split..])?
                    };
                    (after.is_empty() || after.starts_with(['.', '['])).then_some((
                        rest.len() - after.len(),
                        key,
                        k,
                        v,
                        after,
                    ))
                })
                .max_by(|a, b| a.0.cmp(&b.0).then(go_order(a.1, b.1)))
        };
        let best = matches(true)
            .or_else(|| matches(false))
            .map(|(len, _, k, v, after)| (len, k, v, after));
        let Some((_, key, value, after)) = best else {
            return Some(reached);
        };
        rest = after.strip_prefix('.').unwrap_or(after);
        node = value;
        reached = key.mark;
    }
}

fn find_mark<'n, 'a>(node: &'n Node<'a>, at: Mark) -> Option<&'n Node<'a>> {
    // Definitions are mappings; a block sequence may start where its first item does.
    if node.mark == at && matches!(node.value, Value::Map(_)) {
        return Some(node);
    }
    match &node.value {
        Value::Map(entries) => entries.iter().find_map(|(_, v)| find_mark(v, at)),
        Value::Seq(items) => items.iter().find_map(|v| find_mark(v, at)),
        Value::Scalar { .. } => None,
    }
}

/// A job of kind `K` (its kind-specific fields), with everything all jobs share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Job<K> {
    /// Fields every job has, after defaulting and presets.
    pub base: JobBase,
    /// Kind-specific fields.
    pub kind: K,
    /// Indexes into [`Snapshot::presets`] of the presets that apply to this job,
    /// in merge order. [`Snapshot::pod_spec`] applies them.
    pub presets: Vec<usize>,
    /// True when `cluster:` was written (false when it defaulted to `default`).
    pub cluster_written: bool,
    /// Central or in-repo, and for in-repo jobs the repository.
    pub source: JobSource,
    /// Where it was defined.
    pub origin: Origin,
}

/// A periodic job.
pub type Periodic = Job<PeriodicFields>;
/// A presubmit job.
pub type Presubmit = Job<PresubmitFields>;
/// A postsubmit job.
pub type Postsubmit = Job<PostsubmitFields>;

impl<K> Job<K> {
    /// The job's name.
    pub fn name(&self) -> &str {
        &self.base.name
    }
}

impl Periodic {
    /// The periodic's identity: its name for central config, `ORG/REPO:name` for
    /// in-repo config. Run identity and schedule state are keyed by it.
    pub fn identity(&self) -> String {
        match &self.source {
            JobSource::Central => self.base.name.clone(),
            JobSource::InRepo { repo, .. } => format!("{repo}:{}", self.base.name),
        }
    }

    /// Whether `identity` is this periodic's identity, without building it (a
    /// lookup by name compares it with every periodic).
    pub fn has_identity(&self, identity: &str) -> bool {
        match &self.source {
            JobSource::Central => self.base.name == identity,
            JobSource::InRepo { repo, .. } => identity
                .strip_prefix(repo.as_str())
                .and_then(|rest| rest.strip_prefix(':'))
                .is_some_and(|name| name == self.base.name),
        }
    }
}

/// A preset with its origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PresetDef {
    /// The preset.
    pub preset: Preset,
    /// Central or in-repo.
    pub source: JobSource,
    /// Where it was defined.
    pub origin: Origin,
}

/// One immutable, validated view of the whole configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// Increases by one with every snapshot a process builds.
    pub version: u64,
    /// The central `config.yaml` (component settings and bosun's sections).
    pub config: ProwConfig,
    /// All presets, central then in-repo.
    pub presets: Vec<PresetDef>,
    /// All periodics.
    pub periodics: Vec<Periodic>,
    /// Presubmits by `org/repo`.
    pub presubmits: BTreeMap<String, Vec<Presubmit>>,
    /// Postsubmits by `org/repo`.
    pub postsubmits: BTreeMap<String, Vec<Postsubmit>>,
    /// What was read.
    pub stats: LoadStats,
    /// What was read of each repository's in-repo files (counted in `stats`
    /// too).
    pub repo_stats: BTreeMap<String, LoadStats>,
}

static VERSION: AtomicU64 = AtomicU64::new(0);

/// The version of a new snapshot: one more than the last one this process built.
pub(crate) fn next_version() -> u64 {
    VERSION.fetch_add(1, Ordering::Relaxed) + 1
}

impl Snapshot {
    /// Number of jobs of each kind.
    pub fn counts(&self) -> JobCounts {
        JobCounts {
            periodics: self.periodics.len(),
            presubmits: self.presubmits.values().map(Vec::len).sum(),
            postsubmits: self.postsubmits.values().map(Vec::len).sum(),
        }
    }

    /// The pod spec a run of `job` gets: the job's spec with its presets merged,
    /// as Prow merges them.
    pub fn pod_spec<K>(&self, job: &Job<K>) -> Option<k8s_openapi::api::core::v1::PodSpec> {
        let mut spec = job.base.spec.clone()?;
        for &i in &job.presets {
            // Checked at load time: a snapshot only holds jobs whose presets merge.
            let _ =
                crate::defaults::merge_preset(&self.presets[i].preset, &job.base.labels, &mut spec);
        }
        Some(spec)
    }

    /// The decoration config a run of `job` gets (`repo` is the pre/postsubmit's
    /// repository, or `extra_refs[0]` for periodics): the job's own over every
    /// matching `plank.default_decoration_config_entries` entry (or legacy
    /// `plank.default_decoration_configs` key), merged field by field as Prow's
    /// `ApplyDefault` merges them (see
    /// [`DecorationConfig::apply_default`](crate::types::DecorationConfig::apply_default)).
    /// `None` when the job is not decorated and writes no `decoration_config`;
    /// an undecorated job that writes one gets just its own, as in Prow.
    pub fn decoration_config<K>(
        &self,
        job: &Job<K>,
        repo: &str,
    ) -> Option<crate::types::DecorationConfig> {
        crate::defaults::merged_decoration(&self.config, repo, &job.base)
    }

    /// The decoration config a periodic's runs get: matched by its first
    /// `extra_refs` entry (`org/repo`), or by no repository without one, as
    /// Prow's `setPeriodicDecorationDefaults` matches.
    pub fn periodic_decoration(&self, p: &Periodic) -> Option<crate::types::DecorationConfig> {
        let repo = p
            .base
            .extra_refs
            .first()
            .map(|r| format!("{}/{}", r.org, r.repo))
            .unwrap_or_default();
        self.decoration_config(p, &repo)
    }

    /// The periodic with this identity.
    pub fn periodic(&self, identity: &str) -> Option<&Periodic> {
        self.periodics.iter().find(|p| p.has_identity(identity))
    }

    /// Every job as (type, repo, name), for lookups by name.
    pub fn jobs(&self) -> impl Iterator<Item = (JobType, Option<&str>, &JobBase)> {
        let p = self
            .periodics
            .iter()
            .map(|j| (JobType::Periodic, None, &j.base));
        let pre = self.presubmits.iter().flat_map(|(repo, jobs)| {
            jobs.iter()
                .map(move |j| (JobType::Presubmit, Some(repo.as_str()), &j.base))
        });
        let post = self.postsubmits.iter().flat_map(|(repo, jobs)| {
            jobs.iter()
                .map(move |j| (JobType::Postsubmit, Some(repo.as_str()), &j.base))
        });
        p.chain(pre).chain(post)
    }
}

/// Job counts by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct JobCounts {
    /// Periodics.
    pub periodics: usize,
    /// Presubmits.
    pub presubmits: usize,
    /// Postsubmits.
    pub postsubmits: usize,
}

/// What the loader read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LoadStats {
    /// YAML files parsed (config, job config and in-repo files).
    pub files: usize,
    /// YAML files skipped because a `.prowignore` lists them.
    pub ignored_files: usize,
    /// Bytes read.
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_documents;

    #[test]
    fn locate_finds_fields_below_a_job() {
        let src = "periodics:\n- name: a\n  labels:\n    example.com/x: y\n  spec:\n    containers:\n    - image: x\n      env:\n      - name: A\n        value: b\n";
        let docs = parse_documents(src).unwrap();
        let job = Mark { line: 2, col: 3 };
        let at = |p: &str| locate(&docs, job, p).unwrap();
        assert_eq!(at(""), job);
        assert_eq!(at("name"), Mark { line: 2, col: 3 });
        assert_eq!(at("labels.example.com/x"), Mark { line: 4, col: 5 });
        assert_eq!(at("spec.containers[0]").line, 7);
        assert_eq!(at("spec.containers[0].env[0]").line, 9);
        assert_eq!(at("spec.containers[0].env[0].value").line, 10);
        // Deeper than the YAML goes: the closest ancestor.
        assert_eq!(at("spec.containers[0].env[3]").line, 8);
        assert_eq!(at("nothing.here"), job);
        assert_eq!(locate(&docs, Mark { line: 99, col: 1 }, "name"), None);
    }
}
