//! The configuration as bosun judges it: loaded (`bosun_config::load`),
//! then what would end every run of a Lighthouse pipeline job (`agent:
//! tekton-pipeline`) in `error` reported as warnings (the configuration
//! loads, and the daemon takes it). `bosun check`, `bosun serve`'s start and
//! every reload make this one judgement.
//!
//! [`pipeline_diagnostics`] makes the PipelineRun of a run of each such job,
//! as the controller makes it when a run starts, and reports a
//! `pipeline_run_params` template that bosun cannot parse or that fails over
//! the refs such a run gets, Jenkins X `uses:` catalog references (which
//! bosun resolves on no cluster), and, when the job can land on a local
//! cluster, what a local cluster cannot run (`taskRef`, `pipelineRef`,
//! Secrets, ...; what [`bosun_tekton::local::check`] finds).

use std::path::Path;

use bosun_config::types::{JobSource, JobType, Pull, Refs};
use bosun_config::validate::{is_local_cluster, reachable_clusters};
use bosun_config::{load, Diagnostic, Job, Loaded, OsFiles, Snapshot};
use bosun_store::template::{RunTemplate, SpecSnapshot};
use bosun_tekton::gotemplate::Template;
use bosun_tekton::local;
use bosun_tekton::model::PipelineRunSpec;
use bosun_tekton::pipelinerun::{self, PipelineRunError};
use bosun_tekton::PIPELINE_AGENT;

use crate::args::ConfigArgs;

/// The configuration as `bosun check` judges it: loaded, then each pipeline
/// job checked ([`pipeline_diagnostics`]) against the clusters it can land
/// on, its findings among the loader's in file order. The one judgement
/// `bosun check`, `bosun serve`'s start and every reload make, so a reload
/// reports what `bosun check` reports, with the same severity: any error
/// leaves no snapshot (the last good configuration stays).
pub fn load_checked(args: &ConfigArgs) -> Loaded {
    let mut loaded = load(&args.load_options(), &OsFiles);
    if let Some(snapshot) = &loaded.snapshot {
        let contexts = args.kube_context_names();
        let found = pipeline_diagnostics(snapshot, &contexts);
        if !found.is_empty() {
            loaded.diagnostics.extend(found);
            loaded
                .diagnostics
                .sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
            if loaded.errors() > 0 {
                loaded.snapshot = None;
            }
        }
    }
    loaded
}

/// What would end the runs of the snapshot's pipeline jobs in `error` (see
/// the module's doc), as warnings at each job's `source` (or
/// `pipeline_run_params`, or inline spec). `kube_contexts` are the
/// kubeconfig contexts' names, which are build clusters too.
pub fn pipeline_diagnostics(snapshot: &Snapshot, kube_contexts: &[String]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for p in &snapshot.periodics {
        if p.base.agent != PIPELINE_AGENT {
            continue;
        }
        let repo = match &p.source {
            JobSource::InRepo { repo, .. } => repo.clone(),
            JobSource::Central => p
                .base
                .extra_refs
                .first()
                .map(|r| format!("{}/{}", r.org, r.repo))
                .unwrap_or_default(),
        };
        let template = RunTemplate::periodic(p, None, None).defined_in(Path::new(&*p.origin.file));
        let refs_are = match &p.source {
            JobSource::InRepo { .. } => {
                "an in-repo periodic's runs have its repository's refs, {org, repo, base_ref}"
            }
            JobSource::Central => "a central periodic's runs have no refs (.Refs is nil)",
        };
        check_pipeline_job(
            snapshot,
            kube_contexts,
            p,
            JobType::Periodic,
            &repo,
            template.run(None),
            refs_are,
            &mut out,
        );
    }
    for (repo, jobs) in &snapshot.presubmits {
        for j in jobs.iter().filter(|j| j.base.agent == PIPELINE_AGENT) {
            let template = RunTemplate::new(&j.base, JobType::Presubmit, None, None, None)
                .defined_in(Path::new(&*j.origin.file));
            let mut refs = sample_refs(repo);
            refs.pulls.push(Pull {
                number: 1,
                author: "author".into(),
                sha: "1111111111111111111111111111111111111111".into(),
                ref_: Some("refs/pull/1/head".into()),
                ..Pull::default()
            });
            check_pipeline_job(
                snapshot,
                kube_contexts,
                j,
                JobType::Presubmit,
                repo,
                template.run(Some(refs)),
                "evaluated over a presubmit's refs with one pull request",
                &mut out,
            );
        }
    }
    for (repo, jobs) in &snapshot.postsubmits {
        for j in jobs.iter().filter(|j| j.base.agent == PIPELINE_AGENT) {
            let template = RunTemplate::new(&j.base, JobType::Postsubmit, None, None, None)
                .defined_in(Path::new(&*j.origin.file));
            check_pipeline_job(
                snapshot,
                kube_contexts,
                j,
                JobType::Postsubmit,
                repo,
                template.run(Some(sample_refs(repo))),
                "a postsubmit's refs have no pull requests",
                &mut out,
            );
        }
    }
    out
}

/// The refs of a push to `main` of `org/repo`.
fn sample_refs(repo: &str) -> Refs {
    let (org, name) = repo.split_once('/').unwrap_or((repo, ""));
    Refs {
        org: org.into(),
        repo: name.into(),
        base_ref: Some("main".into()),
        base_sha: Some("0000000000000000000000000000000000000000".into()),
        ..Refs::default()
    }
}

/// Checks one pipeline job, whose run (on representative refs) is `new`;
/// `refs_are` says what refs its runs get, for a template that fails.
#[allow(clippy::too_many_arguments)]
fn check_pipeline_job<K>(
    snapshot: &Snapshot,
    kube_contexts: &[String],
    job: &Job<K>,
    ty: JobType,
    repo: &str,
    new: bosun_store::NewRun,
    refs_are: &str,
    out: &mut Vec<Diagnostic>,
) {
    let base = &job.base;
    // At `field`, else where the job's pipeline is written.
    let warn_at = |field: &str, message: String| {
        let mark = [
            field,
            "source",
            "tekton_pipeline_run_spec",
            "pipeline_run_spec",
        ]
        .into_iter()
        .find_map(|k| job.origin.key(k))
        .unwrap_or(job.origin.mark);
        Diagnostic::warning(message)
            .at(&job.origin.file, mark)
            .job(base.name.clone())
    };
    let warn = |field: &str, message: String| {
        warn_at(field, format!("runs of this job end in error: {message}"))
    };

    // Every template, parsed (the run stops at the first that fails).
    let mut templates_parse = true;
    for p in base.pipeline_run_params.iter().flatten() {
        if let Err(e) = Template::parse(&p.name, &p.value_template) {
            templates_parse = false;
            out.push(
                warn(
                    "pipeline_run_params",
                    format!(
                        "pipeline_run_params {}: value_template {:?}: {e}",
                        p.name, p.value_template
                    ),
                )
                .hint(
                    "bosun supports Go templates' field access, index, if, range, with and \
                     variables (see docs/lighthouse.md)",
                ),
            );
        }
    }
    if !templates_parse {
        return;
    }

    let spec: SpecSnapshot = match serde_json::from_str(new.spec.json()) {
        Ok(s) => s,
        Err(e) => {
            out.push(warn("", format!("the job's spec cannot be read: {e}")));
            return;
        }
    };
    let at = jiff::Timestamp::UNIX_EPOCH;
    let run = new.into_run(
        "00000000-0000-4000-8000-000000000000".into(),
        1,
        String::new(),
        at,
    );
    let pr = match pipelinerun::pipeline_run(&run, &spec, &snapshot.config.pod_namespace) {
        Ok(pr) => pr,
        Err(PipelineRunError::Template {
            param,
            template,
            source,
            ..
        }) => {
            out.push(
                warn(
                    "pipeline_run_params",
                    format!("pipeline_run_params {param}: value_template {template:?}: {source}"),
                )
                .hint(refs_are),
            );
            return;
        }
        Err(e) => {
            // The job's name is the diagnostic's.
            let text = e.to_string();
            let text = text
                .strip_prefix(&format!("job {}: ", base.name))
                .unwrap_or(&text);
            out.push(warn("", text.to_string()));
            return;
        }
    };
    let typed: PipelineRunSpec = match serde_json::from_value(pr["spec"].clone()) {
        Ok(t) => t,
        Err(e) => {
            out.push(warn("", format!("the pipeline spec is not valid: {e}")));
            return;
        }
    };

    // jx's catalog references: no cluster of bosun's resolves them.
    let uses: Vec<String> = typed
        .uses_references()
        .iter()
        .map(ToString::to_string)
        .collect();
    for u in &uses {
        out.push(
            warn_at(
                "",
                format!("runs of this job end in error on every cluster: {u}"),
            )
            .hint(
                "write the steps the reference stands for into the pipeline \
                 (`jx pipeline effective` prints the pipeline with them)",
            ),
        );
    }

    // What a local cluster cannot run, when a run can land on one.
    let config = &snapshot.config;
    let local: Vec<&str> = reachable_clusters(config, kube_contexts, job, ty, repo)
        .into_iter()
        .filter(|c| is_local_cluster(config, kube_contexts, c))
        .collect();
    if local.is_empty() {
        return;
    }
    let on = match local.as_slice() {
        [one] => format!("local cluster {one:?}"),
        many => format!(
            "local clusters {}",
            many.iter()
                .map(|c| format!("{c:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    for problem in local::check(&typed) {
        if uses.contains(&problem.message) {
            continue; // reported above
        }
        let d = warn_at(
            "",
            format!(
                "runs of this job on {on} end in error: a local cluster cannot run this \
                 pipeline: {}",
                problem.message
            ),
        );
        out.push(match problem.kind {
            local::ProblemKind::Refused => d.hint(
                "a local cluster runs what the PipelineRun embeds (pipelineSpec, taskSpec), \
                 with nothing from a Kubernetes cluster (references, Secrets, ConfigMaps): run \
                 this job on a Kubernetes cluster with Tekton, or embed what it needs \
                 (Lighthouse's loadFileRefs annotation embeds Pipelines and Tasks from files \
                 beside the source)",
            ),
            local::ProblemKind::Invalid => d.hint("Tekton refuses this pipeline too"),
        });
    }
}
