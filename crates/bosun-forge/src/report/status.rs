//! A run's commit status, as Prow's crier sets it (`pkg/github/report`,
//! `config.ContextDescriptionWithBaseSha`): which runs are reported, and
//! the state, context, description and target URL sent for them.

use bosun_config::types::JobType;
use bosun_job::gotemplate::{render_prowjob, TemplateError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A run's state as crier reports it (Prow's ProwJob states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Created, not started yet.
    Triggered,
    /// Started.
    Pending,
    /// Ended: passed.
    Success,
    /// Ended: failed.
    Failure,
    /// Ended: could not run.
    Error,
    /// Ended: aborted.
    Aborted,
}

impl JobState {
    /// Every state, in Prow's order.
    pub const ALL: [JobState; 6] = [
        JobState::Triggered,
        JobState::Pending,
        JobState::Success,
        JobState::Failure,
        JobState::Error,
        JobState::Aborted,
    ];

    /// Prow's name (`triggered`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Triggered => "triggered",
            JobState::Pending => "pending",
            JobState::Success => "success",
            JobState::Failure => "failure",
            JobState::Error => "error",
            JobState::Aborted => "aborted",
        }
    }

    /// The state named `name` by Prow; `scheduling` (waiting for a
    /// cluster) is reported as `triggered`, since both are a run that has
    /// not started (Prow's crier has no GitHub state for `scheduling`).
    pub fn from_prow(name: &str) -> Option<JobState> {
        match name {
            "scheduling" => Some(JobState::Triggered),
            _ => JobState::ALL.into_iter().find(|s| s.as_str() == name),
        }
    }

    /// Whether the run has ended.
    pub fn is_complete(self) -> bool {
        !matches!(self, JobState::Triggered | JobState::Pending)
    }
}

/// The commit status state for `state`, Prow's map: `triggered` and
/// `pending` are `pending`, `aborted` is `failure`, the others their own
/// name. Gitea's statuses take the same names.
pub fn github_state(state: JobState) -> &'static str {
    match state {
        JobState::Triggered | JobState::Pending => "pending",
        JobState::Success => "success",
        JobState::Error => "error",
        JobState::Failure | JobState::Aborted => "failure",
    }
}

/// The description of a run that has none of its own: Prow's texts where
/// Prow's controller has one for the state ("Job triggered." when a run
/// starts, "Job succeeded.", "Job failed."), bosun's otherwise.
pub fn default_description(state: JobState) -> &'static str {
    match state {
        JobState::Triggered | JobState::Pending => "Job triggered.",
        JobState::Success => "Job succeeded.",
        JobState::Failure => "Job failed.",
        JobState::Error => "Job could not run.",
        JobState::Aborted => "Job aborted.",
    }
}

/// GitHub's limit on a status description, which Prow counts in bytes.
pub const DESCRIPTION_MAX_BYTES: usize = 140;
/// What comes before the base SHA (Tide reads it back after this).
const BASE_SHA_DELIMITER: &str = " BaseSHA:";
/// What replaces the middle of a description too long to send.
const ELIDE: &str = " ... ";

/// The description sent for a run in `state`: its own description
/// (`own`), or [`default_description`] when it is empty, with the base SHA
/// suffix ([`context_description_with_base_sha`]).
pub fn description(state: JobState, own: &str, base_sha: &str) -> String {
    let human = if own.is_empty() {
        default_description(state)
    } else {
        own
    };
    context_description_with_base_sha(human, base_sha)
}

/// Prow's `ContextDescriptionWithBaseSha`: `human`, then (when `base_sha`
/// is set) `" BaseSHA:<sha>"` left-padded with U+2001 (GitHub collapses
/// ordinary spaces) so that it stands at the same place on the right; a
/// text too long for [`DESCRIPTION_MAX_BYTES`] with its suffix keeps its
/// head and tail around `" ... "`. Lengths are in bytes, as Prow counts
/// them, and the padding loop re-reads its bound as the suffix grows (3
/// bytes a pad), as Prow's does: "Job succeeded." with a 40-character SHA
/// gets 20 pads, 123 bytes. Unlike Prow, a cut never splits a character.
pub fn context_description_with_base_sha(human: &str, base_sha: &str) -> String {
    let max = DESCRIPTION_MAX_BYTES;
    let mut suffix = String::new();
    if !base_sha.is_empty() {
        suffix = format!("{BASE_SHA_DELIMITER}{base_sha}");
        if human.len() + suffix.len() < max {
            let mut i = 0;
            while i < max.saturating_sub(human.len() + suffix.len()) {
                suffix.insert(0, '\u{2001}');
                i += 1;
            }
        }
    }
    let mut out = truncate(human, max as isize - suffix.len() as isize);
    out.push_str(&suffix);
    out
}

/// Prow's `truncate`: `s` when it fits in `max` bytes, else its first and
/// last `(max - 5) / 2` bytes around `" ... "` (each part shortened to a
/// character boundary).
fn truncate(s: &str, max: isize) -> String {
    if s.len() as isize <= max {
        return s.to_string();
    }
    let half = ((max - ELIDE.len() as isize) / 2).max(0) as usize;
    let mut head = half.min(s.len());
    while !s.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = s.len() - half.min(s.len());
    while !s.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}{ELIDE}{}", &s[..head], &s[tail..])
}

/// The status context of a job: its `context`, else its name (as Prow
/// defaults a job's context).
pub fn context<'a>(job_context: Option<&'a str>, name: &'a str) -> &'a str {
    job_context.filter(|c| !c.is_empty()).unwrap_or(name)
}

/// Whether runs of a job are reported, as Prow's `ShouldReport`: its type
/// is one of `job_types_to_report` (Prow's default: presubmits and
/// postsubmits; periodics and batches never) and it does not set
/// `skip_report`.
pub fn should_report(
    job_type: JobType,
    skip_report: bool,
    job_types_to_report: &[JobType],
) -> bool {
    matches!(job_type, JobType::Presubmit | JobType::Postsubmit)
        && job_types_to_report.contains(&job_type)
        && !skip_report
}

/// The URL of bosun's page of run `run_id` under `external_url` (the
/// address bosun is reached at from outside, `https://bosun.example.com`),
/// `{external}/runs/{id}`; `None` unless `external_url` is an absolute
/// `http(s)://` URL.
pub fn run_page(external_url: &str, run_id: &str) -> Option<String> {
    let base = external_url.trim_end_matches('/');
    absolute(base).then(|| format!("{base}/runs/{}", segment(run_id)))
}

/// The status's target URL (the "Details" link): Prow's
/// `plank.job_url_template` when it is set, executed over `prowjob` (the
/// run as a ProwJob document, as the daemon's job URLs see it) with
/// bosun's Go template engine, else [`run_page`]. A template giving a path
/// (`/view/...`) is joined to `external_url`'s origin; a template giving
/// nothing, or anything else not absolute, falls back to the run page: a
/// target URL is never relative. `Err` when the template does not parse or
/// execute (the caller may still send [`run_page`]).
pub fn target_url(
    external_url: &str,
    run_id: &str,
    job_url_template: Option<&str>,
    prowjob: &Value,
) -> Result<Option<String>, TemplateError> {
    let page = run_page(external_url, run_id);
    let Some(template) = job_url_template.filter(|t| !t.trim().is_empty()) else {
        return Ok(page);
    };
    let url = render_prowjob("job_url_template", template, prowjob)?;
    let url = url.trim();
    if absolute(url) {
        return Ok(Some(url.to_string()));
    }
    if url.starts_with('/') && !url.starts_with("//") {
        if let Some(origin) = origin(external_url) {
            return Ok(Some(format!("{origin}{url}")));
        }
    }
    Ok(page)
}

/// Whether `u` is an absolute `http(s)://` URL with a host.
fn absolute(u: &str) -> bool {
    ["http://", "https://"].iter().any(|s| {
        u.strip_prefix(s)
            .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
    })
}

/// `scheme://host[:port]` of an absolute URL.
fn origin(u: &str) -> Option<&str> {
    if !absolute(u) {
        return None;
    }
    let start = u.find("://")? + 3;
    Some(match u[start..].find('/') {
        Some(i) => &u[..start + i],
        None => u,
    })
}

/// Percent-encodes a path segment.
pub(crate) fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A commit status to set (GitHub's and Gitea's `POST
/// /repos/{owner}/{repo}/statuses/{sha}` body).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewStatus {
    /// `pending`, `success`, `failure` or `error` (Gitea also `warning`).
    pub state: String,
    /// The "Details" link; not sent when empty.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub target_url: String,
    /// At most 140 bytes ([`description`] makes sure).
    pub description: String,
    /// The status's name on the commit.
    pub context: String,
}

/// What crier knows of a run when it reports its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunStatus {
    /// The job's name.
    pub name: String,
    /// The job's `context`, if set.
    pub context: Option<String>,
    /// The job's type.
    pub job_type: JobType,
    /// The job's `skip_report`.
    pub skip_report: bool,
    /// The run's state.
    pub state: JobState,
    /// The run's own description (may be empty).
    pub description: String,
    /// The target URL ([`target_url`]); empty for none.
    pub target_url: String,
    /// The base commit the run tested (its refs' `base_sha`).
    pub base_sha: String,
    /// The head commits of its pull requests, in order (none for a
    /// postsubmit, several for a batch).
    pub pull_shas: Vec<String>,
}

/// A status to set, and the commit to set it on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusReport {
    /// The commit: the pull request's head, else the base commit.
    pub sha: String,
    /// The status.
    pub status: NewStatus,
}

/// The status crier sets for `run`, as Prow's `ReportStatusContext`:
/// `None` when the run is not reported ([`should_report`]) or is a batch
/// (more than one pull request: Prow reports no status for batches), or
/// has no commit to report on.
pub fn status_report(run: &RunStatus, job_types_to_report: &[JobType]) -> Option<StatusReport> {
    if !should_report(run.job_type, run.skip_report, job_types_to_report) || run.pull_shas.len() > 1
    {
        return None;
    }
    let sha = run.pull_shas.first().unwrap_or(&run.base_sha);
    if sha.is_empty() {
        return None;
    }
    Some(StatusReport {
        sha: sha.clone(),
        status: NewStatus {
            state: github_state(run.state).to_string(),
            target_url: run.target_url.clone(),
            description: description(run.state, &run.description, &run.base_sha),
            context: context(run.context.as_deref(), &run.name).to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(job_type: JobType, state: JobState, skip_report: bool) -> RunStatus {
        RunStatus {
            name: "job-name".into(),
            context: Some("parent".into()),
            job_type,
            skip_report,
            state,
            description: "default-message".into(),
            target_url: "http://mytest.com".into(),
            base_sha: String::new(),
            pull_shas: vec!["abcdef".into()],
        }
    }

    /// The state sent for a run in `state` of type `ty`, as in Prow's
    /// `TestReportStatus` (`reportStatus` reports every type given to it;
    /// `job_types_to_report` is checked by its caller).
    fn reported(ty: JobType, state: JobState, skip: bool) -> Option<String> {
        let types = [JobType::Presubmit, JobType::Postsubmit];
        status_report(&run(ty, state, skip), &types).map(|r| {
            assert_eq!(r.sha, "abcdef");
            assert_eq!(r.status.context, "parent");
            assert_eq!(r.status.target_url, "http://mytest.com");
            assert_eq!(r.status.description, "default-message");
            r.status.state
        })
    }

    #[test]
    fn successful_prowjob_with_report_true_should_set_status() {
        // Prow: TestReportStatus "Successful prowjob with report true should set status"
        assert_eq!(
            reported(JobType::Presubmit, JobState::Success, false).as_deref(),
            Some("success")
        );
    }

    #[test]
    fn successful_prowjob_with_report_false_should_not_set_status() {
        // Prow: TestReportStatus "Successful prowjob with report false should not set status"
        assert_eq!(reported(JobType::Presubmit, JobState::Success, true), None);
    }

    #[test]
    fn pending_prowjob_with_report_true_should_set_status() {
        // Prow: TestReportStatus "Pending prowjob with report true should set status"
        assert_eq!(
            reported(JobType::Presubmit, JobState::Pending, false).as_deref(),
            Some("pending")
        );
    }

    #[test]
    fn aborted_presubmit_job_with_report_true_should_set_failure_status() {
        // Prow: TestReportStatus "Aborted presubmit job with report true should set failure status"
        assert_eq!(
            reported(JobType::Presubmit, JobState::Aborted, false).as_deref(),
            Some("failure")
        );
    }

    #[test]
    fn triggered_presubmit_job_with_report_true_should_set_pending_status() {
        // Prow: TestReportStatus "Triggered presubmit job with report true should set pending status"
        assert_eq!(
            reported(JobType::Presubmit, JobState::Triggered, false).as_deref(),
            Some("pending")
        );
    }

    /// Prow's `shout(i)`: "start part1 part2 ... parti".
    fn shout(i: usize) -> String {
        (1..=i).fold("start".to_string(), |s, n| format!("{s} part{n}"))
    }

    #[test]
    fn really_long_description_is_truncated() {
        // Prow: TestReportStatus "really long description is truncated"
        let long = shout(140);
        let mut r = run(JobType::Presubmit, JobState::Triggered, false);
        r.description = long.clone();
        let s = status_report(&r, &[JobType::Presubmit]).unwrap().status;
        assert_eq!(s.state, "pending");
        assert!(s.description.len() <= DESCRIPTION_MAX_BYTES);
        // Prow's expected value, computed by hand: 67 bytes, " ... ", 67 bytes.
        assert_eq!(
            s.description,
            format!("{} ... {}", &long[..67], &long[long.len() - 67..])
        );
        assert_eq!(s.description, context_description_with_base_sha(&long, ""));
    }

    #[test]
    fn successful_postsubmit_job_with_report_true_should_set_success_status() {
        // Prow: TestReportStatus "Successful postsubmit job with report true should set success status"
        assert_eq!(
            reported(JobType::Postsubmit, JobState::Success, false).as_deref(),
            Some("success")
        );
    }

    #[test]
    fn should_not_report_skip_report_job() {
        // Prow: TestShouldReport (report) "should not report skip report job"
        assert!(!should_report(
            JobType::Presubmit,
            true,
            &[JobType::Presubmit]
        ));
    }

    #[test]
    fn should_report_presubmit_job() {
        // Prow: TestShouldReport (report) "should report presubmit job"
        assert!(should_report(
            JobType::Presubmit,
            false,
            &[JobType::Presubmit]
        ));
        // Prow: TestShouldReport (crier) "should report presubmit job"
        assert!(should_report(
            JobType::Presubmit,
            false,
            &GITHUB_DEFAULT_TYPES
        ));
    }

    #[test]
    fn should_not_report_postsubmit_job() {
        // Prow: TestShouldReport (report) "should not report postsubmit job"
        assert!(!should_report(
            JobType::Postsubmit,
            false,
            &[JobType::Presubmit]
        ));
    }

    #[test]
    fn should_report_postsubmit_job_if_told_to() {
        // Prow: TestShouldReport (report) "should report postsubmit job if told to"
        assert!(should_report(
            JobType::Postsubmit,
            false,
            &[JobType::Presubmit, JobType::Postsubmit]
        ));
        // Prow: TestShouldReport (crier) "should report postsubmit job"
        assert!(should_report(
            JobType::Postsubmit,
            false,
            &GITHUB_DEFAULT_TYPES
        ));
    }

    const GITHUB_DEFAULT_TYPES: [JobType; 2] =
        bosun_config::types::GitHubReporter::DEFAULT_JOB_TYPES;

    #[test]
    fn should_not_report_periodic_job() {
        // Prow: TestShouldReport (crier) "should not report periodic job"
        assert!(!should_report(
            JobType::Periodic,
            false,
            &GITHUB_DEFAULT_TYPES
        ));
        // Even when listed (bosun-config refuses it; Prow's crier too).
        assert!(!should_report(
            JobType::Periodic,
            false,
            &[JobType::Periodic]
        ));
    }

    #[test]
    fn should_not_report_batch_job() {
        // Prow: TestShouldReport (crier) "should not report batch job"
        assert!(!should_report(JobType::Batch, false, &GITHUB_DEFAULT_TYPES));
        // A presubmit over several pull requests gets no status either
        // (Prow's ReportStatusContext).
        let mut r = run(JobType::Presubmit, JobState::Success, false);
        r.pull_shas.push("other".into());
        assert_eq!(status_report(&r, &GITHUB_DEFAULT_TYPES), None);
    }

    #[test]
    fn state_map_is_prows() {
        let got: Vec<_> = JobState::ALL.iter().map(|s| github_state(*s)).collect();
        assert_eq!(
            got,
            ["pending", "pending", "success", "failure", "error", "failure"]
        );
        assert_eq!(JobState::from_prow("scheduling"), Some(JobState::Triggered));
        assert_eq!(JobState::from_prow("aborted"), Some(JobState::Aborted));
        assert_eq!(JobState::from_prow("nope"), None);
    }

    #[test]
    fn base_sha_suffix_is_padded_as_prows_loop_pads_it() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        for (human, pads, chars, bytes) in [
            ("Job succeeded.", 20, 83, 123),
            ("Job failed.", 20, 80, 120),
            ("Aborted by trigger plugin.", 17, 92, 126),
        ] {
            let d = context_description_with_base_sha(human, sha);
            assert_eq!(
                d,
                format!("{human}{} BaseSHA:{sha}", "\u{2001}".repeat(pads))
            );
            assert_eq!((d.chars().count(), d.len()), (chars, bytes), "{human}");
        }
        // Too long with its suffix: cut in the middle, the suffix unpadded.
        let long = "x".repeat(100) + &"y".repeat(100);
        let d = context_description_with_base_sha(&long, sha);
        // 140 - 49 bytes for the text: 43 on each side of " ... ".
        assert_eq!(
            d,
            format!("{} ... {} BaseSHA:{sha}", "x".repeat(43), "y".repeat(43))
        );
        assert_eq!(d.len(), 140);
        // Multi-byte text is never split inside a character.
        let d = context_description_with_base_sha(&"é".repeat(100), "");
        assert!(d.len() <= 140 && d.contains(" ... "), "{d}");
    }

    #[test]
    fn description_defaults_to_the_states_text() {
        assert_eq!(description(JobState::Success, "", ""), "Job succeeded.");
        assert_eq!(description(JobState::Failure, "", ""), "Job failed.");
        assert_eq!(description(JobState::Triggered, "", ""), "Job triggered.");
        assert_eq!(
            description(JobState::Error, "Pod can not be created: x", ""),
            "Pod can not be created: x"
        );
        let r = RunStatus {
            context: None,
            description: String::new(),
            pull_shas: vec![],
            base_sha: "base".into(),
            ..run(JobType::Postsubmit, JobState::Success, false)
        };
        let s = status_report(&r, &GITHUB_DEFAULT_TYPES).unwrap();
        assert_eq!(s.sha, "base", "a postsubmit's status is on its base commit");
        assert_eq!(
            s.status.context, "job-name",
            "the context defaults to the name"
        );
        assert!(s.status.description.starts_with("Job succeeded.\u{2001}"));
        assert!(s.status.description.ends_with(" BaseSHA:base"));
    }

    #[test]
    fn target_urls_are_absolute() {
        let pj = serde_json::json!({"spec": {"job": "pull-unit"}, "status": {"build_id": "17"}});
        let t = |tmpl: Option<&str>| target_url("https://bosun.example.com/", "3f 2a", tmpl, &pj);
        assert_eq!(
            t(None).unwrap().as_deref(),
            Some("https://bosun.example.com/runs/3f%202a")
        );
        assert_eq!(
            t(Some(
                "https://prow.example.com/view/{{.Spec.Job}}/{{.Status.BuildID}}"
            ))
            .unwrap()
            .as_deref(),
            Some("https://prow.example.com/view/pull-unit/17")
        );
        assert_eq!(
            t(Some("/view/{{.Spec.Job}}")).unwrap().as_deref(),
            Some("https://bosun.example.com/view/pull-unit")
        );
        assert_eq!(
            t(Some("view/{{.Spec.Job}}")).unwrap().as_deref(),
            Some("https://bosun.example.com/runs/3f%202a")
        );
        assert!(t(Some("{{if}}")).is_err());
        assert_eq!(run_page("bosun.example.com", "x"), None);
        assert_eq!(run_page("", "x"), None);
        assert_eq!(
            target_url("/relative", "x", Some("{{.Spec.Job}}"), &pj).unwrap(),
            None
        );
    }
}
