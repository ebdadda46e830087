//! Decoration checks: Prow's `DecorationConfig.Validate` on the job's layered
//! decoration config (defaults from `plank.default_decoration_config_entries`
//! under the job's own, see [`DecorationView`]), and that decorated containers say
//! what to run.

use crate::defaults::DecorationView;
use crate::diag::Diagnostic;
use crate::model::Job;

use super::ctx::err_at;

/// A decorated job with containers: its decoration config is complete, and each
/// container has a command.
pub(super) fn check<K>(job: &Job<K>, dc: &DecorationView<'_>, d: &mut Vec<Diagnostic>) {
    if let Err(e) = validate_decoration_config(dc) {
        d.push(err_at(
            job,
            "decoration_config",
            format!("invalid decoration config: {e}"),
        ));
    }
    for (i, c) in job
        .base
        .spec
        .as_ref()
        .expect("has containers")
        .containers
        .iter()
        .enumerate()
    {
        let cmd = c.command.as_deref().unwrap_or_default();
        let args = c.args.as_deref().unwrap_or_default();
        // What runs is command ++ args; its first word must exist.
        let first = cmd.first().or(args.first());
        if first.is_none_or(String::is_empty) {
            d.push(err_at(
                job,
                &format!("spec.containers[{i}]"),
                "decorated job containers must specify command and/or args",
            ));
        }
    }
}

/// Prow's `DecorationConfig.Validate`.
fn validate_decoration_config(dc: &DecorationView<'_>) -> Result<(), String> {
    if !dc.layers.iter().any(|l| l.utility_images.is_some()) {
        return Err("utility image config is not specified".into());
    }
    let missing: Vec<String> = ["clonerefs", "initupload", "entrypoint", "sidecar"]
        .iter()
        .filter(|k| dc.image(k).is_none())
        .map(|k| format!("{k:?}"))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the following utility images are not specified: [{}]",
            missing.join(" ")
        ));
    }
    if !dc.layers.iter().any(|l| l.gcs_configuration.is_some()) {
        return Err("GCS upload configuration is not specified".into());
    }
    let strategy = dc.gcs_str("path_strategy").unwrap_or_default();
    if !matches!(strategy, "legacy" | "explicit" | "single") {
        return Err(r#"GCS configuration is invalid: gcs_path_strategy must be one of "legacy", "explicit", or "single""#.into());
    }
    let empty = |k: &str| dc.gcs_str(k).is_none_or(str::is_empty);
    if strategy != "explicit" && (empty("default_org") || empty("default_repo")) {
        return Err(format!("GCS configuration is invalid: default org and repo must be provided for GCS strategy {strategy:?}"));
    }
    if dc.oauth_token_secret_name().is_some() && !dc.ssh_key_secrets().is_empty() {
        return Err("both OAuth token and SSH key secrets are specified".into());
    }
    Ok(())
}
