//! Lighthouse's pipeline jobs: a job of `.lighthouse/NAME/triggers.yaml` with
//! `source: FILE` names a Tekton `PipelineRun` file (or a `Pipeline`,
//! `Task` or `TaskRun`, wrapped in one: see below), relative to that
//! triggers.yaml's directory. The loader reads it as Lighthouse does when it
//! loads in-repo configuration (jenkins-x/lighthouse
//! `pkg/triggerconfig/inrepo/load_triggers.go` and `load_pipelinerun.go` at
//! 71e4ab8de18ca003ddd45c5bdd44e28424ff97af, `default_parameters.go` at
//! 13f6a6eef79b9a0e010eb43dfc845dc5b27a439a) and keeps its spec on the job,
//! under its API version, in `tekton_pipeline_run_spec` (`{v1: SPEC}` or
//! `{v1beta1: SPEC}`), which every run's spec snapshot carries.
//!
//! As Lighthouse:
//! - the `lighthouse.jenkins-x.io/loadFileRefs` annotation (a regular
//!   expression) embeds, from files beside the source (`NAME` or
//!   `NAME.yaml`), the Pipeline its `pipelineRef` names and the Tasks its
//!   pipeline tasks' `taskRef`s name, when the name matches;
//! - unless the annotation `lighthouse.jenkins-x.io/defaultParameters` is
//!   `"false"`, an embedded pipeline gets Lighthouse's parameters declared
//!   (`BUILD_ID`, `JOB_NAME`, ..., `REPO_URL`), passed to each of its tasks
//!   (`$(params.NAME)`), declared by each embedded task, and set as
//!   environment variables of its steps (the step template's `env`);
//! - jx's `uses:` step images are kept as written (Lighthouse resolves them
//!   from git; bosun refuses them when a run starts);
//! - a `Pipeline`, `Task` or `TaskRun` source is wrapped in a PipelineRun
//!   first (`LoadTektonResourceAsPipelineRun`): a Pipeline becomes its
//!   `pipelineSpec`; a Task, or a TaskRun's task, the one task of a pipeline
//!   (named after the object, `default` without a name) that declares the
//!   task's params and passes them on. Where Lighthouse's wrapping makes a
//!   PipelineRun Tekton refuses, bosun's differs ([`wrap`] says where).
//!
//! Reported, at the file and line concerned and naming the job: an empty or
//! unreadable `source`, one outside the repository, a URL (Lighthouse
//! fetches those; bosun's configuration never touches the network), a file
//! that is not YAML, not exactly one document, not a `tekton.dev/v1` or
//! `tekton.dev/v1beta1` `PipelineRun`, `Pipeline`, `Task` or `TaskRun`, or
//! without a `spec`;
//! a job with both `source` and an inline spec; the
//! `prependStepsURL`/`appendStepsURL` annotations (network again); a
//! `loadFileRefs` pattern or file that cannot be used; and what
//! `tekton.dev/v1` cannot express (PipelineResources, pipeline tasks'
//! `conditions`, `serviceAccountNames`), which would fail every run.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::diag::Diagnostic;
use crate::model::Origin;
use crate::parsed::Parsed;
use crate::source::{EntryKind, FileSource};
use crate::types::JobBase;
use crate::yaml::{self, from_node, Mark, Node, Value as YamlValue};

/// The API versions a source may have.
const API_VERSIONS: &[(&str, &str)] = &[("tekton.dev/v1", "v1"), ("tekton.dev/v1beta1", "v1beta1")];

const DEFAULT_PARAMETERS: &str = "lighthouse.jenkins-x.io/defaultParameters";
const LOAD_FILE_REFS: &str = "lighthouse.jenkins-x.io/loadFileRefs";
const PREPEND_STEPS_URL: &str = "lighthouse.jenkins-x.io/prependStepsURL";
const APPEND_STEPS_URL: &str = "lighthouse.jenkins-x.io/appendStepsURL";

/// Loads the `source:` of every job of one triggers.yaml (`out` holds that
/// file's jobs), `root` being the repository's checkout.
pub(super) fn load_sources(fs: &dyn FileSource, triggers: &Path, root: &Path, out: &mut Parsed) {
    let dir = triggers.parent().unwrap_or(Path::new("."));
    let mut diags = Vec::new();
    let mut stats = (0usize, 0u64);
    let mut ctx = Ctx {
        fs,
        dir,
        root,
        diags: &mut diags,
        stats: &mut stats,
    };
    for job in out.periodics.iter_mut() {
        ctx.job(&mut job.base, &job.origin);
    }
    for (_, job) in out.presubmits.iter_mut() {
        ctx.job(&mut job.base, &job.origin);
    }
    for (_, job) in out.postsubmits.iter_mut() {
        ctx.job(&mut job.base, &job.origin);
    }
    out.diagnostics.append(&mut diags);
    out.stats.files += stats.0;
    out.stats.bytes += stats.1;
}

struct Ctx<'c> {
    fs: &'c dyn FileSource,
    /// The triggers.yaml's directory.
    dir: &'c Path,
    root: &'c Path,
    diags: &'c mut Vec<Diagnostic>,
    /// Files and bytes read.
    stats: &'c mut (usize, u64),
}

/// The kinds a `source:` may hold.
const SOURCE_KINDS: &[&str] = &["PipelineRun", "Pipeline", "Task", "TaskRun"];

/// A Tekton object read from a file.
struct Read {
    /// The file, as diagnostics name it.
    file: Arc<str>,
    /// `v1` or `v1beta1`.
    version: &'static str,
    /// Its kind (one of those asked for).
    kind: String,
    /// `metadata.name`, if any.
    name: Option<String>,
    /// `metadata.annotations`, with where each key is.
    annotations: Vec<(String, Value, Mark)>,
    spec: Value,
}

impl Ctx<'_> {
    fn job(&mut self, base: &mut JobBase, origin: &Origin) {
        let Some(source) = base.source.clone() else {
            return;
        };
        let name = base.name.clone();
        let at = origin.key("source").unwrap_or(origin.mark);
        let error = |msg: String| Diagnostic::error(msg).at(&origin.file, at).job(&name);
        if source.trim().is_empty() {
            self.diags.push(
                error("source is empty".into())
                    .hint("name the PipelineRun file, relative to this triggers.yaml"),
            );
            return;
        }
        if base.pipeline_run_spec.is_some() || base.tekton_pipeline_run_spec.is_some() {
            self.diags.push(error(
                "source and pipeline_run_spec (or tekton_pipeline_run_spec) are both set: a job has one pipeline"
                    .into(),
            ));
            return;
        }
        let path = join(self.dir, &source);
        if !path.starts_with(clean(self.root)) {
            self.diags.push(error(format!(
                "source {source:?} is outside the repository ({})",
                path.display()
            )));
            return;
        }
        match self.fs.stat(&path) {
            Ok(EntryKind::File) => {}
            Ok(_) => {
                self.diags.push(error(format!(
                    "source {source:?}: {} is not a regular file",
                    path.display()
                )));
                return;
            }
            Err(e) => {
                let d = if source.starts_with("http://") || source.starts_with("https://") {
                    error(format!(
                        "source {source:?} is a URL: bosun does not fetch pipelines over the network"
                    ))
                    .hint("check the PipelineRun into the repository and name the file")
                } else {
                    error(format!(
                        "source {source:?}: cannot read {}: {e}",
                        path.display()
                    ))
                };
                self.diags.push(d);
                return;
            }
        }
        let Some(run) = self.read(&path, &name, SOURCE_KINDS) else {
            return;
        };
        let Read {
            file,
            mut version,
            kind,
            name: object_name,
            annotations,
            spec,
        } = run;
        let mut spec = wrap(&kind, object_name.as_deref(), version, spec);
        // An annotation's value and where its key is.
        let annotation = |key: &str| {
            annotations
                .iter()
                .find(|(k, ..)| k == key)
                .and_then(|(_, v, m)| Some((v.as_str()?, *m)))
        };
        let mut failed = false;
        for key in [PREPEND_STEPS_URL, APPEND_STEPS_URL] {
            if let Some((_, mark)) = annotation(key).filter(|(v, _)| !v.is_empty()) {
                self.diags.push(
                    Diagnostic::error(format!(
                        "annotation {key}: bosun does not fetch steps over the network"
                    ))
                    .at(&file, mark)
                    .job(&name)
                    .hint("copy the steps into the pipeline's tasks"),
                );
                failed = true;
            }
        }
        if let Some((pattern, mark)) = annotation(LOAD_FILE_REFS).filter(|(p, _)| !p.is_empty()) {
            match regex::Regex::new(pattern) {
                Ok(re) => {
                    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
                    match self.load_file_refs(&mut spec, &re, &dir, &name) {
                        Some("v1beta1") => version = "v1beta1",
                        Some(_) => {}
                        None => failed = true,
                    }
                }
                Err(e) => {
                    self.diags.push(
                        Diagnostic::error(format!(
                            "annotation {LOAD_FILE_REFS}: {pattern:?} is not a regular expression: {e}"
                        ))
                        .at(&file, mark)
                        .job(&name),
                    );
                    failed = true;
                }
            }
        }
        if failed {
            return;
        }
        if annotation(DEFAULT_PARAMETERS).map(|(v, _)| v) != Some("false") {
            default_parameters(&mut spec);
        }
        let mut by_version = Map::new();
        by_version.insert(version.into(), spec);
        base.tekton_pipeline_run_spec = Some(Value::Object(by_version));
    }

    /// Reads `path` as one Tekton object of one of `kinds`; reports what is
    /// wrong and gives nothing then.
    fn read(&mut self, path: &Path, job: &str, kinds: &[&str]) -> Option<Read> {
        let kind = kinds.join(", ");
        let kind = match kind.rsplit_once(", ") {
            Some((head, last)) => format!("{head} or {last}"),
            None => kind,
        };
        let file: Arc<str> = Arc::from(path.to_string_lossy().as_ref());
        let error = |msg: String, mark: Mark| Diagnostic::error(msg).at(&file, mark).job(job);
        let bytes = match self.fs.read(path) {
            Ok(b) => b,
            Err(e) => {
                self.diags.push(
                    Diagnostic::error(format!("cannot read: {e}"))
                        .in_file(&file)
                        .job(job),
                );
                return None;
            }
        };
        self.stats.0 += 1;
        self.stats.1 += bytes.len() as u64;
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) => t,
            Err(e) => {
                let valid = &bytes[..e.valid_up_to()];
                let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
                self.diags.push(error(
                    format!(
                        "file is not valid UTF-8 (invalid byte 0x{:02x})",
                        bytes[e.valid_up_to()]
                    ),
                    Mark {
                        line: line as u32,
                        col: 1,
                    },
                ));
                return None;
            }
        };
        let docs = match yaml::parse_documents(text) {
            Ok(d) => d,
            Err(e) => {
                self.diags
                    .push(error(format!("invalid YAML: {}", e.message), e.mark));
                return None;
            }
        };
        let docs: Vec<&Node<'_>> = docs.iter().filter(|d| !d.is_null()).collect();
        let doc = match docs.as_slice() {
            [] => {
                self.diags.push(error(
                    format!("the file is empty: expected a Tekton {kind}"),
                    Mark { line: 1, col: 1 },
                ));
                return None;
            }
            [doc] => *doc,
            [_, second, ..] => {
                self.diags.push(error(
                    format!(
                        "the file holds {} YAML documents: expected one Tekton {kind}",
                        docs.len()
                    ),
                    second.mark,
                ));
                return None;
            }
        };
        if !matches!(doc.value, YamlValue::Map(_)) {
            self.diags.push(error(
                format!("expected a Tekton {kind} (a mapping), found {}", doc.kind()),
                doc.mark,
            ));
            return None;
        }
        let field = |name: &str| doc.go_field(name).map(|n| n.into_owned());
        let api_version = field("apiVersion");
        let version = match api_version.as_ref().map(|n| (n.as_str(), n.mark)) {
            None => {
                self.diags.push(
                    error(
                        format!("apiVersion is missing: expected a Tekton {kind}"),
                        doc.mark,
                    )
                    .hint("write apiVersion: tekton.dev/v1"),
                );
                return None;
            }
            Some((text, mark)) => match API_VERSIONS.iter().find(|(v, _)| Some(*v) == text) {
                Some((_, short)) => *short,
                None => {
                    self.diags.push(error(
                        format!(
                            "apiVersion must be tekton.dev/v1 or tekton.dev/v1beta1, found {}",
                            text.map_or_else(|| "a non-string".to_string(), |t| format!("{t:?}"))
                        ),
                        mark,
                    ));
                    return None;
                }
            },
        };
        let found_kind = match field("kind") {
            Some(k) if k.as_str().is_some_and(|k| kinds.contains(&k)) => {
                k.as_str().unwrap_or_default().to_string()
            }
            found => {
                let (mark, what) = match &found {
                    Some(k) => (
                        k.mark,
                        k.as_str()
                            .map_or_else(|| "a non-string".into(), |s| format!("{s:?}")),
                    ),
                    None => (doc.mark, "none".into()),
                };
                self.diags
                    .push(error(format!("kind must be {kind}, found {what}"), mark));
                return None;
            }
        };
        let kind = found_kind.as_str();
        let spec = match field("spec") {
            Some(s) if matches!(s.value, YamlValue::Map(_)) => s,
            Some(s) if !s.is_null() => {
                self.diags.push(error(
                    format!("spec must be a mapping, found {}", s.kind()),
                    s.mark,
                ));
                return None;
            }
            _ => {
                self.diags
                    .push(error(format!("the {kind} has no spec"), doc.mark));
                return None;
            }
        };
        let mut refused = Vec::new();
        match kind {
            "PipelineRun" => pipeline_run_refusals(&spec, &mut refused),
            "Pipeline" => pipeline_refusals(&spec, "spec", &mut refused),
            "TaskRun" => {
                task_refusals(&spec, "spec", &mut refused);
                if let Some(ts) = spec.go_field("taskSpec") {
                    task_refusals(&ts, "spec.taskSpec", &mut refused);
                }
            }
            _ => task_refusals(&spec, "spec", &mut refused),
        }
        if !refused.is_empty() {
            for (mark, msg) in refused {
                self.diags.push(error(msg, mark));
            }
            return None;
        }
        let spec: Value = match from_node(&spec, &std::cell::RefCell::new(Vec::new())) {
            Ok(v) => v,
            Err(e) => {
                self.diags
                    .push(error(e.message, e.mark.unwrap_or(spec.mark)));
                return None;
            }
        };
        let name = field("metadata")
            .and_then(|m| m.go_field("name").map(|n| n.into_owned()))
            .and_then(|n| n.as_str().map(str::to_string))
            .filter(|n| !n.is_empty());
        let annotations = field("metadata")
            .and_then(|m| m.go_field("annotations").map(|a| a.into_owned()))
            .map(|a| {
                a.entries()
                    .iter()
                    .filter_map(|(k, v)| {
                        let value = from_node::<Value>(v, &std::cell::RefCell::new(Vec::new()));
                        Some((k.as_str()?.to_string(), value.ok()?, k.mark))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Read {
            file: file.clone(),
            version,
            kind: kind.to_string(),
            name,
            annotations,
            spec,
        })
    }

    /// Lighthouse's `loadPipelineRunRefs`: embeds the Pipeline of a
    /// matching `pipelineRef` (when there is no `pipelineSpec`) and the Task
    /// of every pipeline task whose `taskRef` matches (and that has no
    /// `taskSpec`), read from `dir`. Gives `v1beta1` when a file read is, or
    /// nothing when one cannot be read.
    fn load_file_refs(
        &mut self,
        spec: &mut Value,
        re: &regex::Regex,
        dir: &Path,
        job: &str,
    ) -> Option<&'static str> {
        let mut version = "v1";
        let obj = spec.as_object_mut()?;
        let pipeline_ref = obj
            .get("pipelineRef")
            .and_then(|r| r.get("name"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty() && re.is_match(n))
            .map(str::to_string);
        if let (None, Some(name)) = (obj.get("pipelineSpec"), pipeline_ref) {
            let read = self.read(&ref_path(dir, &name), job, &["Pipeline"])?;
            if read.version == "v1beta1" {
                version = "v1beta1";
            }
            obj.remove("pipelineRef");
            obj.insert("pipelineSpec".into(), read.spec);
        }
        let tasks = obj
            .get_mut("pipelineSpec")
            .and_then(|p| p.get_mut("tasks"))
            .and_then(Value::as_array_mut);
        for task in tasks.into_iter().flatten() {
            let Some(t) = task.as_object_mut() else {
                continue;
            };
            if t.contains_key("taskSpec") {
                continue;
            }
            let Some(name) = t
                .get("taskRef")
                .and_then(|r| r.get("name"))
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty() && re.is_match(n))
                .map(str::to_string)
            else {
                continue;
            };
            let read = self.read(&ref_path(dir, &name), job, &["Task"])?;
            if read.version == "v1beta1" {
                version = "v1beta1";
            }
            t.remove("taskRef");
            t.insert("taskSpec".into(), read.spec);
        }
        Some(version)
    }
}

/// The spec of the PipelineRun a source of `kind` (`metadata.name` `name`,
/// API version `version`) stands for, as Lighthouse's
/// `LoadTektonResourceAsPipelineRun` wraps it:
/// - a PipelineRun: its spec;
/// - a Pipeline: `{pipelineSpec: SPEC}`;
/// - a Task: a pipeline of one task named `name` (`default` without one)
///   whose `taskSpec` is the Task's spec; the pipeline declares the Task's
///   params and passes each on (`$(params.NAME)`; `[*]` for arrays and
///   objects), and declares its workspaces and binds them to the task.
///   Lighthouse binds the run's workspaces to nothing, which Tekton refuses
///   ("expected exactly one" volume source); bosun binds each to an
///   `emptyDir` (the task's files live as long as the run);
/// - a TaskRun: the same of its `taskSpec` (or `taskRef`), with the run's
///   workspace bindings, service account, pod template and timeout. Given
///   `params` are the task's values; without them the task's param specs
///   are declared and passed on, as for a Task. Lighthouse declares the
///   given params on the pipeline without a default (a run that never sets
///   them) and no pipeline workspaces (a task binding to none): Tekton
///   refuses both, so bosun does neither.
fn wrap(kind: &str, name: Option<&str>, version: &str, spec: Value) -> Value {
    let task_name = || Value::String(name.unwrap_or("default").to_string());
    // Pass the param specs `specs` on as `$(params.NAME)`.
    let passed = |specs: &[Value]| -> Vec<Value> {
        specs
            .iter()
            .filter_map(|p| {
                let name = p.get("name")?.as_str()?;
                let value = match p.get("type").and_then(Value::as_str) {
                    Some("array") => serde_json::json!([format!("$(params.{name}[*])")]),
                    Some("object") => Value::String(format!("$(params.{name}[*])")),
                    _ => Value::String(format!("$(params.{name})")),
                };
                Some(serde_json::json!({"name": name, "value": value}))
            })
            .collect()
    };
    let names = |list: Option<&Value>| -> Vec<String> {
        list.and_then(Value::as_array)
            .map(|l| {
                l.iter()
                    .filter_map(|w| Some(w.get("name")?.as_str()?.to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let array = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    match kind {
        "Pipeline" => serde_json::json!({ "pipelineSpec": spec }),
        "Task" => {
            let specs = array(spec.get("params"));
            let workspaces = names(spec.get("workspaces"));
            let bindings = workspaces
                .iter()
                .map(|w| serde_json::json!({"name": w, "emptyDir": {}}))
                .collect();
            let mut task = Map::new();
            task.insert("name".into(), task_name());
            task.insert("params".into(), Value::Array(passed(&specs)));
            task.insert("taskSpec".into(), spec);
            Value::Object(one_task_run(task, specs, &workspaces, bindings))
        }
        "TaskRun" => {
            let mut task = Map::new();
            task.insert("name".into(), task_name());
            let given = array(spec.get("params"));
            let specs = if given.is_empty() {
                let specs = array(spec.get("taskSpec").and_then(|t| t.get("params")));
                task.insert("params".into(), Value::Array(passed(&specs)));
                specs
            } else {
                task.insert("params".into(), Value::Array(given));
                Vec::new()
            };
            for key in ["taskRef", "taskSpec"] {
                if let Some(v) = spec.get(key) {
                    task.insert(key.into(), v.clone());
                }
            }
            let workspaces = names(spec.get("workspaces"));
            let bindings = array(spec.get("workspaces"));
            let mut run = one_task_run(task, specs, &workspaces, bindings);
            let account = spec.get("serviceAccountName").cloned();
            let pod = spec.get("podTemplate").cloned();
            let timeout = spec.get("timeout").cloned();
            if version == "v1beta1" {
                for (key, v) in [
                    ("serviceAccountName", account),
                    ("podTemplate", pod),
                    ("timeout", timeout),
                ] {
                    if let Some(v) = v {
                        run.insert(key.into(), v);
                    }
                }
            } else {
                let mut template = Map::new();
                for (key, v) in [("serviceAccountName", account), ("podTemplate", pod)] {
                    if let Some(v) = v {
                        template.insert(key.into(), v);
                    }
                }
                if !template.is_empty() {
                    run.insert("taskRunTemplate".into(), Value::Object(template));
                }
                if let Some(t) = timeout {
                    run.insert("timeouts".into(), serde_json::json!({ "pipeline": t }));
                }
            }
            Value::Object(run)
        }
        _ => spec,
    }
}

const RESOURCES_GONE: &str = "PipelineResources were removed from Tekton and tekton.dev/v1 has none: \
     clone with a task (the git-clone catalog task, which Lighthouse fills with REPO_URL and the revision) \
     and share files through workspaces";

/// A PipelineRun spec whose pipeline is the one task `task` (its name,
/// params and `taskSpec` or `taskRef` set), declaring the param specs
/// `params` and the workspaces `workspaces`, each bound to the task under
/// its name, with the run's workspace `bindings`. Empty lists are left out.
fn one_task_run(
    mut task: Map<String, Value>,
    params: Vec<Value>,
    workspaces: &[String],
    bindings: Vec<Value>,
) -> Map<String, Value> {
    let mut pipeline = Map::new();
    let put = |obj: &mut Map<String, Value>, key: &str, list: Vec<Value>| {
        if !list.is_empty() {
            obj.insert(key.into(), Value::Array(list));
        }
    };
    if task
        .get("params")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        task.remove("params");
    }
    let to_task = workspaces
        .iter()
        .map(|w| serde_json::json!({"name": w, "workspace": w}))
        .collect();
    put(&mut task, "workspaces", to_task);
    put(&mut pipeline, "params", params);
    let declared = workspaces
        .iter()
        .map(|w| serde_json::json!({ "name": w }))
        .collect();
    put(&mut pipeline, "workspaces", declared);
    pipeline.insert("tasks".into(), Value::Array(vec![Value::Object(task)]));
    let mut run = Map::new();
    run.insert("pipelineSpec".into(), Value::Object(pipeline));
    put(&mut run, "workspaces", bindings);
    run
}

/// What `tekton.dev/v1` cannot express in a PipelineRun spec (bosun's
/// conversion refuses it when a run starts; reported here with its place).
fn pipeline_run_refusals(spec: &Node<'_>, out: &mut Vec<(Mark, String)>) {
    if let Some(k) = key(spec, "resources") {
        out.push((k, format!("spec.resources: {RESOURCES_GONE}")));
    }
    if let Some(k) = key(spec, "serviceAccountNames") {
        out.push((
            k,
            "spec.serviceAccountNames was removed from Tekton: set taskRunSpecs[].serviceAccountName \
             (v1beta1: taskServiceAccountName) per task"
                .into(),
        ));
    }
    if let Some(p) = spec.go_field("pipelineSpec") {
        pipeline_refusals(&p, "spec.pipelineSpec", out);
    }
}

fn pipeline_refusals(spec: &Node<'_>, path: &str, out: &mut Vec<(Mark, String)>) {
    if let Some(k) = key(spec, "resources") {
        out.push((k, format!("{path}.resources: {RESOURCES_GONE}")));
    }
    for list in ["tasks", "finally"] {
        let Some(tasks) = spec.go_field(list) else {
            continue;
        };
        for (i, t) in tasks.items().iter().enumerate() {
            let at = format!("{path}.{list}[{i}]");
            if let Some(k) = key(t, "resources") {
                out.push((k, format!("{at}.resources: {RESOURCES_GONE}")));
            }
            if let Some(k) = key(t, "conditions") {
                out.push((
                    k,
                    format!("{at}.conditions: Conditions were removed from Tekton: use when expressions"),
                ));
            }
            if let Some(ts) = t.go_field("taskSpec") {
                task_refusals(&ts, &format!("{at}.taskSpec"), out);
            }
        }
    }
}

fn task_refusals(spec: &Node<'_>, path: &str, out: &mut Vec<(Mark, String)>) {
    if let Some(k) = key(spec, "resources") {
        out.push((k, format!("{path}.resources: {RESOURCES_GONE}")));
    }
}

/// Where the key `name` of the mapping `node` is.
fn key(node: &Node<'_>, name: &str) -> Option<Mark> {
    node.entries()
        .iter()
        .find(|(k, _)| k.as_str() == Some(name))
        .map(|(k, _)| k.mark)
}

/// `DIR/NAME`, with `.yaml` added unless it ends so.
fn ref_path(dir: &Path, name: &str) -> PathBuf {
    let mut p = join(dir, name).into_os_string();
    if !name.ends_with(".yaml") {
        p.push(".yaml");
    }
    PathBuf::from(p)
}

/// Go's `filepath.Join(dir, name)`: `name` is relative to `dir` even when it
/// starts with `/`, and the result is cleaned (`.` and `..` resolved).
fn join(dir: &Path, name: &str) -> PathBuf {
    clean(&dir.join(name.trim_start_matches('/')))
}

/// The path with `.` and `..` resolved lexically.
fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            // As Go's `filepath.Clean`: `..` removes a name before it, is
            // dropped right after the root, and is kept at the start of a
            // relative path (`../../x` stays so).
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            c => out.push(c.as_os_str()),
        }
    }
    out
}

/// Lighthouse's parameters: (name, description, has an empty default).
const DEFAULT_PARAMS: &[(&str, &str, bool)] = &[
    ("BUILD_ID", "the unique build number", false),
    (
        "JOB_NAME",
        "the name of the job which is the trigger context name",
        false,
    ),
    ("JOB_SPEC", "the specification of the job", false),
    (
        "JOB_TYPE",
        "'the kind of job: postsubmit or presubmit'",
        false,
    ),
    (
        "PULL_BASE_REF",
        "the base git reference of the pull request",
        false,
    ),
    (
        "PULL_BASE_SHA",
        "the git sha of the base of the pull request",
        false,
    ),
    ("PULL_NUMBER", "git pull request number", true),
    (
        "PULL_PULL_REF",
        "git pull request ref in the form 'refs/pull/$PULL_NUMBER/head'",
        true,
    ),
    (
        "PULL_PULL_SHA",
        "git revision to checkout (branch, tag, sha, ref…)",
        true,
    ),
    (
        "PULL_REFS",
        "git pull reference strings of base and latest in the form \
         'master:$PULL_BASE_SHA,$PULL_NUMBER:$PULL_PULL_SHA:refs/pull/$PULL_NUMBER/head'",
        false,
    ),
    ("REPO_NAME", "git repository name", false),
    (
        "REPO_OWNER",
        "git repository owner (user or organisation)",
        false,
    ),
    ("REPO_URL", "git url to clone", false),
];

/// Lighthouse's `DefaultPipelineParameters` on an embedded pipeline: its
/// parameters declared, passed to every task (not `finally`), declared by
/// every embedded task and set in its step template's environment. What a
/// spec already has stays; an empty description, type, value or variable
/// is filled.
pub(crate) fn default_parameters(spec: &mut Value) {
    let Some(ps) = spec.get_mut("pipelineSpec").and_then(Value::as_object_mut) else {
        return;
    };
    add_param_specs(ps);
    let Some(tasks) = ps.get_mut("tasks").and_then(Value::as_array_mut) else {
        return;
    };
    for task in tasks {
        let Some(t) = task.as_object_mut() else {
            continue;
        };
        let params = list(t, "params");
        for (name, ..) in DEFAULT_PARAMS {
            let value = format!("$(params.{name})");
            match params.iter_mut().find(|p| p["name"] == *name) {
                Some(p) => {
                    if p.get("value") == Some(&Value::String(String::new())) {
                        p["value"] = Value::String(value);
                    }
                }
                None => params.push(serde_json::json!({"name": name, "value": value})),
            }
        }
        let Some(ts) = t.get_mut("taskSpec").and_then(Value::as_object_mut) else {
            continue;
        };
        add_param_specs(ts);
        let template = ts
            .entry("stepTemplate")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(template) = template.as_object_mut() else {
            continue;
        };
        let env = list(template, "env");
        for (name, ..) in DEFAULT_PARAMS {
            let value = Value::String(format!("$(params.{name})"));
            match env.iter_mut().find(|e| e["name"] == *name) {
                Some(e) => {
                    let empty = e.get("value").is_none_or(|v| v == "");
                    // A variable from `valueFrom` keeps it (a value beside it
                    // would make the step invalid).
                    if empty && e.get("valueFrom").is_none() {
                        e["value"] = value;
                    }
                }
                None => env.push(serde_json::json!({"name": name, "value": value})),
            }
        }
    }
}

/// `obj[key]` as a list, made one if it is missing or not a list.
fn list<'m>(obj: &'m mut Map<String, Value>, key: &str) -> &'m mut Vec<Value> {
    let v = obj.entry(key).or_insert_with(|| Value::Array(Vec::new()));
    if !v.is_array() {
        *v = Value::Array(Vec::new());
    }
    v.as_array_mut().expect("an array")
}

/// Lighthouse's parameter specs added to `obj.params`.
fn add_param_specs(obj: &mut Map<String, Value>) {
    let params = list(obj, "params");
    for (name, description, empty_default) in DEFAULT_PARAMS {
        match params.iter_mut().find(|p| p["name"] == *name) {
            Some(p) => {
                if p.get("description").is_none_or(|d| d == "") {
                    p["description"] = Value::String((*description).into());
                }
                if p.get("type").is_none_or(|t| t == "") {
                    p["type"] = Value::String("string".into());
                }
            }
            None => {
                let mut spec = serde_json::json!({
                    "name": name,
                    "description": description,
                    "type": "string",
                });
                if *empty_default {
                    spec["default"] = Value::String(String::new());
                }
                params.push(spec);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cleans_as_go_does() {
        let c = |p: &str| clean(std::path::Path::new(p)).display().to_string();
        assert_eq!(c("../../x"), "../../x");
        assert_eq!(c("a/../../x"), "../x");
        assert_eq!(c("a/b/../c/./d"), "a/c/d");
        assert_eq!(c("/../x"), "/x");
        assert_eq!(c("/a/b/../../.."), "/");
    }

    #[test]
    fn paths_join_as_go() {
        let d = Path::new("/r/.lighthouse/ci");
        assert_eq!(join(d, "pr.yaml"), Path::new("/r/.lighthouse/ci/pr.yaml"));
        assert_eq!(join(d, "/pr.yaml"), Path::new("/r/.lighthouse/ci/pr.yaml"));
        assert_eq!(
            join(d, "../shared/./pr.yaml"),
            Path::new("/r/.lighthouse/shared/pr.yaml")
        );
        assert_eq!(join(d, "../../../x.yaml"), Path::new("/x.yaml"));
        assert_eq!(
            ref_path(d, "git-clone"),
            Path::new("/r/.lighthouse/ci/git-clone.yaml")
        );
        assert_eq!(ref_path(d, "t.yaml"), Path::new("/r/.lighthouse/ci/t.yaml"));
    }

    #[test]
    fn default_parameters_as_lighthouse() {
        let mut spec = json!({"pipelineSpec": {
            "params": [{"name": "REPO_URL"}, {"name": "mine", "default": "x"}],
            "tasks": [
                {"name": "a", "params": [{"name": "PULL_NUMBER", "value": ""}, {"name": "JOB_NAME", "value": "fixed"}], "taskSpec": {
                    "params": [{"name": "BUILD_ID", "description": "own"}],
                    "stepTemplate": {"image": "alpine", "env": [{"name": "REPO_URL", "value": ""}, {"name": "JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]},
                    "steps": [],
                }},
                {"name": "b", "taskRef": {"name": "t"}},
            ],
            "finally": [{"name": "f", "taskRef": {"name": "t"}}],
        }});
        default_parameters(&mut spec);
        let ps = &spec["pipelineSpec"];
        let names = |v: &Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|p| p["name"].as_str().unwrap().to_string())
                .collect()
        };
        let all: Vec<&str> = DEFAULT_PARAMS.iter().map(|(n, ..)| *n).collect();
        let mut want = vec!["REPO_URL".to_string(), "mine".to_string()];
        want.extend(
            all.iter()
                .filter(|n| **n != "REPO_URL")
                .map(|n| n.to_string()),
        );
        assert_eq!(names(&ps["params"]), want);
        assert_eq!(
            ps["params"][0],
            json!({"name": "REPO_URL", "description": "git url to clone", "type": "string"})
        );
        assert_eq!(
            ps["params"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == "PULL_NUMBER")
                .unwrap(),
            &json!({"name": "PULL_NUMBER", "description": "git pull request number", "type": "string", "default": ""})
        );
        let a = &ps["tasks"][0];
        let value = |list: &Value, n: &str| {
            list.as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == n)
                .unwrap()["value"]
                .clone()
        };
        assert_eq!(value(&a["params"], "PULL_NUMBER"), "$(params.PULL_NUMBER)");
        assert_eq!(value(&a["params"], "JOB_NAME"), "fixed");
        assert_eq!(value(&a["params"], "REPO_OWNER"), "$(params.REPO_OWNER)");
        assert_eq!(a["taskSpec"]["params"][0]["description"], "own");
        assert_eq!(names(&a["taskSpec"]["params"]).len(), 13);
        let env = &a["taskSpec"]["stepTemplate"]["env"];
        assert_eq!(value(env, "REPO_URL"), "$(params.REPO_URL)");
        assert_eq!(
            env.as_array().unwrap()[1],
            json!({"name": "JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": "x"}}})
        );
        assert_eq!(names(env).len(), 13);
        // A task by reference gets the parameters passed, no spec; finally
        // tasks are left alone, as Lighthouse leaves them.
        assert_eq!(names(&ps["tasks"][1]["params"]).len(), 13);
        assert!(ps["tasks"][1].get("taskSpec").is_none());
        assert!(ps["finally"][0].get("params").is_none());

        // Applying twice changes nothing.
        let once = spec.clone();
        default_parameters(&mut spec);
        assert_eq!(spec, once);
        // A spec by reference only is left alone.
        let mut r = json!({"pipelineRef": {"name": "p"}});
        default_parameters(&mut r);
        assert_eq!(r, json!({"pipelineRef": {"name": "p"}}));
    }
}
