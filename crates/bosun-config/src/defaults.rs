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

use k8s_openapi::api::core::v1::{PodSpec, Toleration};

use crate::types::{
    DecorationConfig, JobBase, PostsubmitFields, Preset, PresubmitFields, ProwConfig,
};
use crate::yaml::{from_node, Mark, Node, Value};

/// Prow's configuration with nothing written: every field at its default.
pub fn default_config() -> ProwConfig {
    let empty = Node {
        mark: Mark::default(),
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

/// A decorated job's decoration config as layers: the matching
/// `plank.default_decoration_config_entries` in order, then the job's own; a field
/// comes from the last layer that sets it (Prow's `ApplyDefault`).
pub(crate) struct DecorationView<'a> {
    pub(crate) layers: Vec<&'a DecorationConfig>,
}

impl<'a> DecorationView<'a> {
    /// `None` when the job is not decorated (Prow: `decoration_config` is nil).
    pub(crate) fn of(config: &'a ProwConfig, repo: &str, b: &'a JobBase) -> Option<Self> {
        let decorated = b.decorate == Some(true);
        if !decorated && b.decoration_config.is_none() {
            return None;
        }
        let mut layers = Vec::new();
        if decorated {
            layers.extend(default_decoration_entries(config, repo, &b.cluster));
        }
        layers.extend(b.decoration_config.as_ref());
        Some(DecorationView { layers })
    }

    pub(crate) fn image(&self, name: &str) -> Option<&'a str> {
        self.layers
            .iter()
            .rev()
            .find_map(|l| {
                l.utility_images
                    .as_ref()?
                    .get(name)
                    .filter(|s| !s.is_empty())
            })
            .map(String::as_str)
    }

    pub(crate) fn gcs_str(&self, key: &str) -> Option<&'a str> {
        self.layers
            .iter()
            .rev()
            .find_map(|l| l.gcs_configuration.as_ref()?.get(key)?.as_str())
    }

    pub(crate) fn oauth_token_secret_name(&self) -> Option<&'a str> {
        self.layers
            .iter()
            .rev()
            .find_map(|l| l.oauth_token_secret.as_ref())
            .map(|s| s.get("name").and_then(|n| n.as_str()).unwrap_or_default())
    }

    pub(crate) fn ssh_key_secrets(&self) -> &'a [String] {
        self.layers
            .iter()
            .rev()
            .map(|l| l.ssh_key_secrets.as_slice())
            .find(|s| !s.is_empty())
            .unwrap_or_default()
    }
}

fn default_decoration_entries<'c>(
    config: &'c ProwConfig,
    repo: &str,
    cluster: &str,
) -> impl Iterator<Item = &'c DecorationConfig> {
    let org = repo.split('/').next().unwrap_or_default().to_string();
    let repo = repo.to_string();
    let cluster = cluster.to_string();
    config
        .plank
        .default_decoration_config_entries
        .iter()
        .filter(move |e| {
            let repo_ok = matches!(e.repo.as_str(), "" | "*") || e.repo == repo || e.repo == org;
            let cluster_ok = matches!(e.cluster.as_str(), "" | "*") || e.cluster == cluster;
            repo_ok && cluster_ok
        })
        .map(|e| &e.config)
}

/// The job's decoration config over every matching
/// `plank.default_decoration_config_entries` entry (later entries win);
/// `None` when the job is not decorated.
pub fn merged_decoration(config: &ProwConfig, repo: &str, b: &JobBase) -> Option<DecorationConfig> {
    let view = DecorationView::of(config, repo, b)?;
    Some(
        view.layers
            .iter()
            .fold(DecorationConfig::default(), |merged, layer| {
                overlay(merged, layer)
            }),
    )
}

/// `top`'s set fields over `base`'s.
fn overlay(base: DecorationConfig, top: &DecorationConfig) -> DecorationConfig {
    fn map_merge<V: Clone>(
        base: Option<BTreeMap<String, V>>,
        top: &Option<BTreeMap<String, V>>,
    ) -> Option<BTreeMap<String, V>> {
        match (base, top) {
            (None, t) => t.clone(),
            (b, None) => b,
            (Some(mut b), Some(t)) => {
                b.extend(t.iter().map(|(k, v)| (k.clone(), v.clone())));
                Some(b)
            }
        }
    }
    fn json_merge(
        base: Option<serde_json::Value>,
        top: &Option<serde_json::Value>,
    ) -> Option<serde_json::Value> {
        match (base, top) {
            (Some(serde_json::Value::Object(mut b)), Some(serde_json::Value::Object(t))) => {
                b.extend(t.iter().map(|(k, v)| (k.clone(), v.clone())));
                Some(serde_json::Value::Object(b))
            }
            (b, None) => b,
            (_, t) => t.clone(),
        }
    }
    fn vec_or(base: Vec<String>, top: &[String]) -> Vec<String> {
        if top.is_empty() {
            base
        } else {
            top.to_vec()
        }
    }
    DecorationConfig {
        timeout: top.timeout.or(base.timeout),
        grace_period: top.grace_period.or(base.grace_period),
        utility_images: map_merge(base.utility_images, &top.utility_images),
        resources: map_merge(base.resources, &top.resources),
        gcs_configuration: json_merge(base.gcs_configuration, &top.gcs_configuration),
        gcs_credentials_secret: top
            .gcs_credentials_secret
            .clone()
            .or(base.gcs_credentials_secret),
        s3_credentials_secret: top
            .s3_credentials_secret
            .clone()
            .or(base.s3_credentials_secret),
        default_service_account_name: top
            .default_service_account_name
            .clone()
            .or(base.default_service_account_name),
        ssh_key_secrets: vec_or(base.ssh_key_secrets, &top.ssh_key_secrets),
        ssh_host_fingerprints: vec_or(base.ssh_host_fingerprints, &top.ssh_host_fingerprints),
        skip_cloning: top.skip_cloning.or(base.skip_cloning),
        cookiefile_secret: top.cookiefile_secret.clone().or(base.cookiefile_secret),
        oauth_token_secret: top.oauth_token_secret.clone().or(base.oauth_token_secret),
        github_api_endpoints: vec_or(base.github_api_endpoints, &top.github_api_endpoints),
        github_app_id: top.github_app_id.clone().or(base.github_app_id),
        github_app_private_key_secret: top
            .github_app_private_key_secret
            .clone()
            .or(base.github_app_private_key_secret),
        censor_secrets: top.censor_secrets.or(base.censor_secrets),
        censoring_options: json_merge(base.censoring_options, &top.censoring_options),
        upload_ignores_interrupts: top
            .upload_ignores_interrupts
            .or(base.upload_ignores_interrupts),
        fs_group: top.fs_group.or(base.fs_group),
        run_as_user: top.run_as_user.or(base.run_as_user),
        run_as_group: top.run_as_group.or(base.run_as_group),
        set_limit_equals_memory_request: top
            .set_limit_equals_memory_request
            .or(base.set_limit_equals_memory_request),
        default_memory_request: top
            .default_memory_request
            .clone()
            .or(base.default_memory_request),
        blobless_fetch: top.blobless_fetch.or(base.blobless_fetch),
        sparse_checkout_files: vec_or(base.sparse_checkout_files, &top.sparse_checkout_files),
        scheduling_options: top.scheduling_options.clone().or(base.scheduling_options),
        pod_pending_timeout: top.pod_pending_timeout.or(base.pod_pending_timeout),
        pod_running_timeout: top.pod_running_timeout.or(base.pod_running_timeout),
        pod_unscheduled_timeout: top.pod_unscheduled_timeout.or(base.pod_unscheduled_timeout),
    }
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
