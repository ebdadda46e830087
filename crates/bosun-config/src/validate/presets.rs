//! Presets as the validator sees them: which presets apply to a job (central ones,
//! then its own repository's), whether they merge into its pod spec, and Prow's
//! rule that two central presets may not share a `label: value` pair. How presets
//! match and merge is in [`crate::defaults`].

use std::collections::HashMap;

use crate::defaults::{check_preset_merge, preset_matches};
use crate::diag::Diagnostic;
use crate::model::{Job, PresetDef};
use crate::types::JobSource;

use super::ctx::err_at;

/// Records in `job.presets` the presets that apply to the job, in merge order.
/// They are recorded, not copied into the spec (the snapshot would hold a copy of
/// every preset volume and variable per job); the merge is checked here by name
/// and done for real by `Snapshot::pod_spec`.
pub(super) fn apply<K>(presets: &[PresetDef], job: &mut Job<K>) -> Vec<Diagnostic> {
    let mut d = Vec::new();
    // Central presets, then the presets of the job's own repository.
    if let Some(spec) = &job.base.spec {
        let own_repo = match &job.source {
            JobSource::InRepo { repo, .. } => Some(repo.as_str()),
            JobSource::Central => None,
        };
        let matched: Vec<usize> = presets
            .iter()
            .enumerate()
            .filter(|(_, p)| match &p.source {
                JobSource::Central => true,
                JobSource::InRepo { repo, .. } => Some(repo.as_str()) == own_repo,
            })
            .filter(|(_, p)| preset_matches(&p.preset, &job.base.labels))
            .map(|(i, _)| i)
            .collect();
        if let Err((i, e)) = check_preset_merge(spec, matched.iter().map(|i| &presets[*i].preset)) {
            let p = &presets[matched[i]];
            let msg = format!("failed to merge presets for podspec: {e}");
            d.push(err_at(job, "labels", msg).hint(format!(
                "the preset at {}:{} adds it",
                p.origin.file, p.origin.mark
            )));
        }
        job.presets = matched;
    }
    d
}

/// Prow refuses two central presets sharing a `label: value` pair.
pub(super) fn check_pairs(presets: &[PresetDef], d: &mut Vec<Diagnostic>) {
    let mut seen: HashMap<String, &PresetDef> = HashMap::new();
    for p in presets.iter().filter(|p| p.source == JobSource::Central) {
        for (k, v) in &p.preset.labels {
            let pair = format!("{k}:{v}");
            if let Some(first) = seen.get(&pair) {
                d.push(
                    Diagnostic::error(format!("duplicated preset 'label:value' pair : {pair}"))
                        .at_field(&p.origin.file, p.origin.mark, &format!("labels.{k}"))
                        .hint(format!(
                            "also used by the preset at {}:{}",
                            first.origin.file, first.origin.mark
                        )),
                );
            } else {
                seen.insert(pair, p);
            }
        }
    }
}
