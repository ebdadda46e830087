//! Prow's `validatePodSpec`: containers, environment variables, volumes and mounts,
//! with the job's presets included and the names decoration reserves. Also the
//! environment variables bosun (like Prow) sets for each job type.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::PodSpec;

use crate::defaults::DecorationView;
use crate::types::{JobType, Preset};

const DECORATION_CONTAINERS: &[&str] = &["clonerefs", "initupload", "place-entrypoint", "sidecar"];
const DECORATION_MOUNT_NAMES: &[&str] = &["logs", "code", "tools"];
const DECORATION_MOUNT_PATHS: &[&str] = &["/logs", "/home/prow/go", "/tools"];

/// Environment variables bosun (like Prow) sets for each job type.
pub fn reserved_env(ty: JobType) -> &'static [&'static str] {
    const PERIODIC: &[&str] = &[
        "CI",
        "JOB_NAME",
        "JOB_SPEC",
        "JOB_TYPE",
        "PROW_JOB_ID",
        "BUILD_ID",
        "BUILD_NUMBER",
    ];
    const POST: &[&str] = &[
        "CI",
        "JOB_NAME",
        "JOB_SPEC",
        "JOB_TYPE",
        "PROW_JOB_ID",
        "BUILD_ID",
        "BUILD_NUMBER",
        "REPO_OWNER",
        "REPO_NAME",
        "SRC_BASE",
        "SRC_HOST",
        "PULL_BASE_REF",
        "PULL_BASE_SHA",
        "PULL_REFS",
    ];
    const PRE: &[&str] = &[
        "CI",
        "JOB_NAME",
        "JOB_SPEC",
        "JOB_TYPE",
        "PROW_JOB_ID",
        "BUILD_ID",
        "BUILD_NUMBER",
        "REPO_OWNER",
        "REPO_NAME",
        "SRC_BASE",
        "SRC_HOST",
        "PULL_BASE_REF",
        "PULL_BASE_SHA",
        "PULL_REFS",
        "PULL_NUMBER",
        "PULL_PULL_SHA",
        "PULL_HEAD_REF",
        "PULL_TITLE",
        "TRIGGER_COMMENT_ID",
        "TRIGGER_COMMENT_URL",
    ];
    match ty {
        JobType::Periodic => PERIODIC,
        JobType::Postsubmit | JobType::Batch => POST,
        JobType::Presubmit => PRE,
    }
}

/// Prow's `validatePodSpec`: (field path, message) pairs.
pub(super) fn errors(
    ty: JobType,
    spec: &PodSpec,
    presets: &[&Preset],
    dc: Option<&DecorationView<'_>>,
) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    if spec.init_containers.as_ref().is_some_and(|c| !c.is_empty()) {
        errs.push((
            "spec.initContainers".into(),
            "pod spec may not use init containers".into(),
        ));
    }
    let n = spec.containers.len();
    if n < 1 {
        errs.push((
            "spec.containers".into(),
            format!("pod spec must specify at least 1 container, found: {n}"),
        ));
        return errs;
    }
    if n > 1 && dc.is_none() {
        errs.push((
            "spec.containers".into(),
            format!("pod utility decoration must be enabled to use multiple containers: {n}"),
        ));
        return errs;
    }
    if n > 1 {
        let mut seen = HashSet::new();
        for (i, c) in spec.containers.iter().enumerate() {
            let path = format!("spec.containers[{i}]");
            if c.name.is_empty() {
                errs.push((path, "container does not have name. all containers must have names when defining multiple containers".into()));
                continue;
            }
            if !seen.insert(c.name.as_str()) {
                errs.push((
                    path.clone(),
                    format!("container named {:?} is defined more than once", c.name),
                ));
            }
            if DECORATION_CONTAINERS.contains(&c.name.as_str()) {
                errs.push((path, format!("container name {} is a reserved for decoration. please specify a different container name that does not conflict with pod utility container names", c.name)));
            }
        }
    }
    let reserved_env = reserved_env(ty);
    for (i, c) in spec.containers.iter().enumerate() {
        let mut seen = HashSet::new();
        for (j, e) in c
            .env
            .iter()
            .flatten()
            .chain(presets.iter().flat_map(|p| &p.env))
            .enumerate()
        {
            let path = format!("spec.containers[{i}].env[{j}]");
            if !seen.insert(e.name.as_str()) {
                errs.push((
                    path.clone(),
                    format!("env var named {:?} is defined more than once", e.name),
                ));
            }
            if reserved_env.contains(&e.name.as_str()) {
                errs.push((path, format!("env {} is reserved", e.name)));
            }
        }
    }
    let mut reserved_volumes: Vec<&str> =
        vec!["logs", "code", "tools", "gcs-credentials", "s3-credentials"];
    if let Some(dc) = dc {
        if let Some(name) = dc.oauth_token_secret_name() {
            reserved_volumes.push(name);
        }
        reserved_volumes.extend(dc.ssh_key_secrets().iter().map(String::as_str));
    }
    let mut volumes = HashSet::new();
    for (i, v) in spec
        .volumes
        .iter()
        .flatten()
        .chain(presets.iter().flat_map(|p| &p.volumes))
        .enumerate()
    {
        let path = format!("spec.volumes[{i}]");
        if !volumes.insert(v.name.as_str()) {
            errs.push((
                path.clone(),
                format!("volume named {:?} is defined more than once", v.name),
            ));
        }
        if reserved_volumes.contains(&v.name.as_str()) {
            errs.push((
                path,
                format!("volume {} is a reserved for decoration", v.name),
            ));
        }
    }
    for (i, c) in spec.containers.iter().enumerate() {
        for (j, m) in c
            .volume_mounts
            .iter()
            .flatten()
            .chain(presets.iter().flat_map(|p| &p.volume_mounts))
            .enumerate()
        {
            let path = format!("spec.containers[{i}].volumeMounts[{j}]");
            if !volumes.contains(m.name.as_str()) && !reserved_volumes.contains(&m.name.as_str()) {
                errs.push((
                    path.clone(),
                    format!("volumeMount named {:?} is undefined", m.name),
                ));
            }
            if DECORATION_MOUNT_NAMES.contains(&m.name.as_str()) {
                errs.push((
                    path.clone(),
                    format!("volumeMount name {} is reserved for decoration", m.name),
                ));
            }
            if DECORATION_MOUNT_PATHS.contains(&m.mount_path.as_str()) {
                errs.push((
                    path,
                    format!(
                        "mount {} at {} conflicts with decoration mount",
                        m.name, m.mount_path
                    ),
                ));
            }
        }
    }
    errs
}
