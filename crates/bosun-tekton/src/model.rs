//! The pieces of a Tekton `tekton.dev/v1` PipelineRun that bosun reads: the
//! run's spec ([`PipelineRunSpec`]), its embedded pipeline ([`PipelineSpec`]),
//! the pipeline's tasks ([`PipelineTask`]) with their embedded task specs
//! ([`TaskSpec`]) and steps ([`Step`]), and the values they pass
//! ([`ParamValue`]).
//!
//! Fields are named and shaped as Tekton's JSON has them (`camelCase`, a
//! `null` read as the field's zero value, as Go reads it). Every type keeps
//! the fields it does not name in `extra`, so a spec read and written back
//! loses nothing (volumes, pod templates, resources and the like are there
//! as JSON).
//!
//! Two kinds of reference need more than the spec itself, and a local
//! cluster has neither: Tekton references to resources on a cluster or
//! behind a resolver (`pipelineRef`, a task's `taskRef`, a step's `ref`), and
//! Jenkins X's catalog references, a step image written `uses:PATH@REF`
//! (`uses:jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream`,
//! or `uses:https://…`), which Lighthouse replaces by the steps of that file
//! when it loads the pipeline. A step without an image takes its task's
//! `stepTemplate.image`, so `uses:` may be written there too.
//! [`PipelineRunSpec::uses_references`] lists the latter, for every executor.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The fields a type does not name, kept as JSON.
pub type Extra = BTreeMap<String, Value>;

/// The API version bosun writes and runs.
pub const API_VERSION: &str = "tekton.dev/v1";

/// The image prefix of a Jenkins X catalog reference.
pub const USES_PREFIX: &str = "uses:";

/// Reads `null` (or an absent field, with `#[serde(default)]`) as `T`'s
/// default, as Go's `encoding/json` leaves a field at its zero value.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A PipelineRun document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PipelineRun {
    /// `tekton.dev/v1` (or `tekton.dev/v1beta1` before conversion).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub api_version: String,
    /// `PipelineRun`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub kind: String,
    /// Its metadata.
    #[serde(default, deserialize_with = "nullable")]
    pub metadata: ObjectMeta,
    /// Its spec.
    #[serde(default, deserialize_with = "nullable")]
    pub spec: PipelineRunSpec,
    /// Other fields (`status`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// The metadata bosun reads of a PipelineRun.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// `name`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    /// `generateName`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub generate_name: String,
    /// `namespace`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub namespace: String,
    /// `labels`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub labels: BTreeMap<String, String>,
    /// `annotations`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub annotations: BTreeMap<String, String>,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A PipelineRun's `spec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PipelineRunSpec {
    /// The values of the pipeline's parameters (and, for an embedded
    /// pipeline, of parameters it does not declare, which Tekton propagates
    /// to its embedded tasks).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub params: Vec<Param>,
    /// The pipeline, embedded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_spec: Option<PipelineSpec>,
    /// The pipeline, by reference (a cluster resource or a resolver's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_ref: Option<Ref>,
    /// The run's timeouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<Timeouts>,
    /// The volumes bound to the pipeline's workspaces.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub workspaces: Vec<WorkspaceBinding>,
    /// The pod template and service account of the run's TaskRuns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_run_template: Option<TaskRunTemplate>,
    /// `Cancelled`, `CancelledRunFinally`, `StoppedRunFinally`,
    /// `PipelineRunPending`, or empty.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub status: String,
    /// Other fields (`taskRunSpecs`, ...).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.timeouts`: Go durations (`1h30m`); `0` is no timeout.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeouts {
    /// The whole run, `finally` tasks included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<String>,
    /// The pipeline's `tasks` (not its `finally` tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<String>,
    /// The pipeline's `finally` tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finally: Option<String>,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.taskRunTemplate`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRunTemplate {
    /// The pods' template, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<Value>,
    /// The pods' service account.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub service_account_name: String,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A reference to a pipeline or a task that is not in the spec: a resource
/// on the cluster (`name`, `kind`), or one a resolver fetches (`resolver`,
/// `params`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ref {
    /// The resource's name.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    /// Its kind (`Task`, `ClusterTask`, a custom task's kind).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub kind: String,
    /// Its API version (custom tasks).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub api_version: String,
    /// The resolver (`git`, `bundles`, `hub`, `cluster`, `http`).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub resolver: String,
    /// The resolver's parameters.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub params: Vec<Param>,
    /// Other fields (`bundle`).
    #[serde(flatten)]
    pub extra: Extra,
}

impl fmt::Display for Ref {
    /// The reference as a person would name it: `git-clone`,
    /// `ClusterTask git-clone`, `resolver git (url=…, pathInRepo=…)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.resolver.is_empty() {
            write!(f, "resolver {}", self.resolver)?;
            if !self.params.is_empty() {
                let params: Vec<String> = self
                    .params
                    .iter()
                    .map(|p| format!("{}={}", p.name, p.value))
                    .collect();
                write!(f, " ({})", params.join(", "))?;
            }
            return Ok(());
        }
        if !self.kind.is_empty() && self.kind != "Task" && self.kind != "Pipeline" {
            write!(f, "{} ", self.kind)?;
        }
        if self.name.is_empty() {
            write!(f, "(unnamed)")
        } else {
            write!(f, "{}", self.name)
        }
    }
}

/// A volume bound to a pipeline workspace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceBinding {
    /// The pipeline workspace.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// A directory within the volume.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub sub_path: String,
    /// `emptyDir`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<Value>,
    /// `persistentVolumeClaim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<Value>,
    /// `volumeClaimTemplate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_claim_template: Option<Value>,
    /// `configMap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<Value>,
    /// `secret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Value>,
    /// `projected`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projected: Option<Value>,
    /// `csi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi: Option<Value>,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An embedded pipeline (`spec.pipelineSpec`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PipelineSpec {
    /// The parameters it declares.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub params: Vec<ParamSpec>,
    /// Its tasks.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tasks: Vec<PipelineTask>,
    /// The tasks run after all of `tasks`, whatever became of them.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub finally: Vec<PipelineTask>,
    /// The workspaces it declares.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub workspaces: Vec<PipelineWorkspaceDeclaration>,
    /// The results it gives, from its tasks' results.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub results: Vec<PipelineResult>,
    /// Other fields (`description`, `displayName`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A workspace a pipeline declares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PipelineWorkspaceDeclaration {
    /// Its name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Whether a run may leave it unbound.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub optional: bool,
    /// Other fields (`description`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A result a pipeline gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PipelineResult {
    /// Its name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// `string`, `array` or `object`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ParamType>,
    /// Its value, usually `$(tasks.T.results.R)`.
    pub value: ParamValue,
    /// Other fields (`description`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A task of a pipeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PipelineTask {
    /// Its name, unique in the pipeline.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// The task, by reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<Ref>,
    /// The task, embedded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_spec: Option<TaskSpec>,
    /// The tasks it runs after.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub run_after: Vec<String>,
    /// The values of the task's parameters.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub params: Vec<Param>,
    /// The pipeline workspaces bound to the task's.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub workspaces: Vec<WorkspacePipelineTaskBinding>,
    /// The conditions under which it runs (all must hold).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub when: Vec<WhenExpression>,
    /// The timeout of each attempt (a Go duration; `0`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// How many times a failed attempt is tried again.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_zero"
    )]
    pub retries: u32,
    /// `continue`: the task's failure does not fail the pipeline.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub on_error: String,
    /// A pipeline run as this task, by reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_ref: Option<Ref>,
    /// A pipeline run as this task, embedded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_spec: Option<Value>,
    /// Its matrix (a task run once per combination of values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<Value>,
    /// Other fields (`displayName`, `description`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A pipeline workspace bound to a task's workspace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspacePipelineTaskBinding {
    /// The task's workspace.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// The pipeline's workspace (empty: the same name).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub workspace: String,
    /// A directory within it.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub sub_path: String,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A task's spec (embedded in a pipeline task).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSpec {
    /// The parameters it declares.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub params: Vec<ParamSpec>,
    /// Its steps, run in order.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub steps: Vec<Step>,
    /// What every step has unless it says otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_template: Option<StepTemplate>,
    /// The workspaces it declares.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub workspaces: Vec<WorkspaceDeclaration>,
    /// The results it gives.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub results: Vec<TaskResult>,
    /// The pod's volumes, as JSON.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub volumes: Vec<Value>,
    /// Containers run beside the steps.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sidecars: Vec<Step>,
    /// Other fields (`metadata`, `description`, `displayName`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A workspace a task declares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceDeclaration {
    /// Its name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Where its steps see it (default `/workspace/NAME`).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub mount_path: String,
    /// Whether the steps may only read it.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub read_only: bool,
    /// Whether it may be left unbound.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub optional: bool,
    /// Other fields (`description`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A result a task gives: the content of the file
/// `$(results.NAME.path)` when its steps end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskResult {
    /// Its name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// `string` (default), `array` or `object` (written as JSON).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ParamType>,
    /// Other fields (`description`, `properties`, `value`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A step: a container's command, or a script.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Its name (unique in the task; may be empty).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    /// Its image; `uses:…` is a Jenkins X catalog reference.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub image: String,
    /// A script, run with its `#!` line (none: `/bin/sh` with `set -e`).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub script: String,
    /// The command (none: the image's entrypoint).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub command: Vec<String>,
    /// The command's (or the script's) arguments.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub args: Vec<String>,
    /// Its working directory.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub working_dir: String,
    /// Its environment variables.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub env: Vec<EnvVar>,
    /// Environment variables from ConfigMaps and Secrets, as JSON.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub env_from: Vec<Value>,
    /// Its timeout (a Go duration; `0`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// `continue`: its failure does not fail the task; `stopAndFail`
    /// (default): it does.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub on_error: String,
    /// A StepAction it runs, by reference.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub ref_: Option<Ref>,
    /// Other fields (`resources`, `volumeMounts`, `securityContext`, ...).
    #[serde(flatten)]
    pub extra: Extra,
}

impl Step {
    /// The Jenkins X catalog reference of the step's own image
    /// (`jenkins-x/jx3-pipeline-catalog/…@ref`), if it is one.
    pub fn uses(&self) -> Option<&str> {
        self.image.strip_prefix(USES_PREFIX)
    }
}

/// A task's `stepTemplate`: the container fields every step starts from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepTemplate {
    /// The steps' image.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub image: String,
    /// The steps' command.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub command: Vec<String>,
    /// The steps' arguments.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub args: Vec<String>,
    /// The steps' working directory.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub working_dir: String,
    /// Environment variables of every step (a step's own win by name).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub env: Vec<EnvVar>,
    /// Environment variables from ConfigMaps and Secrets, as JSON.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub env_from: Vec<Value>,
    /// Other fields (`resources`, `volumeMounts`, ...).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A container's environment variable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    /// Its name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Its value.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub value: String,
    /// Where its value comes from instead (a Secret, a ConfigMap, the pod),
    /// as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<Value>,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A condition on a pipeline task: `input` is (`in`) or is not (`notin`)
/// one of `values`. CEL expressions (`cel`) are another form.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WhenExpression {
    /// The value tested.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub input: String,
    /// `in` or `notin`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub operator: String,
    /// The values.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub values: Vec<String>,
    /// A CEL expression.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub cel: String,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A parameter a pipeline or a task declares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParamSpec {
    /// Its name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Its type (none: its default's, else `string`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ParamType>,
    /// Its value when none is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<ParamValue>,
    /// Other fields (`description`, `properties`, `enum`).
    #[serde(flatten)]
    pub extra: Extra,
}

impl ParamSpec {
    /// The parameter's type: as declared, else its default's, else
    /// `string`.
    pub fn param_type(&self) -> ParamType {
        self.type_
            .or_else(|| self.default.as_ref().map(ParamValue::param_type))
            .unwrap_or(ParamType::String)
    }
}

/// A parameter's value, given by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Param {
    /// The parameter.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Its value.
    pub value: ParamValue,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Param {
    /// A string parameter.
    pub fn string(name: &str, value: &str) -> Param {
        Param {
            name: name.into(),
            value: ParamValue::String(value.into()),
            extra: Extra::new(),
        }
    }
}

/// The type of a parameter or a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    /// A string.
    String,
    /// An array of strings.
    Array,
    /// An object whose values are strings.
    Object,
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ParamType::String => "string",
            ParamType::Array => "array",
            ParamType::Object => "object",
        })
    }
}

/// A parameter's (or a result's) value. Read as Tekton reads it: a JSON
/// string, array or object; any other scalar (`value: 10`, `true`) is its
/// text, and `null` is the empty string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamValue {
    /// A string.
    String(String),
    /// An array of strings.
    Array(Vec<String>),
    /// An object whose values are strings.
    Object(BTreeMap<String, String>),
}

impl Default for ParamValue {
    fn default() -> Self {
        ParamValue::String(String::new())
    }
}

impl ParamValue {
    /// Its type.
    pub fn param_type(&self) -> ParamType {
        match self {
            ParamValue::String(_) => ParamType::String,
            ParamValue::Array(_) => ParamType::Array,
            ParamValue::Object(_) => ParamType::Object,
        }
    }

    /// Reads a JSON value as Tekton does.
    pub fn from_json(v: &Value) -> Result<ParamValue, String> {
        fn scalar(v: &Value) -> Result<String, String> {
            match v {
                Value::String(s) => Ok(s.clone()),
                Value::Null => Ok(String::new()),
                Value::Bool(_) | Value::Number(_) => Ok(v.to_string()),
                _ => Err(format!("{v} is not a string")),
            }
        }
        match v {
            Value::Array(items) => items
                .iter()
                .map(scalar)
                .collect::<Result<_, _>>()
                .map(ParamValue::Array),
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| scalar(v).map(|v| (k.clone(), v)))
                .collect::<Result<_, _>>()
                .map(ParamValue::Object),
            _ => scalar(v).map(ParamValue::String),
        }
    }
}

impl fmt::Display for ParamValue {
    /// A string as it is; an array or an object as JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::String(s) => f.write_str(s),
            ParamValue::Array(a) => write!(f, "{}", serde_json::json!(a)),
            ParamValue::Object(o) => write!(f, "{}", serde_json::json!(o)),
        }
    }
}

impl Serialize for ParamValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ParamValue::String(v) => s.serialize_str(v),
            ParamValue::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            ParamValue::Object(map) => {
                let mut m = s.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        ParamValue::from_json(&v).map_err(de::Error::custom)
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A Jenkins X catalog reference (`uses:`) in a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsesReference {
    /// The pipeline task.
    pub task: String,
    /// The step (its name; empty when it has none), or `stepTemplate`.
    pub step: String,
    /// What follows `uses:`.
    pub uses: String,
}

impl fmt::Display for UsesReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Where: an unnamed step, the task's stepTemplate, or the named step.
        let step = match self.step.as_str() {
            "" => "a step".to_string(),
            "stepTemplate" => "stepTemplate".to_string(),
            name => format!("step {name}"),
        };
        write!(
            f,
            "uses:{} (task {}, {step}): Jenkins X catalog references are resolved by Lighthouse when it \
             loads the pipeline, and bosun does not resolve them",
            self.uses, self.task
        )
    }
}

impl PipelineRunSpec {
    /// Every Jenkins X catalog reference in the embedded pipeline (its tasks,
    /// then its `finally` tasks), in order: steps whose image is `uses:…`,
    /// and task `stepTemplate`s whose image is (a step without an image
    /// takes it).
    pub fn uses_references(&self) -> Vec<UsesReference> {
        let mut found = Vec::new();
        let Some(pipeline) = &self.pipeline_spec else {
            return found;
        };
        for task in pipeline.tasks.iter().chain(&pipeline.finally) {
            let Some(spec) = &task.task_spec else {
                continue;
            };
            for step in &spec.steps {
                if let Some(uses) = step.uses() {
                    found.push(UsesReference {
                        task: task.name.clone(),
                        step: step.name.clone(),
                        uses: uses.to_string(),
                    });
                }
            }
            if let Some(uses) = spec
                .step_template
                .as_ref()
                .and_then(|t| t.image.strip_prefix(USES_PREFIX))
            {
                found.push(UsesReference {
                    task: task.name.clone(),
                    step: "stepTemplate".into(),
                    uses: uses.to_string(),
                });
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tekton_json_round_trips_with_unknown_fields_kept() {
        let doc = json!({
            "apiVersion": "tekton.dev/v1",
            "kind": "PipelineRun",
            "metadata": {"generateName": "build-", "labels": {"a": "b"}, "uid": "x"},
            "spec": {
                "params": [{"name": "n", "value": "1"}, {"name": "arr", "value": ["a", "b"]}],
                "timeouts": {"pipeline": "1h"},
                "taskRunTemplate": {"serviceAccountName": "tekton-bot", "podTemplate": {"nodeSelector": {"x": "y"}}},
                "workspaces": [{"name": "ws", "emptyDir": {}}],
                "pipelineSpec": {
                    "description": "kept",
                    "params": [{"name": "n", "type": "string", "default": "0", "description": "d"}],
                    "workspaces": [{"name": "ws"}],
                    "results": [{"name": "r", "value": "$(tasks.a.results.r)"}],
                    "tasks": [{
                        "name": "a",
                        "runAfter": ["b"],
                        "retries": 2,
                        "timeout": "5m",
                        "when": [{"input": "$(params.n)", "operator": "in", "values": ["1"]}],
                        "workspaces": [{"name": "src", "workspace": "ws", "subPath": "x"}],
                        "taskSpec": {
                            "metadata": {"labels": {"l": "v"}},
                            "params": [{"name": "p"}],
                            "results": [{"name": "r", "type": "string"}],
                            "stepTemplate": {"env": [{"name": "E", "value": "1"}], "resources": {}},
                            "volumes": [{"name": "v", "emptyDir": {}}],
                            "steps": [{
                                "name": "s",
                                "image": "alpine",
                                "script": "echo hi",
                                "onError": "continue",
                                "timeout": "10s",
                                "volumeMounts": [{"name": "v", "mountPath": "/v"}]
                            }]
                        }
                    }],
                    "finally": [{"name": "f", "taskRef": {"name": "cleanup", "kind": "ClusterTask"}}]
                }
            },
            "status": {"conditions": []}
        });
        let pr: PipelineRun = serde_json::from_value(doc.clone()).unwrap();
        let spec = pr.spec.pipeline_spec.as_ref().unwrap();
        assert_eq!(spec.tasks[0].run_after, ["b"]);
        assert_eq!(spec.tasks[0].retries, 2);
        let ts = spec.tasks[0].task_spec.as_ref().unwrap();
        assert_eq!(ts.steps[0].on_error, "continue");
        assert!(ts.steps[0].extra.contains_key("volumeMounts"));
        assert!(ts.extra.contains_key("metadata"));
        assert_eq!(
            pr.spec.params[1].value,
            ParamValue::Array(vec!["a".into(), "b".into()])
        );
        assert_eq!(spec.params[0].param_type(), ParamType::String);
        assert_eq!(
            spec.finally[0].task_ref.as_ref().unwrap().to_string(),
            "ClusterTask cleanup"
        );
        assert_eq!(serde_json::to_value(&pr).unwrap(), doc);
    }

    #[test]
    fn nulls_and_scalars_read_as_go_and_tekton_read_them() {
        let spec: PipelineRunSpec = serde_json::from_value(json!({
            "params": [{"name": "n", "value": 10}, {"name": "b", "value": true}, {"name": "z", "value": null}],
            "pipelineSpec": {"tasks": null, "params": [{"name": "o", "default": {"k": 1}}]}
        }))
        .unwrap();
        assert_eq!(spec.params[0].value, ParamValue::String("10".into()));
        assert_eq!(spec.params[1].value, ParamValue::String("true".into()));
        assert_eq!(spec.params[2].value, ParamValue::String(String::new()));
        let p = spec.pipeline_spec.unwrap();
        assert!(p.tasks.is_empty());
        assert_eq!(p.params[0].param_type(), ParamType::Object);
        let bad = serde_json::from_value::<Param>(json!({"name": "x", "value": [[1]]}));
        assert!(bad.is_err());
    }

    #[test]
    fn jx_uses_references_are_found_in_steps_and_step_templates() {
        // As Lighthouse's users write them (jx3-pipeline-catalog).
        let src = r#"
apiVersion: tekton.dev/v1beta1
kind: PipelineRun
metadata:
  name: cheese
spec:
  pipelineSpec:
    tasks:
    - name: from-build-pack
      taskSpec:
        stepTemplate:
          image: uses:jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream
          workingDir: /workspace/source
        steps:
        - image: uses:jenkins-x/jx3-pipeline-catalog/tasks/git-clone/git-clone-pr.yaml@versionStream
          name: ""
        - name: jx-variables
        - name: build-make-test
          image: golang:1.22
          script: make test
    finally:
    - name: notify
      taskSpec:
        steps:
        - name: tell
          image: uses:https://raw.githubusercontent.com/org/repo/main/notify.yaml
"#;
        let docs = bosun_config::yaml::parse_documents(src).unwrap();
        let pr: PipelineRun = bosun_config::yaml::from_node(&docs[0], &Default::default()).unwrap();
        let found = pr.spec.uses_references();
        let found: Vec<(&str, &str, &str)> = found
            .iter()
            .map(|u| (u.task.as_str(), u.step.as_str(), u.uses.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "from-build-pack",
                    "",
                    "jenkins-x/jx3-pipeline-catalog/tasks/git-clone/git-clone-pr.yaml@versionStream"
                ),
                (
                    "from-build-pack",
                    "stepTemplate",
                    "jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream"
                ),
                (
                    "notify",
                    "tell",
                    "https://raw.githubusercontent.com/org/repo/main/notify.yaml"
                ),
            ]
        );
        let text = pr.spec.uses_references()[0].to_string();
        assert!(text.starts_with(
            "uses:jenkins-x/jx3-pipeline-catalog/tasks/git-clone/git-clone-pr.yaml@versionStream (task from-build-pack"
        ), "{text}");
    }

    #[test]
    fn references_are_named_for_people() {
        let r: Ref = serde_json::from_value(json!({
            "resolver": "git",
            "params": [{"name": "url", "value": "https://x/y.git"}, {"name": "pathInRepo", "value": "t.yaml"}]
        }))
        .unwrap();
        assert_eq!(
            r.to_string(),
            "resolver git (url=https://x/y.git, pathInRepo=t.yaml)"
        );
        let r: Ref = serde_json::from_value(json!({"name": "git-clone"})).unwrap();
        assert_eq!(r.to_string(), "git-clone");
    }
}
