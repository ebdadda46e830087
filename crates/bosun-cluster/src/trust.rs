//! Trusted clusters as policy: a cluster with `build_clusters.<alias>.trusted`
//! holds privileged credentials, so only the jobs its allow rules admit may run
//! there, and only on the code their definition names. The rules look at the
//! job's definition (name, the repository it is defined for, type), never at
//! refs in a request; a request that brings other refs is refused.
//!
//! A rule function over configuration and refs: it knows nothing of
//! executors or runs' states (`bosun check` and the API both call it).

use bosun_config::types::{JobType, ProwConfig, Refs};
use bosun_config::validate::trust_admits;

/// A job as its definition describes it.
#[derive(Debug, Clone, Copy)]
pub struct Definition<'a> {
    /// The job's name.
    pub name: &'a str,
    /// Its type.
    pub job_type: JobType,
    /// `org/repo` it is defined for: a pre/postsubmit's repository, an
    /// in-repo job's source, a periodic's first `extra_refs`.
    pub repo: Option<&'a str>,
}

/// Why a run of `job` with `refs` may not run on `cluster`, or `None` when it
/// may (not a trusted cluster, or admitted with its own refs).
pub fn refusal(
    config: &ProwConfig,
    cluster: &str,
    job: Definition<'_>,
    refs: Option<&Refs>,
) -> Option<String> {
    let rules = config.build_clusters.get(cluster)?.trusted.as_ref()?;
    if !trust_admits(rules, job.name, job.repo, job.job_type) {
        return Some(format!(
            "job {} may not run on trusted cluster {cluster:?}: no allow rule admits it",
            job.name
        ));
    }
    let refs = refs?;
    let own = job.job_type != JobType::Periodic
        && job.repo == Some(format!("{}/{}", refs.org, refs.repo).as_str())
        && (job.job_type == JobType::Presubmit || refs.pulls.is_empty());
    (!own).then(|| {
        format!(
            "job {} runs on trusted cluster {cluster:?}, so it runs only the code its definition names: refs for {}/{}{} are not allowed",
            job.name,
            refs.org,
            refs.repo,
            if refs.pulls.is_empty() { "" } else { " with pull requests" }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> ProwConfig {
        let docs = bosun_config::yaml::parse_documents(yaml).unwrap();
        bosun_config::yaml::from_node(&docs[0], &Default::default()).unwrap()
    }

    fn refs(org_repo: &str, pull: Option<u64>) -> Refs {
        let (org, repo) = org_repo.split_once('/').unwrap();
        let mut v = serde_json::json!({"org": org, "repo": repo, "base_ref": "main"});
        if let Some(n) = pull {
            v["pulls"] = serde_json::json!([{"number": n, "author": "a", "sha": "abc"}]);
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn only_admitted_jobs_on_their_own_refs() {
        let c = config(
            "build_clusters:\n  trusted:\n    trusted:\n    - {jobs: [\"post-.*-publish\"], repos: [org/app], types: [postsubmit]}\n    - {jobs: [label-sync], types: [periodic]}\n    - {repos: [org/infra], types: [presubmit]}\n  open: {}\n",
        );
        let def = |name, job_type, repo| Definition {
            name,
            job_type,
            repo,
        };
        let post = def("post-app-publish", JobType::Postsubmit, Some("org/app"));
        assert_eq!(refusal(&c, "trusted", post, None), None);
        assert_eq!(
            refusal(&c, "trusted", post, Some(&refs("org/app", None))),
            None
        );
        // Another repository's code, or a pull request, on a postsubmit.
        for r in [refs("evil/app", None), refs("org/app", Some(1))] {
            let why = refusal(&c, "trusted", post, Some(&r)).unwrap();
            assert!(
                why.contains("runs only the code its definition names"),
                "{why}"
            );
        }
        // Not admitted: wrong type, wrong repo, unknown name.
        for d in [
            def("post-app-publish", JobType::Periodic, Some("org/app")),
            def("post-app-publish", JobType::Postsubmit, Some("org/other")),
            def("build", JobType::Postsubmit, Some("org/app")),
        ] {
            let why = refusal(&c, "trusted", d, None).unwrap();
            assert!(why.contains("no allow rule admits it"), "{why}");
        }
        // A periodic takes no refs at all.
        let sync = def("label-sync", JobType::Periodic, None);
        assert_eq!(refusal(&c, "trusted", sync, None), None);
        assert!(refusal(&c, "trusted", sync, Some(&refs("org/app", None))).is_some());
        // A presubmit of its own repo may bring its pull request.
        let pre = def("verify", JobType::Presubmit, Some("org/infra"));
        assert_eq!(
            refusal(&c, "trusted", pre, Some(&refs("org/infra", Some(7)))),
            None
        );
        assert!(refusal(&c, "trusted", pre, Some(&refs("org/app", Some(7)))).is_some());
        // Clusters without rules refuse nothing.
        assert_eq!(
            refusal(
                &c,
                "open",
                def("x", JobType::Periodic, None),
                Some(&refs("a/b", Some(1)))
            ),
            None
        );
        assert_eq!(
            refusal(&c, "nowhere", def("x", JobType::Periodic, None), None),
            None
        );
    }
}
