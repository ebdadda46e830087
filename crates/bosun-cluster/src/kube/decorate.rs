//! The decorated pod of a run on a Kubernetes build cluster: Prow's pod
//! utilities (clonerefs, initupload, entrypoint, sidecar) around the job's
//! containers, as plank's `decorate` builds them, so that Prow's released
//! utility images run in bosun's pods unchanged.
//!
//! What was read, in kubernetes-sigs/prow:
//! - `pkg/pod-utils/decorate/podspec.go` at
//!   087836a449afa406f3121fbd40625dc0bfa03b27 (`decorate`, `CloneRefs`,
//!   `InitUpload`, `PlaceEntrypoint`, `InjectEntrypoint`, `Sidecar`,
//!   `BlobStorageOptions`, the volume helpers; d04680445b20 is the same but
//!   for `minimum_secret_length`);
//! - `pkg/apis/prowjobs/v1/types.go` as the index holds it (with
//!   `sparse_checkout_files` and `minimum_secret_length`, as at a6194089):
//!   `DecorationConfig` and its parts, their JSON and `Validate`;
//! - the option types: `pkg/clonerefs/options.go` (db89760f),
//!   `pkg/gcsupload/options.go`, `pkg/initupload/options.go`,
//!   `pkg/entrypoint/options.go` (80627dab), `pkg/sidecar/options.go`
//!   (b7bffab5), `pkg/flagutil/storage.go` (384b6cc5), and the wrapper's
//!   options (`pkg/pod-utils/wrapper/options.go`, not in the index at a
//!   recent commit: its JSON is read off Prow's fixtures);
//! - `pkg/pod-utils/clone/clone.go` (`PathForRefs`: `path.Join`);
//! - `pkg/config/config.go` `validateDecoration` (the refusal texts).
//!
//! The pod, for a run whose spec snapshot carries a decoration config, in
//! Prow's order:
//! 1. the containers' environment gains `ARTIFACTS=/logs/artifacts` and
//!    `GOPATH=/home/prow/go` beside Prow's variables, and `JOB_SPEC` carries
//!    the decoration config;
//! 2. `clonerefs` (when there are refs and cloning is not skipped) goes
//!    before the job's init containers; `initupload` and `place-entrypoint`
//!    after them;
//! 3. every test container runs `/tools/entrypoint` with its command and
//!    arguments in `ENTRYPOINT_OPTIONS`, the last variable of its
//!    environment (so `$(VAR)` in them still expands), and mounts `/logs`,
//!    `/tools` and, when cloning, `/home/prow/go` as its working directory;
//! 4. the `sidecar` container comes last;
//! 5. volumes `logs`, `tools`, the credentials' secrets, then the clone's
//!    (ssh keys, OAuth token, GitHub App key, `clonerefs-tmp`, cookie file)
//!    and `code`;
//! 6. `default_memory_request`, the security context (always set, its
//!    users and group from the config when the job sets none), the
//!    scheduling options, `set_limit_equals_memory_request`,
//!    `terminationGracePeriodSeconds` (the grace period × 5/4, in whole
//!    seconds) and `default_service_account_name`.
//!
//! The utilities read their options as JSON from `CLONEREFS_OPTIONS`,
//! `INITUPLOAD_OPTIONS`, `ENTRYPOINT_OPTIONS` and `SIDECAR_OPTIONS`; they
//! are written as Go's `json.Marshal` writes Prow's structs: fields in the
//! structs' order, empty ones left out where Go leaves them out,
//! entrypoint's durations as integer nanoseconds, `dry_run:false` always,
//! and `<`, `>`, `&` escaped. `JOB_SPEC`'s `decoration_config` has its
//! durations as Go duration strings (`2h0m0s`).
//!
//! Where bosun writes JSON that differs from Go's: a resource quantity
//! (`default_memory_request`, the utility containers' resources inside
//! `JOB_SPEC`) is written as configured, where Go writes its canonical form
//! (`1024Mi` becomes `1Gi`); the pod's own copy is canonicalised by the API
//! server.
//!
//! A decoration config Prow would refuse (a local-only job relocated to
//! Kubernetes may lack the utility images or the GCS configuration) is a
//! a [`DecorationError`] (a pod error) with Prow's text: the run's resolved config goes
//! through the check bosun's configuration applies to a job that can land on
//! Kubernetes ([`DecorationConfig::validate`]).

use std::collections::{BTreeMap, BTreeSet};

use bosun_config::types::DecorationConfig;
use bosun_config::GoDuration;
use bosun_store::Run;
use k8s_openapi::api::core::v1::{
    Affinity, Container, EmptyDirVolumeSource, EnvVar, KeyToPath, PodSecurityContext, PodSpec,
    ResourceRequirements, SecretVolumeSource, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use bosun_job::gojson::{empty_str, go_json, is_false, RefsJson};
use bosun_job::refs::relative_path;

/// Why a run's decoration config cannot decorate its pod: Prow's text (a
/// config Prow would refuse, a container that does not say what to run).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecorationError(pub String);

const LOGS_NAME: &str = "logs";
const LOGS_PATH: &str = "/logs";
const ARTIFACTS_PATH: &str = "/logs/artifacts";
const CLONE_LOG: &str = "/logs/clone.json";
const CODE_NAME: &str = "code";
const CODE_PATH: &str = "/home/prow/go";
const TOOLS_NAME: &str = "tools";
const TOOLS_PATH: &str = "/tools";
const ENTRYPOINT: &str = "/tools/entrypoint";
const GCS_CREDENTIALS_NAME: &str = "gcs-credentials";
const GCS_CREDENTIALS_PATH: &str = "/secrets/gcs";
const S3_CREDENTIALS_NAME: &str = "s3-credentials";
const S3_CREDENTIALS_PATH: &str = "/secrets/s3-storage";
const CLONEREFS_TMP: &str = "clonerefs-tmp";
const COOKIEFILE_NAME: &str = "cookiefile";
const COOKIEFILE_PATH: &str = "/secrets/cookiefile";
const OAUTH_PATH: &str = "/secrets/oauth";
const GITHUB_APP_PATH: &str = "/secrets/github-app";
/// clonerefs' default GitHub API endpoint.
const GITHUB_API: &str = "https://api.github.com";
/// The git identity clonerefs commits merges as.
const GIT_USER_NAME: &str = "ci-robot";
const GIT_USER_EMAIL: &str = "ci-robot@k8s.io";
/// `0400`: secrets holding keys and cookies are readable by their owner only.
const SECRET_FILE_MODE: i32 = 0o400;

/// The clonerefs init container's name.
pub const CLONEREFS_NAME: &str = "clonerefs";
/// The initupload init container's name.
pub const INITUPLOAD_NAME: &str = "initupload";
/// The init container copying entrypoint into `/tools`.
pub const PLACE_ENTRYPOINT_NAME: &str = "place-entrypoint";
/// The sidecar container's name (the pod's last container).
pub const SIDECAR_NAME: &str = "sidecar";

/// Prow's `DecorationConfig`, typed as Prow types it: the pod utilities'
/// settings a decorated run carries. Made from bosun's configuration type
/// with [`Decoration::from_config`]; its JSON (`serde_json`) is Go's
/// (field order, empty fields left out, durations as `2h0m0s`), as in
/// `JOB_SPEC`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Decoration {
    /// How long entrypoint lets the test run before interrupting it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<GoDuration>,
    /// How long entrypoint waits after the interrupt before killing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_period: Option<GoDuration>,
    /// The utilities' images.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utility_images: Option<UtilityImages>,
    /// The utility containers' resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Where logs and artifacts are uploaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gcs_configuration: Option<GcsConfiguration>,
    /// The secret with GCS credentials (none or empty: none mounted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gcs_credentials_secret: Option<String>,
    /// The secret with S3 credentials (none or empty: none mounted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s3_credentials_secret: Option<String>,
    /// The pod's service account when the job names none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_service_account_name: Option<String>,
    /// Secrets with SSH keys for clonerefs.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub ssh_key_secrets: Vec<String>,
    /// SSH host fingerprints clonerefs trusts.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub ssh_host_fingerprints: Vec<String>,
    /// Blobless fetches by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blobless_fetch: Option<bool>,
    /// Sparse checkout of the primary ref.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub sparse_checkout_files: Vec<String>,
    /// No clonerefs, no code volume, no working directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_cloning: Option<bool>,
    /// `NAME` or `NAME/KEY`: the secret with a git cookie file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cookiefile_secret: Option<String>,
    /// The secret key with an OAuth token for cloning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth_token_secret: Option<SecretKey>,
    /// GitHub API endpoints (none: `https://api.github.com`).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub github_api_endpoints: Vec<String>,
    /// A GitHub App's id, for cloning.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub github_app_id: String,
    /// The secret key with the GitHub App's private key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub github_app_private_key_secret: Option<SecretKey>,
    /// The sidecar censors the test containers' secrets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub censor_secrets: Option<bool>,
    /// How the sidecar censors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub censoring_options: Option<CensoringOptions>,
    /// The sidecar ignores interrupts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upload_ignores_interrupts: Option<bool>,
    /// Test containers' memory limit := their memory request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_limit_equals_memory_request: Option<bool>,
    /// Memory request of test containers that have none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_memory_request: Option<Quantity>,
    /// Affinity and tolerations of pods that have none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling_options: Option<SchedulingOptions>,
    /// plank's pending timeout for this job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_pending_timeout: Option<GoDuration>,
    /// plank's running timeout for this job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_running_timeout: Option<GoDuration>,
    /// plank's unscheduled timeout for this job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_unscheduled_timeout: Option<GoDuration>,
    /// The pod's `runAsUser` when the job sets none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
    /// The pod's `runAsGroup` when the job sets none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<i64>,
    /// The pod's `fsGroup` when the job sets none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs_group: Option<i64>,
}

/// The utilities' images.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct UtilityImages {
    /// clonerefs' image.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub clonerefs: String,
    /// initupload's image.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub initupload: String,
    /// entrypoint's image.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub entrypoint: String,
    /// sidecar's image.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub sidecar: String,
}

/// The utility containers' resources.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Resources {
    /// clonerefs'.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "go_resources"
    )]
    pub clonerefs: Option<ResourceRequirements>,
    /// initupload's.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "go_resources"
    )]
    pub initupload: Option<ResourceRequirements>,
    /// place-entrypoint's.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "go_resources"
    )]
    pub place_entrypoint: Option<ResourceRequirements>,
    /// sidecar's.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "go_resources"
    )]
    pub sidecar: Option<ResourceRequirements>,
}

/// Where logs and artifacts go (Prow's `GCSConfiguration`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct GcsConfiguration {
    /// `NAME`, `gs://NAME` or `s3://NAME`.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub bucket: String,
    /// A path before the job paths.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub path_prefix: String,
    /// `legacy`, `single` or `explicit`.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub path_strategy: String,
    /// The organisation left out of paths.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub default_org: String,
    /// The repository left out of paths.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub default_repo: String,
    /// Media types by extension.
    #[serde(
        rename = "mediaTypes",
        deserialize_with = "nullable",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub media_types: BTreeMap<String, String>,
    /// Where the job's output is viewed.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub job_url_prefix: String,
    /// Copy instead of uploading.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub local_output_dir: String,
    /// Extensions gzipped on upload.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub compress_file_types: Vec<String>,
}

/// A key of a Kubernetes secret.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct SecretKey {
    /// The secret.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    /// The key in it.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub key: String,
}

/// How the sidecar censors secrets in logs and artifacts.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct CensoringOptions {
    /// Files censored at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub censoring_concurrency: Option<i64>,
    /// The buffer per censored file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub censoring_buffer_size: Option<i64>,
    /// Globs (under `$ARTIFACTS`) censored.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub include_directories: Vec<String>,
    /// Globs (under `$ARTIFACTS`) not censored.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub exclude_directories: Vec<String>,
    /// Shorter secrets are not censored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum_secret_length: Option<i64>,
}

/// Affinity and tolerations for pods that set none.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct SchedulingOptions {
    /// The pod's affinity.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "go_affinity"
    )]
    pub affinity: Option<Affinity>,
    /// The pod's tolerations.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "go_tolerations"
    )]
    pub tolerations: Option<Vec<Toleration>>,
}

/// `null` read as the empty value (Go reads `null` into a slice or string
/// as its zero value).
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

impl Decoration {
    /// A run's decoration config in Prow's types. It fails only when a
    /// free-form part of the configuration does not have Prow's shape.
    pub fn from_config(config: &DecorationConfig) -> Result<Decoration, DecorationError> {
        let invalid =
            |e: serde_json::Error| DecorationError(format!("invalid decoration config: {e}"));
        serde_json::to_value(config)
            .and_then(serde_json::from_value)
            .map_err(invalid)
    }

    /// `JOB_SPEC`'s `decoration_config`: Go's JSON of the config.
    pub fn to_go_json(&self) -> String {
        go_json(self)
    }
}

/// Prow's check of a decorated job, with its texts: the run's resolved
/// decoration config ([`DecorationConfig::validate`]), then each container's
/// command ([`DecorationConfig::says_what_to_run`]).
pub(super) fn check(config: &DecorationConfig, spec: &PodSpec) -> Result<(), DecorationError> {
    config
        .validate()
        .map_err(|e| DecorationError(format!("invalid decoration config: {e}")))?;
    if !spec
        .containers
        .iter()
        .all(DecorationConfig::says_what_to_run)
    {
        return Err(DecorationError(DecorationConfig::NO_COMMAND.into()));
    }
    Ok(())
}

/// Go's `path.Join`: the parts joined with `/`, then cleaned (`//`, `.`
/// and `..` resolved, no trailing `/`).
pub(crate) fn go_path_join(parts: &[&str]) -> String {
    let joined = parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("/");
    if joined.is_empty() {
        return String::new();
    }
    let rooted = joined.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|p| *p != "..") {
                    out.pop();
                } else if !rooted {
                    out.push("..");
                }
            }
            p => out.push(p),
        }
    }
    let body = out.join("/");
    match (rooted, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".into(),
        (false, false) => body,
    }
}

/// A mount of `name` at `path`.
fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

/// An `emptyDir` volume.
fn empty_dir(name: &str) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }
}

/// A volume of the secret `secret`.
fn secret_volume(
    name: &str,
    secret: &str,
    mode: Option<i32>,
    items: Option<Vec<KeyToPath>>,
) -> Volume {
    Volume {
        name: name.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.into()),
            default_mode: mode,
            items,
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// One environment variable.
fn env_var(name: &str, value: String) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value),
        value_from: None,
    }
}

/// Prow's `KubeEnv`: the variables sorted by name.
fn kube_env(env: &BTreeMap<String, String>) -> Vec<EnvVar> {
    env.iter().map(|(k, v)| env_var(k, v.clone())).collect()
}

/// clonerefs' options (`clonerefs.Options`); `max_parallel_workers` and
/// `fail` are never set by decoration.
#[derive(Serialize)]
struct CloneRefsOptions<'a> {
    src_root: &'a str,
    log: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    git_user_name: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    git_user_email: &'a str,
    refs: Vec<RefsJson<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    key_files: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    oauth_token_file: String,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    host_fingerprints: &'a [String],
    #[serde(skip_serializing_if = "String::is_empty")]
    cookie_path: String,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    github_api_endpoints: &'a [String],
    #[serde(skip_serializing_if = "empty_str")]
    github_app_id: &'a str,
    #[serde(skip_serializing_if = "String::is_empty")]
    github_app_private_key_file: String,
}

/// gcsupload's options (`gcsupload.Options`, its `GCSConfiguration` and
/// storage client options inlined); `sub_dir` is never set.
#[derive(Serialize, Clone)]
struct GcsOptions<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    items: Vec<&'a str>,
    #[serde(flatten)]
    gcs: &'a GcsConfiguration,
    #[serde(skip_serializing_if = "empty_str")]
    gcs_credentials_file: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    s3_credentials_file: &'a str,
    dry_run: bool,
}

/// initupload's options (`initupload.Options`).
#[derive(Serialize)]
struct InitUploadOptions<'a> {
    #[serde(flatten)]
    gcs: &'a GcsOptions<'a>,
    #[serde(skip_serializing_if = "empty_str")]
    log: &'a str,
}

/// The wrapper's options: what entrypoint runs and where it writes.
#[derive(Serialize, Clone)]
struct WrapperOptions {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    args: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    container_name: String,
    process_log: String,
    marker_file: String,
    metadata_file: String,
}

/// entrypoint's options (`entrypoint.Options`): durations in nanoseconds;
/// `previous_marker`, `always_zero`, `propagate_error_code` and the copy
/// options are never set by decoration.
#[derive(Serialize)]
struct EntrypointOptions<'a> {
    timeout: i64,
    grace_period: i64,
    #[serde(skip_serializing_if = "empty_str")]
    artifact_dir: &'a str,
    #[serde(flatten)]
    wrapper: &'a WrapperOptions,
}

/// sidecar's options (`sidecar.Options`); `entry_error` is false under
/// decoration, so left out.
#[derive(Serialize)]
struct SidecarOptions<'a> {
    gcs_options: GcsOptions<'a>,
    #[serde(skip_serializing_if = "<[WrapperOptions]>::is_empty")]
    entries: &'a [WrapperOptions],
    #[serde(skip_serializing_if = "is_false")]
    ignore_interrupts: bool,
    censoring_options: SidecarCensoring<'a>,
}

/// sidecar's `CensoringOptions`.
#[derive(Serialize)]
struct SidecarCensoring<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    secret_directories: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    censoring_concurrency: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    censoring_buffer_size: Option<i64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    include_directories: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    exclude_directories: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    minimum_secret_length: Option<i64>,
}

/// The clonerefs container and its volumes, or none when nothing is
/// cloned (Prow's `CloneRefs`).
fn clonerefs(
    dc: &Decoration,
    refs: &[&bosun_config::types::Refs],
    log: &VolumeMount,
    code: &VolumeMount,
) -> Option<(Container, Vec<Volume>)> {
    if dc.skip_cloning == Some(true) || refs.is_empty() {
        return None;
    }
    let mut mounts = Vec::new();
    let mut volumes = Vec::new();
    let mut key_files = Vec::new();
    for secret in &dc.ssh_key_secrets {
        let name = format!("ssh-keys-{secret}");
        let path = go_path_join(&["/secrets/ssh", secret]);
        volumes.push(secret_volume(&name, secret, Some(SECRET_FILE_MODE), None));
        mounts.push(mount(&name, &path, true));
        key_files.push(path);
    }
    let mut keyed = |secret: &SecretKey, path: &str| {
        let items = vec![KeyToPath {
            key: secret.key.clone(),
            path: format!("./{}", secret.key),
            mode: None,
        }];
        volumes.push(secret_volume(&secret.name, &secret.name, None, Some(items)));
        mounts.push(mount(&secret.name, path, true));
        go_path_join(&[path, &secret.key])
    };
    let oauth_token_file = dc
        .oauth_token_secret
        .as_ref()
        .map(|s| keyed(s, OAUTH_PATH))
        .unwrap_or_default();
    let github_app_private_key_file = dc
        .github_app_private_key_secret
        .as_ref()
        .map(|s| keyed(s, GITHUB_APP_PATH))
        .unwrap_or_default();
    volumes.push(empty_dir(CLONEREFS_TMP));
    mounts.push(mount(CLONEREFS_TMP, "/tmp", false));
    let mut args = Vec::new();
    let mut cookie_path = String::new();
    if let Some(cookie) = dc.cookiefile_secret.as_deref().filter(|c| !c.is_empty()) {
        let (secret, key) = cookie.split_once('/').unwrap_or((cookie, cookie));
        volumes.push(secret_volume(
            COOKIEFILE_NAME,
            secret,
            Some(SECRET_FILE_MODE),
            None,
        ));
        mounts.push(mount(COOKIEFILE_NAME, COOKIEFILE_PATH, true));
        cookie_path = go_path_join(&[COOKIEFILE_PATH, key]);
        args.push(format!("--cookiefile={cookie_path}"));
    }
    let default_endpoints = [GITHUB_API.to_string()];
    let options = CloneRefsOptions {
        src_root: &code.mount_path,
        log: CLONE_LOG,
        git_user_name: GIT_USER_NAME,
        git_user_email: GIT_USER_EMAIL,
        refs: refs.iter().map(|r| RefsJson::from(*r)).collect(),
        key_files,
        oauth_token_file,
        host_fingerprints: &dc.ssh_host_fingerprints,
        cookie_path,
        github_api_endpoints: if dc.github_api_endpoints.is_empty() {
            &default_endpoints
        } else {
            &dc.github_api_endpoints
        },
        github_app_id: &dc.github_app_id,
        github_app_private_key_file,
    };
    let mut all_mounts = vec![log.clone(), code.clone()];
    all_mounts.extend(mounts);
    let container = Container {
        name: CLONEREFS_NAME.into(),
        image: Some(images(dc).clonerefs.clone()),
        args: (!args.is_empty()).then_some(args),
        env: Some(vec![env_var("CLONEREFS_OPTIONS", go_json(&options))]),
        volume_mounts: Some(all_mounts),
        resources: dc.resources.as_ref().and_then(|r| r.clonerefs.clone()),
        ..Container::default()
    };
    Some((container, volumes))
}

/// The utility images (checked to be there before decorating).
fn images(dc: &Decoration) -> &UtilityImages {
    dc.utility_images
        .as_ref()
        .expect("a decoration config is validated before decorating")
}

/// Decorates `spec` (the job's pod spec, after Prow's undecorated
/// prologue) for `run` with `dc`; `raw_env` is Prow's environment of the
/// run (`JOB_SPEC` with the decoration config). Prow's `decorate`, step by
/// step. `dc` has passed [`check`].
pub(super) fn decorate(
    spec: &mut PodSpec,
    run: &Run,
    dc: &Decoration,
    mut raw_env: BTreeMap<String, String>,
) {
    raw_env.insert("ARTIFACTS".into(), ARTIFACTS_PATH.into());
    raw_env.insert("GOPATH".into(), CODE_PATH.into());
    let log_mount = mount(LOGS_NAME, LOGS_PATH, false);
    let code_mount = mount(CODE_NAME, CODE_PATH, false);
    let tools_mount = mount(TOOLS_NAME, TOOLS_PATH, false);
    let gcs = dc
        .gcs_configuration
        .as_ref()
        .expect("a decoration config is validated before decorating");

    // Blob storage credentials.
    let mut blob_volumes = Vec::new();
    let mut blob_mounts = Vec::new();
    let mut gcs_credentials_file = String::new();
    let mut s3_credentials_file = String::new();
    for (secret, name, path, file) in [
        (
            &dc.gcs_credentials_secret,
            GCS_CREDENTIALS_NAME,
            GCS_CREDENTIALS_PATH,
            &mut gcs_credentials_file,
        ),
        (
            &dc.s3_credentials_secret,
            S3_CREDENTIALS_NAME,
            S3_CREDENTIALS_PATH,
            &mut s3_credentials_file,
        ),
    ] {
        if let Some(secret) = secret.as_deref().filter(|s| !s.is_empty()) {
            blob_volumes.push(secret_volume(name, secret, None, None));
            blob_mounts.push(mount(name, path, false));
            *file = format!("{path}/service-account.json");
        }
    }
    let blob_options = GcsOptions {
        items: Vec::new(),
        gcs,
        gcs_credentials_file: &gcs_credentials_file,
        s3_credentials_file: &s3_credentials_file,
        dry_run: false,
    };

    // clonerefs, before the job's init containers.
    let refs: Vec<&bosun_config::types::Refs> = run
        .refs
        .as_deref()
        .into_iter()
        .chain(run.extra_refs.iter())
        .collect();
    let cloner = clonerefs(dc, &refs, &log_mount, &code_mount);
    let init = spec.init_containers.get_or_insert_with(Vec::new);
    let (cloned, clone_volumes) = match cloner {
        Some((container, volumes)) => {
            init.insert(0, container);
            (true, volumes)
        }
        None => (false, Vec::new()),
    };

    // initupload and place-entrypoint, after them.
    let job_spec = raw_env.get("JOB_SPEC").cloned().unwrap_or_default();
    let initupload_options = InitUploadOptions {
        gcs: &blob_options,
        log: if cloned { CLONE_LOG } else { "" },
    };
    let mut initupload_mounts = Vec::new();
    if cloned {
        initupload_mounts.push(log_mount.clone());
    }
    initupload_mounts.extend(blob_mounts.iter().cloned());
    init.push(Container {
        name: INITUPLOAD_NAME.into(),
        image: Some(images(dc).initupload.clone()),
        env: Some(kube_env(&BTreeMap::from([
            ("INITUPLOAD_OPTIONS".into(), go_json(&initupload_options)),
            ("JOB_SPEC".into(), job_spec.clone()),
        ]))),
        volume_mounts: Some(initupload_mounts),
        resources: dc.resources.as_ref().and_then(|r| r.initupload.clone()),
        ..Container::default()
    });
    init.push(Container {
        name: PLACE_ENTRYPOINT_NAME.into(),
        image: Some(images(dc).entrypoint.clone()),
        args: Some(vec!["--copy-mode-only".into()]),
        volume_mounts: Some(vec![tools_mount.clone()]),
        resources: dc
            .resources
            .as_ref()
            .and_then(|r| r.place_entrypoint.clone()),
        ..Container::default()
    });

    // The job's environment.
    let env = kube_env(&raw_env);
    for c in &mut spec.containers {
        c.env
            .get_or_insert_with(Vec::new)
            .extend(env.iter().cloned());
    }

    // entrypoint in every test container.
    let secret_volumes: BTreeSet<&str> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.secret.is_some())
        .map(|v| v.name.as_str())
        .collect();
    let censor = dc.censor_secrets == Some(true);
    let timeout = dc.timeout.map_or(0, GoDuration::as_nanos);
    let grace = dc.grace_period.map_or(0, GoDuration::as_nanos);
    let single = spec.containers.len() == 1;
    let mut secret_mounts = Vec::new();
    let mut wrappers = Vec::new();
    for c in &mut spec.containers {
        let prefix = if single { "" } else { c.name.as_str() };
        let (process_log, marker_file, metadata_file) = if prefix.is_empty() {
            (
                format!("{LOGS_PATH}/process-log.txt"),
                format!("{LOGS_PATH}/marker-file.txt"),
                format!("{ARTIFACTS_PATH}/metadata.json"),
            )
        } else {
            (
                format!("{LOGS_PATH}/{prefix}-log.txt"),
                format!("{LOGS_PATH}/{prefix}-marker.txt"),
                format!("{ARTIFACTS_PATH}/{prefix}-metadata.json"),
            )
        };
        let wrapper = WrapperOptions {
            args: c
                .command
                .iter()
                .flatten()
                .chain(c.args.iter().flatten())
                .cloned()
                .collect(),
            container_name: c.name.clone(),
            process_log,
            marker_file,
            metadata_file,
        };
        let options = EntrypointOptions {
            timeout,
            grace_period: grace,
            artifact_dir: ARTIFACTS_PATH,
            wrapper: &wrapper,
        };
        c.command = Some(vec![ENTRYPOINT.into()]);
        c.args = None;
        c.env
            .get_or_insert_with(Vec::new)
            .push(env_var("ENTRYPOINT_OPTIONS", go_json(&options)));
        let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
        mounts.push(log_mount.clone());
        mounts.push(tools_mount.clone());
        if censor {
            secret_mounts.extend(
                mounts
                    .iter()
                    .filter(|m| secret_volumes.contains(m.name.as_str()))
                    .cloned(),
            );
        }
        wrappers.push(wrapper);
    }

    // The sidecar (added last, below).
    let mut sidecar_gcs = blob_options.clone();
    sidecar_gcs.items.push(ARTIFACTS_PATH);
    let censoring = dc.censoring_options.as_ref();
    let sidecar_options = SidecarOptions {
        gcs_options: sidecar_gcs,
        entries: &wrappers,
        ignore_interrupts: dc.upload_ignores_interrupts == Some(true),
        censoring_options: SidecarCensoring {
            secret_directories: secret_mounts.iter().map(|m| m.mount_path.clone()).collect(),
            censoring_concurrency: censoring.and_then(|c| c.censoring_concurrency),
            censoring_buffer_size: censoring.and_then(|c| c.censoring_buffer_size),
            include_directories: censoring.map_or(&[], |c| &c.include_directories),
            exclude_directories: censoring.map_or(&[], |c| &c.exclude_directories),
            minimum_secret_length: censoring.and_then(|c| c.minimum_secret_length),
        },
    };
    let mut sidecar_mounts = vec![log_mount.clone()];
    sidecar_mounts.extend(blob_mounts.iter().cloned());
    sidecar_mounts.extend(secret_mounts);
    let sidecar = Container {
        name: SIDECAR_NAME.into(),
        image: Some(images(dc).sidecar.clone()),
        env: Some(kube_env(&BTreeMap::from([
            ("JOB_SPEC".into(), job_spec),
            ("SIDECAR_OPTIONS".into(), go_json(&sidecar_options)),
        ]))),
        volume_mounts: Some(sidecar_mounts),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        resources: dc.resources.as_ref().and_then(|r| r.sidecar.clone()),
        ..Container::default()
    };

    // Volumes; the clone's working directory.
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    volumes.push(empty_dir(LOGS_NAME));
    volumes.push(empty_dir(TOOLS_NAME));
    volumes.extend(blob_volumes);
    if cloned {
        let chosen = refs.iter().find(|r| r.workdir).unwrap_or(&refs[0]);
        let work_dir = go_path_join(&[CODE_PATH, "src", &relative_path(chosen)]);
        for c in &mut spec.containers {
            c.working_dir = Some(work_dir.clone());
            c.volume_mounts
                .get_or_insert_with(Vec::new)
                .push(code_mount.clone());
        }
        volumes.extend(clone_volumes);
        volumes.push(empty_dir(CODE_NAME));
    }

    // Resources, security context, scheduling.
    if let Some(memory) = &dc.default_memory_request {
        for c in &mut spec.containers {
            let resources = c.resources.get_or_insert_with(Default::default);
            let requests = resources.requests.get_or_insert_with(BTreeMap::new);
            requests
                .entry("memory".into())
                .or_insert_with(|| memory.clone());
        }
    }
    let security = spec
        .security_context
        .get_or_insert_with(PodSecurityContext::default);
    if security.run_as_user.is_none() {
        security.run_as_user = dc.run_as_user;
    }
    if security.run_as_group.is_none() {
        security.run_as_group = dc.run_as_group;
    }
    if security.fs_group.is_none() {
        security.fs_group = dc.fs_group;
    }
    if let Some(scheduling) = &dc.scheduling_options {
        if spec.affinity.is_none() {
            spec.affinity.clone_from(&scheduling.affinity);
        }
        if spec.tolerations.is_none() {
            spec.tolerations.clone_from(&scheduling.tolerations);
        }
    }
    if dc.set_limit_equals_memory_request == Some(true) {
        for c in &mut spec.containers {
            let Some(resources) = c.resources.as_mut() else {
                continue;
            };
            let Some(memory) = resources.requests.as_ref().and_then(|r| r.get("memory")) else {
                continue;
            };
            let memory = memory.clone();
            resources
                .limits
                .get_or_insert_with(BTreeMap::new)
                .insert("memory".into(), memory);
        }
    }

    spec.containers.push(sidecar);

    if spec.termination_grace_period_seconds.is_none() {
        if let Some(grace) = dc.grace_period {
            // Go: int64(grace.Seconds()) * 5 / 4, whole seconds first.
            let seconds = grace.as_nanos() / 1_000_000_000;
            spec.termination_grace_period_seconds = Some(seconds * 5 / 4);
        }
    }
    if spec
        .service_account_name
        .as_deref()
        .unwrap_or("")
        .is_empty()
    {
        if let Some(sa) = &dc.default_service_account_name {
            spec.service_account_name = Some(sa.clone());
        }
    }
}

// Go's JSON of the Kubernetes types inside a decoration config: the fields
// in the order of Go's structs (k8s-openapi writes them alphabetically),
// empty ones left out where Go leaves them out.

fn go_resources<S: Serializer>(r: &Option<ResourceRequirements>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct GoResources<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        limits: Option<&'a BTreeMap<String, Quantity>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        requests: Option<&'a BTreeMap<String, Quantity>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        claims: Option<&'a Vec<k8s_openapi::api::core::v1::ResourceClaim>>,
    }
    let r = r.as_ref().expect("skipped when none");
    GoResources {
        limits: r.limits.as_ref().filter(|m| !m.is_empty()),
        requests: r.requests.as_ref().filter(|m| !m.is_empty()),
        claims: r.claims.as_ref().filter(|c| !c.is_empty()),
    }
    .serialize(s)
}

fn go_tolerations<S: Serializer>(t: &Option<Vec<Toleration>>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct GoToleration<'a> {
        #[serde(skip_serializing_if = "empty_str")]
        key: &'a str,
        #[serde(skip_serializing_if = "empty_str")]
        operator: &'a str,
        #[serde(skip_serializing_if = "empty_str")]
        value: &'a str,
        #[serde(skip_serializing_if = "empty_str")]
        effect: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        toleration_seconds: Option<i64>,
    }
    fn o(s: &Option<String>) -> &str {
        s.as_deref().unwrap_or("")
    }
    let list: Vec<GoToleration<'_>> = t
        .iter()
        .flatten()
        .map(|t| GoToleration {
            key: o(&t.key),
            operator: o(&t.operator),
            value: o(&t.value),
            effect: o(&t.effect),
            toleration_seconds: t.toleration_seconds,
        })
        .collect();
    list.serialize(s)
}

fn go_affinity<S: Serializer>(a: &Option<Affinity>, s: S) -> Result<S::Ok, S::Error> {
    use k8s_openapi::api::core::v1::{
        NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm,
        WeightedPodAffinityTerm,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn list<T>(v: &Option<Vec<T>>) -> &[T] {
        v.as_deref().unwrap_or(&[])
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Requirement<'a> {
        key: &'a str,
        operator: &'a str,
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        values: &'a [String],
    }
    fn requirements(r: &Option<Vec<NodeSelectorRequirement>>) -> Vec<Requirement<'_>> {
        list(r)
            .iter()
            .map(|r| Requirement {
                key: &r.key,
                operator: &r.operator,
                values: list(&r.values),
            })
            .collect()
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Term<'a> {
        #[serde(skip_serializing_if = "Vec::is_empty")]
        match_expressions: Vec<Requirement<'a>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        match_fields: Vec<Requirement<'a>>,
    }
    fn term(t: &NodeSelectorTerm) -> Term<'_> {
        Term {
            match_expressions: requirements(&t.match_expressions),
            match_fields: requirements(&t.match_fields),
        }
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct NodeSelector<'a> {
        node_selector_terms: Vec<Term<'a>>,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Preferred<'a> {
        weight: i32,
        preference: Term<'a>,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct GoNodeAffinity<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        required_during_scheduling_ignored_during_execution: Option<NodeSelector<'a>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        preferred_during_scheduling_ignored_during_execution: Vec<Preferred<'a>>,
    }
    fn node(n: &NodeAffinity) -> GoNodeAffinity<'_> {
        GoNodeAffinity {
            required_during_scheduling_ignored_during_execution: n
                .required_during_scheduling_ignored_during_execution
                .as_ref()
                .map(|r| NodeSelector {
                    node_selector_terms: r.node_selector_terms.iter().map(term).collect(),
                }),
            preferred_during_scheduling_ignored_during_execution: list(
                &n.preferred_during_scheduling_ignored_during_execution,
            )
            .iter()
            .map(|p| Preferred {
                weight: p.weight,
                preference: term(&p.preference),
            })
            .collect(),
        }
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Selector<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        match_labels: Option<&'a BTreeMap<String, String>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        match_expressions: Vec<Requirement<'a>>,
    }
    fn selector(l: &LabelSelector) -> Selector<'_> {
        Selector {
            match_labels: l.match_labels.as_ref().filter(|m| !m.is_empty()),
            match_expressions: list(&l.match_expressions)
                .iter()
                .map(|r| Requirement {
                    key: &r.key,
                    operator: &r.operator,
                    values: list(&r.values),
                })
                .collect(),
        }
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct PodTerm<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        label_selector: Option<Selector<'a>>,
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        namespaces: &'a [String],
        topology_key: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        namespace_selector: Option<Selector<'a>>,
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        match_label_keys: &'a [String],
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        mismatch_label_keys: &'a [String],
    }
    fn pod_term(t: &PodAffinityTerm) -> PodTerm<'_> {
        PodTerm {
            label_selector: t.label_selector.as_ref().map(selector),
            namespaces: list(&t.namespaces),
            topology_key: &t.topology_key,
            namespace_selector: t.namespace_selector.as_ref().map(selector),
            match_label_keys: list(&t.match_label_keys),
            mismatch_label_keys: list(&t.mismatch_label_keys),
        }
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Weighted<'a> {
        weight: i32,
        pod_affinity_term: PodTerm<'a>,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct GoPodAffinity<'a> {
        #[serde(skip_serializing_if = "Vec::is_empty")]
        required_during_scheduling_ignored_during_execution: Vec<PodTerm<'a>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        preferred_during_scheduling_ignored_during_execution: Vec<Weighted<'a>>,
    }
    fn pod<'a>(
        required: &'a Option<Vec<PodAffinityTerm>>,
        preferred: &'a Option<Vec<WeightedPodAffinityTerm>>,
    ) -> GoPodAffinity<'a> {
        GoPodAffinity {
            required_during_scheduling_ignored_during_execution: list(required)
                .iter()
                .map(pod_term)
                .collect(),
            preferred_during_scheduling_ignored_during_execution: list(preferred)
                .iter()
                .map(|w| Weighted {
                    weight: w.weight,
                    pod_affinity_term: pod_term(&w.pod_affinity_term),
                })
                .collect(),
        }
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct GoAffinity<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        node_affinity: Option<GoNodeAffinity<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pod_affinity: Option<GoPodAffinity<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pod_anti_affinity: Option<GoPodAffinity<'a>>,
    }
    let a = a.as_ref().expect("skipped when none");
    GoAffinity {
        node_affinity: a.node_affinity.as_ref().map(node),
        pod_affinity: a.pod_affinity.as_ref().map(|p| {
            pod(
                &p.required_during_scheduling_ignored_during_execution,
                &p.preferred_during_scheduling_ignored_during_execution,
            )
        }),
        pod_anti_affinity: a.pod_anti_affinity.as_ref().map(|p| {
            pod(
                &p.required_during_scheduling_ignored_during_execution,
                &p.preferred_during_scheduling_ignored_during_execution,
            )
        }),
    }
    .serialize(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decoration(v: serde_json::Value) -> Decoration {
        let config: DecorationConfig = serde_json::from_value(v).expect("a decoration config");
        Decoration::from_config(&config).expect("Prow's shape")
    }

    fn valid() -> serde_json::Value {
        json!({
            "utility_images": {"clonerefs": "c", "initupload": "i", "entrypoint": "e", "sidecar": "s"},
            "gcs_configuration": {"bucket": "b", "path_strategy": "explicit"},
        })
    }

    #[test]
    fn paths_are_joined_and_cleaned_as_go_does() {
        for (parts, want) in [
            (
                &["/home/prow/go", "src", "k8s.io/test-infra"][..],
                "/home/prow/go/src/k8s.io/test-infra",
            ),
            (
                &["/home/prow/go", "src", "k8s.io/test-infra/"],
                "/home/prow/go/src/k8s.io/test-infra",
            ),
            (
                &["/home/prow/go", "src", "a//b/./c"],
                "/home/prow/go/src/a/b/c",
            ),
            (&["/home/prow/go", "src", "../../x"], "/home/prow/x"),
            (&["/secrets/ssh", "../../../etc"], "/etc"),
            (&["/secrets/cookiefile", ""], "/secrets/cookiefile"),
            (&["a", "..", ".."], ".."),
            (&["", ""], ""),
        ] {
            assert_eq!(go_path_join(parts), want, "{parts:?}");
        }
    }

    #[test]
    fn the_config_is_go_json_in_prows_field_order() {
        let d = decoration(json!({
            "fs_group": 2000,
            "pod_running_timeout": "48h",
            "default_memory_request": "4Gi",
            "censoring_options": {"minimum_secret_length": 4, "censoring_concurrency": 2},
            "github_app_id": "",
            "sparse_checkout_files": ["Makefile"],
            "blobless_fetch": false,
            "gcs_credentials_secret": "",
            "gcs_configuration": {"mediaTypes": {"b": "x/y", "a": "x/z"}, "bucket": "b", "compress_file_types": ["*"]},
            "grace_period": "1.5s",
            "timeout": "90m",
            "resources": {"sidecar": {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}}},
            "oauth_token_secret": {"key": "token", "name": "oauth"},
            "utility_images": {"sidecar": "a<b>&c"},
        }));
        assert_eq!(
            d.to_go_json(),
            concat!(
                r#"{"timeout":"1h30m0s","grace_period":"1.5s","utility_images":{"sidecar":"a\u003cb\u003e\u0026c"},"#,
                r#""resources":{"sidecar":{"limits":{"memory":"1Gi"},"requests":{"cpu":"100m"}}},"#,
                r#""gcs_configuration":{"bucket":"b","mediaTypes":{"a":"x/z","b":"x/y"},"compress_file_types":["*"]},"#,
                r#""gcs_credentials_secret":"","blobless_fetch":false,"sparse_checkout_files":["Makefile"],"#,
                r#""oauth_token_secret":{"name":"oauth","key":"token"},"#,
                r#""censoring_options":{"censoring_concurrency":2,"minimum_secret_length":4},"#,
                r#""default_memory_request":"4Gi","pod_running_timeout":"48h0m0s","fs_group":2000}"#
            )
        );
    }

    #[test]
    fn scheduling_options_are_written_in_gos_field_order() {
        let d = decoration(json!({"scheduling_options": {
            "tolerations": [
                {"effect": "NoExecute", "key": "k", "operator": "Equal", "tolerationSeconds": 30, "value": "v"},
                {"operator": "Exists"},
            ],
            "affinity": {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": {
                        "topologyKey": "zone", "namespaces": ["ns"],
                        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}], "matchLabels": {"a": "b"}},
                    }}],
                    "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "host"}],
                },
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"preference": {}, "weight": 1}],
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]},
                    ]},
                },
            },
        }}));
        assert_eq!(
            d.to_go_json(),
            concat!(
                r#"{"scheduling_options":{"affinity":{"nodeAffinity":{"#,
                r#""requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"NotIn","values":["n1"]}]}]},"#,
                r#""preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{}}]},"#,
                r#""podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"host"}],"#,
                r#""preferredDuringSchedulingIgnoredDuringExecution":[{"weight":5,"podAffinityTerm":{"#,
                r#""labelSelector":{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"app","operator":"In","values":["x"]}]},"#,
                r#""namespaces":["ns"],"topologyKey":"zone"}}]}},"#,
                r#""tolerations":[{"key":"k","operator":"Equal","value":"v","effect":"NoExecute","tolerationSeconds":30},{"operator":"Exists"}]}}"#
            )
        );
    }

    fn decorated(dc: serde_json::Value, spec: serde_json::Value) -> PodSpec {
        let d = decoration(dc);
        let mut spec: PodSpec = serde_json::from_value(spec).unwrap();
        let run = bosun_store::NewRun {
            job: "j".into(),
            job_type: bosun_config::types::JobType::Periodic,
            periodic: Some("j".into()),
            configured_cluster: "c".into(),
            state: bosun_store::RunState::Triggered,
            refs: None,
            extra_refs: vec![],
            labels: BTreeMap::new().into(),
            annotations: BTreeMap::new().into(),
            spec: json!({}).into(),
            scheduled_at: None,
            attempt: 0,
            description: String::new(),
        }
        .into_run("id".into(), 1, "h".into(), jiff::Timestamp::UNIX_EPOCH);
        decorate(&mut spec, &run, &d, BTreeMap::new());
        spec
    }

    #[test]
    fn the_termination_grace_period_is_five_quarters_of_whole_seconds() {
        let grace = |g: Option<&str>, spec: serde_json::Value| {
            let mut dc = valid();
            if let Some(g) = g {
                dc["grace_period"] = json!(g);
            }
            decorated(dc, spec).termination_grace_period_seconds
        };
        let one = json!({"containers": [{"name": "test", "command": ["t"]}]});
        assert_eq!(grace(Some("10s"), one.clone()), Some(12));
        assert_eq!(grace(Some("15s"), one.clone()), Some(18));
        assert_eq!(grace(Some("1h"), one.clone()), Some(4500));
        assert_eq!(
            grace(Some("1999ms"), one.clone()),
            Some(1),
            "whole seconds first"
        );
        assert_eq!(grace(Some("0s"), one.clone()), Some(0), "a set zero is set");
        assert_eq!(grace(None, one), None, "Kubernetes' default");
        let own = json!({"terminationGracePeriodSeconds": 60, "containers": [{"name": "test", "command": ["t"]}]});
        assert_eq!(grace(Some("10s"), own), Some(60), "the job's own stays");
    }

    #[test]
    fn the_job_s_own_scheduling_security_and_service_account_win() {
        let mut dc = valid();
        dc["run_as_user"] = json!(1000);
        dc["fs_group"] = json!(2000);
        dc["default_service_account_name"] = json!("prowjob-default");
        dc["scheduling_options"] = json!({
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}]}},
        });
        let spec = decorated(
            dc.clone(),
            json!({
                "serviceAccountName": "mine",
                "securityContext": {"runAsUser": 0},
                "tolerations": [],
                "containers": [{"name": "test", "command": ["t"]}],
            }),
        );
        assert_eq!(spec.service_account_name.as_deref(), Some("mine"));
        let sc = spec.security_context.unwrap();
        assert_eq!(
            (sc.run_as_user, sc.fs_group, sc.run_as_group),
            (Some(0), Some(2000), None)
        );
        assert_eq!(
            spec.tolerations,
            Some(vec![]),
            "an empty list is the job's own"
        );
        assert!(
            spec.affinity.is_some(),
            "no affinity of its own: the config's"
        );
        let spec = decorated(
            dc,
            json!({"containers": [{"name": "test", "command": ["t"]}]}),
        );
        assert_eq!(
            spec.service_account_name.as_deref(),
            Some("prowjob-default")
        );
        assert_eq!(
            spec.tolerations.unwrap()[0].key.as_deref(),
            Some("dedicated")
        );
    }

    #[test]
    fn s3_credentials_are_mounted_beside_gcs_ones() {
        let mut dc = valid();
        dc["gcs_credentials_secret"] = json!("gcs");
        dc["s3_credentials_secret"] = json!("s3");
        dc["upload_ignores_interrupts"] = json!(true);
        let spec = decorated(
            dc,
            json!({"containers": [{"name": "test", "command": ["t"]}]}),
        );
        let sidecar = spec.containers.last().unwrap();
        let mounts: Vec<_> = sidecar
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| (m.name.as_str(), m.mount_path.as_str()))
            .collect();
        assert_eq!(
            mounts,
            [
                ("logs", "/logs"),
                ("gcs-credentials", "/secrets/gcs"),
                ("s3-credentials", "/secrets/s3-storage")
            ]
        );
        let options = sidecar.env.as_ref().unwrap()[1].value.clone().unwrap();
        assert_eq!(
            options,
            concat!(
                r#"{"gcs_options":{"items":["/logs/artifacts"],"bucket":"b","path_strategy":"explicit","#,
                r#""gcs_credentials_file":"/secrets/gcs/service-account.json","#,
                r#""s3_credentials_file":"/secrets/s3-storage/service-account.json","dry_run":false},"#,
                r#""entries":[{"args":["t"],"container_name":"test","process_log":"/logs/process-log.txt","#,
                r#""marker_file":"/logs/marker-file.txt","metadata_file":"/logs/artifacts/metadata.json"}],"#,
                r#""ignore_interrupts":true,"censoring_options":{}}"#
            )
        );
    }

    #[test]
    fn clone_secrets_are_mounted_for_clonerefs() {
        let mut dc = valid();
        dc["oauth_token_secret"] = json!({"name": "oauth", "key": "token"});
        dc["github_app_id"] = json!("123");
        dc["github_app_private_key_secret"] = json!({"name": "app", "key": "key.pem"});
        dc["github_api_endpoints"] = json!(["http://ghproxy"]);
        dc["cookiefile_secret"] = json!("");
        let d = decoration(dc);
        let refs = bosun_config::types::Refs {
            org: "o".into(),
            repo: "r".into(),
            ..Default::default()
        };
        let log = mount(LOGS_NAME, LOGS_PATH, false);
        let code = mount(CODE_NAME, CODE_PATH, false);
        let (c, volumes) = clonerefs(&d, &[&refs], &log, &code).expect("cloned");
        assert_eq!(c.args, None, "an empty cookie file secret is none");
        let names: Vec<_> = volumes.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["oauth", "app", "clonerefs-tmp"]);
        let oauth = volumes[0].secret.as_ref().unwrap();
        assert_eq!(oauth.items.as_ref().unwrap()[0].path, "./token");
        assert_eq!(oauth.default_mode, None);
        assert_eq!(
            c.env.unwrap()[0].value.as_deref().unwrap(),
            concat!(
                r#"{"src_root":"/home/prow/go","log":"/logs/clone.json","git_user_name":"ci-robot","#,
                r#""git_user_email":"ci-robot@k8s.io","refs":[{"org":"o","repo":"r"}],"#,
                r#""oauth_token_file":"/secrets/oauth/token","github_api_endpoints":["http://ghproxy"],"#,
                r#""github_app_id":"123","github_app_private_key_file":"/secrets/github-app/key.pem"}"#
            )
        );
        let mut skip = d.clone();
        skip.skip_cloning = Some(true);
        assert!(clonerefs(&skip, &[&refs], &log, &code).is_none());
        assert!(clonerefs(&d, &[], &log, &code).is_none());
    }
}
