//! The plan: a PipelineRun's spec checked as Tekton checks it and as a
//! local cluster can run it, with its tasks' dependencies (see [`super`]).
//!
//! Its items are the local runner's working parts (`bosun_injob::pipeline`
//! runs the plan), public for it and documented where they are not plain.

#![allow(missing_docs)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::variables::*;
use super::*;
use crate::model::{
    EnvVar, ParamType, ParamValue, PipelineSpec, PipelineTask, Step, StepTemplate, TaskSpec,
};

// ---------------------------------------------------------------------------
// The plan: the spec checked, with its tasks' dependencies

/// A task of the plan.
#[derive(Debug)]
pub struct Node {
    pub pt: PipelineTask,
    pub spec: TaskSpec,
    pub finally: bool,
    /// The tasks named in `runAfter`.
    pub after: BTreeSet<usize>,
    /// The results used: (task, result).
    pub result_refs: BTreeSet<(usize, String)>,
    /// Each attempt's timeout.
    pub timeout: Option<Duration>,
    /// The steps, merged with the step template, and their timeouts.
    pub steps: Vec<(Step, Option<Duration>)>,
}

impl Node {
    /// Every task it waits for.
    pub fn deps(&self) -> BTreeSet<usize> {
        let mut d = self.after.clone();
        d.extend(self.result_refs.iter().map(|(t, _)| *t));
        d
    }
}

/// The run's phases' timeouts.
#[derive(Debug, Default)]
pub struct Timeouts {
    pub pipeline: Option<Duration>,
    pub tasks: Option<Duration>,
    pub finally: Option<Duration>,
}

#[derive(Debug)]
pub struct Plan {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub dir: PathBuf,
    pub env: Vec<(String, String)>,
    pub max_parallel: usize,
    pub grace: Duration,
    pub pipeline: PipelineSpec,
    /// The pipeline's params (declared, then the run's undeclared ones).
    pub params: BTreeMap<String, ParamValue>,
    /// The pipeline's workspaces: their directories (`None`: an optional
    /// one left unbound).
    pub workspaces: BTreeMap<String, Option<PathBuf>>,
    pub nodes: Vec<Node>,
    pub index: HashMap<String, usize>,
    pub timeouts: Timeouts,
}

#[derive(Default)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    pub fn invalid(&mut self, m: impl Into<String>) {
        self.0.push(Problem {
            kind: ProblemKind::Invalid,
            message: m.into(),
        });
    }
    pub fn refused(&mut self, m: impl Into<String>) {
        self.0.push(Problem {
            kind: ProblemKind::Refused,
            message: m.into(),
        });
    }
}

/// A `valueFrom` or `envFrom` entry as a person would name it:
/// `secretKeyRef my-secret/token`.
pub fn describe_source(v: &Value) -> String {
    let Some(map) = v.as_object() else {
        return v.to_string();
    };
    for (kind, inner) in map {
        if kind == "prefix" {
            continue;
        }
        let name = inner.get("name").and_then(Value::as_str);
        let key = inner
            .get("key")
            .or_else(|| inner.get("fieldPath"))
            .or_else(|| inner.get("resource"))
            .and_then(Value::as_str);
        return match (name, key) {
            (Some(n), Some(k)) => format!("{kind} {n}/{k}"),
            (Some(n), None) => format!("{kind} {n}"),
            (None, Some(k)) => format!("{kind} {k}"),
            (None, None) => kind.clone(),
        };
    }
    v.to_string()
}

/// A step merged with its task's `stepTemplate`, as Tekton merges them.
pub fn merge_step(step: &Step, tpl: Option<&StepTemplate>) -> Step {
    let mut s = step.clone();
    let Some(t) = tpl else {
        return s;
    };
    if s.image.is_empty() {
        s.image = t.image.clone();
    }
    if s.script.is_empty() && s.command.is_empty() {
        s.command = t.command.clone();
        if s.args.is_empty() {
            s.args = t.args.clone();
        }
    } else if !s.script.is_empty() && s.args.is_empty() {
        s.args = t.args.clone();
    }
    if s.working_dir.is_empty() {
        s.working_dir = t.working_dir.clone();
    }
    if s.env_from.is_empty() {
        s.env_from = t.env_from.clone();
    }
    let mut env: Vec<EnvVar> = t
        .env
        .iter()
        .map(|e| {
            step.env
                .iter()
                .find(|s| s.name == e.name)
                .unwrap_or(e)
                .clone()
        })
        .collect();
    env.extend(
        step.env
            .iter()
            .filter(|e| !t.env.iter().any(|t| t.name == e.name))
            .cloned(),
    );
    s.env = env;
    s
}

/// Whether `s` is a DNS-1123 label, as Tekton requires of task, step and
/// workspace names (they also name directories here).
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Whether `s` is a result name as Tekton accepts it (it names a file here).
pub fn is_result_name(s: &str) -> bool {
    let ok = |b: u8| b.is_ascii_alphanumeric();
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && ok(bytes[0])
        && ok(bytes[bytes.len() - 1])
        && bytes
            .iter()
            .all(|&b| ok(b) || b == b'-' || b == b'_' || b == b'.')
}

/// Whether a `subPath` stays within its volume.
pub fn is_sub_path(s: &str) -> bool {
    let p = Path::new(s);
    p.is_relative()
        && p.components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
}

pub fn step_name(step: &Step, i: usize) -> String {
    if step.name.is_empty() {
        format!("unnamed-{i}")
    } else {
        step.name.clone()
    }
}

impl Plan {
    pub fn new(opts: &PipelineOptions) -> Result<Plan, Vec<Problem>> {
        let mut p = Problems::default();
        let spec = &opts.spec;
        if let Some(r) = &spec.pipeline_ref {
            p.refused(format!(
                "pipelineRef {r}: a local cluster runs only a pipeline embedded in the PipelineRun \
                 (pipelineSpec), and cannot resolve references"
            ));
        }
        let Some(pipeline) = &spec.pipeline_spec else {
            if spec.pipeline_ref.is_none() {
                p.invalid("the PipelineRun has neither pipelineSpec nor pipelineRef");
            }
            return Err(p.0);
        };
        for u in spec.uses_references() {
            p.refused(u.to_string());
        }

        // Timeouts.
        let mut timeouts = Timeouts {
            pipeline: Some(DEFAULT_PIPELINE_TIMEOUT),
            ..Default::default()
        };
        if let Some(t) = &spec.timeouts {
            let mut read = |field: &str, v: &Option<String>| -> Option<Duration> {
                let v = v.as_deref()?;
                parse_timeout(v)
                    .map_err(|e| p.invalid(format!("timeouts.{field}: {e}")))
                    .ok()
                    .flatten()
            };
            if t.pipeline.is_some() {
                timeouts.pipeline = read("pipeline", &t.pipeline);
            }
            timeouts.tasks = read("tasks", &t.tasks);
            timeouts.finally = read("finally", &t.finally);
        }

        // Pipeline params: declared ones (the run's value, else the
        // default), then the run's others.
        let mut params = BTreeMap::new();
        for ps in &pipeline.params {
            let given = spec.params.iter().find(|x| x.name == ps.name);
            match given.map(|g| &g.value).or(ps.default.as_ref()) {
                Some(v) if v.param_type() != ps.param_type() => p.invalid(format!(
                    "parameter {} is declared {} but its value is {}",
                    ps.name,
                    ps.param_type(),
                    v.param_type()
                )),
                Some(v) => {
                    params.insert(ps.name.clone(), v.clone());
                }
                None => p.invalid(format!(
                    "parameter {} has no value: the PipelineRun gives none and it has no default",
                    ps.name
                )),
            }
        }
        for given in &spec.params {
            params
                .entry(given.name.clone())
                .or_insert_with(|| given.value.clone());
        }

        // Workspaces: each is a directory; its binding's subPath applies.
        let mut workspaces = BTreeMap::new();
        for ws in &pipeline.workspaces {
            if !is_dns_label(&ws.name) {
                p.invalid(format!(
                    "workspace name {:?} is not a DNS-1123 label (lowercase letters, digits and -)",
                    ws.name
                ));
                continue;
            }
            let binding = spec.workspaces.iter().find(|b| b.name == ws.name);
            match binding {
                None if ws.optional => {
                    workspaces.insert(ws.name.clone(), None);
                }
                None => p.invalid(format!(
                    "workspace {} is not bound: the PipelineRun's workspaces do not name it",
                    ws.name
                )),
                Some(b) => {
                    let unreadable = [
                        ("configMap", &b.config_map),
                        ("secret", &b.secret),
                        ("projected", &b.projected),
                        ("csi", &b.csi),
                    ];
                    if let Some((kind, v)) = unreadable.iter().find(|(_, v)| v.is_some()) {
                        let name = v
                            .as_ref()
                            .and_then(|v| v.get("name").or_else(|| v.get("secretName")))
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        p.refused(format!(
                            "workspace {} is bound to {kind} {name}, which a local cluster cannot read",
                            ws.name
                        ));
                    }
                    if !is_sub_path(&b.sub_path) {
                        p.invalid(format!(
                            "workspace {}: subPath {} leaves the volume",
                            ws.name, b.sub_path
                        ));
                    }
                    let mut dir = opts.dir.join("workspaces").join(&ws.name);
                    if !b.sub_path.is_empty() {
                        dir = dir.join(&b.sub_path);
                    }
                    workspaces.insert(ws.name.clone(), Some(dir));
                }
            }
        }

        // Tasks.
        let mut index = HashMap::new();
        let all: Vec<(&PipelineTask, bool)> = pipeline
            .tasks
            .iter()
            .map(|t| (t, false))
            .chain(pipeline.finally.iter().map(|t| (t, true)))
            .collect();
        if pipeline.tasks.is_empty() {
            p.invalid("the pipeline has no tasks");
        }
        for (i, (pt, _)) in all.iter().enumerate() {
            if pt.name.is_empty() {
                p.invalid(format!("task {} has no name", i + 1));
            } else if !is_dns_label(&pt.name) {
                p.invalid(format!(
                    "task name {:?} is not a DNS-1123 label (lowercase letters, digits and -)",
                    pt.name
                ));
            } else if index.insert(pt.name.clone(), i).is_some() {
                p.invalid(format!("task name {} is used twice", pt.name));
            }
        }
        let mut nodes = Vec::new();
        for (pt, finally) in &all {
            nodes.push(Self::node(pt, *finally, &all, &index, pipeline, &mut p));
        }
        if !p.0.is_empty() {
            return Err(p.0);
        }
        if let Some(cycle) = find_cycle(&nodes) {
            p.invalid(format!(
                "the tasks depend on each other in a cycle: {cycle}"
            ));
            return Err(p.0);
        }
        let plan = Plan {
            name: opts.name.clone(),
            namespace: opts.namespace.clone(),
            uid: opts.uid.clone(),
            dir: opts.dir.clone(),
            env: opts.env.clone(),
            max_parallel: if opts.max_parallel == 0 {
                std::thread::available_parallelism().map_or(2, |n| n.get())
            } else {
                opts.max_parallel
            },
            grace: opts
                .grace_period
                .filter(|g| !g.is_zero())
                .unwrap_or(DEFAULT_GRACE_PERIOD),
            pipeline: pipeline.clone(),
            params,
            workspaces,
            nodes,
            index,
            timeouts,
        };
        // Every variable must name something, with the right type: each task
        // is prepared once with placeholder results.
        let facts = Facts::dry(plan.nodes.len());
        for (i, node) in plan.nodes.iter().enumerate() {
            let prepared = plan
                .pipeline_level(i, &facts)
                .and_then(|pl| plan.prepare(i, &facts, &pl.params, 0));
            if let Err(e) = prepared {
                p.invalid(format!("task {}: {e}", node.pt.name));
            }
        }
        for r in &plan.pipeline.results {
            let scope = Scope::pipeline(&plan, &facts, true);
            if let Err(e) = subst_value(&scope, &r.value) {
                p.invalid(format!("pipeline result {}: {e}", r.name));
            }
        }
        if p.0.is_empty() {
            Ok(plan)
        } else {
            Err(p.0)
        }
    }

    /// Checks one task and finds what it depends on.
    pub fn node(
        pt: &PipelineTask,
        finally: bool,
        all: &[(&PipelineTask, bool)],
        index: &HashMap<String, usize>,
        pipeline: &PipelineSpec,
        p: &mut Problems,
    ) -> Node {
        let name = &pt.name;
        let mut node = Node {
            pt: pt.clone(),
            spec: TaskSpec::default(),
            finally,
            after: BTreeSet::new(),
            result_refs: BTreeSet::new(),
            timeout: None,
            steps: Vec::new(),
        };
        if let Some(r) = &pt.task_ref {
            p.refused(format!(
                "task {name}: taskRef {r} cannot be resolved on a local cluster \
                 (only tasks embedded with taskSpec run locally)"
            ));
        }
        if let Some(r) = &pt.pipeline_ref {
            p.refused(format!(
                "task {name}: pipelineRef {r}: pipelines in pipelines are not run locally"
            ));
        }
        if pt.pipeline_spec.is_some() {
            p.refused(format!(
                "task {name}: an embedded pipelineSpec (pipelines in pipelines) is not run locally"
            ));
        }
        if pt.matrix.is_some() {
            p.refused(format!("task {name}: matrix is not run locally"));
        }
        if !matches!(pt.on_error.as_str(), "" | "continue" | "stopAndFail") {
            p.invalid(format!(
                "task {name}: onError {} is not continue or stopAndFail",
                pt.on_error
            ));
        }
        if let Some(t) = &pt.timeout {
            match parse_timeout(t) {
                Ok(t) => node.timeout = t,
                Err(e) => p.invalid(format!("task {name}: timeout: {e}")),
            }
        }
        for w in &pt.when {
            if !w.cel.is_empty() {
                p.refused(format!(
                    "task {name}: the CEL when expression {:?} is not evaluated locally",
                    w.cel
                ));
            } else if !matches!(w.operator.as_str(), "in" | "notin") {
                p.invalid(format!(
                    "task {name}: when operator {:?} is not in or notin",
                    w.operator
                ));
            } else if w.values.is_empty() {
                p.invalid(format!("task {name}: a when expression has no values"));
            }
        }
        if finally && !pt.run_after.is_empty() {
            p.invalid(format!("finally task {name} cannot use runAfter"));
        }
        for after in &pt.run_after {
            match index.get(after) {
                Some(&j) if !all[j].1 && after != name => {
                    node.after.insert(j);
                }
                _ => p.invalid(format!(
                    "task {name}: runAfter names {after}, which is not a task"
                )),
            }
        }
        for b in &pt.workspaces {
            let ws = if b.workspace.is_empty() {
                &b.name
            } else {
                &b.workspace
            };
            if !pipeline.workspaces.iter().any(|w| &w.name == ws) {
                p.invalid(format!(
                    "task {name}: workspace {} is bound to {ws}, which the pipeline does not declare",
                    b.name
                ));
            }
        }

        // Result references, anywhere in the task.
        let json = serde_json::to_value(pt).unwrap_or(Value::Null);
        let mut strings = Vec::new();
        json_strings(&json, &mut strings);
        for s in strings {
            for var in vars_in(s) {
                let (task, result, text) = match &var {
                    Var::TaskResult(t, r, _) => (t, Some(r), format!("$(tasks.{t}.results.{r})")),
                    Var::TaskStatus(t) => (t, None, format!("$(tasks.{t}.status)")),
                    Var::TaskReason(t) => (t, None, format!("$(tasks.{t}.reason)")),
                    _ => continue,
                };
                let Some(&j) = index.get(task) else {
                    p.invalid(format!(
                        "task {name}: {text} names task {task}, which does not exist"
                    ));
                    continue;
                };
                if all[j].1 {
                    p.invalid(format!(
                        "task {name}: {text} uses finally task {task}, whose results and status no task can use"
                    ));
                    continue;
                }
                if task == name {
                    p.invalid(format!("task {name} uses its own results"));
                    continue;
                }
                if let Some(r) = result {
                    let declared = all[j]
                        .0
                        .task_spec
                        .as_ref()
                        .is_none_or(|ts| ts.results.iter().any(|d| &d.name == r));
                    if !declared {
                        p.invalid(format!(
                            "task {name}: {text} uses result {r} of task {task}, which does not declare it"
                        ));
                    }
                    node.result_refs.insert((j, r.clone()));
                }
            }
        }

        let Some(spec) = &pt.task_spec else {
            if pt.task_ref.is_none() && pt.pipeline_ref.is_none() && pt.pipeline_spec.is_none() {
                p.invalid(format!("task {name} has neither taskSpec nor taskRef"));
            }
            return node;
        };
        if spec.extra.contains_key("apiVersion") || spec.extra.contains_key("kind") {
            p.refused(format!("task {name}: custom tasks are not run locally"));
        }
        if spec.steps.is_empty() {
            p.invalid(format!("task {name} has no steps"));
        }
        for r in &spec.results {
            if !is_result_name(&r.name) {
                p.invalid(format!(
                    "task {name}: result name {:?} is not valid",
                    r.name
                ));
            }
        }
        let tpl = spec.step_template.as_ref();
        if let Some(t) = tpl {
            for e in &t.env_from {
                p.refused(format!(
                    "task {name}: the stepTemplate's envFrom {} cannot be read on a local cluster",
                    describe_source(e)
                ));
            }
        }
        let mut seen = BTreeSet::new();
        for (i, raw) in spec.steps.iter().enumerate() {
            let step = merge_step(raw, tpl);
            let sname = step_name(raw, i);
            let at = format!("task {name}, step {sname}");
            if !raw.name.is_empty() && !seen.insert(raw.name.clone()) {
                p.invalid(format!("task {name}: step name {} is used twice", raw.name));
            }
            if !raw.name.is_empty() && !is_dns_label(&raw.name) {
                p.invalid(format!(
                    "task {name}: step name {:?} is not a DNS-1123 label (lowercase letters, digits and -)",
                    raw.name
                ));
            }
            if let Some(r) = &raw.ref_ {
                p.refused(format!(
                    "{at}: the StepAction ref {r} cannot be resolved on a local cluster"
                ));
                continue;
            }
            if raw.uses().is_some() || step.uses().is_some() {
                // Reported with the pipeline's uses: references.
                continue;
            }
            if !raw.script.is_empty() && !raw.command.is_empty() {
                p.invalid(format!("{at}: script cannot be used with command"));
            }
            if step.script.is_empty() && step.command.is_empty() {
                p.refused(format!(
                    "{at} has neither script nor command: a local cluster cannot run the entrypoint of its image {}",
                    if step.image.is_empty() { "(none)" } else { &step.image }
                ));
            }
            for e in &raw.env_from {
                p.refused(format!(
                    "{at}: envFrom {} cannot be read on a local cluster",
                    describe_source(e)
                ));
            }
            for e in &step.env {
                if let Some(from) = &e.value_from {
                    p.refused(format!(
                        "{at}: env {} takes its value from {}, which a local cluster cannot read",
                        e.name,
                        describe_source(from)
                    ));
                }
            }
            if !matches!(raw.on_error.as_str(), "" | "continue" | "stopAndFail") {
                p.invalid(format!(
                    "{at}: onError {} is not continue or stopAndFail",
                    raw.on_error
                ));
            }
            let timeout = match raw.timeout.as_deref().map(parse_timeout) {
                Some(Ok(t)) => t,
                Some(Err(e)) => {
                    p.invalid(format!("{at}: timeout: {e}"));
                    None
                }
                None => None,
            };
            node.steps.push((step, timeout));
        }
        node.spec = spec.clone();
        node
    }

    pub fn task_dir(&self, i: usize) -> PathBuf {
        self.dir.join("tasks").join(&self.nodes[i].pt.name)
    }

    pub fn task_run_name(&self, i: usize) -> String {
        format!("{}-{}", self.name, self.nodes[i].pt.name)
    }

    /// The pipeline-level side of task `i`: its params' values and whether
    /// its `when` expressions hold (with the first that does not).
    pub fn pipeline_level(&self, i: usize, facts: &Facts) -> Result<PipelineLevel, String> {
        let node = &self.nodes[i];
        let scope = Scope {
            task: Some(i),
            ..Scope::pipeline(self, facts, facts.dry)
        };
        let mut params = BTreeMap::new();
        for p in &node.pt.params {
            let v = subst_value(&scope, &p.value).map_err(|e| format!("param {}: {e}", p.name))?;
            params.insert(p.name.clone(), v);
        }
        let mut skip = None;
        for w in &node.pt.when {
            let input = subst_str(&scope, &w.input).map_err(|e| format!("when: {e}"))?;
            let values = subst_list(&scope, &w.values).map_err(|e| format!("when: {e}"))?;
            let holds = values.contains(&input) == (w.operator == "in");
            if !holds && skip.is_none() {
                skip = Some(format!("{input:?} {} {values:?} does not hold", w.operator));
            }
        }
        Ok(PipelineLevel { params, skip })
    }

    /// Task `i` ready to run its attempt `attempt`: its steps with every
    /// variable substituted.
    pub fn prepare(
        &self,
        i: usize,
        facts: &Facts,
        given: &BTreeMap<String, ParamValue>,
        attempt: u32,
    ) -> Result<Prepared, String> {
        let node = &self.nodes[i];
        let task_dir = self.task_dir(i);
        let spec = &node.spec;

        // Params: the pipeline's (propagated), then what the pipeline task
        // gives, then the task's declared ones (given, else default).
        let mut params = self.params.clone();
        for (k, v) in given {
            params.insert(k.clone(), v.clone());
        }
        for ps in &spec.params {
            let v = match given.get(&ps.name) {
                Some(v) => v.clone(),
                None => match &ps.default {
                    Some(d) => d.clone(),
                    None => {
                        return Err(format!(
                            "parameter {} has no value: the pipeline task gives none and it has no default",
                            ps.name
                        ))
                    }
                },
            };
            if v.param_type() != ps.param_type() {
                return Err(format!(
                    "parameter {} is declared {} but its value is {}",
                    ps.name,
                    ps.param_type(),
                    v.param_type()
                ));
            }
            params.insert(ps.name.clone(), v);
        }

        // Workspaces: declared by the task and bound (or propagated from
        // the pipeline).
        let pscope = Scope::pipeline(self, facts, facts.dry);
        let mut workspaces = BTreeMap::new();
        let bound_dir = |pws: &str, sub: &str| -> Result<Option<PathBuf>, String> {
            let Some(base) = self.workspaces.get(pws) else {
                return Ok(None);
            };
            let sub = subst_str(&pscope, sub)?;
            if !is_sub_path(&sub) {
                return Err(format!("workspace subPath {sub} leaves the volume"));
            }
            Ok(base.as_ref().map(|b| {
                if sub.is_empty() {
                    b.clone()
                } else {
                    b.join(sub)
                }
            }))
        };
        for d in &spec.workspaces {
            let mount = if d.mount_path.is_empty() {
                format!("/workspace/{}", d.name)
            } else {
                d.mount_path.clone()
            };
            let binding = node.pt.workspaces.iter().find(|b| b.name == d.name);
            let dir = match binding {
                Some(b) => {
                    let pws = if b.workspace.is_empty() {
                        &b.name
                    } else {
                        &b.workspace
                    };
                    bound_dir(pws, &b.sub_path)?
                }
                None => bound_dir(&d.name, "")?,
            };
            if dir.is_none() && !d.optional {
                return Err(format!("workspace {} is not bound", d.name));
            }
            workspaces.insert(d.name.clone(), (dir, mount));
        }
        for b in &node.pt.workspaces {
            if !workspaces.contains_key(&b.name) {
                let pws = if b.workspace.is_empty() {
                    &b.name
                } else {
                    &b.workspace
                };
                let dir = bound_dir(pws, &b.sub_path)?;
                workspaces.insert(b.name.clone(), (dir, format!("/workspace/{}", b.name)));
            }
        }
        for (name, dir) in &self.workspaces {
            workspaces
                .entry(name.clone())
                .or_insert_with(|| (dir.clone(), format!("/workspace/{name}")));
        }

        let step_names: Vec<String> = spec
            .steps
            .iter()
            .enumerate()
            .map(|(j, s)| step_name(s, j))
            .collect();
        let scope = Scope {
            task: Some(i),
            task_params: Some(&params),
            workspaces: Some(&workspaces),
            step_names: &step_names,
            attempt,
            ..Scope::pipeline(self, facts, facts.dry)
        };
        let home = task_dir.join("workspace");
        let mut mounts: Vec<(String, PathBuf)> = workspaces
            .values()
            .filter_map(|(dir, mount)| dir.as_ref().map(|d| (mount.clone(), d.clone())))
            .collect();
        mounts.push(("/workspace".into(), home.clone()));
        mounts.sort_by_key(|(m, _)| std::cmp::Reverse(m.len()));

        let mut steps = Vec::new();
        for (j, (step, timeout)) in node.steps.iter().enumerate() {
            let name = step_names[j].clone();
            let at = |e: String| format!("step {name}: {e}");
            let mut env_map: HashMap<String, String> = self.env.iter().cloned().collect();
            let mut env = Vec::new();
            for e in &step.env {
                let v = subst_str(&scope, &e.value).map_err(&at)?;
                let v = k8s_expand(&v, &env_map);
                env_map.insert(e.name.clone(), v.clone());
                env.push((e.name.clone(), v));
            }
            let command = subst_list(&scope, &step.command).map_err(&at)?;
            let args = subst_list(&scope, &step.args).map_err(&at)?;
            let command: Vec<String> = command.iter().map(|c| k8s_expand(c, &env_map)).collect();
            let args: Vec<String> = args.iter().map(|c| k8s_expand(c, &env_map)).collect();
            let script = subst_str(&scope, &step.script).map_err(&at)?;
            let wd = subst_str(&scope, &step.working_dir).map_err(&at)?;
            let working_dir = self.local_dir(&wd, &mounts, &home);
            steps.push(PreparedStep {
                name,
                script: (!step.script.is_empty()).then_some(script),
                command,
                args,
                working_dir,
                env,
                timeout: *timeout,
                continue_on_error: step.on_error == "continue",
            });
        }
        Ok(Prepared {
            task_dir,
            home,
            steps,
            results: spec
                .results
                .iter()
                .map(|r| (r.name.clone(), r.type_.unwrap_or(ParamType::String)))
                .collect(),
        })
    }

    /// Where a step's `workingDir` is on this machine.
    pub fn local_dir(&self, wd: &str, mounts: &[(String, PathBuf)], home: &Path) -> PathBuf {
        if wd.is_empty() {
            return home.to_path_buf();
        }
        let p = Path::new(wd);
        if p.is_relative() {
            return home.join(p);
        }
        if p.starts_with(&self.dir) {
            return p.to_path_buf();
        }
        for (mount, dir) in mounts {
            if let Ok(rest) = p.strip_prefix(mount) {
                return dir.join(rest);
            }
        }
        p.to_path_buf()
    }
}

/// A cycle among the tasks, as `a -> b -> a`.
pub fn find_cycle(nodes: &[Node]) -> Option<String> {
    // 0: unvisited, 1: on the path, 2: done.
    pub fn visit(
        i: usize,
        nodes: &[Node],
        mark: &mut [u8],
        path: &mut Vec<usize>,
    ) -> Option<String> {
        mark[i] = 1;
        path.push(i);
        for d in nodes[i].deps() {
            if mark[d] == 1 {
                let start = path.iter().position(|&x| x == d).unwrap_or(0);
                let mut names: Vec<&str> = path[start..]
                    .iter()
                    .map(|&x| nodes[x].pt.name.as_str())
                    .collect();
                names.push(&nodes[d].pt.name);
                return Some(names.join(" -> "));
            }
            if mark[d] == 0 {
                if let Some(c) = visit(d, nodes, mark, path) {
                    return Some(c);
                }
            }
        }
        path.pop();
        mark[i] = 2;
        None
    }
    let mut mark = vec![0u8; nodes.len()];
    for i in 0..nodes.len() {
        if mark[i] == 0 {
            if let Some(c) = visit(i, nodes, &mut mark, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

pub struct PipelineLevel {
    pub params: BTreeMap<String, ParamValue>,
    /// Why the `when` expressions do not hold, if they do not.
    pub skip: Option<String>,
}

/// A task's attempt, ready to run.
pub struct Prepared {
    pub task_dir: PathBuf,
    pub home: PathBuf,
    pub steps: Vec<PreparedStep>,
    pub results: Vec<(String, ParamType)>,
}

pub struct PreparedStep {
    pub name: String,
    pub script: Option<String>,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: PathBuf,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    pub continue_on_error: bool,
}

/// What the tasks that ended left (or, `dry`, placeholders).
#[derive(Clone)]
pub struct Facts {
    pub dry: bool,
    pub ends: Vec<Option<TaskEnd>>,
}

impl Facts {
    pub fn dry(n: usize) -> Facts {
        Facts {
            dry: true,
            ends: vec![None; n],
        }
    }
}

/// The variables one place sees: the pipeline's, and a task's.
pub struct Scope<'a> {
    pub plan: &'a Plan,
    pub facts: &'a Facts,
    pub dry: bool,
    pub task: Option<usize>,
    pub task_params: Option<&'a BTreeMap<String, ParamValue>>,
    pub workspaces: Option<&'a BTreeMap<String, (Option<PathBuf>, String)>>,
    pub step_names: &'a [String],
    pub attempt: u32,
}

impl<'a> Scope<'a> {
    pub fn pipeline(plan: &'a Plan, facts: &'a Facts, dry: bool) -> Scope<'a> {
        Scope {
            plan,
            facts,
            dry,
            task: None,
            task_params: None,
            workspaces: None,
            step_names: &[],
            attempt: 0,
        }
    }

    pub fn in_finally(&self) -> bool {
        self.task.is_some_and(|i| self.plan.nodes[i].finally)
    }
}

impl Resolve for Scope<'_> {
    fn placeholders(&self) -> bool {
        self.dry
    }

    fn resolve(&self, var: &Var) -> Result<ParamValue, String> {
        let plan = self.plan;
        let s = |v: String| Ok(ParamValue::String(v));
        match var {
            Var::Param(name, _) => self
                .task_params
                .and_then(|p| p.get(name))
                .or_else(|| plan.params.get(name))
                .cloned()
                .ok_or_else(|| format!("there is no parameter {name}")),
            Var::TaskResult(task, result, _) => {
                let j = *plan
                    .index
                    .get(task)
                    .ok_or_else(|| format!("there is no task {task}"))?;
                if self.dry {
                    let ty = plan.nodes[j]
                        .spec
                        .results
                        .iter()
                        .find(|r| &r.name == result)
                        .and_then(|r| r.type_)
                        .unwrap_or(ParamType::String);
                    return Ok(match ty {
                        ParamType::String => ParamValue::String(String::new()),
                        ParamType::Array => ParamValue::Array(vec![String::new()]),
                        ParamType::Object => ParamValue::Object(BTreeMap::new()),
                    });
                }
                self.facts.ends[j]
                    .as_ref()
                    .and_then(|e| e.results.get(result))
                    .cloned()
                    .ok_or_else(|| format!("task {task} gave no result {result}"))
            }
            Var::TaskStatus(task) | Var::TaskReason(task) => {
                if !self.in_finally() {
                    return Err("only finally tasks can use a task's status".into());
                }
                let j = *plan
                    .index
                    .get(task)
                    .ok_or_else(|| format!("there is no task {task}"))?;
                let end = self.facts.ends[j].as_ref();
                if matches!(var, Var::TaskReason(_)) {
                    return s(end.map(|e| e.reason.clone()).unwrap_or_default());
                }
                s(match end.map(|e| &e.state) {
                    Some(State::Succeeded) => "Succeeded",
                    Some(State::Failed) | Some(State::Cancelled) => "Failed",
                    _ => "None",
                }
                .into())
            }
            Var::TasksStatus => {
                if !self.in_finally() {
                    return Err("only finally tasks can use the tasks' status".into());
                }
                let dag = plan.nodes.iter().enumerate().filter(|(_, n)| !n.finally);
                let states: Vec<Option<&State>> = dag
                    .map(|(j, _)| self.facts.ends[j].as_ref().map(|e| &e.state))
                    .collect();
                let status = if states
                    .iter()
                    .any(|s| matches!(s, Some(State::Failed) | Some(State::Cancelled)))
                {
                    "Failed"
                } else if states.iter().all(|s| matches!(s, Some(State::Succeeded))) {
                    "Succeeded"
                } else if states.iter().all(|s| s.is_some()) {
                    "Completed"
                } else {
                    "None"
                };
                s(status.into())
            }
            Var::Result(name) => {
                let i = self
                    .task
                    .filter(|_| self.workspaces.is_some())
                    .ok_or("results are only in a task's steps")?;
                if !plan.nodes[i].spec.results.iter().any(|r| &r.name == name) {
                    return Err(format!("the task declares no result {name}"));
                }
                s(path_string(&plan.task_dir(i).join("results").join(name)))
            }
            Var::Workspace(name, attr) => {
                let Some(ws) = self.workspaces else {
                    // In a pipeline task's params and when expressions.
                    let bound = plan
                        .workspaces
                        .get(name)
                        .ok_or_else(|| format!("the pipeline declares no workspace {name}"))?;
                    return match attr.as_str() {
                        "bound" => s(bound.is_some().to_string()),
                        _ => Err(format!(
                            "workspaces.{name}.{attr} is only in a task's steps"
                        )),
                    };
                };
                let (dir, _) = ws
                    .get(name)
                    .ok_or_else(|| format!("there is no workspace {name}"))?;
                match attr.as_str() {
                    "path" => s(dir.as_deref().map(path_string).unwrap_or_default()),
                    "bound" => s(dir.is_some().to_string()),
                    "claim" => s(String::new()),
                    "volume" => s(if dir.is_some() {
                        name.clone()
                    } else {
                        String::new()
                    }),
                    _ => Err(format!("workspaces have no {attr}")),
                }
            }
            Var::StepExitCode(step) => {
                let i = self
                    .task
                    .filter(|_| self.workspaces.is_some())
                    .ok_or("steps are only in a task")?;
                let name = step
                    .strip_prefix("step-")
                    .filter(|n| self.step_names.iter().any(|s| s == n));
                let name = match name {
                    Some(n) => n,
                    None if self.step_names.iter().any(|s| s == step) => step.as_str(),
                    None => return Err(format!("the task has no step {step}")),
                };
                s(path_string(
                    &plan.task_dir(i).join("steps").join(name).join("exitCode"),
                ))
            }
            Var::Context(what) => {
                let task = self.task.map(|i| &plan.nodes[i]);
                let run_name = self.task.map(|i| plan.task_run_name(i));
                let in_task = self.workspaces.is_some();
                let v = match (what.as_str(), task, run_name) {
                    ("pipelineRun.name", _, _) | ("pipeline.name", _, _) => plan.name.clone(),
                    ("pipelineRun.namespace", _, _) => plan.namespace.clone(),
                    ("pipelineRun.uid", _, _) => plan.uid.clone(),
                    ("pipelineTask.retries", Some(t), _) => t.pt.retries.to_string(),
                    ("taskRun.name", Some(_), Some(r)) | ("task.name", Some(_), Some(r))
                        if in_task =>
                    {
                        r
                    }
                    ("taskRun.namespace", Some(_), _) if in_task => plan.namespace.clone(),
                    ("taskRun.uid", Some(_), Some(r)) if in_task => {
                        if plan.uid.is_empty() {
                            String::new()
                        } else {
                            format!("{}-{r}", plan.uid)
                        }
                    }
                    ("task.retry-count", Some(_), _) if in_task => self.attempt.to_string(),
                    _ => return Err(format!("context.{what} is not known here")),
                };
                s(v)
            }
        }
    }
}

pub fn path_string(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// What became of a task.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Succeeded,
    Failed,
    /// `when`: skipped because its `when` expressions did not hold.
    Skipped {
        when: bool,
    },
    Cancelled,
}

#[derive(Debug, Clone)]
pub struct TaskEnd {
    pub state: State,
    pub reason: String,
    pub message: String,
    pub results: BTreeMap<String, ParamValue>,
    pub attempts: u32,
    /// `onError: continue` on the pipeline task: a failure does not count.
    pub ignored: bool,
    /// It was stopped by `timeouts.pipeline`.
    pub pipeline_timeout: bool,
}

impl TaskEnd {
    pub fn skipped(reason: &str, message: String, when: bool) -> TaskEnd {
        TaskEnd {
            state: State::Skipped { when },
            reason: reason.into(),
            message,
            results: BTreeMap::new(),
            attempts: 0,
            ignored: false,
            pipeline_timeout: false,
        }
    }

    pub fn failed(reason: &str, message: String) -> TaskEnd {
        TaskEnd {
            state: State::Failed,
            reason: reason.into(),
            message,
            results: BTreeMap::new(),
            attempts: 0,
            ignored: false,
            pipeline_timeout: false,
        }
    }
}
