//! What the dispatcher needs to know of each job ([`JobFacts`]), and how jobs
//! group into units of placement ([`units`]).
//!
//! Units: all jobs sharing a name are one unit (the scheduling API answers by
//! name, so they cannot be apart); with `dispatcher.unit: file` (the default)
//! the relocatable jobs of one job-config file are one unit too, so a unit is
//! the closure of both relations (a union-find over names and files). Jobs
//! that are not relocatable (a written `cluster:` outside
//! `dispatcher.relocatable_clusters`, or an agent other than `kubernetes`)
//! join a unit only through their name.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

use bosun_config::model::{Job, Snapshot};
use bosun_config::types::{DispatchUnit, DispatcherConfig, JobSource, JobType, ProwConfig};

/// One job as the dispatcher sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFacts {
    /// Its name.
    pub name: String,
    /// Periodic, presubmit or postsubmit.
    pub ty: JobType,
    /// The job-config file it comes from, relative to its job-config
    /// directory (`org/repo/org-repo-main-presubmits.yaml`); for in-repo jobs
    /// `ORG/REPO:<path in the repository>` (`o/r:.prow.yaml`,
    /// `o/r:.lighthouse/jenkins-x/triggers.yaml`).
    pub file: String,
    /// `org/repo`: a pre/postsubmit's repository, an in-repo periodic's
    /// source, a central periodic's first `extra_refs` (none without).
    pub repo: Option<String>,
    /// Branch regexes it runs on (pre/postsubmits; an in-repo periodic's
    /// branch); empty: all.
    pub branches: Vec<String>,
    /// Branch regexes it never runs on.
    pub skip_branches: Vec<String>,
    /// Its configured cluster (`default` when it omits `cluster:`).
    pub cluster: String,
    /// Whether `cluster:` was written.
    pub cluster_written: bool,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its agent (`kubernetes`, ...).
    pub agent: String,
    /// Defined in a repository's in-repo configuration.
    pub in_repo: bool,
    /// The `CLUSTER_TYPE` environment variable of its first container
    /// (OpenShift's rules read a job's cloud from it when no label says).
    pub cluster_type: Option<String>,
}

impl JobFacts {
    /// Whether the dispatcher may move it: a `kubernetes` job that omits
    /// `cluster:` or names a cluster of `dispatcher.relocatable_clusters`.
    pub fn relocatable(&self, dispatcher: &DispatcherConfig) -> bool {
        self.dispatched() && dispatcher.relocatable(&self.cluster, self.cluster_written)
    }

    /// Whether the dispatcher places it at all: only `kubernetes` jobs (an
    /// empty agent defaults to it); others stay on their configured cluster.
    pub fn dispatched(&self) -> bool {
        self.agent.is_empty() || self.agent == "kubernetes"
    }
}

/// The facts of every job of `snapshot`: periodics, then presubmits and
/// postsubmits by repository, each in configuration order (in-repo jobs
/// included). `job_config_dirs` are the `--job-config` roots, to make file
/// paths relative; a file under none of them (`config.yaml`'s inline jobs, a
/// root given as a file) is named by its file name.
pub fn facts(snapshot: &Snapshot, job_config_dirs: &[PathBuf]) -> Vec<JobFacts> {
    let mut out = Vec::with_capacity(
        snapshot.periodics.len()
            + snapshot.presubmits.values().map(Vec::len).sum::<usize>()
            + snapshot.postsubmits.values().map(Vec::len).sum::<usize>(),
    );
    for p in &snapshot.periodics {
        let repo = match &p.source {
            JobSource::InRepo { repo, .. } => Some(repo.clone()),
            JobSource::Central => p
                .base
                .extra_refs
                .first()
                .map(|r| format!("{}/{}", r.org, r.repo)),
        };
        let branches = match &p.source {
            JobSource::InRepo { branch, .. } => {
                vec![p.kind.branch.clone().unwrap_or_else(|| branch.clone())]
            }
            JobSource::Central => Vec::new(),
        };
        out.push(one(
            p,
            JobType::Periodic,
            repo,
            branches,
            Vec::new(),
            job_config_dirs,
        ));
    }
    for (repo, jobs) in &snapshot.presubmits {
        for j in jobs {
            out.push(one(
                j,
                JobType::Presubmit,
                Some(repo.clone()),
                j.kind.branches.clone(),
                j.kind.skip_branches.clone(),
                job_config_dirs,
            ));
        }
    }
    for (repo, jobs) in &snapshot.postsubmits {
        for j in jobs {
            out.push(one(
                j,
                JobType::Postsubmit,
                Some(repo.clone()),
                j.kind.branches.clone(),
                j.kind.skip_branches.clone(),
                job_config_dirs,
            ));
        }
    }
    out
}

fn one<K>(
    job: &Job<K>,
    ty: JobType,
    repo: Option<String>,
    branches: Vec<String>,
    skip_branches: Vec<String>,
    dirs: &[PathBuf],
) -> JobFacts {
    let (file, in_repo) = match &job.source {
        JobSource::InRepo { repo, .. } => (
            format!("{repo}:{}", in_repo_path(Path::new(&*job.origin.file))),
            true,
        ),
        JobSource::Central => (relative_file(Path::new(&*job.origin.file), dirs), false),
    };
    JobFacts {
        name: job.base.name.clone(),
        ty,
        file,
        repo: repo.filter(|r| !r.is_empty()),
        branches,
        skip_branches,
        cluster: job.base.cluster.clone(),
        cluster_written: job.cluster_written,
        labels: job.base.labels.clone(),
        agent: job.base.agent.clone(),
        in_repo,
        cluster_type: job
            .base
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.env.as_ref())
            .and_then(|env| env.iter().find(|e| e.name == "CLUSTER_TYPE"))
            .and_then(|e| e.value.clone()),
    }
}

/// `file` relative to the deepest of `dirs` it is under, with `/`
/// separators; else its file name.
fn relative_file(file: &Path, dirs: &[PathBuf]) -> String {
    let rel = dirs
        .iter()
        .filter_map(|d| file.strip_prefix(d).ok())
        .filter(|r| !r.as_os_str().is_empty())
        .min_by_key(|r| r.components().count());
    match rel {
        Some(r) => slash_path(r),
        None => file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| slash_path(file)),
    }
}

/// The path of an in-repo file below its checkout: from the last `.prow`,
/// `.prow.yaml` or `.lighthouse` component on.
fn in_repo_path(file: &Path) -> String {
    let comps: Vec<Component<'_>> = file.components().collect();
    let start = comps
        .iter()
        .rposition(|c| {
            matches!(c, Component::Normal(n)
                if *n == ".prow" || *n == ".prow.yaml" || *n == ".lighthouse")
        })
        .unwrap_or(comps.len().saturating_sub(1));
    let rest: PathBuf = comps[start..].iter().collect();
    slash_path(&rest)
}

fn slash_path(p: &Path) -> String {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A unit of placement before the rules: its jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitSeed {
    /// Its identity: the first (in sorted order) job-config file of its
    /// file-grouped jobs, else `job:NAME` with its first job name.
    pub id: String,
    /// Indexes of its jobs in the facts, ascending.
    pub jobs: Vec<usize>,
    /// Its job names, sorted, unique.
    pub names: Vec<String>,
}

/// Groups `facts` into units: every job in exactly one unit. Jobs sharing a
/// name are one unit; with `dispatcher.unit: file` (the default) so are the
/// relocatable jobs of one file. Units are sorted by id.
pub fn units(facts: &[JobFacts], config: &ProwConfig) -> Vec<UnitSeed> {
    let default = DispatcherConfig::default();
    let dispatcher = config.dispatcher.as_ref().unwrap_or(&default);
    let by_file = dispatcher.unit == DispatchUnit::File;
    let mut uf = UnionFind::new(facts.len());
    let mut first_of_name: HashMap<&str, usize> = HashMap::new();
    let mut first_of_file: HashMap<&str, usize> = HashMap::new();
    // Whether a job joins its file's unit.
    let grouped: Vec<bool> = facts
        .iter()
        .map(|f| by_file && f.relocatable(dispatcher))
        .collect();
    for (i, f) in facts.iter().enumerate() {
        let n = *first_of_name.entry(&f.name).or_insert(i);
        uf.union(n, i);
        if grouped[i] {
            let g = *first_of_file.entry(&f.file).or_insert(i);
            uf.union(g, i);
        }
    }
    let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..facts.len() {
        members.entry(uf.find(i)).or_default().push(i);
    }
    let mut out: Vec<UnitSeed> = members
        .into_values()
        .map(|jobs| {
            let names: Vec<String> = jobs
                .iter()
                .map(|&i| facts[i].name.clone())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let file = jobs
                .iter()
                .filter(|&&i| grouped[i])
                .map(|&i| facts[i].file.as_str())
                .min();
            let id = match file {
                Some(f) => f.to_string(),
                None => format!("job:{}", names[0]),
            };
            UnitSeed { id, jobs, names }
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// Union-find with path halving and union by size.
struct UnionFind {
    parent: Vec<usize>,
    size: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> Self {
        UnionFind {
            parent: (0..n).collect(),
            size: vec![1; n],
        }
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (mut a, mut b) = (self.find(a), self.find(b));
        if a == b {
            return;
        }
        if self.size[a] < self.size[b] {
            std::mem::swap(&mut a, &mut b);
        }
        self.parent[b] = a;
        self.size[a] += self.size[b];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_relative_to_their_root() {
        let dirs = vec![PathBuf::from("/c/jobs"), PathBuf::from("/c/jobs/sub")];
        assert_eq!(
            relative_file(Path::new("/c/jobs/o/r/a.yaml"), &dirs),
            "o/r/a.yaml"
        );
        assert_eq!(
            relative_file(Path::new("/c/jobs/sub/b.yaml"), &dirs),
            "b.yaml"
        );
        assert_eq!(
            relative_file(Path::new("/c/config.yaml"), &dirs),
            "config.yaml"
        );
        assert_eq!(
            relative_file(Path::new("jobs/x.yaml"), &[PathBuf::from("jobs")]),
            "x.yaml"
        );
        // A root given as a file.
        assert_eq!(
            relative_file(Path::new("/c/one.yaml"), &[PathBuf::from("/c/one.yaml")]),
            "one.yaml"
        );
    }

    #[test]
    fn in_repo_paths_start_at_the_config() {
        assert_eq!(in_repo_path(Path::new("/src/r/.prow.yaml")), ".prow.yaml");
        assert_eq!(
            in_repo_path(Path::new("/src/r/.prow/a/b.yaml")),
            ".prow/a/b.yaml"
        );
        assert_eq!(
            in_repo_path(Path::new("/src/r/.lighthouse/jx/triggers.yaml")),
            ".lighthouse/jx/triggers.yaml"
        );
    }
}
