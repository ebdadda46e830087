//! Decoration checks: Prow's `DecorationConfig.Validate` on the job's layered
//! decoration config (defaults from `plank.default_decoration_config_entries`
//! under the job's own, see [`DecorationView`]), and that decorated containers say
//! what to run.

use crate::defaults::DecorationView;
use crate::diag::Diagnostic;
use crate::model::Job;

use super::ctx::err_at;

/// Why a decoration config is invalid (Prow's texts).
#[derive(Debug, thiserror::Error)]
enum DecorationError {
    #[error("utility image config is not specified")]
    NoUtilityImages,
    #[error("the following utility images are not specified: [{}]", quoted(.0))]
    MissingUtilityImages(Vec<&'static str>),
    #[error("GCS upload configuration is not specified")]
    NoGcsConfiguration,
    #[error(r#"GCS configuration is invalid: gcs_path_strategy must be one of "legacy", "explicit", or "single""#)]
    PathStrategy,
    #[error("GCS configuration is invalid: default org and repo must be provided for GCS strategy {strategy:?}")]
    NoDefaultOrgRepo { strategy: String },
    #[error("both OAuth token and SSH key secrets are specified")]
    OAuthAndSshKey,
}

/// Go's `%q` of each name, separated by spaces (as Go prints a `[]string`).
fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|k| format!("{k:?}"))
        .collect::<Vec<_>>()
        .join(" ")
}

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
fn validate_decoration_config(dc: &DecorationView<'_>) -> Result<(), DecorationError> {
    if !dc.layers.iter().any(|l| l.utility_images.is_some()) {
        return Err(DecorationError::NoUtilityImages);
    }
    let missing: Vec<&'static str> = ["clonerefs", "initupload", "entrypoint", "sidecar"]
        .into_iter()
        .filter(|k| dc.image(k).is_none())
        .collect();
    if !missing.is_empty() {
        return Err(DecorationError::MissingUtilityImages(missing));
    }
    if !dc.layers.iter().any(|l| l.gcs_configuration.is_some()) {
        return Err(DecorationError::NoGcsConfiguration);
    }
    let strategy = dc.gcs_str("path_strategy").unwrap_or_default();
    if !matches!(strategy, "legacy" | "explicit" | "single") {
        return Err(DecorationError::PathStrategy);
    }
    let empty = |k: &str| dc.gcs_str(k).is_none_or(str::is_empty);
    if strategy != "explicit" && (empty("default_org") || empty("default_repo")) {
        return Err(DecorationError::NoDefaultOrgRepo {
            strategy: strategy.to_string(),
        });
    }
    if dc.oauth_token_secret_name().is_some() && !dc.ssh_key_secrets().is_empty() {
        return Err(DecorationError::OAuthAndSshKey);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_images_print_as_go_prints_a_string_slice() {
        let e = DecorationError::MissingUtilityImages(vec!["clonerefs", "sidecar"]);
        assert_eq!(
            e.to_string(),
            r#"the following utility images are not specified: ["clonerefs" "sidecar"]"#
        );
    }
}
