//! Answers from a plan: the cluster of a job by name (Prow's external
//! scheduling strategy asks `{"job": NAME}`), and the cluster of a
//! repository's jobs of a type on a branch (`{"organization", "repository",
//! "type", "branch"}`, as OpenShift's dispatcher design first proposed).
//!
//! Built once per plan, read by every request: a lookup is one hash probe
//! and hands out a ready answer body, so serving costs no more than parsing
//! the request.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::{Assignment, Plan};

/// Strips Prow's rehearsal prefix, `rehearse-<digits>-`, as OpenShift's
/// dispatcher does: a rehearsal runs where the job it rehearses runs.
pub fn strip_rehearse(name: &str) -> &str {
    let Some(rest) = name.strip_prefix("rehearse-") else {
        return name;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    match rest[digits..].strip_prefix('-') {
        Some(job) if digits > 0 => job,
        _ => name,
    }
}

/// What a repository's jobs are, for the lookup by repository.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RepoKey {
    /// `org`.
    pub organization: String,
    /// `repo`.
    pub repository: String,
    /// `presubmit`, `postsubmit` or `periodic`.
    pub job_type: String,
    /// A branch the jobs run on (`None`: every branch).
    pub branch: Option<String>,
}

/// A job's repository facts, given with the plan.
#[derive(Debug, Clone)]
pub struct JobRepo {
    /// The job.
    pub job: String,
    /// Its repository and type; its branches (empty: every branch).
    pub organization: String,
    /// Its repository.
    pub repository: String,
    /// Its type.
    pub job_type: String,
    /// The branches it runs on (empty: every branch).
    pub branches: Vec<String>,
    /// Its demand.
    pub demand: f64,
}

/// The answers of one plan.
#[derive(Debug, Default)]
pub struct Lookup {
    by_job: HashMap<String, usize>,
    /// Per answer: the job's assignment, and the answer body
    /// `{"cluster":"..."}` made once per cluster.
    answers: Vec<(Assignment, Arc<[u8]>)>,
    by_repo: HashMap<RepoKey, usize>,
    generation: u64,
}

impl Lookup {
    /// The answers of `plan`; `repos` tells which repository each job
    /// belongs to (jobs without one are found by name only).
    pub fn new(plan: &Plan, repos: &[JobRepo]) -> Lookup {
        let mut bodies: HashMap<&str, Arc<[u8]>> = HashMap::new();
        let mut by_job = HashMap::with_capacity(plan.assignments.len());
        let mut answers = Vec::with_capacity(plan.assignments.len());
        for (job, a) in &plan.assignments {
            let body = bodies
                .entry(a.cluster.as_str())
                .or_insert_with(|| {
                    serde_json::to_vec(&serde_json::json!({ "cluster": a.cluster }))
                        .expect("a JSON object")
                        .into()
                })
                .clone();
            by_job.insert(job.clone(), answers.len());
            answers.push((a.clone(), body));
        }
        // Per repository key, the job with the most demand in its unit
        // decides: several units can hold a repository's jobs of one type
        // (by file), and the biggest is the one to follow.
        let mut best: HashMap<RepoKey, (f64, usize)> = HashMap::new();
        for r in repos {
            let Some(&i) = by_job.get(&r.job) else {
                continue;
            };
            let branches: Vec<Option<String>> = if r.branches.is_empty() {
                vec![None]
            } else {
                r.branches.iter().cloned().map(Some).collect()
            };
            for branch in branches {
                let key = RepoKey {
                    organization: r.organization.clone(),
                    repository: r.repository.clone(),
                    job_type: r.job_type.clone(),
                    branch,
                };
                let entry = best.entry(key).or_insert((f64::NEG_INFINITY, i));
                // Ties go to the job that sorts first (assignments are in
                // name order), so answers are deterministic.
                if r.demand > entry.0 || (r.demand == entry.0 && i < entry.1) {
                    *entry = (r.demand, i);
                }
            }
        }
        Lookup {
            by_job,
            answers,
            by_repo: best.into_iter().map(|(k, (_, i))| (k, i)).collect(),
            generation: plan.generation,
        }
    }

    /// The plan's generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// A job's assignment and answer body, by name (a rehearsal's name is
    /// that of the job it rehearses).
    pub fn job(&self, name: &str) -> Option<(&Assignment, &Arc<[u8]>)> {
        let i = *self
            .by_job
            .get(name)
            .or_else(|| self.by_job.get(strip_rehearse(name)))?;
        let (a, body) = &self.answers[i];
        Some((a, body))
    }

    /// The assignment deciding a repository's jobs of `job_type` on
    /// `branch`: a job of exactly that branch, else one that runs on every
    /// branch.
    pub fn repository(
        &self,
        organization: &str,
        repository: &str,
        job_type: &str,
        branch: Option<&str>,
    ) -> Option<(&Assignment, &Arc<[u8]>)> {
        let mut key = RepoKey {
            organization: organization.to_string(),
            repository: repository.to_string(),
            job_type: job_type.to_string(),
            branch: branch.map(String::from),
        };
        let i = match self.by_repo.get(&key) {
            Some(&i) => i,
            None => {
                key.branch = None;
                *self.by_repo.get(&key)?
            }
        };
        let (a, body) = &self.answers[i];
        Some((a, body))
    }

    /// How many jobs it answers for.
    pub fn len(&self) -> usize {
        self.answers.len()
    }

    /// Whether it answers for no job.
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assignment(cluster: &str) -> Assignment {
        Assignment {
            cluster: cluster.into(),
            unit: "u".into(),
            rule: "balanced".into(),
            previous: None,
            reason: "placed".into(),
        }
    }

    fn plan() -> Plan {
        let mut p = Plan {
            generation: 7,
            ..Plan::default()
        };
        for (job, c) in [
            ("pull-ci-acme-widget-main-unit", "build01"),
            ("pull-ci-acme-widget-main-e2e", "build02"),
            ("branch-ci-acme-widget-main-images", "build03"),
        ] {
            p.assignments.insert(job.into(), assignment(c));
        }
        p
    }

    #[test]
    fn rehearsals_are_answered_as_the_job_they_rehearse() {
        assert_eq!(strip_rehearse("rehearse-1234-pull-ci-x"), "pull-ci-x");
        assert_eq!(strip_rehearse("rehearse-pull-ci-x"), "rehearse-pull-ci-x");
        assert_eq!(strip_rehearse("rehearse--x"), "rehearse--x");
        assert_eq!(strip_rehearse("pull-ci-x"), "pull-ci-x");
        let l = Lookup::new(&plan(), &[]);
        let (a, body) = l.job("rehearse-42-pull-ci-acme-widget-main-e2e").unwrap();
        assert_eq!(a.cluster, "build02");
        assert_eq!(&body[..], br#"{"cluster":"build02"}"#);
        assert!(l.job("pull-ci-acme-widget-main-nope").is_none());
        assert_eq!(l.generation(), 7);
    }

    #[test]
    fn a_repository_follows_the_unit_with_the_most_demand() {
        let repo = |job: &str, t: &str, branches: &[&str], demand: f64| JobRepo {
            job: job.into(),
            organization: "acme".into(),
            repository: "widget".into(),
            job_type: t.into(),
            branches: branches.iter().map(|b| b.to_string()).collect(),
            demand,
        };
        let l = Lookup::new(
            &plan(),
            &[
                repo("pull-ci-acme-widget-main-unit", "presubmit", &["main"], 2.0),
                repo("pull-ci-acme-widget-main-e2e", "presubmit", &["main"], 9.0),
                repo("branch-ci-acme-widget-main-images", "postsubmit", &[], 1.0),
            ],
        );
        let cluster = |t: &str, b: Option<&str>| {
            l.repository("acme", "widget", t, b)
                .map(|(a, _)| a.cluster.clone())
        };
        assert_eq!(
            cluster("presubmit", Some("main")).as_deref(),
            Some("build02")
        );
        assert_eq!(cluster("presubmit", Some("dev")), None);
        // A job on every branch answers for any branch.
        assert_eq!(
            cluster("postsubmit", Some("dev")).as_deref(),
            Some("build03")
        );
        assert_eq!(cluster("periodic", None), None);
    }
}
