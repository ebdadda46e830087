//! One repository's jobs apart from the snapshot they run in: what
//! [`load_repo`](crate::load::load_repo) gives, what a daemon keeps as a
//! repository's last good jobs, and how a snapshot takes them in or lets
//! them go ([`Snapshot::with_repos`]) without validating anything again.
//!
//! A job names its presets by index ([`Job::presets`]), so jobs moving
//! between a snapshot and a [`RepoJobs`] carry their presets along and have
//! their indexes remapped; a central preset a repository's jobs use is
//! copied into its `RepoJobs`, and becomes the snapshot's own again when the
//! jobs go back into a snapshot with the same preset.

use std::collections::{BTreeMap, HashMap};

use crate::types::{JobSource, JobType};
use crate::yaml::Mark;

use super::{
    next_version, Job, JobCounts, LoadStats, Periodic, Postsubmit, PresetDef, Presubmit, Snapshot,
};

/// One repository's jobs, self-contained: their preset indexes point into
/// `presets`. Every job's source is `JobSource::InRepo` of `repo`.
#[derive(Debug, Clone, PartialEq)]
pub struct RepoJobs {
    /// `org/repo`.
    pub repo: String,
    /// The branch its jobs belong to (periodics' base ref).
    pub branch: String,
    /// The repository's presets, and the central presets its jobs use
    /// (copied), in the order they had where the jobs were validated.
    pub presets: Vec<PresetDef>,
    /// Its periodics (identities `org/repo:name`).
    pub periodics: Vec<Periodic>,
    /// Its presubmits.
    pub presubmits: Vec<Presubmit>,
    /// Its postsubmits.
    pub postsubmits: Vec<Postsubmit>,
    /// What was read of its files.
    pub stats: LoadStats,
}

impl RepoJobs {
    /// Number of jobs of each kind.
    pub fn counts(&self) -> JobCounts {
        JobCounts {
            periodics: self.periodics.len(),
            presubmits: self.presubmits.len(),
            postsubmits: self.postsubmits.len(),
        }
    }

    /// Every job as (kind, name), sorted.
    pub fn names(&self) -> Vec<(JobType, &str)> {
        let mut names: Vec<(JobType, &str)> = self
            .periodics
            .iter()
            .map(|j| (JobType::Periodic, j.name()))
            .chain(
                self.presubmits
                    .iter()
                    .map(|j| (JobType::Presubmit, j.name())),
            )
            .chain(
                self.postsubmits
                    .iter()
                    .map(|j| (JobType::Postsubmit, j.name())),
            )
            .collect();
        names.sort_unstable();
        names
    }

    /// The jobs of `repo` whose preset indexes point into `presets`, made
    /// self-contained: of `presets`, the repository's own and the central
    /// ones the jobs use are kept, in order, and the indexes remapped.
    pub(crate) fn new(
        repo: String,
        branch: String,
        presets: &[PresetDef],
        periodics: Vec<Periodic>,
        presubmits: Vec<Presubmit>,
        postsubmits: Vec<Postsubmit>,
        stats: LoadStats,
    ) -> RepoJobs {
        let mut jobs = RepoJobs {
            repo,
            branch,
            presets: Vec::new(),
            periodics,
            presubmits,
            postsubmits,
            stats,
        };
        let used = jobs.used(presets.len());
        let mut index = vec![usize::MAX; presets.len()];
        for (i, p) in presets.iter().enumerate() {
            let own = matches!(&p.source, JobSource::InRepo { repo, .. } if *repo == jobs.repo);
            if used[i] || own {
                index[i] = jobs.presets.len();
                jobs.presets.push(p.clone());
            }
        }
        jobs.remap(|i| index[i]);
        jobs
    }

    /// Which of `n` presets some job uses.
    fn used(&self, n: usize) -> Vec<bool> {
        let mut used = vec![false; n];
        self.each_job_presets(|presets| {
            for &i in presets {
                used[i] = true;
            }
        });
        used
    }

    /// Replaces every job's preset index `i` by `to(i)`.
    fn remap(&mut self, to: impl Fn(usize) -> usize) {
        let all = self.periodics.iter_mut().map(|j| &mut j.presets);
        let all = all.chain(self.presubmits.iter_mut().map(|j| &mut j.presets));
        let all = all.chain(self.postsubmits.iter_mut().map(|j| &mut j.presets));
        for presets in all {
            for i in presets {
                *i = to(*i);
            }
        }
    }

    fn each_job_presets(&self, mut f: impl FnMut(&[usize])) {
        self.periodics.iter().for_each(|j| f(&j.presets));
        self.presubmits.iter().for_each(|j| f(&j.presets));
        self.postsubmits.iter().for_each(|j| f(&j.presets));
    }
}

impl Snapshot {
    /// The jobs of `repo` with `JobSource::InRepo { repo }` (and the in-repo
    /// presets of that repo), as a self-contained [`RepoJobs`]: the central
    /// presets they use copied in, indexes remapped. `None` when it has no
    /// job here.
    pub fn repo_jobs(&self, repo: &str) -> Option<RepoJobs> {
        let own = |s: &JobSource| matches!(s, JobSource::InRepo { repo: r, .. } if r == repo);
        let periodics: Vec<Periodic> = self
            .periodics
            .iter()
            .filter(|j| own(&j.source))
            .cloned()
            .collect();
        fn of_repo<K: Clone>(
            by_repo: &BTreeMap<String, Vec<Job<K>>>,
            repo: &str,
            own: impl Fn(&JobSource) -> bool,
        ) -> Vec<Job<K>> {
            let jobs = by_repo.get(repo).into_iter().flatten();
            jobs.filter(|j| own(&j.source)).cloned().collect()
        }
        let presubmits = of_repo(&self.presubmits, repo, own);
        let postsubmits = of_repo(&self.postsubmits, repo, own);
        let branch = periodics
            .iter()
            .map(|j| &j.source)
            .chain(presubmits.iter().map(|j| &j.source))
            .chain(postsubmits.iter().map(|j| &j.source))
            .find_map(|s| match s {
                JobSource::InRepo { branch, .. } => Some(branch.clone()),
                JobSource::Central => None,
            })?;
        Some(RepoJobs::new(
            repo.to_string(),
            branch,
            &self.presets,
            periodics,
            presubmits,
            postsubmits,
            self.repo_stats.get(repo).cloned().unwrap_or_default(),
        ))
    }

    /// A new snapshot (a new `version`): this one with, for each `(repo,
    /// jobs)` of `changes`, every in-repo job and in-repo preset of `repo`
    /// removed and `jobs` (when `Some`; its `repo` is `repo`) added. Nothing
    /// is validated again: `jobs` are as [`load_repo`](crate::load::load_repo)
    /// validated them. Central jobs and presets are untouched.
    ///
    /// Of the presets of `jobs`, those its jobs use are appended (others are
    /// dropped) and the jobs' indexes remapped; a central preset equal to one
    /// of this snapshot's is that one again, and one this snapshot does not
    /// have (the central configuration changed since the jobs were
    /// validated) is appended as the repository's, so that it never applies
    /// to other jobs. `stats` trades what was read of the old version of each
    /// repository for what was read of the new. Of two changes for one
    /// repository, the later wins.
    pub fn with_repos(
        &self,
        changes: impl IntoIterator<Item = (String, Option<RepoJobs>)>,
    ) -> Snapshot {
        let changes: BTreeMap<String, Option<RepoJobs>> = changes.into_iter().collect();
        let changed = |s: &JobSource| matches!(s, JobSource::InRepo { repo, .. } if changes.contains_key(repo));

        // Kept presets keep their order; `moved[i]` is old preset i's index.
        let mut moved: Vec<usize> = vec![usize::MAX; self.presets.len()];
        let mut presets: Vec<PresetDef> = Vec::with_capacity(self.presets.len());
        for (i, p) in self.presets.iter().enumerate() {
            if !changed(&p.source) {
                moved[i] = presets.len();
                presets.push(p.clone());
            }
        }
        // A kept job is central or of an unchanged repository: its presets
        // are central or of its repository, all kept.
        fn kept<K: Clone>(job: &Job<K>, moved: &[usize]) -> Job<K> {
            let mut job = job.clone();
            for i in &mut job.presets {
                *i = moved[*i];
            }
            job
        }
        let mut periodics: Vec<Periodic> = Vec::with_capacity(self.periodics.len());
        periodics.extend(
            self.periodics
                .iter()
                .filter(|j| !changed(&j.source))
                .map(|j| kept(j, &moved)),
        );
        fn kept_by_repo<K: Clone>(
            by_repo: &BTreeMap<String, Vec<Job<K>>>,
            changed: &dyn Fn(&JobSource) -> bool,
            moved: &[usize],
        ) -> BTreeMap<String, Vec<Job<K>>> {
            by_repo
                .iter()
                .filter_map(|(repo, jobs)| {
                    let jobs: Vec<Job<K>> = jobs
                        .iter()
                        .filter(|j| !changed(&j.source))
                        .map(|j| kept(j, moved))
                        .collect();
                    (!jobs.is_empty()).then(|| (repo.clone(), jobs))
                })
                .collect()
        }
        let mut presubmits = kept_by_repo(&self.presubmits, &changed, &moved);
        let mut postsubmits = kept_by_repo(&self.postsubmits, &changed, &moved);

        // This snapshot's central presets, by where they were defined.
        let central: HashMap<(&str, Mark), usize> = self
            .presets
            .iter()
            .enumerate()
            .filter(|(_, p)| p.source == JobSource::Central)
            .map(|(i, p)| ((&*p.origin.file, p.origin.mark), i))
            .collect();
        let mut stats = self.stats.clone();
        let mut repo_stats = self.repo_stats.clone();
        for (repo, jobs) in changes {
            if let Some(old) = repo_stats.remove(&repo) {
                stats.files = stats.files.saturating_sub(old.files);
                stats.ignored_files = stats.ignored_files.saturating_sub(old.ignored_files);
                stats.bytes = stats.bytes.saturating_sub(old.bytes);
            }
            let Some(mut jobs) = jobs else { continue };
            debug_assert_eq!(jobs.repo, repo, "RepoJobs under another repository's name");
            let used = jobs.used(jobs.presets.len());
            let mut index = vec![usize::MAX; jobs.presets.len()];
            for (k, p) in std::mem::take(&mut jobs.presets).into_iter().enumerate() {
                if !used[k] {
                    continue;
                }
                let same_central = (p.source == JobSource::Central)
                    .then(|| central.get(&(&*p.origin.file, p.origin.mark)))
                    .flatten()
                    .filter(|&&c| self.presets[c] == p);
                index[k] = match same_central {
                    Some(&c) => moved[c],
                    None => {
                        presets.push(PresetDef {
                            source: JobSource::InRepo {
                                repo: repo.clone(),
                                branch: jobs.branch.clone(),
                            },
                            ..p
                        });
                        presets.len() - 1
                    }
                };
            }
            jobs.remap(|i| index[i]);
            periodics.append(&mut jobs.periodics);
            if !jobs.presubmits.is_empty() {
                presubmits
                    .entry(repo.clone())
                    .or_default()
                    .append(&mut jobs.presubmits);
            }
            if !jobs.postsubmits.is_empty() {
                postsubmits
                    .entry(repo.clone())
                    .or_default()
                    .append(&mut jobs.postsubmits);
            }
            stats.files += jobs.stats.files;
            stats.ignored_files += jobs.stats.ignored_files;
            stats.bytes += jobs.stats.bytes;
            repo_stats.insert(repo, jobs.stats);
        }
        Snapshot {
            version: next_version(),
            config: self.config.clone(),
            presets,
            periodics,
            presubmits,
            postsubmits,
            stats,
            repo_stats,
        }
    }
}
