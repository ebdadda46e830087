//! The files of a decorated run's job path, in the JSON Prow's readers
//! (Spyglass, TestGrid, Prow's own tools) expect: `started.json` and
//! `finished.json` (testgrid's `metadata.Started` and `metadata.Finished`,
//! as initupload and the sidecar write them), `prowjob.json` (the ProwJob,
//! tab-indented as crier's GCS reporter writes it), and the metadata the job
//! leaves in `artifacts/metadata.json`.
//!
//! The JSON is written as Go's `encoding/json` writes it ([`super::gojson`],
//! whose [`go_json`], [`go_json_indent`] and [`go_float`] are re-exported
//! here): struct fields in declaration order, `omitempty` fields left out
//! exactly when Go leaves them out, map keys sorted, `<`, `>`, `&`, U+2028
//! and U+2029 escaped as `\u003c` etc., and numbers that came from a job's
//! JSON (Go reads them as `float64`) printed as Go prints a `float64` (`1.0`
//! is `1`, `1e21` is `1e+21`). Objects held as [`serde_json::Value`] (refs,
//! pod spec, decoration config inside `prowjob.json`) are written with their
//! keys sorted, where Go would follow its struct order; readers parse JSON,
//! so the content is the same.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use bosun_config::types::Refs;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::gojson::is_false;
pub use crate::gojson::{go_float, go_json, go_json_indent};
use crate::refs::refs_string;

/// The exit code entrypoint records when the test was aborted (SIGINT or
/// SIGTERM to entrypoint); `finished.json` then says `ABORTED`.
pub const ABORTED_CODE: i32 = 130;

/// `started.json`: testgrid's `metadata.Started`, as initupload writes it
/// when the refs are cloned. Empty strings and maps are left out (`omitempty`);
/// `timestamp` is always written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Started {
    /// When the job started, in Unix seconds.
    pub timestamp: i64,
    /// The machine that ran the job (initupload leaves it empty).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// The number of the first pull request of the run's `refs`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub pull: String,
    /// `org/repo` of every ref, to its `PULL_REFS` form
    /// (`base_ref:base_sha,number:sha`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub repos: BTreeMap<String, String>,
    /// The commit tested: the main ref's clone's final SHA, else its
    /// revision ([`revision`]).
    #[serde(rename = "repo-commit", skip_serializing_if = "String::is_empty")]
    pub repo_commit: String,
    /// Deprecated in testgrid (metadata belongs in `finished.json`).
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// Deprecated in testgrid.
    #[serde(rename = "job-version", skip_serializing_if = "String::is_empty")]
    pub job_version: String,
    /// Deprecated in testgrid; initupload sets it to `repo-commit`.
    #[serde(rename = "repo-version", skip_serializing_if = "String::is_empty")]
    pub repo_version: String,
}

impl Started {
    /// `started.json` as initupload writes it, at `timestamp` (Unix
    /// seconds).
    ///
    /// `refs` are all refs of the run in clone order: the run's own `refs`
    /// first when `primary` is true, then its `extra_refs`. `cloned` pairs
    /// each cloned ref with its clone's final SHA (the clone records). The
    /// main ref is the run's own `refs`, else the first extra ref that is
    /// not `auxiliary`; `repo-commit` and `repo-version` are the final SHA of
    /// the clone of exactly that ref, else its [`revision`]. `pull` comes
    /// only from the run's own `refs`; `repos` covers every ref.
    pub fn new<'a>(
        timestamp: i64,
        refs: &[Refs],
        primary: bool,
        cloned: impl IntoIterator<Item = (&'a Refs, &'a str)>,
    ) -> Started {
        let main = main_refs(refs, primary);
        let mut version = main
            .and_then(|m| {
                cloned
                    .into_iter()
                    .find(|(r, _)| *r == m)
                    .map(|(_, sha)| sha.to_string())
            })
            .unwrap_or_default();
        if version.is_empty() {
            version = revision(refs, primary);
        }
        let pull = match refs.first().filter(|_| primary) {
            Some(r) => r.pulls.first().map(|p| p.number.to_string()),
            None => None,
        };
        Started {
            timestamp,
            pull: pull.unwrap_or_default(),
            repos: refs
                .iter()
                .map(|r| (format!("{}/{}", r.org, r.repo), refs_string(r)))
                .collect(),
            repo_commit: version.clone(),
            repo_version: version,
            ..Started::default()
        }
    }

    /// The JSON as Go's `json.Marshal` writes it (no trailing newline).
    pub fn to_json(&self) -> String {
        go_json(self)
    }
}

/// `finished.json`: testgrid's `metadata.Finished`, as the sidecar writes
/// it. `passed` is always written (`null` when unknown); the other fields
/// are left out when empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Finished {
    /// When the job finished, in Unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// Whether the job passed.
    pub passed: Option<bool>,
    /// The job's own metadata (the top-level keys of its `metadata.json`).
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// `SUCCESS`, `FAILURE` or `ABORTED`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub result: String,
    /// Deprecated in testgrid.
    #[serde(rename = "job-version", skip_serializing_if = "String::is_empty")]
    pub job_version: String,
    /// The main ref's revision ([`revision`]).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub revision: String,
    /// Deprecated in testgrid.
    #[serde(rename = "repo-version", skip_serializing_if = "String::is_empty")]
    pub repo_version: String,
}

impl Finished {
    /// `finished.json` for a test that ended with entrypoint's `exit_code`:
    /// passed when 0; `ABORTED` for [`ABORTED_CODE`], else `FAILURE`.
    /// `metadata` is the job's ([`read_metadata`]) and `revision` the main
    /// ref's ([`revision`]).
    ///
    /// initupload's `finished.json` after a failed clone is
    /// `from_exit(now, 1, Map::new(), "")`: no metadata, no revision.
    pub fn from_exit(
        timestamp: i64,
        exit_code: i32,
        metadata: Map<String, Value>,
        revision: &str,
    ) -> Finished {
        let passed = exit_code == 0;
        let result = if passed {
            "SUCCESS"
        } else if exit_code == ABORTED_CODE {
            "ABORTED"
        } else {
            "FAILURE"
        };
        Finished {
            timestamp: Some(timestamp),
            passed: Some(passed),
            metadata,
            result: result.into(),
            revision: revision.into(),
            ..Finished::default()
        }
    }

    /// The JSON as Go's `json.Marshal` writes it (no trailing newline).
    pub fn to_json(&self) -> String {
        go_json(self)
    }
}

/// The main ref of a run: its own `refs` (`refs[0]` when `primary`), else
/// the first extra ref that is not `auxiliary`.
fn main_refs(refs: &[Refs], primary: bool) -> Option<&Refs> {
    if primary {
        return refs.first();
    }
    refs.iter().find(|r| !r.auxiliary)
}

/// The revision of a run (Prow's `GetRevisionFromRefs`): of its main ref
/// (see [`Started::new`] for `refs` and `primary`), the first pull's SHA,
/// else the base SHA, else the base ref; `""` without a main ref.
pub fn revision(refs: &[Refs], primary: bool) -> String {
    let Some(main) = main_refs(refs, primary) else {
        return String::new();
    };
    if let Some(pull) = main.pulls.first() {
        return pull.sha.clone();
    }
    match main.base_sha.as_deref().filter(|s| !s.is_empty()) {
        Some(sha) => sha.to_string(),
        None => main.base_ref.clone().unwrap_or_default(),
    }
}

/// The metadata key the sidecar reports unreadable metadata files under.
pub const METADATA_ERRORS_KEY: &str = "sidecar-errors";

/// The sidecar's name for a wrapped test in its errors: `entry N: ARGS`.
pub fn entry_name(index: usize, args: &[String]) -> String {
    format!("entry {index}: {}", args.join(" "))
}

/// The metadata of one test container: the top-level keys of
/// `metadata_file` (`artifacts/metadata.json`), as [`combine_metadata`]
/// reads them for the test wrapped with `args` (entry 0).
pub fn read_metadata(metadata_file: &Path, args: &[String]) -> Map<String, Value> {
    combine_metadata(&[(entry_name(0, args), metadata_file)])
}

/// The sidecar's merge of the test containers' metadata files, given as
/// (entry name, path): the top-level keys of each JSON object, later files
/// winning. A missing file adds nothing; an unreadable one, or one that is
/// not a JSON object (`null` counts as an empty one), adds the error under
/// `sidecar-errors` (entry name to message — the sidecar writes Go's error
/// structs there, bosun their messages). Numbers are kept as Go holds them
/// (`float64`).
pub fn combine_metadata(entries: &[(String, &Path)]) -> Map<String, Value> {
    let mut merged = Map::new();
    let mut errors = Map::new();
    for (name, path) in entries {
        let raw = match fs::read(path) {
            Ok(raw) => raw,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                errors.insert(name.clone(), format!("{}: {e}", path.display()).into());
                continue;
            }
        };
        match serde_json::from_slice::<Value>(&raw) {
            Ok(Value::Object(piece)) => {
                for (k, v) in piece {
                    merged.insert(k, as_go_numbers(v));
                }
            }
            Ok(Value::Null) => {}
            Ok(other) => {
                let kind = match other {
                    Value::Bool(_) => "bool",
                    Value::Number(_) => "number",
                    Value::String(_) => "string",
                    _ => "array",
                };
                errors.insert(
                    name.clone(),
                    format!(
                        "json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
                    )
                    .into(),
                );
            }
            Err(e) => {
                errors.insert(name.clone(), e.to_string().into());
            }
        }
    }
    if !errors.is_empty() {
        merged.insert(METADATA_ERRORS_KEY.into(), Value::Object(errors));
    }
    merged
}

/// `v` with every number as Go's `float64` holds it: integers beyond
/// 2^53 lose their exactness as they do in Go.
fn as_go_numbers(v: Value) -> Value {
    const EXACT: u64 = 1 << 53;
    match v {
        Value::Number(n) => {
            let exact = n.as_u64().is_some_and(|u| u <= EXACT)
                || n.as_i64().is_some_and(|i| i.unsigned_abs() <= EXACT);
            if exact {
                Value::Number(n)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or(Value::Null, Value::Number)
            }
        }
        Value::Array(a) => Value::Array(a.into_iter().map(as_go_numbers).collect()),
        Value::Object(o) => {
            Value::Object(o.into_iter().map(|(k, v)| (k, as_go_numbers(v))).collect())
        }
        other => other,
    }
}

/// The ProwJob of a run, as `prowjob.json` holds it (`prow.k8s.io/v1`
/// `ProwJob`): the fields Prow's readers use, in Prow's order, empty ones
/// left out as Prow leaves them out. Write it with [`prowjob_json`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProwJob {
    /// `ProwJob`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// `prow.k8s.io/v1`.
    #[serde(rename = "apiVersion", skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Name, namespace, creation time, labels, annotations.
    pub metadata: ProwJobMeta,
    /// What the job runs.
    pub spec: ProwJobSpec,
    /// Where the run stands.
    pub status: ProwJobStatus,
}

impl Default for ProwJob {
    fn default() -> ProwJob {
        ProwJob {
            kind: "ProwJob".into(),
            api_version: "prow.k8s.io/v1".into(),
            metadata: ProwJobMeta::default(),
            spec: ProwJobSpec::default(),
            status: ProwJobStatus::default(),
        }
    }
}

/// A ProwJob's `metadata` (Kubernetes `ObjectMeta`, the fields a run has).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProwJobMeta {
    /// The ProwJob's name (the run's id).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The namespace ProwJobs live in.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// When the run was created ([`go_time`]); `null` when unknown, as
    /// Kubernetes writes a zero time.
    #[serde(rename = "creationTimestamp")]
    pub creation_timestamp: Option<String>,
    /// Labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A ProwJob's `spec`, in the order of Prow's `ProwJobSpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProwJobSpec {
    /// `presubmit`, `postsubmit`, `periodic` or `batch`.
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub job_type: String,
    /// `kubernetes` for pod jobs.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub agent: String,
    /// The build cluster.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// The namespace of the job's pods.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The job's name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub job: String,
    /// The code under test (Prow's `Refs` as JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refs: Option<Value>,
    /// Further repositories to clone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra_refs: Vec<Value>,
    /// Whether the result is reported.
    #[serde(skip_serializing_if = "is_false")]
    pub report: bool,
    /// The status context reported to GitHub.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub context: String,
    /// The comment that re-runs the job.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub rerun_command: String,
    /// The job's pod spec (undecorated, as configured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_spec: Option<Value>,
    /// The resolved decoration config.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decoration_config: Option<Value>,
}

/// A ProwJob's `status`, in the order of Prow's `ProwJobStatus`. Times are
/// [`go_time`] strings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProwJobStatus {
    /// When the run was created (`null` when unknown).
    #[serde(rename = "startTime")]
    pub start_time: Option<String>,
    /// When it started running.
    #[serde(rename = "pendingTime", skip_serializing_if = "Option::is_none")]
    pub pending_time: Option<String>,
    /// When it ended.
    #[serde(rename = "completionTime", skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    /// `triggered`, `pending`, `success`, `failure`, `aborted` or `error`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// The state's description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The run's page.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// The pod's name (Kubernetes runs).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub pod_name: String,
    /// The build id.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub build_id: String,
}

/// `prowjob.json`: `pj` as crier's GCS reporter writes it (Go's
/// `json.MarshalIndent` with a tab, no trailing newline).
pub fn prowjob_json(pj: &ProwJob) -> String {
    go_json_indent(pj)
}

/// A time as Kubernetes writes one (`metav1.Time`): RFC 3339 in UTC, whole
/// seconds (`2024-05-06T07:08:09Z`).
pub fn go_time(t: jiff::Timestamp) -> String {
    format!("{t:.0}")
}

/// Writes `value` to `path` as [`go_json`] writes it, atomically: a
/// temporary file in the same directory, synced, then renamed over `path`.
pub fn write_json_atomic<T: Serialize + ?Sized>(path: &Path, value: &T) -> io::Result<()> {
    write_atomic(path, go_json(value).as_bytes())
}

pub use bosun_base::fs::write_atomic;
