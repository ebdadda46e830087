//! Prow's `validateJobBase`: the checks every job gets once it is defaulted, in
//! Prow's order. The job's own fields (name, `max_concurrency`, agent, labels,
//! annotations, job queue, rerun auth) are checked here; the pod spec, the
//! decoration, checkconfig's warnings and the cluster have their own modules,
//! called from [`check`].

use crate::defaults::DecorationView;
use crate::diag::Diagnostic;
use crate::model::Job;
use crate::names::{
    label_value_errors, qualified_name_errors, valid_job_name, JENKINS_JOB_NAME_REGEX,
    JOB_NAME_REGEX, RESERVED_LABELS,
};
use crate::types::{JobBase, JobType, Preset};

use super::ctx::{err_at, Ctx};
use super::{clusters, decoration, pod_spec, warnings};

/// Prow's `validateJobBase` and bosun's cluster checks. `repo` is the
/// pre/postsubmit's repository, or a periodic's `extra_refs[0]` (may be empty).
pub(super) fn check<K>(
    ctx: &Ctx<'_>,
    job: &Job<K>,
    ty: JobType,
    repo: &str,
    d: &mut Vec<Diagnostic>,
) {
    let b = &job.base;
    let decoration = DecorationView::of(ctx.config, repo, b);
    if !valid_job_name(&b.name, &b.agent) {
        let re = if b.agent == "jenkins" {
            JENKINS_JOB_NAME_REGEX
        } else {
            JOB_NAME_REGEX
        };
        d.push(err_at(
            job,
            "name",
            format!("name: must match regex {re:?}"),
        ));
    }
    if b.max_concurrency < 0 {
        d.push(err_at(
            job,
            "max_concurrency",
            format!(
                "max_concurrency: {} must be a non-negative number",
                b.max_concurrency
            ),
        ));
    }
    if let Some((path, e)) = agent_error(ctx, b, decoration.is_some()) {
        d.push(err_at(job, path, e));
    }
    if let Some(spec) = &b.spec {
        let presets: Vec<&Preset> = job
            .presets
            .iter()
            .map(|i| &ctx.presets[*i].preset)
            .collect();
        for (path, e) in pod_spec::errors(ty, spec, &presets, decoration.as_ref()) {
            d.push(err_at(job, &path, e));
        }
    }
    for (key, value) in &b.labels {
        let path = format!("labels.{key}");
        if RESERVED_LABELS.contains(&key.as_str()) {
            d.push(err_at(
                job,
                &path,
                format!("label {key} is reserved for decoration"),
            ));
            continue;
        }
        let errs = qualified_name_errors(key);
        if !errs.is_empty() {
            d.push(err_at(
                job,
                &path,
                format!("invalid label {key}: [{}]", errs.join(" ")),
            ));
            continue;
        }
        let errs = label_value_errors(value);
        if !errs.is_empty() {
            d.push(err_at(
                job,
                &path,
                format!(
                    "label {key} has invalid value {value}: [{}]",
                    errs.join(" ")
                ),
            ));
        }
    }
    for key in b.annotations.keys() {
        let errs = qualified_name_errors(key);
        if !errs.is_empty() {
            d.push(err_at(
                job,
                &format!("annotations.{key}"),
                format!("invalid annotation key {key:?}: [{}]", errs.join(" ")),
            ));
        }
    }
    if let Some(q) = b.job_queue_name.as_deref().filter(|q| !q.is_empty()) {
        if !ctx.config.plank.job_queue_capacities.contains_key(q) {
            d.push(
                err_at(job, "job_queue_name", format!("invalid job queue name {q}"))
                    .hint("add it to plank.job_queue_capacities"),
            );
        }
    }
    let has_containers = b.spec.as_ref().is_some_and(|s| !s.containers.is_empty());
    if has_containers {
        if let Some(r) = &b.rerun_auth_config {
            if r.allow_anyone
                && (!r.github_users.is_empty()
                    || !r.github_team_ids.is_empty()
                    || !r.github_team_slugs.is_empty()
                    || !r.github_orgs.is_empty())
            {
                d.push(err_at(
                    job,
                    "rerun_auth_config",
                    "allow anyone is set to true and permitted users or groups are specified",
                ));
            }
        }
        if let Some(dc) = &decoration {
            decoration::check(job, dc, d);
        }
    }
    warnings::check(job, ty, repo, d);
    clusters::check(ctx, job, ty, repo, d);
}

/// Prow's `validateAgent`: the first rule that applies.
fn agent_error(ctx: &Ctx<'_>, b: &JobBase, decorated: bool) -> Option<(&'static str, String)> {
    const K: &str = "kubernetes";
    const P: &str = "tekton-pipeline";
    let agent = b.agent.as_str();
    let has_pipeline = b.pipeline_run_spec.is_some() || b.tekton_pipeline_run_spec.is_some();
    if !matches!(agent, K | P | "jenkins") {
        return None;
    }
    if b.spec.is_some() && agent != K {
        return Some((
            "agent",
            format!("job specs require agent: {K} (found {agent:?})"),
        ));
    }
    if agent == K && b.spec.is_none() {
        return Some(("spec", "kubernetes jobs require a spec".into()));
    }
    if has_pipeline && agent != P {
        return Some((
            "agent",
            format!("job pipeline_run_spec require agent: {P} (found {agent:?})"),
        ));
    }
    // Lighthouse's Tekton jobs name a pipeline file (`source`) instead of a spec.
    if agent == P && !has_pipeline && b.source.is_none() {
        return Some((
            "agent",
            format!("agent: {P} jobs require a pipeline_run_spec"),
        ));
    }
    if decorated && agent != K {
        return Some((
            "decoration_config",
            format!("decoration requires agent: {K} (found {agent:?})"),
        ));
    }
    if b.error_on_eviction && agent != K {
        return Some((
            "error_on_eviction",
            format!("error_on_eviction only applies to agent: {K} (found {agent:?})"),
        ));
    }
    let ns = b.namespace.as_deref().unwrap_or_default();
    if ns != ctx.config.pod_namespace && agent != P {
        return Some((
            "namespace",
            format!("namespace customization requires agent: {P} (found {agent:?})"),
        ));
    }
    None
}
