//! Defaults and presets: what an unwritten field becomes, as Prow decides it.
//!
//! Prow's empty configuration ([`default_config`]), a job's defaulted fields
//! (agent, namespace, cluster, decoration, a presubmit's context, trigger and
//! rerun command), presets (which apply to a job, and how they merge into its pod
//! spec) and the layering of `plank.default_decoration_config_entries` under a
//! job's own decoration config. The validator calls these while loading; the
//! [`Snapshot`](crate::Snapshot) calls the merges when a run needs them.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::marker::PhantomData;

use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements, Toleration};

use crate::types::{
    DecorationConfig, FreeForm, JobBase, Plank, PostsubmitFields, Preset, PresubmitFields,
    ProwConfig, SchedulingOptions,
};
use crate::yaml::{from_node, Form, Mark, Node, Span, Value};

/// Prow's configuration with nothing written: every field at its default.
pub fn default_config() -> ProwConfig {
    let empty = Node {
        mark: Mark::default(),
        span: Span::default(),
        anchor: 0,
        form: Form::Block,
        tagged: false,
        value: Value::Map(Vec::new()),
    };
    from_node(&empty, &RefCell::new(Vec::new())).expect("the empty config is valid")
}

// --- Jobs.

/// Prow's `defaultJobBase` and the decoration default: fills the fields every job
/// has when they are not written.
pub(crate) fn default_job_base(b: &mut JobBase, config: &ProwConfig) {
    if b.agent.is_empty() {
        // Lighthouse: a `source:` pipeline file means a Tekton job.
        b.agent = if b.source.is_some() {
            "tekton-pipeline".into()
        } else {
            "kubernetes".into()
        };
    }
    if b.namespace.as_deref().is_none_or(str::is_empty) {
        b.namespace = Some(config.pod_namespace.clone());
    }
    if b.cluster.is_empty() {
        b.cluster = "default".into();
    }
    // The merge with `plank.default_decoration_config_entries` is not stored
    // (every decorated job would carry a copy of the defaults): validation
    // reads through the layers, and `Snapshot::decoration_config` merges.
    b.decorate.get_or_insert(config.decorate_all_jobs);
}

/// A presubmit's context defaults to its name; its trigger and rerun command to
/// Prow's `/test NAME` when neither is written.
pub(crate) fn default_presubmit(name: &str, k: &mut PresubmitFields) {
    if k.context.is_empty() {
        k.context = name.to_string();
    }
    if k.trigger.is_empty() && k.rerun_command.is_empty() {
        k.trigger = default_trigger(name);
        k.rerun_command = default_rerun_command(name);
    }
}

/// A postsubmit's context defaults to its name.
pub(crate) fn default_postsubmit(name: &str, k: &mut PostsubmitFields) {
    if k.context.is_empty() {
        k.context = name.to_string();
    }
}

/// Prow's default trigger for a presubmit.
pub fn default_trigger(name: &str) -> String {
    format!(r"(?m)^/test( | .* ){name},?($|\s.*)")
}

/// Prow's default rerun command for a presubmit.
pub fn default_rerun_command(name: &str) -> String {
    format!("/test {name}")
}

// --- Presets.

/// Why presets do not merge into a pod spec (Prow's texts).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PresetMergeError {
    /// An environment variable the spec (or an earlier preset) already has.
    #[error("env var duplicated in pod spec: {0}")]
    Env(String),
    /// A volume the spec (or an earlier preset) already has.
    #[error("volume duplicated in pod spec: {0}")]
    Volume(String),
    /// A toleration the spec (or an earlier preset) already has.
    #[error("toleration duplicated in pod spec: {0:?}")]
    Toleration(Box<Toleration>),
    /// A volume mount the spec (or an earlier preset) already has.
    #[error("volume mount duplicated in pod spec: {0}")]
    VolumeMount(String),
}

/// Prow's `mergePreset`: a preset applies when the job carries all its labels.
pub fn merge_preset(
    preset: &Preset,
    labels: &BTreeMap<String, String>,
    spec: &mut PodSpec,
) -> Result<(), PresetMergeError> {
    if !preset_matches(preset, labels) {
        return Ok(());
    }
    for e in &preset.env {
        for c in &mut spec.containers {
            let env = c.env.get_or_insert_with(Vec::new);
            if env.iter().any(|x| x.name == e.name) {
                return Err(PresetMergeError::Env(e.name.clone()));
            }
            env.push(e.clone());
        }
    }
    for v in &preset.volumes {
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        if volumes.iter().any(|x| x.name == v.name) {
            return Err(PresetMergeError::Volume(v.name.clone()));
        }
        volumes.push(v.clone());
    }
    for t in &preset.tolerations {
        let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
        if tolerations.contains(t) {
            return Err(PresetMergeError::Toleration(Box::new(t.clone())));
        }
        tolerations.push(t.clone());
    }
    for m in &preset.volume_mounts {
        for c in &mut spec.containers {
            let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
            if mounts.iter().any(|x| x.name == m.name) {
                return Err(PresetMergeError::VolumeMount(m.name.clone()));
            }
            mounts.push(m.clone());
        }
    }
    Ok(())
}

/// A preset applies when the job carries all its labels (an empty set matches all).
pub fn preset_matches(preset: &Preset, labels: &BTreeMap<String, String>) -> bool {
    preset.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// [`merge_preset`]'s duplicate checks for several presets in order, by name only:
/// `Err((index of the preset, why))`.
pub(crate) fn check_preset_merge<'p>(
    spec: &PodSpec,
    presets: impl Iterator<Item = &'p Preset>,
) -> Result<(), (usize, PresetMergeError)> {
    let mut env: Vec<HashSet<&str>> = spec
        .containers
        .iter()
        .map(|c| c.env.iter().flatten().map(|e| e.name.as_str()).collect())
        .collect();
    let mut volumes: HashSet<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    let mut mounts: Vec<HashSet<&str>> = spec
        .containers
        .iter()
        .map(|c| {
            c.volume_mounts
                .iter()
                .flatten()
                .map(|m| m.name.as_str())
                .collect()
        })
        .collect();
    let mut tolerations: Vec<&Toleration> = spec.tolerations.iter().flatten().collect();
    for (i, p) in presets.enumerate() {
        for t in &p.tolerations {
            if tolerations.contains(&t) {
                return Err((i, PresetMergeError::Toleration(Box::new(t.clone()))));
            }
            tolerations.push(t);
        }
        for e in &p.env {
            for names in &mut env {
                if !names.insert(&e.name) {
                    return Err((i, PresetMergeError::Env(e.name.clone())));
                }
            }
        }
        for v in &p.volumes {
            if !volumes.insert(&v.name) {
                return Err((i, PresetMergeError::Volume(v.name.clone())));
            }
        }
        for m in &p.volume_mounts {
            for names in &mut mounts {
                if !names.insert(&m.name) {
                    return Err((i, PresetMergeError::VolumeMount(m.name.clone())));
                }
            }
        }
    }
    Ok(())
}

// --- Decoration.

/// The utilities of `utility_images`, in Prow's order.
pub(crate) const UTILITY_IMAGES: [&str; 4] = ["clonerefs", "initupload", "entrypoint", "sidecar"];
/// The containers of `resources`.
const UTILITY_RESOURCES: [&str; 4] = ["clonerefs", "initupload", "place_entrypoint", "sidecar"];
/// `gcs_configuration`'s strings (an empty one is unset).
const GCS_STRINGS: [&str; 7] = [
    "bucket",
    "path_prefix",
    "path_strategy",
    "default_org",
    "default_repo",
    "job_url_prefix",
    "local_output_dir",
];
/// All of `gcs_configuration`'s fields.
const GCS_FIELDS: [&str; 9] = [
    "bucket",
    "path_prefix",
    "path_strategy",
    "default_org",
    "default_repo",
    "mediaTypes",
    "job_url_prefix",
    "local_output_dir",
    "compress_file_types",
];
/// `censoring_options`' fields (all pointers or lists where `null` is unset).
const CENSORING_FIELDS: [&str; 5] = [
    "censoring_concurrency",
    "censoring_buffer_size",
    "include_directories",
    "exclude_directories",
    "minimum_secret_length",
];
/// The fields of `oauth_token_secret` and `github_app_private_key_secret`.
const SECRET_FIELDS: [&str; 2] = ["name", "key"];

/// The fields of a map as Go decodes it into a struct with `fields`: each key
/// read as the field it folds to (Go's case-insensitive match, exact first),
/// the greatest key in byte order winning when several fold to one field (Go
/// decodes them in that order); unknown keys dropped, as Go drops them.
fn go_fields<'v, V: 'v>(
    entries: impl Iterator<Item = (&'v String, &'v V)>,
    fields: &[&'static str],
) -> Vec<(&'static str, &'v V)> {
    let mut entries: Vec<(&String, &V)> = entries.collect();
    entries.sort_by(|a, b| crate::yaml::go_order(a.0, b.0));
    let mut out: Vec<(&'static str, &V)> = Vec::new();
    for (k, v) in entries {
        let Some(field) = crate::yaml::go_key_field(k, fields) else {
            continue;
        };
        match out.iter_mut().find(|(f, _)| *f == field) {
            Some(slot) => slot.1 = v,
            None => out.push((field, v)),
        }
    }
    out
}

/// A free-form struct (a JSON object) as Go reads it: Prow's field names only,
/// `null` fields left out (unset); `keep` decides which other values count as
/// set. Anything but an object reads as an empty struct.
fn go_object(
    v: &FreeForm,
    fields: &[&'static str],
    keep: impl Fn(&str, &FreeForm) -> bool,
) -> serde_json::Map<String, FreeForm> {
    let Some(map) = v.as_object() else {
        return serde_json::Map::new();
    };
    go_fields(map.iter(), fields)
        .into_iter()
        .filter(|(f, v)| !v.is_null() && keep(f, v))
        .map(|(f, v)| (f.to_string(), v.clone()))
        .collect()
}

/// A string field of a free-form struct: unset when absent or empty.
fn is_empty_string(v: &FreeForm) -> bool {
    v.as_str() == Some("")
}

/// `gcs_configuration` as Go reads it: Prow's fields, empty strings unset.
fn gcs_fields(v: &FreeForm) -> serde_json::Map<String, FreeForm> {
    go_object(v, &GCS_FIELDS, |f, v| {
        !(GCS_STRINGS.contains(&f) && is_empty_string(v))
    })
}

/// `utility_images` as Go reads it: the four images, an empty one unset.
fn image_fields(m: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    go_fields(m.iter(), &UTILITY_IMAGES)
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(f, v)| (f.to_string(), v.clone()))
        .collect()
}

/// `resources` as Go reads it: the four utility containers.
fn resource_fields(
    m: &BTreeMap<String, ResourceRequirements>,
) -> BTreeMap<String, ResourceRequirements> {
    go_fields(m.iter(), &UTILITY_RESOURCES)
        .into_iter()
        .map(|(f, v)| (f.to_string(), v.clone()))
        .collect()
}

/// Prow's `ApplyDefault` of two optional nested structs: either alone is
/// taken (read as Go reads it, by `read`), both are merged by `merge`.
fn nested<T, R>(
    mine: &Option<T>,
    def: &Option<T>,
    read: impl Fn(&T) -> R,
    merge: impl FnOnce(R, R) -> R,
) -> Option<R> {
    match (mine, def) {
        (None, None) => None,
        (Some(m), None) => Some(read(m)),
        (None, Some(d)) => Some(read(d)),
        (Some(m), Some(d)) => Some(merge(read(m), read(d))),
    }
}

/// The keys of `def` that `mine` lacks, added to `mine` (per-field fill of a
/// struct read as a map whose absent keys are unset).
fn fill_keys<V>(mut mine: BTreeMap<String, V>, def: BTreeMap<String, V>) -> BTreeMap<String, V> {
    for (k, v) in def {
        mine.entry(k).or_insert(v);
    }
    mine
}

/// [`fill_keys`] for JSON objects.
fn fill_object(
    mut mine: serde_json::Map<String, FreeForm>,
    def: serde_json::Map<String, FreeForm>,
) -> serde_json::Map<String, FreeForm> {
    for (k, v) in def {
        mine.entry(k).or_insert(v);
    }
    mine
}

/// Prow's `GCSConfiguration.ApplyDefault`: every field fills from the
/// default when unset, except `mediaTypes`, which are the union of both with
/// the **default's** type winning for an extension both name (Prow's
/// behaviour, kept).
fn merge_gcs(
    mut mine: serde_json::Map<String, FreeForm>,
    def: serde_json::Map<String, FreeForm>,
) -> serde_json::Map<String, FreeForm> {
    let def_types = def
        .get("mediaTypes")
        .and_then(FreeForm::as_object)
        .filter(|t| !t.is_empty())
        .cloned();
    if let Some(def_types) = def_types {
        let merged = match mine.remove("mediaTypes") {
            Some(FreeForm::Object(mut types)) => {
                types.extend(def_types);
                types
            }
            // Unset (or not a mapping, which Prow would not load).
            _ => def_types,
        };
        mine.insert("mediaTypes".into(), FreeForm::Object(merged));
    }
    let rest = def.into_iter().filter(|(k, _)| k != "mediaTypes").collect();
    fill_object(mine, rest)
}

/// A `Some` that is empty counts as unset (Prow's string fields).
fn non_empty(s: &Option<String>) -> Option<&String> {
    s.as_ref().filter(|s| !s.is_empty())
}

impl DecorationConfig {
    /// Prow's `DecorationConfig.ApplyDefault`: this config's set fields, and
    /// `def`'s where this one's are unset.
    ///
    /// Unset is Prow's nil: an `Option` that is `None` (an explicit `""`,
    /// `0s` or `false` is set and wins), an empty list (`ssh_key_secrets`,
    /// `ssh_host_fingerprints`, `github_api_endpoints`,
    /// `sparse_checkout_files`), an empty `github_app_id`. Nested structs merge
    /// field by field: `utility_images` per image (an empty image is unset),
    /// `resources` per container, `gcs_configuration` per field (an empty
    /// string is unset; `mediaTypes` are unioned with `def`'s winning on a
    /// clash, as in Prow), `censoring_options` and `scheduling_options` per
    /// field (a `null` or absent field is unset, an empty list is set). The
    /// free-form structs come out with Prow's field names only.
    pub fn apply_default(&self, def: &DecorationConfig) -> DecorationConfig {
        fn fill<T: Clone>(mine: &Option<T>, def: &Option<T>) -> Option<T> {
            mine.as_ref().or(def.as_ref()).cloned()
        }
        fn fill_list(mine: &[String], def: &[String]) -> Vec<String> {
            if mine.is_empty() { def } else { mine }.to_vec()
        }
        let object = |fields: &'static [&'static str]| {
            move |v: &FreeForm| FreeForm::Object(go_object(v, fields, |_, _| true))
        };
        DecorationConfig {
            timeout: fill(&self.timeout, &def.timeout),
            grace_period: fill(&self.grace_period, &def.grace_period),
            utility_images: nested(
                &self.utility_images,
                &def.utility_images,
                image_fields,
                fill_keys,
            ),
            resources: nested(&self.resources, &def.resources, resource_fields, fill_keys),
            gcs_configuration: nested(
                &self.gcs_configuration,
                &def.gcs_configuration,
                gcs_fields,
                merge_gcs,
            )
            .map(FreeForm::Object),
            gcs_credentials_secret: fill(&self.gcs_credentials_secret, &def.gcs_credentials_secret),
            s3_credentials_secret: fill(&self.s3_credentials_secret, &def.s3_credentials_secret),
            default_service_account_name: fill(
                &self.default_service_account_name,
                &def.default_service_account_name,
            ),
            ssh_key_secrets: fill_list(&self.ssh_key_secrets, &def.ssh_key_secrets),
            ssh_host_fingerprints: fill_list(
                &self.ssh_host_fingerprints,
                &def.ssh_host_fingerprints,
            ),
            skip_cloning: fill(&self.skip_cloning, &def.skip_cloning),
            cookiefile_secret: fill(&self.cookiefile_secret, &def.cookiefile_secret),
            oauth_token_secret: fill(&self.oauth_token_secret, &def.oauth_token_secret)
                .as_ref()
                .map(object(&SECRET_FIELDS)),
            github_api_endpoints: fill_list(&self.github_api_endpoints, &def.github_api_endpoints),
            github_app_id: non_empty(&self.github_app_id)
                .or(non_empty(&def.github_app_id))
                .cloned(),
            github_app_private_key_secret: fill(
                &self.github_app_private_key_secret,
                &def.github_app_private_key_secret,
            )
            .as_ref()
            .map(object(&SECRET_FIELDS)),
            censor_secrets: fill(&self.censor_secrets, &def.censor_secrets),
            censoring_options: nested(
                &self.censoring_options,
                &def.censoring_options,
                |v| go_object(v, &CENSORING_FIELDS, |_, _| true),
                fill_object,
            )
            .map(FreeForm::Object),
            upload_ignores_interrupts: fill(
                &self.upload_ignores_interrupts,
                &def.upload_ignores_interrupts,
            ),
            fs_group: fill(&self.fs_group, &def.fs_group),
            run_as_user: fill(&self.run_as_user, &def.run_as_user),
            run_as_group: fill(&self.run_as_group, &def.run_as_group),
            set_limit_equals_memory_request: fill(
                &self.set_limit_equals_memory_request,
                &def.set_limit_equals_memory_request,
            ),
            default_memory_request: fill(&self.default_memory_request, &def.default_memory_request),
            blobless_fetch: fill(&self.blobless_fetch, &def.blobless_fetch),
            sparse_checkout_files: fill_list(
                &self.sparse_checkout_files,
                &def.sparse_checkout_files,
            ),
            scheduling_options: nested(
                &self.scheduling_options,
                &def.scheduling_options,
                SchedulingOptions::clone,
                |m, d| SchedulingOptions {
                    affinity: m.affinity.or(d.affinity),
                    tolerations: m.tolerations.or(d.tolerations),
                },
            ),
            pod_pending_timeout: fill(&self.pod_pending_timeout, &def.pod_pending_timeout),
            pod_running_timeout: fill(&self.pod_running_timeout, &def.pod_running_timeout),
            pod_unscheduled_timeout: fill(
                &self.pod_unscheduled_timeout,
                &def.pod_unscheduled_timeout,
            ),
        }
    }
}

/// One decoration default in force: which jobs it matches (`repo`, `cluster`)
/// and its config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecorationDefault<'c> {
    pub(crate) repo: &'c str,
    pub(crate) cluster: &'c str,
    pub(crate) config: &'c DecorationConfig,
}

impl DecorationDefault<'_> {
    /// Prow's `matches`: the entry's `cluster` is empty, `*` or the job's; its
    /// `repo` is empty, `*`, the job's `org/repo` or the job's org. Exact
    /// strings (no patterns); a `http://` or `https://` prefix of the job's
    /// repository (Gerrit's) is ignored.
    pub(crate) fn matches(&self, repo: &str, cluster: &str) -> bool {
        let repo = repo
            .strip_prefix("https://")
            .or_else(|| repo.strip_prefix("http://"))
            .unwrap_or(repo);
        let org = repo.split('/').next().unwrap_or_default();
        let repo_ok = matches!(self.repo, "" | "*") || self.repo == repo || self.repo == org;
        let cluster_ok = matches!(self.cluster, "" | "*") || self.cluster == cluster;
        repo_ok && cluster_ok
    }
}

/// The decoration defaults in force, in order: `default_decoration_config_entries`,
/// or else the legacy `default_decoration_configs` map as entries for every
/// cluster, `*` first, then the orgs, then the `org/repo` keys (each group in
/// key order; at most one org and one repo key match a job, so the order
/// inside a group never matters). Both set is a configuration error
/// (reported by the validator); the entries are used then.
pub(crate) fn decoration_defaults(plank: &Plank) -> Vec<DecorationDefault<'_>> {
    if !plank.default_decoration_config_entries.is_empty()
        || plank.default_decoration_configs.is_empty()
    {
        return plank
            .default_decoration_config_entries
            .iter()
            .map(|e| DecorationDefault {
                repo: &e.repo,
                cluster: &e.cluster,
                config: &e.config,
            })
            .collect();
    }
    let map = &plank.default_decoration_configs;
    fn entry<'c>((k, config): (&'c String, &'c DecorationConfig)) -> DecorationDefault<'c> {
        DecorationDefault {
            repo: k,
            cluster: "",
            config,
        }
    }
    let star = map.get_key_value("*").into_iter().map(entry);
    let orgs = map
        .iter()
        .filter(|(k, _)| *k != "*" && !k.contains('/'))
        .map(entry);
    let repos = map
        .iter()
        .filter(|(k, _)| *k != "*" && k.contains('/'))
        .map(entry);
    star.chain(orgs).chain(repos).collect()
}

/// A job's merged decoration config, as validation reads it (made from the
/// configuration and the job it borrows while validating them).
pub(crate) struct DecorationView<'a> {
    /// The merged config (Prow's `mergeDefaultDecorationConfig`).
    pub(crate) merged: DecorationConfig,
    _reads: PhantomData<&'a ProwConfig>,
}

impl<'a> DecorationView<'a> {
    /// `None` when the job is not decorated and writes no `decoration_config`
    /// (Prow's `decoration_config` stays nil). A decorated job gets the
    /// matching defaults (in order, a later one's set fields winning) under
    /// its own config; an undecorated one with a `decoration_config` keeps just
    /// its own, as in Prow (which still validates it and decorates its pods).
    pub(crate) fn of(config: &'a ProwConfig, repo: &str, b: &'a JobBase) -> Option<Self> {
        let decorated = b.decorate == Some(true);
        if !decorated && b.decoration_config.is_none() {
            return None;
        }
        let mut layers = Vec::new();
        if decorated {
            layers.extend(
                decoration_defaults(&config.plank)
                    .into_iter()
                    .filter(|e| e.matches(repo, &b.cluster))
                    .map(|e| e.config),
            );
        }
        layers.extend(b.decoration_config.as_ref());
        // Prow: merged = layer.ApplyDefault(merged) for each layer in turn; a
        // config with nothing under it is taken as is (read as Go reads it).
        let none = DecorationConfig::default();
        let merged = layers
            .iter()
            .fold(None::<DecorationConfig>, |merged, layer| {
                Some(layer.apply_default(merged.as_ref().unwrap_or(&none)))
            })
            .unwrap_or_default();
        Some(DecorationView {
            merged,
            _reads: PhantomData,
        })
    }

    /// The OAuth token secret's name (empty when it has none), if one is set.
    pub(crate) fn oauth_token_secret_name(&self) -> Option<&str> {
        self.merged
            .oauth_token_secret
            .as_ref()
            .map(|s| s.get("name").and_then(|n| n.as_str()).unwrap_or_default())
    }

    /// The SSH key secrets.
    pub(crate) fn ssh_key_secrets(&self) -> &[String] {
        &self.merged.ssh_key_secrets
    }
}

/// The decoration config a run of a job gets (`repo`: the pre/postsubmit's
/// `org/repo`, or a periodic's `extra_refs[0]`, or empty): the job's own over
/// every matching decoration default, merged as Prow merges them; an empty
/// config when nothing is set; `None` when the job is not decorated and
/// writes no `decoration_config`.
pub fn merged_decoration(config: &ProwConfig, repo: &str, b: &JobBase) -> Option<DecorationConfig> {
    DecorationView::of(config, repo, b).map(|v| v.merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_trigger_matches_default_rerun_command() {
        for name in ["pull-kubernetes-e2e", "a.b_c", "x"] {
            let re = regex::Regex::new(&default_trigger(name)).unwrap();
            assert!(re.is_match(&default_rerun_command(name)));
        }
    }
}
