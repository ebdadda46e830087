//! Where a run's results are viewed when its artifacts are not on this
//! machine (a decorated Kubernetes run uploads them to its bucket), as
//! Prow's plank computes a ProwJob's `status.url` (`pjutil.JobURL`):
//!
//! - a decorated run whose `gcs_configuration.job_url_prefix` is set: the
//!   prefix (a trailing `gcs/` or `gcs` trimmed, as Prow's
//!   `GetJobURLPrefix` does) joined with the storage provider (`gs`, or the
//!   bucket's scheme: `s3://b` is `s3`), the bucket and the run's path in it
//!   (Prow's `gcsupload.PathsForJob`: `path_prefix`, then
//!   `logs/JOB/BUILD_ID` for periodics and postsubmits,
//!   `pr-logs/pull/REPO_SEGMENT/PR/JOB/BUILD_ID` for presubmits,
//!   `pr-logs/pull/batch/JOB/BUILD_ID` for batches, the repository segment
//!   after `path_strategy`);
//! - else `plank.job_url_template`, a Go template executed over the run as
//!   a ProwJob (`prowjob::document`) on bosun's template engine
//!   ([`bosun_job::gotemplate`]), with pipelines and the functions such
//!   templates use (bosun-job's `ProwJobJson` describes the data).
//!
//! A run's own `url` (set by its executor) wins over both.
//! (`plank.job_url_prefix_config` is not read: bosun's configuration types
//! keep it as an ignored field.)

use bosun_config::types::ProwConfig;
use bosun_store::template::SpecSnapshot;
use bosun_store::Run;
use serde_json::Value;

/// The URL of `run`'s results, if Prow's settings give one; an error when
/// the job URL template does not execute.
pub fn job_url(
    config: &ProwConfig,
    run: &Run,
    spec: Option<&SpecSnapshot>,
) -> Result<Option<String>, String> {
    if let Some(u) = run.url.as_deref().filter(|u| !u.is_empty()) {
        return Ok(Some(u.to_string()));
    }
    let Some(spec) = spec else {
        return Ok(None);
    };
    let decoration = spec
        .decoration
        .as_ref()
        .filter(|_| spec.job.decorate == Some(true));
    if let Some(d) = decoration {
        let gcs = d.gcs_configuration.as_ref().unwrap_or(&Value::Null);
        let prefix = gcs["job_url_prefix"].as_str().unwrap_or_default();
        if !prefix.is_empty() {
            return Ok(Some(prefixed_url(prefix, gcs, run)));
        }
    }
    let Some(template) = config
        .plank
        .job_url_template
        .as_deref()
        .filter(|t| !t.is_empty())
    else {
        return Ok(None);
    };
    let doc = bosun_job::prowjob::document(run, spec, &config.prowjob_namespace);
    let data = serde_json::to_value(&doc).map_err(|e| e.to_string())?;
    let out = execute(template, &data)?;
    Ok(Some(out).filter(|u| !u.is_empty()))
}

/// Prow's URL for a decorated job under `prefix`.
fn prefixed_url(prefix: &str, gcs: &Value, run: &Run) -> String {
    let prefix = prefix
        .strip_suffix("gcs/")
        .or_else(|| prefix.strip_suffix("gcs"))
        .unwrap_or(prefix);
    let bucket = gcs["bucket"].as_str().unwrap_or_default();
    let (provider, bucket) = match bucket.split_once("://") {
        Some((scheme, rest)) => (scheme, rest),
        None => ("gs", bucket),
    };
    let path = job_path(gcs, run);
    let (base, rest) = split_url(prefix);
    let joined = join(&[rest, provider, bucket, &path]);
    format!("{base}{joined}")
}

/// `scheme://host` and the path of a URL (no scheme: all path).
fn split_url(u: &str) -> (&str, &str) {
    match u.find("://") {
        Some(i) => match u[i + 3..].find('/') {
            Some(j) => u.split_at(i + 3 + j),
            None => (u, ""),
        },
        None => ("", u),
    }
}

/// Go's `path.Join`: the non-empty elements joined by `/`, cleaned (no
/// doubled or trailing slash); rooted when the first element is.
fn join(parts: &[&str]) -> String {
    let rooted = parts
        .iter()
        .find(|p| !p.is_empty())
        .is_some_and(|p| p.starts_with('/'));
    let segs: Vec<&str> = parts
        .iter()
        .flat_map(|p| p.split('/'))
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let body = segs.join("/");
    if rooted {
        format!("/{body}")
    } else {
        body
    }
}

/// The run's directory in its bucket (Prow's `gcsupload.PathsForJob`).
pub fn job_path(gcs: &Value, run: &Run) -> String {
    let s = |k: &str| gcs[k].as_str().unwrap_or_default();
    let (default_org, default_repo) = (s("default_org"), s("default_repo"));
    let segment = |org: &str, repo: &str| -> String {
        let repo_ = repo.replace('/', "_");
        match s("path_strategy") {
            "legacy" if org == default_org && repo == default_repo => String::new(),
            "legacy" if org == default_org => repo.to_string(),
            "single" if org == default_org && repo == default_repo => String::new(),
            _ => format!("{org}_{repo_}"),
        }
    };
    use bosun_config::types::JobType;
    let base = match run.job_type {
        JobType::Periodic | JobType::Postsubmit => join(&["logs", &run.job, &run.build_id]),
        JobType::Presubmit => {
            let (seg, pr) = run
                .refs
                .as_ref()
                .map_or((String::new(), String::new()), |r| {
                    (
                        segment(&r.org, &r.repo),
                        r.pulls
                            .first()
                            .map(|p| p.number.to_string())
                            .unwrap_or_default(),
                    )
                });
            join(&["pr-logs", "pull", &seg, &pr, &run.job, &run.build_id])
        }
        JobType::Batch => join(&["pr-logs", "pull", "batch", &run.job, &run.build_id]),
    };
    join(&[s("path_prefix"), &base])
}

/// Parses and executes the job URL template over the ProwJob `data`
/// (bosun-job's ProwJob model, shared with the reports' templates).
fn execute(template: &str, data: &Value) -> Result<String, String> {
    bosun_job::gotemplate::render_prowjob("job_url_template", template, data).map_err(|e| e.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_config::types::{JobType, Pull, Refs};

    fn run(job_type: JobType) -> Run {
        let mut r: Run = serde_json::from_value(serde_json::json!({
            "id": "3f2a", "build_id": "1700", "job": "pull-unit", "job_type": "presubmit",
            "configured_cluster": "default", "labels": {}, "annotations": {},
            "spec_hash": "h", "attempt": 0, "pod_revival_count": 0,
            "created_at": "2026-03-02T10:00:00Z", "state": "pending", "description": "",
            "extra_refs": []
        }))
        .unwrap();
        r.job_type = job_type;
        r.refs = Some(Box::new(Refs {
            org: "acme".into(),
            repo: "widget".into(),
            base_ref: Some("main".into()),
            pulls: vec![Pull {
                number: 42,
                author: "alice".into(),
                sha: "abc".into(),
                ..Pull::default()
            }],
            ..Refs::default()
        }));
        r
    }

    /// Prow's `gcsupload.PathsForJob` and `JobURL` on its own test cases'
    /// shapes.
    #[test]
    fn prefixed_urls_follow_prows_paths() {
        let gcs = serde_json::json!({"bucket": "ci-logs", "path_strategy": "explicit"});
        let pre = run(JobType::Presubmit);
        assert_eq!(
            prefixed_url("https://prow.example.com/view/", &gcs, &pre),
            "https://prow.example.com/view/gs/ci-logs/pr-logs/pull/acme_widget/42/pull-unit/1700"
        );
        // An old prefix ending in gcs/ is trimmed; an s3 bucket keeps its provider.
        let s3 = serde_json::json!({"bucket": "s3://b", "path_strategy": "legacy",
            "default_org": "acme", "default_repo": "widget", "path_prefix": "p"});
        assert_eq!(
            prefixed_url("https://prow.example.com/view/gcs/", &s3, &pre),
            "https://prow.example.com/view/s3/b/p/pr-logs/pull/42/pull-unit/1700"
        );
        let single = serde_json::json!({"bucket": "b", "path_strategy": "single",
            "default_org": "acme", "default_repo": "other"});
        assert!(prefixed_url("https://x/view", &single, &pre).contains("/pull/acme_widget/42/"));
        let mut periodic = run(JobType::Periodic);
        periodic.job = "nightly".into();
        assert_eq!(
            prefixed_url("https://x/view/", &gcs, &periodic),
            "https://x/view/gs/ci-logs/logs/nightly/1700"
        );
        assert_eq!(
            job_path(&gcs, &run(JobType::Batch)),
            "pr-logs/pull/batch/pull-unit/1700"
        );
    }

    #[test]
    fn go_templates_over_a_prowjob() {
        let data = serde_json::json!({
            "metadata": {"name": "3f2a", "labels": {"prow.k8s.io/type": "presubmit"}},
            "spec": {"type": "presubmit", "job": "pull-unit",
                     "refs": {"org": "acme", "repo": "widget", "pulls": [{"number": 42}]}},
            "status": {"build_id": "1700", "startTime": "2026-03-02T10:00:00Z", "state": "pending"}
        });
        let t = |src: &str| execute(src, &data);
        // Prow's documented example.
        assert_eq!(
            t("https://x/view/b/pr-logs/pull/{{.Spec.Refs.Repo}}/{{with index .Spec.Refs.Pulls 0}}{{.Number}}{{end}}/{{.Spec.Job}}/{{.Status.BuildID}}").unwrap(),
            "https://x/view/b/pr-logs/pull/widget/42/pull-unit/1700"
        );
        assert_eq!(
            t(r#"{{if eq .Spec.Type "presubmit"}}pr{{else if eq .Spec.Type "batch"}}batch{{else}}logs{{end}}"#).unwrap(),
            "pr"
        );
        assert_eq!(
            t("{{.ObjectMeta.Name}} {{.Name}} {{.Status.StartTime}}").unwrap(),
            "3f2a 3f2a 2026-03-02T10:00:00Z"
        );
        assert_eq!(
            t(r#"{{index .ObjectMeta.Labels "prow.k8s.io/type"}}"#).unwrap(),
            "presubmit"
        );
        assert_eq!(
            t(r#"{{printf "%s/%d" .Spec.Job 7}}"#).unwrap(),
            "pull-unit/7"
        );
        assert_eq!(
            t("{{- range $i, $p := .Spec.Refs.Pulls }} #{{ $p.Number }}@{{$i}} {{- end }}")
                .unwrap(),
            " #42@0"
        );
        assert_eq!(
            t("{{ $r := .Spec.Refs }}{{ $r.Org }}/{{ $r.Repo | len }}").unwrap(),
            "acme/6"
        );
        assert_eq!(
            t("{{if and .Spec.Refs (not .Spec.Nope)}}y{{end}}").unwrap(),
            "y"
        );
        assert!(t("{{.Spec.Extra.Refs.Org}}").is_err(), "a field of nil");
        assert!(t("{{if}}").is_err());
        assert!(t("{{template \"x\"}}").is_err());
        assert!(t("{{index .Spec.Refs.Pulls 3}}")
            .unwrap_err()
            .contains("out of range"));
    }
}
