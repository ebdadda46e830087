//! Warnings about a job that loads: Prow's checkconfig warnings (a name too long
//! for a label, `cluster` set on a Jenkins job) and bosun's (agents it does not
//! run, agents nobody knows).

use crate::diag::Diagnostic;
use crate::model::Job;
use crate::names::MAX_LABEL_LEN;
use crate::types::JobType;

use super::ctx::warn_at;

/// The warnings about `job`'s base, in checkconfig's order.
pub(super) fn check<K>(job: &Job<K>, ty: JobType, repo: &str, d: &mut Vec<Diagnostic>) {
    let b = &job.base;
    if b.agent == "kubernetes" && b.name.len() > MAX_LABEL_LEN {
        let msg =
            match (ty, repo) {
                (JobType::Periodic, _) => format!(
                    "name of Periodic job {:?} too long (should be at most 63 characters)",
                    b.name
                ),
                (t, repo) => format!(
                "name of {} job {:?} (for repo {:?}) too long (should be at most 63 characters)",
                if t == JobType::Presubmit { "Presubmit" } else { "Postsubmit" },
                b.name,
                repo
            ),
            };
        d.push(
            warn_at(job, "name", msg)
                .hint("Prow labels pods with job names; the label is truncated to 63 characters"),
        );
    }
    match b.agent.as_str() {
        "kubernetes" | "tekton-pipeline" => {}
        "jenkins" => d.push(warn_at(
            job,
            "agent",
            format!(
                "agent {} is not supported by bosun: the job loads, but its runs end in error",
                b.agent
            ),
        )),
        other => d.push(warn_at(
            job,
            "agent",
            format!("agent {other} is unknown and cannot be validated: use at your own risk"),
        )),
    }
    if b.agent == "jenkins" && job.cluster_written && b.cluster != "default" {
        d.push(warn_at(
            job,
            "cluster",
            format!(
                "{}: cannot set cluster field if agent is {}",
                b.name, b.agent
            ),
        ));
    }
}
