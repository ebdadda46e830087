//! `tekton.dev/v1beta1` to `tekton.dev/v1`, on JSON, for the fields people
//! write in a PipelineRun: what Tekton's own conversion webhook does
//! (tektoncd/pipeline `pkg/apis/pipeline/v1beta1/*_conversion.go`), so a
//! `v1beta1` source is created as the `v1` PipelineRun Tekton would have
//! stored.
//!
//! Renamed or moved:
//! - PipelineRun spec: `timeout` becomes `timeouts.pipeline`;
//!   `serviceAccountName` and `podTemplate` move into `taskRunTemplate`;
//!   in `taskRunSpecs[]`, `taskServiceAccountName` becomes
//!   `serviceAccountName`, `taskPodTemplate` `podTemplate`, `stepOverrides`
//!   `stepSpecs` and `sidecarOverrides` `sidecarSpecs` (their `resources`
//!   `computeResources`);
//! - pipeline tasks (`tasks[]`, `finally[]`): `whenExpressions` becomes
//!   `when`;
//! - task specs (`taskSpec` of a pipeline task): a step's, a sidecar's and
//!   the step template's `resources` become `computeResources`; the
//!   container fields v1 steps do not have (`ports`, probes, `lifecycle`,
//!   `terminationMessage*`, `stdin*`, `tty`, and the step template's `name`)
//!   are dropped, as Tekton drops them (it keeps them only in an
//!   annotation);
//! - a `taskRef`/`pipelineRef` `bundle` becomes the `bundles` resolver
//!   (`params` `bundle`, `name`, `kind`), as Tekton converts it.
//!
//! Refused ([`ConvertError`] names the field): PipelineResources
//! (`resources` of a PipelineRun, a Pipeline, a pipeline task or a Task),
//! which Tekton removed and v1 cannot express; `conditions` of a pipeline
//! task (removed, replaced by `when`); `serviceAccountNames` (removed);
//! `timeout` together with `timeouts`, and `whenExpressions` together with
//! `when` (Tekton refuses both).
//!
//! Every other field is kept as written, so a spec already written with v1's
//! fields comes out unchanged: bosun converts Lighthouse's inline
//! `pipeline_run_spec` this way whichever version it was written for.

use serde_json::{Map, Value};

/// A field `v1` cannot express.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConvertError {
    /// The field, from the PipelineRun's `spec` (`spec.pipelineSpec.tasks[0].resources`).
    pub path: String,
    /// Why it cannot be converted, and what to write instead.
    pub message: String,
}

fn refuse(path: &str, message: &str) -> ConvertError {
    ConvertError {
        path: path.to_string(),
        message: message.to_string(),
    }
}

const RESOURCES_GONE: &str = "PipelineResources were removed from Tekton and tekton.dev/v1 has none: \
     clone with a task (the git-clone catalog task, which Lighthouse fills with REPO_URL and the revision) \
     and share files through workspaces";

/// The `v1` form of a `v1beta1` PipelineRun `spec`.
pub fn pipeline_run_spec(spec: &Value) -> Result<Value, ConvertError> {
    let path = "spec";
    let Some(obj) = spec.as_object() else {
        return Err(refuse(path, "must be a mapping"));
    };
    let mut out = obj.clone();
    if out.contains_key("resources") {
        return Err(refuse("spec.resources", RESOURCES_GONE));
    }
    if out.contains_key("serviceAccountNames") {
        return Err(refuse(
            "spec.serviceAccountNames",
            "was removed from Tekton: set taskRunSpecs[].serviceAccountName (v1beta1: taskServiceAccountName) per task",
        ));
    }
    if let Some(timeout) = out.remove("timeout") {
        if out.contains_key("timeouts") {
            return Err(refuse(
                "spec.timeout",
                "timeout and timeouts are both set (Tekton refuses that): keep timeouts",
            ));
        }
        let mut t = Map::new();
        t.insert("pipeline".into(), timeout);
        out.insert("timeouts".into(), Value::Object(t));
    }
    for (old, new) in [
        ("serviceAccountName", "serviceAccountName"),
        ("podTemplate", "podTemplate"),
    ] {
        if let Some(v) = out.remove(old) {
            let template = out
                .entry("taskRunTemplate")
                .or_insert_with(|| Value::Object(Map::new()));
            match template.as_object_mut() {
                Some(t) => {
                    t.insert(new.into(), v);
                }
                None => return Err(refuse("spec.taskRunTemplate", "must be a mapping")),
            }
        }
    }
    if let Some(r) = out.get_mut("pipelineRef") {
        *r = reference(r, "Pipeline", "spec.pipelineRef")?;
    }
    if let Some(p) = out.get_mut("pipelineSpec") {
        *p = pipeline_spec(p, "spec.pipelineSpec")?;
    }
    if let Some(Value::Array(specs)) = out.get_mut("taskRunSpecs") {
        for (i, s) in specs.iter_mut().enumerate() {
            *s = task_run_spec(s, &format!("spec.taskRunSpecs[{i}]"))?;
        }
    }
    Ok(Value::Object(out))
}

/// A `taskRunSpecs[]` item.
fn task_run_spec(spec: &Value, path: &str) -> Result<Value, ConvertError> {
    let Some(obj) = spec.as_object() else {
        return Err(refuse(path, "must be a mapping"));
    };
    let mut out = obj.clone();
    rename(
        &mut out,
        "taskServiceAccountName",
        "serviceAccountName",
        path,
    )?;
    rename(&mut out, "taskPodTemplate", "podTemplate", path)?;
    rename(&mut out, "stepOverrides", "stepSpecs", path)?;
    rename(&mut out, "sidecarOverrides", "sidecarSpecs", path)?;
    for key in ["stepSpecs", "sidecarSpecs"] {
        if let Some(Value::Array(items)) = out.get_mut(key) {
            for (i, item) in items.iter_mut().enumerate() {
                if let Some(o) = item.as_object_mut() {
                    rename(
                        o,
                        "resources",
                        "computeResources",
                        &format!("{path}.{key}[{i}]"),
                    )?;
                }
            }
        }
    }
    Ok(Value::Object(out))
}

/// The `v1` form of a `v1beta1` Pipeline spec (a PipelineRun's
/// `pipelineSpec`, or a Pipeline's `spec`), at `path`.
pub fn pipeline_spec(spec: &Value, path: &str) -> Result<Value, ConvertError> {
    let Some(obj) = spec.as_object() else {
        return Err(refuse(path, "must be a mapping"));
    };
    let mut out = obj.clone();
    if out.contains_key("resources") {
        return Err(refuse(&format!("{path}.resources"), RESOURCES_GONE));
    }
    for key in ["tasks", "finally"] {
        if let Some(Value::Array(tasks)) = out.get_mut(key) {
            for (i, t) in tasks.iter_mut().enumerate() {
                *t = pipeline_task(t, &format!("{path}.{key}[{i}]"))?;
            }
        }
    }
    Ok(Value::Object(out))
}

/// A pipeline task.
fn pipeline_task(task: &Value, path: &str) -> Result<Value, ConvertError> {
    let Some(obj) = task.as_object() else {
        return Err(refuse(path, "must be a mapping"));
    };
    let mut out = obj.clone();
    if out.contains_key("resources") {
        return Err(refuse(&format!("{path}.resources"), RESOURCES_GONE));
    }
    if out.contains_key("conditions") {
        return Err(refuse(
            &format!("{path}.conditions"),
            "Conditions were removed from Tekton: use when expressions",
        ));
    }
    rename(&mut out, "whenExpressions", "when", path)?;
    if let Some(r) = out.get_mut("taskRef") {
        *r = reference(r, "Task", &format!("{path}.taskRef"))?;
    }
    if let Some(r) = out.get_mut("pipelineRef") {
        *r = reference(r, "Pipeline", &format!("{path}.pipelineRef"))?;
    }
    if let Some(s) = out.get_mut("taskSpec") {
        *s = task_spec(s, &format!("{path}.taskSpec"))?;
    }
    if let Some(s) = out.get_mut("pipelineSpec") {
        *s = pipeline_spec(s, &format!("{path}.pipelineSpec"))?;
    }
    Ok(Value::Object(out))
}

/// Container fields a `v1` step does not have; Tekton's conversion drops
/// them.
const DEPRECATED_STEP_FIELDS: &[&str] = &[
    "ports",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "stdin",
    "stdinOnce",
    "tty",
];

/// The `v1` form of a `v1beta1` Task spec (or an embedded task), at `path`.
pub fn task_spec(spec: &Value, path: &str) -> Result<Value, ConvertError> {
    let Some(obj) = spec.as_object() else {
        return Err(refuse(path, "must be a mapping"));
    };
    let mut out = obj.clone();
    if out.contains_key("resources") {
        return Err(refuse(&format!("{path}.resources"), RESOURCES_GONE));
    }
    if let Some(Value::Array(steps)) = out.get_mut("steps") {
        for (i, s) in steps.iter_mut().enumerate() {
            if let Some(o) = s.as_object_mut() {
                let p = format!("{path}.steps[{i}]");
                rename(o, "resources", "computeResources", &p)?;
                for f in DEPRECATED_STEP_FIELDS {
                    o.remove(*f);
                }
                if let Some(r) = o.get_mut("ref") {
                    *r = reference(r, "StepAction", &format!("{p}.ref"))?;
                }
            }
        }
    }
    if let Some(Value::Object(t)) = out.get_mut("stepTemplate") {
        rename(
            t,
            "resources",
            "computeResources",
            &format!("{path}.stepTemplate"),
        )?;
        t.remove("name");
        for f in DEPRECATED_STEP_FIELDS {
            t.remove(*f);
        }
    }
    if let Some(Value::Array(sidecars)) = out.get_mut("sidecars") {
        for (i, s) in sidecars.iter_mut().enumerate() {
            if let Some(o) = s.as_object_mut() {
                rename(
                    o,
                    "resources",
                    "computeResources",
                    &format!("{path}.sidecars[{i}]"),
                )?;
            }
        }
    }
    Ok(Value::Object(out))
}

/// A `taskRef`/`pipelineRef`: a `bundle` becomes the `bundles` resolver.
fn reference(r: &Value, kind: &str, path: &str) -> Result<Value, ConvertError> {
    let Some(obj) = r.as_object() else {
        return Err(refuse(path, "must be a mapping"));
    };
    let mut out = obj.clone();
    let bundle = out.remove("bundle");
    match bundle {
        None => {}
        Some(Value::String(b)) if b.is_empty() => {}
        Some(Value::String(b)) => {
            if out.contains_key("resolver") {
                return Err(refuse(
                    &format!("{path}.bundle"),
                    "bundle and resolver are both set (Tekton refuses that)",
                ));
            }
            let name = out.remove("name").unwrap_or(Value::String(String::new()));
            let param = |n: &str, v: Value| serde_json::json!({"name": n, "value": v});
            out.insert("resolver".into(), Value::String("bundles".into()));
            out.insert(
                "params".into(),
                Value::Array(vec![
                    param("bundle", Value::String(b)),
                    param("name", name),
                    param("kind", Value::String(kind.into())),
                ]),
            );
        }
        Some(_) => return Err(refuse(&format!("{path}.bundle"), "must be a string")),
    }
    Ok(Value::Object(out))
}

/// Moves `old` to `new`; both set is an error (only one can be meant).
fn rename(
    obj: &mut Map<String, Value>,
    old: &str,
    new: &str,
    path: &str,
) -> Result<(), ConvertError> {
    if let Some(v) = obj.remove(old) {
        if obj.contains_key(new) {
            return Err(refuse(
                &format!("{path}.{old}"),
                &format!("{old} (v1beta1) and {new} (v1) are both set: keep {new}"),
            ));
        }
        obj.insert(new.into(), v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pipeline_run_fields_move() {
        let got = pipeline_run_spec(&json!({
            "pipelineRef": {"name": "build", "apiVersion": "tekton.dev/v1beta1"},
            "serviceAccountName": "tekton-bot",
            "podTemplate": {"schedulerName": ""},
            "timeout": "240h0m0s",
            "params": [{"name": "a", "value": "b"}],
            "workspaces": [{"name": "ws", "emptyDir": {}}],
            "status": "Cancelled",
        }))
        .unwrap();
        assert_eq!(
            got,
            json!({
                "pipelineRef": {"name": "build", "apiVersion": "tekton.dev/v1beta1"},
                "taskRunTemplate": {"serviceAccountName": "tekton-bot", "podTemplate": {"schedulerName": ""}},
                "timeouts": {"pipeline": "240h0m0s"},
                "params": [{"name": "a", "value": "b"}],
                "workspaces": [{"name": "ws", "emptyDir": {}}],
                "status": "Cancelled",
            })
        );
    }

    #[test]
    fn task_run_specs_are_renamed() {
        let got = pipeline_run_spec(&json!({
            "pipelineRef": {"name": "p"},
            "taskRunSpecs": [{
                "pipelineTaskName": "build",
                "taskServiceAccountName": "builder",
                "taskPodTemplate": {"nodeSelector": {"disk": "ssd"}},
                "stepOverrides": [{"name": "compile", "resources": {"limits": {"cpu": "2"}}}],
                "sidecarOverrides": [{"name": "db", "resources": {"requests": {"memory": "1Gi"}}}],
                "metadata": {"labels": {"a": "b"}},
            }],
        }))
        .unwrap();
        assert_eq!(
            got["taskRunSpecs"],
            json!([{
                "pipelineTaskName": "build",
                "serviceAccountName": "builder",
                "podTemplate": {"nodeSelector": {"disk": "ssd"}},
                "stepSpecs": [{"name": "compile", "computeResources": {"limits": {"cpu": "2"}}}],
                "sidecarSpecs": [{"name": "db", "computeResources": {"requests": {"memory": "1Gi"}}}],
                "metadata": {"labels": {"a": "b"}},
            }])
        );
    }

    #[test]
    fn embedded_pipeline_and_tasks_convert() {
        let got = pipeline_run_spec(&json!({
            "pipelineSpec": {
                "params": [{"name": "x", "type": "string"}],
                "tasks": [{
                    "name": "build",
                    "whenExpressions": [{"input": "$(params.x)", "operator": "in", "values": ["y"]}],
                    "taskSpec": {
                        "metadata": {"labels": {"l": "v"}},
                        "stepTemplate": {"name": "tmpl", "image": "alpine", "resources": {"limits": {"cpu": "1"}}, "env": [{"name": "A", "value": "1"}]},
                        "steps": [{"name": "s", "image": "alpine", "script": "echo", "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 80}], "tty": true}],
                        "sidecars": [{"name": "db", "image": "pg", "resources": {}}],
                    },
                }],
                "finally": [{"name": "notify", "taskRef": {"name": "notify", "bundle": "reg.io/tasks:1"}}],
            },
        }))
        .unwrap();
        let task = &got["pipelineSpec"]["tasks"][0];
        assert_eq!(task["when"][0]["operator"], "in");
        assert!(task.get("whenExpressions").is_none());
        assert_eq!(
            task["taskSpec"]["stepTemplate"],
            json!({"image": "alpine", "computeResources": {"limits": {"cpu": "1"}}, "env": [{"name": "A", "value": "1"}]})
        );
        assert_eq!(
            task["taskSpec"]["steps"][0],
            json!({"name": "s", "image": "alpine", "script": "echo", "computeResources": {"requests": {"cpu": "1"}}})
        );
        assert_eq!(
            task["taskSpec"]["sidecars"][0]["computeResources"],
            json!({})
        );
        assert_eq!(task["taskSpec"]["metadata"], json!({"labels": {"l": "v"}}));
        assert_eq!(
            got["pipelineSpec"]["finally"][0]["taskRef"],
            json!({
                "resolver": "bundles",
                "params": [
                    {"name": "bundle", "value": "reg.io/tasks:1"},
                    {"name": "name", "value": "notify"},
                    {"name": "kind", "value": "Task"},
                ],
            })
        );
    }

    #[test]
    fn v1_specs_come_out_unchanged() {
        let v1 = json!({
            "pipelineSpec": {
                "tasks": [{
                    "name": "t",
                    "when": [{"input": "a", "operator": "in", "values": ["a"]}],
                    "taskSpec": {"steps": [{"name": "s", "image": "alpine", "computeResources": {}}]},
                }],
            },
            "taskRunTemplate": {"serviceAccountName": "sa"},
            "timeouts": {"pipeline": "1h0m0s", "tasks": "30m"},
            "taskRunSpecs": [{"pipelineTaskName": "t", "serviceAccountName": "x", "stepSpecs": []}],
        });
        assert_eq!(pipeline_run_spec(&v1).unwrap(), v1);
    }

    #[test]
    fn removed_features_are_refused_naming_the_field() {
        for (spec, path) in [
            (
                json!({"resources": [{"name": "git", "resourceRef": {"name": "PROW_IMPLICIT_GIT_REF"}}]}),
                "spec.resources",
            ),
            (
                json!({"pipelineSpec": {"resources": [{"name": "git", "type": "git"}]}}),
                "spec.pipelineSpec.resources",
            ),
            (
                json!({"pipelineSpec": {"tasks": [{"name": "a", "resources": {"inputs": []}}]}}),
                "spec.pipelineSpec.tasks[0].resources",
            ),
            (
                json!({"pipelineSpec": {"tasks": [{"name": "a", "taskSpec": {"resources": {}, "steps": []}}]}}),
                "spec.pipelineSpec.tasks[0].taskSpec.resources",
            ),
            (
                json!({"pipelineSpec": {"finally": [{"name": "a", "conditions": []}]}}),
                "spec.pipelineSpec.finally[0].conditions",
            ),
            (
                json!({"serviceAccountNames": [{"taskName": "a", "serviceAccountName": "b"}]}),
                "spec.serviceAccountNames",
            ),
            (
                json!({"timeout": "1h", "timeouts": {"pipeline": "2h"}}),
                "spec.timeout",
            ),
            (
                json!({"pipelineSpec": {"tasks": [{"name": "a", "whenExpressions": [], "when": []}]}}),
                "spec.pipelineSpec.tasks[0].whenExpressions",
            ),
        ] {
            let e = pipeline_run_spec(&spec).expect_err(path);
            assert_eq!(e.path, path, "{e}");
        }
        let e = pipeline_run_spec(&json!({"resources": []})).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("spec.resources: PipelineResources were removed from Tekton"),
            "{e}"
        );
    }
}
