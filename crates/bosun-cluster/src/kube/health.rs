//! A Kubernetes cluster's health: the probe and the [`Tracker`] of
//! successive probes.
//!
//! The probe asks `/version`, then, with one SelfSubjectAccessReview per verb,
//! whether bosun may `create, delete, list, watch, get, patch` pods and `get`
//! `pods/log` in the pod namespace, and, for a cluster with pipeline jobs,
//! `create, delete, list, watch, patch` `pipelineruns.tekton.dev` (the verbs
//! bosun uses on them: [`PIPELINE_RUN_VERBS`]; a PipelineRun's logs are
//! read from its TaskRuns' pods, so bosun needs nothing on `taskruns`). A
//! cluster is `Reachable` when all is
//! allowed, `MissingPermissions` when the API answers but denies a verb, and
//! `Unreachable` after two failed probes in a row (one failure may be a blip).
//!
//! It knows nothing of the executor: the daemon probes clusters on its own
//! schedule and decides what their health means for runs.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use super::client::{ApiError, API_TIMEOUT};
use super::pipelines::PIPELINE_RUN_VERBS;

/// The pod verbs bosun needs (Prow's list).
pub const POD_VERBS: [&str; 6] = ["create", "delete", "list", "watch", "get", "patch"];

/// A failed probe step.
fn step(step: &str, reason: impl std::fmt::Display) -> ApiError {
    ApiError::Step {
        step: step.to_string(),
        reason: reason.to_string(),
    }
}

/// What one probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// The API answered and allows every verb bosun needs.
    Allowed,
    /// The API answered but denies these (`verb resource[/subresource]`).
    Denied(Vec<String>),
    /// The API did not answer (or answered an error).
    Failed(ApiError),
}

/// Probes a cluster: `/version`, then the access reviews. Each call is bounded
/// by [`API_TIMEOUT`], so a hanging cluster costs at most that per call.
pub async fn probe(client: &Client, namespace: &str) -> Probe {
    probe_with_pipelines(client, namespace, false).await
}

/// As [`probe`], and when `pipelines` (the cluster has pipeline jobs) the
/// verbs on `pipelineruns.tekton.dev` too (denied ones named
/// `VERB pipelineruns.tekton.dev`).
pub async fn probe_with_pipelines(client: &Client, namespace: &str, pipelines: bool) -> Probe {
    match tokio::time::timeout(API_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Probe::Failed(step("version", e)),
        Err(_) => return Probe::Failed(step("version", "timed out")),
    }
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let pipeline_asks = PIPELINE_RUN_VERBS
        .iter()
        .filter(|_| pipelines)
        .map(|v| (*v, "tekton.dev", "pipelineruns", None));
    let asks = POD_VERBS
        .iter()
        .map(|v| (*v, "", "pods", None))
        .chain(std::iter::once(("get", "", "pods", Some("log"))))
        .chain(pipeline_asks);
    let mut denied = Vec::new();
    for (verb, group, resource, subresource) in asks {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(namespace.to_string()),
                    verb: Some(verb.to_string()),
                    group: Some(group.to_string()).filter(|g| !g.is_empty()),
                    resource: Some(resource.into()),
                    subresource: subresource.map(str::to_string),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let what = match (subresource, group) {
            (Some(s), _) => format!("{verb} {resource}/{s}"),
            (None, "") => format!("{verb} {resource}"),
            (None, group) => format!("{verb} {resource}.{group}"),
        };
        match tokio::time::timeout(API_TIMEOUT, reviews.create(&PostParams::default(), &review))
            .await
        {
            Ok(Ok(r)) if r.status.as_ref().is_some_and(|s| s.allowed) => {}
            Ok(Ok(_)) => denied.push(what),
            Ok(Err(e)) => return Probe::Failed(step(&format!("access review ({what})"), e)),
            Err(_) => return Probe::Failed(step(&format!("access review ({what})"), "timed out")),
        }
    }
    if denied.is_empty() {
        Probe::Allowed
    } else {
        Probe::Denied(denied)
    }
}

/// A build cluster's health, as `GET /api/v1/clusters` and the metrics show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Runs can start there.
    Reachable,
    /// Two probes in a row failed.
    Unreachable(String),
    /// The API answers, but bosun may not do everything it needs.
    MissingPermissions(Vec<String>),
    /// Listed in `disabled_clusters`.
    Disabled,
}

impl Health {
    /// bosun's word.
    pub fn word(&self) -> &'static str {
        match self {
            Health::Reachable => "Reachable",
            Health::Unreachable(_) => "Unreachable",
            Health::MissingPermissions(_) => "MissingPermissions",
            Health::Disabled => "Disabled",
        }
    }

    /// Prow's word for the same (`Reachable | No-Manager | Error |
    /// MissingPermissions`): a disabled cluster has no manager.
    pub fn prow_word(&self) -> &'static str {
        match self {
            Health::Reachable => "Reachable",
            Health::Unreachable(_) => "Error",
            Health::MissingPermissions(_) => "MissingPermissions",
            Health::Disabled => "No-Manager",
        }
    }
}

/// A cluster's health over successive probes: one failure keeps the last
/// answer, the second in a row makes it `Unreachable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracker {
    health: Health,
    failures: u32,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            health: Health::Unreachable("not probed yet".into()),
            failures: 0,
        }
    }
}

impl Tracker {
    /// Takes a probe's result; returns the health now.
    pub fn record(&mut self, probe: Probe) -> &Health {
        match probe {
            Probe::Allowed => {
                self.failures = 0;
                self.health = Health::Reachable;
            }
            Probe::Denied(verbs) => {
                self.failures = 0;
                self.health = Health::MissingPermissions(verbs);
            }
            Probe::Failed(why) => {
                self.failures += 1;
                if self.failures >= 2 || matches!(self.health, Health::Unreachable(_)) {
                    self.health = Health::Unreachable(why.to_string());
                }
            }
        }
        &self.health
    }

    /// The health now.
    pub fn health(&self) -> &Health {
        &self.health
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A probe's failure, from its text.
    impl From<&str> for ApiError {
        fn from(why: &str) -> Self {
            ApiError::Request(why.to_string())
        }
    }

    #[test]
    fn two_failures_in_a_row_make_a_cluster_unreachable() {
        let mut t = Tracker::default();
        assert_eq!(t.health().word(), "Unreachable", "until the first probe");
        assert_eq!(t.record(Probe::Allowed), &Health::Reachable);
        assert_eq!(t.record(Probe::Failed("blip".into())), &Health::Reachable);
        assert_eq!(
            t.record(Probe::Failed("down".into())),
            &Health::Unreachable("down".into())
        );
        assert_eq!(t.record(Probe::Allowed), &Health::Reachable);
        let denied = Probe::Denied(vec!["create pods".into()]);
        assert_eq!(t.record(denied).prow_word(), "MissingPermissions");
        assert_eq!(Health::Disabled.prow_word(), "No-Manager");
        assert_eq!(Health::Unreachable(String::new()).prow_word(), "Error");
    }
}
