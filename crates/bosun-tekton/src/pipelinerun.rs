//! The `tekton.dev/v1` PipelineRun of a run of a Lighthouse pipeline job, as
//! Lighthouse's Tekton engine makes it (`makePipelineRun` in
//! jenkins-x/lighthouse `pkg/engines/tekton/utils.go` at
//! d3178ddc31d3442258db20eb32bc3c0e7c97f232, with `jobutil.GenerateName` and
//! `LabelsAndAnnotationsForJob` of `pkg/jobutil/jobutil.go`), as JSON ready to
//! create.
//!
//! From the job's spec ([`job_spec_v1`]: its `source:` file's, loaded by
//! bosun-config into `tekton_pipeline_run_spec`, or an inline
//! `pipeline_run_spec`; `v1beta1` converted by [`super::convert`]):
//! - `metadata`: `generateName` (`ORG-REPO-BRANCH-CONTEXT`, made a valid name,
//!   its last 32 characters, then `-`; the branch is `pr-N` for a pull),
//!   `namespace`, Lighthouse's labels (`created-by-lighthouse`,
//!   `lighthouse.jenkins-x.io/{type,job,context,refs.org,refs.repo,branch,
//!   baseSHA,refs.pull,lastCommitSHA,id,buildNum}`) and annotations
//!   (`lighthouse.jenkins-x.io/job`, `.../cloneURI`), a label value that is
//!   not one replaced by its last path element or dropped, as Lighthouse;
//! - `spec.timeouts.pipeline` `24h0m0s` when the spec sets none;
//! - parameters, each replacing the spec's parameter of that name or
//!   appended in name order: the job's environment, `REPO_URL` (the refs'
//!   clone URI), `PULL_PULL_REF` (the pulls' refs, space-separated, when a
//!   pull has one); then either every `pipeline_run_params` template
//!   executed over `{"Refs": refs}` ([`super::gotemplate`]), or, without
//!   them, the parameters found in the pipeline's `git-clone` task (`url`:
//!   the clone URI; `revision`: the first pull's SHA, else the base ref) or
//!   `git-batch-merge` task (`url`, `revision`: the base ref, `batchedRefs`:
//!   the pulls' refs), when its values are `$(params.NAME)`.
//!
//! Where bosun differs, and why:
//! - the environment is the one every bosun run gets (`Run::job_env`, Prow's,
//!   with `JOB_SPEC` as Prow's pods have it): Lighthouse's `GetEnvVars` gives
//!   `JOB_NAME`, `JOB_TYPE`, `JOB_SPEC` (`type:KIND` there, Prow's JSON
//!   here), and but for periodics
//!   `REPO_OWNER`, `REPO_NAME`, `PULL_BASE_REF`, `PULL_BASE_SHA`,
//!   `PULL_REFS`, and for presubmits `PULL_NUMBER`, `PULL_PULL_SHA`; bosun
//!   adds `CI`, `BUILD_NUMBER` and `PROW_JOB_ID`, and an in-repo periodic
//!   (whose run has refs) gets the refs variables too;
//! - refs without a clone URI get `https://github.com/ORG/REPO.git` (an
//!   in-repo periodic's refs have none; Lighthouse's `REPO_URL` is then
//!   empty);
//! - the labels and annotations also carry the run's own (Prow's
//!   `created-by-prow`, `prow.k8s.io/*` and the job's labels, as Lighthouse
//!   carries its LighthouseJob's), and `prow.k8s.io/id` and
//!   `prow.k8s.io/build-id`, so bosun finds its PipelineRuns as it finds its
//!   pods; the job's context is the run's `prow.k8s.io/context` annotation
//!   (a run does not record it otherwise), and `generateName` uses the job's
//!   name where there is no context (Lighthouse's context defaults to the
//!   name) and where the run has no refs (Lighthouse: `missingref`);
//! - no owner reference (there is no LighthouseJob object) and no
//!   Lighthouse breakpoints (`taskRunSpecs` debug);
//! - a `pipelineRef`'s Pipeline is read from the cluster by Lighthouse to
//!   find the `git-clone` parameters: here its spec is an argument of
//!   [`pipeline_run_with`], and without it there is no detection.
//!
//! [`unresolved_references`] lists what a PipelineRun refers to outside
//! itself (`taskRef`, `pipelineRef`, step `ref`s and jx's `uses:` images),
//! so a run that cannot resolve them ends naming one.

use std::collections::BTreeMap;

use bosun_config::types::{JobBase, JobType, Refs};
use bosun_store::template::SpecSnapshot;
use bosun_store::Run;
use serde_json::{json, Map, Value};

use crate::convert::{self, ConvertError};
use crate::gotemplate::{Template, TemplateError};
use bosun_job::env::job_spec_json;

/// The PipelineRun's API version.
pub const API_VERSION: &str = "tekton.dev/v1";
/// The pipeline timeout when the spec sets none (Lighthouse's).
pub const DEFAULT_PIPELINE_TIMEOUT: &str = "24h0m0s";
/// Lighthouse's label on everything it creates.
pub const CREATED_BY_LIGHTHOUSE: &str = "created-by-lighthouse";
/// The run id (Lighthouse: the LighthouseJob's name).
pub const ID_LABEL: &str = "lighthouse.jenkins-x.io/id";
/// The build id.
pub const BUILD_NUM_LABEL: &str = "lighthouse.jenkins-x.io/buildNum";
/// The job name: a label (cut to 63 characters) and an annotation (whole).
pub const JOB_LABEL: &str = "lighthouse.jenkins-x.io/job";
/// The job type.
pub const TYPE_LABEL: &str = "lighthouse.jenkins-x.io/type";
/// The status context.
pub const CONTEXT_LABEL: &str = "lighthouse.jenkins-x.io/context";
/// The clone URI annotation.
pub const CLONE_URI_ANNOTATION: &str = "lighthouse.jenkins-x.io/cloneURI";

const ORG_LABEL: &str = "lighthouse.jenkins-x.io/refs.org";
const REPO_LABEL: &str = "lighthouse.jenkins-x.io/refs.repo";
const BRANCH_LABEL: &str = "lighthouse.jenkins-x.io/branch";
const BASE_SHA_LABEL: &str = "lighthouse.jenkins-x.io/baseSHA";
const PULL_LABEL: &str = "lighthouse.jenkins-x.io/refs.pull";
const LAST_COMMIT_SHA_LABEL: &str = "lighthouse.jenkins-x.io/lastCommitSHA";
/// bosun's run id and build id labels, as on its pods.
const PROW_ID_LABEL: &str = "prow.k8s.io/id";
const PROW_BUILD_ID_LABEL: &str = "prow.k8s.io/build-id";
const PROW_CONTEXT_ANNOTATION: &str = "prow.k8s.io/context";
const LABEL_VALUE_MAX: usize = 63;
const MAX_GENERATE_NAME_PREFIX: usize = 32;

/// Why a run's PipelineRun cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipelineRunError {
    /// The job has no PipelineRun spec.
    #[error("job {job}: no pipeline run spec (a source: file, pipeline_run_spec or tekton_pipeline_run_spec)")]
    NoSpec {
        /// The job.
        job: String,
    },
    /// `tekton_pipeline_run_spec` holds no version bosun reads, or a spec
    /// that is not a mapping.
    #[error("job {job}: {message}")]
    BadSpec {
        /// The job.
        job: String,
        /// What is wrong.
        message: String,
    },
    /// A `v1beta1` field that `v1` cannot express.
    #[error("job {job}: {source}")]
    Convert {
        /// The job.
        job: String,
        /// The field and why.
        source: ConvertError,
    },
    /// A `pipeline_run_params` template bosun refuses or that fails.
    #[error("job {job}: pipeline_run_params {param}: value_template {template:?}: {source}")]
    Template {
        /// The job.
        job: String,
        /// The parameter.
        param: String,
        /// The template as written.
        template: String,
        /// Go's (or bosun's) error.
        source: TemplateError,
    },
}

/// The job's PipelineRun spec in `tekton.dev/v1`: `tekton_pipeline_run_spec`'s
/// `v1` as it is, or its `v1beta1` converted; else `pipeline_run_spec`
/// (Lighthouse's field) converted as `v1beta1`, which leaves a spec written
/// for `v1` unchanged.
pub fn job_spec_v1(job: &JobBase) -> Result<Value, PipelineRunError> {
    let bad = |message: String| PipelineRunError::BadSpec {
        job: job.name.clone(),
        message,
    };
    let convert = |spec: &Value| {
        convert::pipeline_run_spec(spec).map_err(|source| PipelineRunError::Convert {
            job: job.name.clone(),
            source,
        })
    };
    if let Some(by_version) = &job.tekton_pipeline_run_spec {
        let Some(obj) = by_version.as_object() else {
            return Err(bad(
                "tekton_pipeline_run_spec must map an API version to a spec".into(),
            ));
        };
        if let Some(v1) = obj.get("v1") {
            if !v1.is_object() {
                return Err(bad("tekton_pipeline_run_spec.v1 must be a mapping".into()));
            }
            return Ok(v1.clone());
        }
        if let Some(v1beta1) = obj.get("v1beta1") {
            return convert(v1beta1);
        }
        let versions: Vec<&str> = obj.keys().map(String::as_str).collect();
        return Err(bad(format!(
            "tekton_pipeline_run_spec has no v1 or v1beta1 spec (found: {})",
            versions.join(", ")
        )));
    }
    match &job.pipeline_run_spec {
        Some(spec) => convert(spec),
        None => Err(PipelineRunError::NoSpec {
            job: job.name.clone(),
        }),
    }
}

/// The PipelineRun of `run` (whose spec snapshot is `spec`) in `namespace`.
/// A job whose spec names a Pipeline by `pipelineRef` gets no `git-clone`
/// parameters: [`pipeline_run_with`] takes that Pipeline's spec.
pub fn pipeline_run(
    run: &Run,
    spec: &SpecSnapshot,
    namespace: &str,
) -> Result<Value, PipelineRunError> {
    pipeline_run_with(run, spec, namespace, None)
}

/// [`pipeline_run`], with the spec (`tekton.dev/v1`) of the Pipeline the job's
/// `pipelineRef` names, read from the cluster, in which the `git-clone` and
/// `git-batch-merge` tasks' parameters are looked for.
pub fn pipeline_run_with(
    run: &Run,
    spec: &SpecSnapshot,
    namespace: &str,
    referenced_pipeline: Option<&Value>,
) -> Result<Value, PipelineRunError> {
    let job = &spec.job;
    let mut pr_spec = job_spec_v1(job)?;
    let refs = run.refs.as_deref().map(with_clone_uri);
    let context = run
        .annotations
        .get(PROW_CONTEXT_ANNOTATION)
        .cloned()
        .unwrap_or_default();

    let obj = pr_spec
        .as_object_mut()
        .expect("job_spec_v1 gives a mapping");
    // A default timeout of one day.
    let timeouts = obj
        .entry("timeouts")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(t) = timeouts.as_object_mut() {
        t.entry("pipeline")
            .or_insert_with(|| Value::String(DEFAULT_PIPELINE_TIMEOUT.into()));
    }

    // Parameters instead of environment variables.
    let mut env: BTreeMap<String, String> = bosun_job::env::job_env(run).into_iter().collect();
    env.insert("JOB_SPEC".into(), job_spec_json(run, None::<&()>));
    env.insert("BUILD_ID".into(), run.build_id.clone());
    let clone_uri = refs
        .as_ref()
        .and_then(|r| r.clone_uri.clone())
        .unwrap_or_default();
    env.insert("REPO_URL".into(), clone_uri.clone());
    let batched: Vec<&str> = refs
        .iter()
        .flat_map(|r| &r.pulls)
        .filter_map(|p| p.ref_.as_deref().filter(|r| !r.is_empty()))
        .collect();
    if !batched.is_empty() {
        env.insert("PULL_PULL_REF".into(), batched.join(" "));
    }
    match job.pipeline_run_params.as_deref() {
        Some(params) if !params.is_empty() => {
            for p in params {
                let value = Template::parse(&p.name, &p.value_template)
                    .and_then(|t| t.execute(refs.as_ref()))
                    .map_err(|source| PipelineRunError::Template {
                        job: job.name.clone(),
                        param: p.name.clone(),
                        template: p.value_template.clone(),
                        source,
                    })?;
                env.insert(p.name.clone(), value);
            }
        }
        _ => {
            let pipeline = obj.get("pipelineSpec").or(referenced_pipeline);
            if let Some(names) = pipeline.and_then(git_task_params) {
                env.insert(names.url, clone_uri.clone());
                if let Some(rev) = names.revision {
                    let value = match refs.as_ref().and_then(|r| r.pulls.first()) {
                        Some(p) => p.sha.clone(),
                        None => base_ref(refs.as_ref()),
                    };
                    env.insert(rev, value);
                }
                if let Some(base) = names.base_revision {
                    env.insert(base, base_ref(refs.as_ref()));
                }
                if let Some(b) = names.batched_refs {
                    env.insert(b, batched.join(" "));
                }
            }
        }
    }
    let params = obj
        .entry("params")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !params.is_array() {
        *params = Value::Array(Vec::new());
    }
    let params = params.as_array_mut().expect("an array");
    for (name, value) in env {
        match params
            .iter_mut()
            .find(|p| p.get("name").and_then(Value::as_str) == Some(name.as_str()))
        {
            Some(p) => p["value"] = Value::String(value),
            None => params.push(json!({"name": name, "value": value})),
        }
    }

    let (labels, annotations) = labels_and_annotations(run, refs.as_ref(), &context);
    Ok(json!({
        "apiVersion": API_VERSION,
        "kind": "PipelineRun",
        "metadata": {
            "generateName": generate_name(run, refs.as_ref(), &context),
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": pr_spec,
    }))
}

/// `refs` with a clone URI: its own, else GitHub's for `ORG/REPO`.
fn with_clone_uri(refs: &Refs) -> Refs {
    let mut r = refs.clone();
    if r.clone_uri.as_deref().is_none_or(str::is_empty) && !r.org.is_empty() && !r.repo.is_empty() {
        r.clone_uri = Some(format!("https://github.com/{}/{}.git", r.org, r.repo));
    }
    r
}

fn base_ref(refs: Option<&Refs>) -> String {
    refs.and_then(|r| r.base_ref.clone()).unwrap_or_default()
}

/// The pipeline parameters Lighthouse fills for the `git-clone` or
/// `git-batch-merge` catalog task (`determineGitCloneOrMergeTaskParams`).
#[derive(Debug, Default, PartialEq)]
struct GitParams {
    url: String,
    revision: Option<String>,
    batched_refs: Option<String>,
    base_revision: Option<String>,
}

/// Finds them as Lighthouse does: tasks in order, the first `git-clone`
/// task giving `url` and `revision`, or `git-batch-merge` giving `url` and
/// `batchedRefs` (and `revision` as the base); what a task finds stays
/// found for the next ones, and nothing is found unless one task completes
/// the set.
fn git_task_params(pipeline: &Value) -> Option<GitParams> {
    let mut url = None;
    let mut rev = None;
    let mut batched = None;
    let mut base = None;
    for task in pipeline.get("tasks")?.as_array()? {
        let Some(name) = task.pointer("/taskRef/name").and_then(Value::as_str) else {
            continue;
        };
        let params = task.get("params").and_then(Value::as_array);
        let param = |n: &str| -> Option<String> {
            params?
                .iter()
                .filter(|p| p.get("name").and_then(Value::as_str) == Some(n))
                .filter_map(|p| p.get("value").and_then(Value::as_str))
                .map(pipeline_param)
                .next_back()
        };
        if name == "git-clone" {
            if let Some(u) = param("url") {
                url = Some(u);
            }
            if let Some(r) = param("revision") {
                rev = Some(r);
            }
            if let (Some(u), Some(r)) = (&url, &rev) {
                if !u.is_empty() && !r.is_empty() {
                    return Some(GitParams {
                        url: u.clone(),
                        revision: Some(r.clone()),
                        batched_refs: batched.filter(|s: &String| !s.is_empty()),
                        base_revision: base.filter(|s: &String| !s.is_empty()),
                    });
                }
            }
        }
        if name == "git-batch-merge" {
            if let Some(u) = param("url") {
                url = Some(u);
            }
            if let Some(r) = param("revision") {
                base = Some(r);
            }
            if let Some(b) = param("batchedRefs") {
                batched = Some(b);
            }
            if let (Some(u), Some(b)) = (&url, &batched) {
                if !u.is_empty() && !b.is_empty() {
                    return Some(GitParams {
                        url: u.clone(),
                        revision: rev.filter(|s: &String| !s.is_empty()),
                        batched_refs: Some(b.clone()),
                        base_revision: base.filter(|s: &String| !s.is_empty()),
                    });
                }
            }
        }
    }
    None
}

/// `NAME` of a task parameter's value `$(params.NAME)`, else empty.
fn pipeline_param(value: &str) -> String {
    value
        .strip_prefix("$(params.")
        .and_then(|v| v.strip_suffix(')'))
        .unwrap_or_default()
        .to_string()
}

/// Lighthouse's `GetBranch`: a postsubmit's base ref, `batch`, `PR-N` for a
/// pull, else the base ref.
fn branch(run: &Run, refs: &Refs) -> String {
    let base = refs.base_ref.clone().unwrap_or_default();
    match run.job_type {
        JobType::Postsubmit => base,
        JobType::Batch => "batch".into(),
        _ => match refs.pulls.first() {
            Some(p) => format!("PR-{}", p.number),
            None => base,
        },
    }
}

/// Lighthouse's `GenerateName`.
fn generate_name(run: &Run, refs: Option<&Refs>, context: &str) -> String {
    let context = if context.is_empty() {
        run.job.as_str()
    } else {
        context
    };
    let parts: Vec<String> = match refs {
        Some(r) => {
            let branch = match r.pulls.first() {
                Some(p) => format!("pr-{}", p.number),
                None => r.base_ref.clone().unwrap_or_default(),
            };
            vec![r.org.clone(), r.repo.clone(), branch, context.to_string()]
        }
        None => vec![context.to_string()],
    };
    let joined: Vec<&str> = parts
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    let mut name = to_valid_name(&joined.join("-"));
    if name.len() > MAX_GENERATE_NAME_PREFIX {
        name = name[name.len() - MAX_GENERATE_NAME_PREFIX..].to_string();
    }
    let mut name = to_valid_name(name.trim_start_matches('-'));
    if !name.ends_with('-') {
        name.push('-');
    }
    name
}

/// Lighthouse's `util.ToValidName`: lower case, leading characters up to
/// the first letter dropped, anything but `[a-z0-9-]` made `-`, runs of `-`
/// made one, trailing `-` dropped.
fn to_valid_name(name: &str) -> String {
    let mut out = String::new();
    let mut started = false;
    let mut last_dash = false;
    for ch in name.to_lowercase().chars() {
        if !started {
            if ch.is_ascii_lowercase() {
                out.push(ch);
                started = true;
            }
            continue;
        }
        let ch = if ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-' {
            ch
        } else {
            '-'
        };
        if ch != '-' || !last_dash {
            out.push(ch);
        }
        last_dash = ch == '-';
    }
    out.trim_end_matches('-').to_string()
}

/// A label value cut to 63 bytes without trailing `.` or `-`
/// (Lighthouse's truncation of job and context names).
fn cut_label_value(value: &str) -> String {
    if value.len() <= LABEL_VALUE_MAX {
        return value.to_string();
    }
    let mut end = LABEL_VALUE_MAX;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    value[..end].trim_end_matches(['.', '-']).to_string()
}

type StrMap = BTreeMap<String, String>;

/// Lighthouse's `LabelsAndAnnotationsForJob`, the run's own labels and
/// annotations in the place of the LighthouseJob's.
fn labels_and_annotations(run: &Run, refs: Option<&Refs>, context: &str) -> (StrMap, StrMap) {
    let mut labels = StrMap::new();
    labels.insert(CREATED_BY_LIGHTHOUSE.into(), "true".into());
    labels.insert(TYPE_LABEL.into(), run.job_type.as_str().into());
    labels.insert(JOB_LABEL.into(), cut_label_value(&run.job));
    if !context.is_empty() {
        labels.insert(CONTEXT_LABEL.into(), cut_label_value(context));
    }
    if let Some(r) = refs.filter(|_| run.job_type != JobType::Periodic) {
        labels.insert(ORG_LABEL.into(), r.org.to_lowercase());
        labels.insert(REPO_LABEL.into(), r.repo.clone());
        labels.insert(BRANCH_LABEL.into(), branch(run, r));
        let base_sha = r.base_sha.clone().unwrap_or_default();
        labels.insert(BASE_SHA_LABEL.into(), base_sha.clone());
        match r.pulls.first() {
            Some(p) => {
                labels.insert(PULL_LABEL.into(), p.number.to_string());
                labels.insert(LAST_COMMIT_SHA_LABEL.into(), p.sha.clone());
            }
            None => {
                labels.insert(LAST_COMMIT_SHA_LABEL.into(), base_sha);
            }
        }
    }
    for (k, v) in run.labels.iter() {
        labels.insert(k.clone(), v.clone());
    }
    labels.insert(ID_LABEL.into(), run.id.clone());
    labels.insert(BUILD_NUM_LABEL.into(), run.build_id.clone());
    labels.insert(PROW_ID_LABEL.into(), run.id.clone());
    labels.insert(PROW_BUILD_ID_LABEL.into(), run.build_id.clone());
    let labels = labels
        .into_iter()
        .filter_map(|(k, v)| label_safe(&v).map(|v| (k, v)))
        .collect();

    let mut annotations = StrMap::new();
    annotations.insert(JOB_LABEL.into(), run.job.clone());
    if let Some(uri) = refs
        .and_then(|r| r.clone_uri.as_deref())
        .filter(|u| !u.is_empty())
    {
        annotations.insert(CLONE_URI_ANNOTATION.into(), uri.into());
    }
    for (k, v) in run.annotations.iter() {
        annotations.insert(k.clone(), v.clone());
    }
    (labels, annotations)
}

/// `value` if it is a label value, else its last path element if that one
/// is, else nothing.
fn label_safe(value: &str) -> Option<String> {
    let base = value.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    let base = if value.is_empty() {
        "."
    } else if base.is_empty() {
        "/"
    } else {
        base
    };
    [value, base]
        .into_iter()
        .find(|v| bosun_config::validate::label_value_errors(v).is_empty())
        .map(str::to_string)
}

/// What a PipelineRun `spec` (`tekton.dev/v1`) refers to outside itself: its
/// `pipelineRef`, its pipeline tasks' `taskRef`s and `pipelineRef`s, steps'
/// `ref`s (StepActions), and jx's `uses:` step images (Lighthouse resolves
/// them from git when it loads the job; bosun does not). Each is described
/// with where it is, e.g. `taskRef "git-clone" (pipeline task "fetch")`.
pub fn unresolved_references(spec: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(r) = spec.get("pipelineRef") {
        out.push(format!("pipelineRef {}", describe_ref(r)));
    }
    if let Some(p) = spec.get("pipelineSpec") {
        pipeline_references(p, "", &mut out);
    }
    out
}

fn describe_ref(r: &Value) -> String {
    let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
    match r.get("resolver").and_then(Value::as_str) {
        Some(resolver) if !resolver.is_empty() => {
            let params: Vec<String> = r
                .get("params")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    Some(format!(
                        "{}={}",
                        p.get("name")?.as_str()?,
                        p.get("value")?.as_str()?
                    ))
                })
                .collect();
            format!("(resolver {resolver} {})", params.join(" ")).replace(" )", ")")
        }
        _ => {
            let kind = r.get("kind").and_then(Value::as_str).unwrap_or_default();
            if kind.is_empty() || kind == "Task" || kind == "Pipeline" {
                format!("{name:?}")
            } else {
                format!("{name:?} (kind {kind})")
            }
        }
    }
}

fn pipeline_references(pipeline: &Value, outer: &str, out: &mut Vec<String>) {
    for key in ["tasks", "finally"] {
        for task in pipeline
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = task.get("name").and_then(Value::as_str).unwrap_or_default();
            let at = format!("{outer}pipeline task {name:?}");
            if let Some(r) = task.get("taskRef") {
                out.push(format!("taskRef {} ({at})", describe_ref(r)));
            }
            if let Some(r) = task.get("pipelineRef") {
                out.push(format!("pipelineRef {} ({at})", describe_ref(r)));
            }
            if let Some(p) = task.get("pipelineSpec") {
                pipeline_references(p, &format!("{at}, "), out);
            }
            let Some(ts) = task.get("taskSpec") else {
                continue;
            };
            if let Some(image) = ts
                .pointer("/stepTemplate/image")
                .and_then(Value::as_str)
                .filter(|i| i.starts_with("uses:"))
            {
                out.push(format!("{image} ({at}, stepTemplate)"));
            }
            for step in ts
                .get("steps")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let step_name = step.get("name").and_then(Value::as_str).unwrap_or_default();
                if let Some(image) = step
                    .get("image")
                    .and_then(Value::as_str)
                    .filter(|i| i.starts_with("uses:"))
                {
                    out.push(format!("{image} ({at}, step {step_name:?})"));
                }
                if let Some(r) = step.get("ref") {
                    out.push(format!(
                        "step ref {} ({at}, step {step_name:?})",
                        describe_ref(r)
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_config::types::{PipelineRunParam, Pull};
    use bosun_store::{Labels, RunState};

    fn run(job_type: JobType, refs: Option<Refs>) -> Run {
        Run {
            id: "6f0c7c2e-7a51-4b6e-9b1a-3c1d2e4f5a6b".into(),
            build_id: "1800000000000001".into(),
            job: "unit".into(),
            job_type,
            periodic: None,
            configured_cluster: "default".into(),
            cluster: None,
            refs: refs.map(Box::new),
            extra_refs: vec![],
            labels: Labels::default(),
            annotations: Labels::default(),
            spec_hash: String::new(),
            scheduled_at: None,
            attempt: 0,
            pod_revival_count: 0,
            created_at: jiff::Timestamp::UNIX_EPOCH,
            pending_at: None,
            completed_at: None,
            state: RunState::Triggered,
            description: String::new(),
            url: None,
        }
    }

    fn snapshot(job: serde_json::Value) -> SpecSnapshot {
        SpecSnapshot {
            job: serde_json::from_value(job).unwrap(),
            pod_spec: None,
            decoration: None,
        }
    }

    fn pr_refs() -> Refs {
        Refs {
            org: "Acme".into(),
            repo: "app".into(),
            base_ref: Some("main".into()),
            base_sha: Some("b45e".into()),
            pulls: vec![Pull {
                number: 7,
                author: "a".into(),
                sha: "c0ffee".into(),
                ..Pull::default()
            }],
            ..Refs::default()
        }
    }

    fn param<'v>(pr: &'v Value, name: &str) -> Option<&'v str> {
        pr["spec"]["params"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == name)?["value"]
            .as_str()
    }

    #[test]
    fn job_spec_versions() {
        let v1 =
            json!({"pipelineRef": {"name": "p"}, "taskRunTemplate": {"serviceAccountName": "sa"}});
        let j = |v: Value| -> JobBase { serde_json::from_value(v).unwrap() };
        assert_eq!(
            job_spec_v1(&j(
                json!({"name": "a", "tekton_pipeline_run_spec": {"v1": v1}})
            ))
            .unwrap(),
            v1
        );
        assert_eq!(
            job_spec_v1(&j(json!({"name": "a", "tekton_pipeline_run_spec": {"v1beta1": {"pipelineRef": {"name": "p"}, "serviceAccountName": "sa"}}}))).unwrap(),
            v1
        );
        assert_eq!(
            job_spec_v1(&j(json!({"name": "a", "pipeline_run_spec": {"pipelineRef": {"name": "p"}, "serviceAccountName": "sa"}}))).unwrap(),
            v1
        );
        assert_eq!(
            job_spec_v1(&j(json!({"name": "a", "pipeline_run_spec": v1}))).unwrap(),
            v1
        );
        assert_eq!(
            job_spec_v1(&j(json!({"name": "a"}))).unwrap_err().to_string(),
            "job a: no pipeline run spec (a source: file, pipeline_run_spec or tekton_pipeline_run_spec)"
        );
        assert_eq!(
            job_spec_v1(&j(
                json!({"name": "a", "tekton_pipeline_run_spec": {"v1alpha1": {}}})
            ))
            .unwrap_err()
            .to_string(),
            "job a: tekton_pipeline_run_spec has no v1 or v1beta1 spec (found: v1alpha1)"
        );
        assert!(job_spec_v1(&j(
            json!({"name": "a", "pipeline_run_spec": {"resources": []}})
        ))
        .unwrap_err()
        .to_string()
        .starts_with("job a: spec.resources: PipelineResources were removed"));
    }

    #[test]
    fn presubmit_metadata_timeout_and_environment() {
        let mut r = run(JobType::Presubmit, Some(pr_refs()));
        std::sync::Arc::make_mut(&mut r.annotations)
            .insert(PROW_CONTEXT_ANNOTATION.into(), "ci/unit".into());
        std::sync::Arc::make_mut(&mut r.labels).insert("team".into(), "x".into());
        let s = snapshot(
            json!({"name": "unit", "tekton_pipeline_run_spec": {"v1": {"pipelineSpec": {"tasks": []}, "params": [{"name": "JOB_NAME", "value": "old"}]}}}),
        );
        let pr = pipeline_run(&r, &s, "ci").unwrap();
        assert_eq!(pr["apiVersion"], "tekton.dev/v1");
        assert_eq!(pr["kind"], "PipelineRun");
        assert_eq!(pr["metadata"]["generateName"], "acme-app-pr-7-ci-unit-");
        assert_eq!(pr["metadata"]["namespace"], "ci");
        assert_eq!(
            pr["metadata"]["labels"],
            json!({
                "created-by-lighthouse": "true",
                "lighthouse.jenkins-x.io/type": "presubmit",
                "lighthouse.jenkins-x.io/job": "unit",
                // Not a label value: its last path element, as Lighthouse.
                "lighthouse.jenkins-x.io/context": "unit",
                "lighthouse.jenkins-x.io/refs.org": "acme",
                "lighthouse.jenkins-x.io/refs.repo": "app",
                "lighthouse.jenkins-x.io/branch": "PR-7",
                "lighthouse.jenkins-x.io/baseSHA": "b45e",
                "lighthouse.jenkins-x.io/refs.pull": "7",
                "lighthouse.jenkins-x.io/lastCommitSHA": "c0ffee",
                "lighthouse.jenkins-x.io/id": r.id,
                "lighthouse.jenkins-x.io/buildNum": "1800000000000001",
                "prow.k8s.io/id": r.id,
                "prow.k8s.io/build-id": "1800000000000001",
                "team": "x",
            })
        );
        assert_eq!(
            pr["metadata"]["annotations"],
            json!({
                "lighthouse.jenkins-x.io/job": "unit",
                "lighthouse.jenkins-x.io/cloneURI": "https://github.com/Acme/app.git",
                "prow.k8s.io/context": "ci/unit",
            })
        );
        assert_eq!(pr["spec"]["timeouts"], json!({"pipeline": "24h0m0s"}));
        // The spec's own parameter of a name is overwritten in place; the
        // others are appended in name order.
        let names: Vec<&str> = pr["spec"]["params"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "JOB_NAME",
                "BUILD_ID",
                "BUILD_NUMBER",
                "CI",
                "JOB_SPEC",
                "JOB_TYPE",
                "PROW_JOB_ID",
                "PULL_BASE_REF",
                "PULL_BASE_SHA",
                "PULL_NUMBER",
                "PULL_PULL_SHA",
                "PULL_REFS",
                "REPO_NAME",
                "REPO_OWNER",
                "REPO_URL"
            ]
        );
        assert_eq!(param(&pr, "JOB_NAME"), Some("unit"));
        assert_eq!(
            param(&pr, "REPO_URL"),
            Some("https://github.com/Acme/app.git")
        );
        assert_eq!(param(&pr, "PULL_NUMBER"), Some("7"));
        assert_eq!(param(&pr, "PULL_REFS"), Some("main:b45e,7:c0ffee"));
        assert_eq!(param(&pr, "PULL_PULL_REF"), None, "no pull has a ref");
    }

    #[test]
    fn a_written_timeout_stays() {
        let r = run(
            JobType::Postsubmit,
            Some(Refs {
                pulls: vec![],
                ..pr_refs()
            }),
        );
        let s = snapshot(
            json!({"name": "unit", "pipeline_run_spec": {"pipelineRef": {"name": "p"}, "timeout": "1h"}}),
        );
        let pr = pipeline_run(&r, &s, "ci").unwrap();
        assert_eq!(pr["spec"]["timeouts"], json!({"pipeline": "1h"}));
        let s = snapshot(
            json!({"name": "unit", "pipeline_run_spec": {"pipelineRef": {"name": "p"}, "timeouts": {"tasks": "1h"}}}),
        );
        let pr = pipeline_run(&r, &s, "ci").unwrap();
        assert_eq!(
            pr["spec"]["timeouts"],
            json!({"pipeline": "24h0m0s", "tasks": "1h"})
        );
        assert_eq!(pr["metadata"]["labels"][BRANCH_LABEL], "main");
        assert_eq!(pr["metadata"]["labels"][LAST_COMMIT_SHA_LABEL], "b45e");
        assert_eq!(pr["metadata"]["generateName"], "acme-app-main-unit-");
    }

    #[test]
    fn pipeline_run_params_are_templates_over_the_refs() {
        let mut refs = pr_refs();
        refs.pulls.push(Pull {
            number: 8,
            sha: "beef".into(),
            ..Pull::default()
        });
        refs.pulls[0].ref_ = Some("refs/pull/7/head".into());
        refs.pulls[1].ref_ = Some("refs/pull/8/head".into());
        let r = run(JobType::Batch, Some(refs));
        let s = snapshot(json!({
            "name": "unit",
            "pipeline_run_spec": {"pipelineSpec": {"tasks": [{"name": "c", "taskRef": {"name": "git-clone"}, "params": [{"name": "url", "value": "$(params.u)"}, {"name": "revision", "value": "$(params.r)"}]}]}},
            "pipeline_run_params": [
                {"name": "sha", "value_template": "{{ (index .Refs.Pulls 0).SHA }}"},
                {"name": "JOB_NAME", "value_template": "overridden"},
            ],
        }));
        let pr = pipeline_run(&r, &s, "ci").unwrap();
        assert_eq!(param(&pr, "sha"), Some("c0ffee"));
        assert_eq!(param(&pr, "JOB_NAME"), Some("overridden"));
        assert_eq!(
            param(&pr, "PULL_PULL_REF"),
            Some("refs/pull/7/head refs/pull/8/head")
        );
        // With templates, the git-clone task is not looked at.
        assert_eq!(param(&pr, "u"), None);
        assert_eq!(pr["metadata"]["labels"][BRANCH_LABEL], "batch");

        let s = snapshot(json!({
            "name": "unit",
            "pipeline_run_spec": {"pipelineRef": {"name": "p"}},
            "pipeline_run_params": [{"name": "x", "value_template": "{{ printf \"%s\" .Refs.Org }}"}],
        }));
        assert_eq!(
            pipeline_run(&r, &s, "ci").unwrap_err().to_string(),
            "job unit: pipeline_run_params x: value_template \"{{ printf \\\"%s\\\" .Refs.Org }}\": template: x:1: function \"printf\" is not supported by bosun (supported: index)"
        );
    }

    #[test]
    fn git_clone_and_batch_merge_parameters() {
        let clone = json!({"tasks": [
            {"name": "x", "taskSpec": {"steps": []}},
            {"name": "fetch", "taskRef": {"name": "git-clone"}, "params": [{"name": "url", "value": "$(params.repo-url)"}, {"name": "revision", "value": "$(params.branch-name)"}]},
        ]});
        let s = snapshot(json!({"name": "unit", "pipeline_run_spec": {"pipelineSpec": clone}}));
        let pr = pipeline_run(&run(JobType::Presubmit, Some(pr_refs())), &s, "ci").unwrap();
        assert_eq!(
            param(&pr, "repo-url"),
            Some("https://github.com/Acme/app.git")
        );
        assert_eq!(param(&pr, "branch-name"), Some("c0ffee"));
        let push = Refs {
            pulls: vec![],
            ..pr_refs()
        };
        let pr = pipeline_run(&run(JobType::Postsubmit, Some(push.clone())), &s, "ci").unwrap();
        assert_eq!(param(&pr, "branch-name"), Some("main"));

        // A pipelineRef's Pipeline, given.
        let s =
            snapshot(json!({"name": "unit", "pipeline_run_spec": {"pipelineRef": {"name": "p"}}}));
        let pr = pipeline_run(&run(JobType::Postsubmit, Some(push.clone())), &s, "ci").unwrap();
        assert_eq!(param(&pr, "branch-name"), None);
        let pr = pipeline_run_with(
            &run(JobType::Postsubmit, Some(push)),
            &s,
            "ci",
            Some(&clone),
        )
        .unwrap();
        assert_eq!(param(&pr, "branch-name"), Some("main"));

        let merge = json!({"tasks": [{"name": "m", "taskRef": {"name": "git-batch-merge"}, "params": [
            {"name": "url", "value": "$(params.repo-url)"},
            {"name": "revision", "value": "$(params.base)"},
            {"name": "batchedRefs", "value": "$(params.refs)"},
        ]}]});
        assert_eq!(
            git_task_params(&merge),
            Some(GitParams {
                url: "repo-url".into(),
                revision: None,
                batched_refs: Some("refs".into()),
                base_revision: Some("base".into()),
            })
        );
        // Values that are not `$(params.X)`, or an incomplete set: nothing.
        assert_eq!(
            git_task_params(
                &json!({"tasks": [{"name": "f", "taskRef": {"name": "git-clone"}, "params": [{"name": "url", "value": "https://x"}, {"name": "revision", "value": "$(params.r)"}]}]})
            ),
            None
        );
        assert_eq!(
            git_task_params(
                &json!({"tasks": [{"name": "f", "taskRef": {"name": "git-clone"}, "params": [{"name": "url", "value": "$(params.u)"}]}]})
            ),
            None
        );
    }

    #[test]
    fn periodics() {
        // An in-repo periodic: refs {org, repo, base_ref}, no clone URI.
        let refs = Refs {
            org: "acme".into(),
            repo: "app".into(),
            base_ref: Some("main".into()),
            ..Refs::default()
        };
        let mut r = run(JobType::Periodic, Some(refs));
        r.job = "nightly".into();
        let s = snapshot(
            json!({"name": "nightly", "pipeline_run_spec": {"pipelineRef": {"name": "p"}}}),
        );
        let pr = pipeline_run(&r, &s, "ci").unwrap();
        assert_eq!(pr["metadata"]["generateName"], "acme-app-main-nightly-");
        assert_eq!(
            param(&pr, "REPO_URL"),
            Some("https://github.com/acme/app.git")
        );
        assert_eq!(param(&pr, "REPO_OWNER"), Some("acme"));
        assert!(
            pr["metadata"]["labels"].get(ORG_LABEL).is_none(),
            "no refs labels on a periodic"
        );
        // A central periodic: no refs.
        let mut r = run(JobType::Periodic, None);
        r.job = "Nightly_Cleanup".into();
        let pr = pipeline_run(&r, &s, "ci").unwrap();
        assert_eq!(pr["metadata"]["generateName"], "nightly-cleanup-");
        assert_eq!(param(&pr, "REPO_URL"), Some(""));
        assert!(pr["metadata"]["annotations"]
            .get(CLONE_URI_ANNOTATION)
            .is_none());
    }

    #[test]
    fn names_and_labels_as_lighthouse_makes_them() {
        assert_eq!(
            to_valid_name("Jenkins-X/lighthouse_PR-813--github--"),
            "jenkins-x-lighthouse-pr-813-github"
        );
        assert_eq!(to_valid_name("123-abc"), "abc");
        let r = run(
            JobType::Presubmit,
            Some({
                let mut refs = pr_refs();
                refs.org = "jenkins-x".into();
                refs.repo = "lighthouse".into();
                refs.pulls[0].number = 813;
                refs
            }),
        );
        let mut r = r;
        std::sync::Arc::make_mut(&mut r.annotations)
            .insert(PROW_CONTEXT_ANNOTATION.into(), "github".into());
        let s =
            snapshot(json!({"name": "unit", "pipeline_run_spec": {"pipelineRef": {"name": "p"}}}));
        // 34 characters: the last 32 are kept.
        assert_eq!(
            pipeline_run(&r, &s, "ci").unwrap()["metadata"]["generateName"],
            "nkins-x-lighthouse-pr-813-github-"
        );
        assert_eq!(
            cut_label_value(&format!("{}-.x", "a".repeat(61))),
            "a".repeat(61)
        );
        assert_eq!(label_safe("ok"), Some("ok".into()));
        assert_eq!(label_safe("org/sub/repo"), Some("repo".into()));
        assert_eq!(label_safe("a b/c d"), None);
        assert_eq!(label_safe(""), Some(String::new()));
    }

    #[test]
    fn references_are_listed() {
        let spec = json!({
            "pipelineRef": {"name": "release"},
            "pipelineSpec": {
                "tasks": [
                    {"name": "fetch", "taskRef": {"name": "git-clone"}},
                    {"name": "remote", "taskRef": {"resolver": "git", "params": [{"name": "url", "value": "https://x"}, {"name": "pathInRepo", "value": "t.yaml"}]}},
                    {"name": "from-build-pack", "taskSpec": {
                        "stepTemplate": {"image": "uses:jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream"},
                        "steps": [
                            {"name": "clone", "image": "uses:jenkins-x/jx3-pipeline-catalog/tasks/git-clone/git-clone-pr.yaml@versionStream"},
                            {"name": "build"},
                            {"name": "act", "ref": {"name": "my-action"}},
                            {"name": "plain", "image": "alpine"},
                        ],
                    }},
                ],
                "finally": [{"name": "notify", "taskRef": {"name": "wait", "apiVersion": "custom.dev/v1", "kind": "Wait"}}],
            },
        });
        assert_eq!(
            unresolved_references(&spec),
            vec![
                "pipelineRef \"release\"",
                "taskRef \"git-clone\" (pipeline task \"fetch\")",
                "taskRef (resolver git url=https://x pathInRepo=t.yaml) (pipeline task \"remote\")",
                "uses:jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream (pipeline task \"from-build-pack\", stepTemplate)",
                "uses:jenkins-x/jx3-pipeline-catalog/tasks/git-clone/git-clone-pr.yaml@versionStream (pipeline task \"from-build-pack\", step \"clone\")",
                "step ref \"my-action\" (pipeline task \"from-build-pack\", step \"act\")",
                "taskRef \"wait\" (kind Wait) (pipeline task \"notify\")",
            ]
        );
        assert!(unresolved_references(&json!({"pipelineSpec": {"tasks": [{"name": "a", "taskSpec": {"steps": [{"image": "alpine"}]}}]}})).is_empty());
    }

    #[test]
    fn param_types_are_kept_in_the_job() {
        // `PipelineRunParam` round-trips through the spec snapshot.
        let s = snapshot(
            json!({"name": "unit", "pipeline_run_params": [{"name": "a", "value_template": "b"}]}),
        );
        assert_eq!(
            s.job.pipeline_run_params,
            Some(vec![PipelineRunParam {
                name: "a".into(),
                value_template: "b".into()
            }])
        );
        let back: SpecSnapshot = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back.job, s.job);
    }
}
