//! The failed-tests comment on a pull request, as Prow's crier keeps it
//! (`report.ReportComment`): one comment by the bot, marked
//! [`COMMENT_TAG`], with a table row per failed job on the head; rows of
//! jobs that ran again are replaced, older comments deleted, the comment
//! edited in place when only rows went away, and deleted when none is
//! left (or, for `github_reporter.summary_comment_repos`, replaced by
//! "all tests **passed!**").
//!
//! [`plan_comment`] decides it from the bot's login, the pull request's
//! comments and the jobs' latest results; the caller sends the
//! [`CommentPlan`] with [`crate::client`], one pull request at a time (Prow
//! holds a lock per pull request while it lists, deletes and writes).

use bosun_config::types::JobType;
use bosun_job::gotemplate::{ProwJobJson, Template, TemplateError, PROWJOB_LANGUAGE};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::status::{should_report, JobState};

/// The mark of the bot's failed-tests comment (Prow's `CommentTag`).
pub const COMMENT_TAG: &str = "<!-- test report -->";

/// Prow's closing paragraph (`plugins.AboutThisBot`), for a bot that
/// answers as Prow's does; bosun's daemon may pass its own text instead.
pub const PROW_ABOUT: &str = "Instructions for interacting with me using PR comments are available [here](https://git.k8s.io/community/contributors/guide/pull-requests.md).  If you have questions or suggestions related to my behavior, please file an issue against the [kubernetes-sigs/prow](https://github.com/kubernetes-sigs/prow/issues/new?title=Prow%20issue:) repository. I understand the commands that are listed [here](https://go.k8s.io/bot-commands).";

/// GitHub's limit on a comment's body, in characters.
pub const BODY_LIMIT: usize = 65_536;

/// A comment on an issue or pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssueComment {
    /// The comment's id.
    pub id: u64,
    /// Its author's login.
    pub user: String,
    /// Its text.
    pub body: String,
}

/// A job's latest result on a pull request's head.
#[derive(Debug, Clone, PartialEq)]
pub struct JobResult {
    /// The job's name.
    pub name: String,
    /// Its status context ([`super::context`]): a row's key in the table.
    pub context: String,
    /// The job's type.
    pub job_type: JobType,
    /// The job's `skip_report`.
    pub skip_report: bool,
    /// The run's state.
    pub state: JobState,
    /// Where its results are (the status's target URL).
    pub url: String,
    /// Whether the job is optional, if known (Prow reads the
    /// `prow.k8s.io/is-optional` label of presubmits).
    pub optional: Option<bool>,
    /// The command that reruns it (`/test NAME`).
    pub rerun_command: String,
    /// The head commit it ran on.
    pub sha: String,
    /// The run as a ProwJob document, for the report template (`Null` when
    /// there is no template).
    pub prowjob: Value,
}

/// A parsed `plank.report_templates` entry.
#[derive(Debug, Clone)]
pub struct ReportTemplate(Template);

impl ReportTemplate {
    /// Parses a report template (a Go template over a ProwJob).
    pub fn parse(text: &str) -> Result<ReportTemplate, TemplateError> {
        Template::parse("Report", text, &PROWJOB_LANGUAGE).map(ReportTemplate)
    }

    /// The template for `org/repo` in `plank` ([`bosun_config::types::Plank::report_template_for`]),
    /// parsed; `None` when none applies.
    pub fn for_repo(
        plank: &bosun_config::types::Plank,
        org: &str,
        repo: &str,
    ) -> Option<Result<ReportTemplate, TemplateError>> {
        plank
            .report_template_for(org, repo)
            .map(ReportTemplate::parse)
    }

    /// Executes it over a ProwJob document.
    pub fn render(&self, prowjob: &Value) -> Result<String, TemplateError> {
        self.0.execute(prowjob, &ProwJobJson)
    }
}

/// What [`plan_comment`] decides from.
#[derive(Debug, Clone, Copy)]
pub struct CommentInput<'a> {
    /// The bot's login ([`crate::client::Client::bot_login`]); a GitHub
    /// App's `slug[bot]` matches comments by `slug[bot]` or `slug`.
    pub bot_login: &'a str,
    /// The pull request's author, greeted as `@author`.
    pub author: &'a str,
    /// The pull request's comments, oldest first.
    pub comments: &'a [IssueComment],
    /// The latest result of each job being reported on the head (one run
    /// for an ordinary report, every job's latest for a summary).
    pub results: &'a [JobResult],
    /// `github_reporter.job_types_to_report`.
    pub job_types_to_report: &'a [JobType],
    /// Whether a comment is written also when nothing failed (the repository
    /// is in `github_reporter.summary_comment_repos`).
    pub must_create: bool,
    /// The repository's report template, executed over the first reported
    /// result's ProwJob and added below the table.
    pub template: Option<&'a ReportTemplate>,
    /// The closing paragraph, inside `<details>` ([`PROW_ABOUT`] is Prow's).
    pub about: &'a str,
}

/// What to do with the pull request's comments, in this order: delete,
/// then create or edit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommentPlan {
    /// Comments to delete.
    pub delete: Vec<u64>,
    /// The body of a comment to create.
    pub create: Option<String>,
    /// A comment to edit, and its new body.
    pub edit: Option<(u64, String)>,
}

impl CommentPlan {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.delete.is_empty() && self.create.is_none() && self.edit.is_none()
    }
}

/// Decides the failed-tests comment as Prow's `ReportComment` does: only
/// ended results of reported jobs count (none: nothing to do); the table
/// rows are read back from the bot's marked comments (rows between the
/// `---` line and the next blank line), a row dropped when a later row or a
/// result has its context; every `failure` result adds its row. Older
/// marked comments are deleted; the latest is deleted too when a failure
/// was added (a new comment is made, so that it notifies) or no row is left,
/// else edited in place. With `must_create`, a comment is made even with
/// no failure, unless a result is `aborted` (a push during the runs).
///
/// Beyond Prow: an edit that would not change the body is left out, and a
/// body over GitHub's [`BODY_LIMIT`] drops its oldest rows (saying how many)
/// and then cuts the template's text. `Err` when the template fails.
pub fn plan_comment(input: &CommentInput<'_>) -> Result<CommentPlan, TemplateError> {
    let valid: Vec<&JobResult> = input
        .results
        .iter()
        .filter(|r| {
            should_report(r.job_type, r.skip_report, input.job_types_to_report)
                && r.state.is_complete()
        })
        .collect();
    let Some(first) = valid.first() else {
        return Ok(CommentPlan::default());
    };
    let is_bot = |login: &str| {
        let trim = |s: &'_ str| s.strip_suffix("[bot]").unwrap_or(s).to_string();
        !login.is_empty() && trim(login) == trim(input.bot_login)
    };

    // The bot's marked comments, and the rows they hold.
    let mut previous = Vec::new();
    let mut latest: Option<&IssueComment> = None;
    let mut entries: Vec<String> = Vec::new();
    for c in input.comments {
        if !is_bot(&c.user) || !c.body.contains(COMMENT_TAG) {
            continue;
        }
        if let Some(l) = latest {
            previous.push(l.id);
        }
        latest = Some(c);
        let mut tracking = false;
        for line in c.body.split('\n') {
            let line = line.trim();
            if line.starts_with("---") {
                tracking = true;
            } else if line.is_empty() {
                tracking = false;
            } else if tracking {
                entries.push(line.to_string());
            }
        }
    }
    let key = |e: &str| e.split(" | ").next().unwrap_or_default().to_string();
    let mut rows: Vec<String> = entries
        .iter()
        .enumerate()
        .filter(|(i, e)| {
            let k = key(e);
            !entries[i + 1..].iter().any(|later| key(later) == k)
                && !valid.iter().any(|r| r.context == k)
        })
        .map(|(_, e)| e.clone())
        .collect();
    let mut added = false;
    for r in &valid {
        if r.state == JobState::Failure {
            rows.push(entry(r));
            added = true;
        }
    }
    let mut plan = CommentPlan {
        delete: previous,
        ..CommentPlan::default()
    };
    if let Some(l) = latest.filter(|_| added || rows.is_empty()) {
        plan.delete.push(l.id);
        latest = None;
    }

    let aborted = valid.iter().any(|r| r.state == JobState::Aborted);
    if !rows.is_empty() || (input.must_create && !aborted) {
        let report = input
            .template
            .map(|t| t.render(&first.prowjob))
            .transpose()?;
        let body = compose(input.author, &rows, report.as_deref(), input.about);
        match latest {
            None => plan.create = Some(body),
            Some(l) if l.body == body => {}
            Some(l) => plan.edit = Some((l.id, body)),
        }
    }
    Ok(plan)
}

/// A table row (Prow's `createEntry`): context, head SHA, link, required
/// (`true`/`false` for presubmits whose optionality is known, else
/// `unknown`), rerun command.
fn entry(r: &JobResult) -> String {
    let required = match (r.job_type, r.optional) {
        (JobType::Presubmit, Some(optional)) => {
            if optional {
                "false"
            } else {
                "true"
            }
        }
        _ => "unknown",
    };
    [
        r.context.as_str(),
        r.sha.as_str(),
        &format!("[link]({})", r.url),
        required,
        &format!("`{}`", r.rerun_command),
    ]
    .join(" | ")
}

/// The comment's body (Prow's `createComment`), kept within
/// [`BODY_LIMIT`]: the oldest rows go first, then the end of the report.
fn compose(author: &str, rows: &[String], report: Option<&str>, about: &str) -> String {
    let whole = body(author, rows, 0, report, about);
    if whole.chars().count() <= BODY_LIMIT {
        return whole;
    }
    // Keep the newest rows that fit with an empty report, then the report's
    // head in what is left.
    let empty = report.map(|_| "");
    let mut dropped = 0;
    while dropped < rows.len() && body_len(author, rows, dropped, empty, about) > BODY_LIMIT {
        dropped += 1;
    }
    let Some(report) = report else {
        return body_cut(body(author, rows, dropped, None, about));
    };
    let room = BODY_LIMIT.saturating_sub(body_len(author, rows, dropped, Some(""), about));
    let cut: String = if report.chars().count() <= room {
        report.to_string()
    } else {
        let mut s: String = report.chars().take(room.saturating_sub(1)).collect();
        s.push('…');
        s
    };
    body_cut(body(author, rows, dropped, Some(&cut), about))
}

fn body_len(
    author: &str,
    rows: &[String],
    dropped: usize,
    report: Option<&str>,
    about: &str,
) -> usize {
    body(author, rows, dropped, report, about).chars().count()
}

/// A last resort for a body still too long (a single row or the fixed text
/// alone over the limit): its first characters.
fn body_cut(body: String) -> String {
    if body.chars().count() <= BODY_LIMIT {
        body
    } else {
        body.chars().take(BODY_LIMIT).collect()
    }
}

/// The body with the first `dropped` rows left out (and said so).
fn body(
    author: &str,
    rows: &[String],
    dropped: usize,
    report: Option<&str>,
    about: &str,
) -> String {
    let mut lines: Vec<String> = if rows.is_empty() {
        vec![format!("@{author}: all tests **passed!**"), String::new()]
    } else {
        let plural = if rows.len() > 1 { "s" } else { "" };
        vec![
            format!("@{author}: The following test{plural} **failed**, say `/retest` to rerun all failed tests or `/retest-required` to rerun all mandatory failed tests:"),
            String::new(),
            "Test name | Commit | Details | Required | Rerun command".into(),
            "--- | --- | --- | --- | ---".into(),
        ]
    };
    lines.extend(rows[dropped..].iter().cloned());
    if dropped > 0 {
        let plural = if dropped > 1 { "s" } else { "" };
        lines.push(String::new());
        lines.push(format!(
            "{dropped} more failed test{plural} not listed: GitHub limits a comment to {BODY_LIMIT} characters."
        ));
    }
    if let Some(report) = report {
        lines.push(String::new());
        lines.push(report.to_string());
    }
    lines.extend(
        ["", "<details>", "", about, "</details>", COMMENT_TAG]
            .iter()
            .map(|s| s.to_string()),
    );
    lines.join("\n")
}

/// The latest result of each job (by name) among a pull request's runs on
/// its head, for a summary comment, as Prow's `pjsToReport`: `None` while
/// any run has not ended (no comment yet); runs with `skip_report` left
/// out; of a job's runs, the one created last (`created`).
pub fn latest_per_job<T: Ord + Copy>(runs: &[(T, JobResult)]) -> Option<Vec<JobResult>> {
    if runs.iter().any(|(_, r)| !r.state.is_complete()) {
        return None;
    }
    let mut latest: Vec<(T, &JobResult)> = Vec::new();
    for (at, r) in runs.iter().filter(|(_, r)| !r.skip_report) {
        match latest.iter_mut().find(|(_, l)| l.name == r.name) {
            Some(slot) if *at > slot.0 => *slot = (*at, r),
            Some(_) => {}
            None => latest.push((*at, r)),
        }
    }
    Some(latest.into_iter().map(|(_, r)| r.clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOT: &str = "k8s-ci-robot";

    fn result(context: &str, state: JobState, optional: Option<bool>) -> JobResult {
        JobResult {
            name: context.into(),
            context: context.into(),
            job_type: JobType::Presubmit,
            skip_report: false,
            state,
            url: String::new(),
            optional,
            rerun_command: String::new(),
            sha: String::new(),
            prowjob: Value::Null,
        }
    }

    fn bot(id: u64, body: &str) -> IssueComment {
        IssueComment {
            id,
            user: BOT.into(),
            body: body.into(),
        }
    }

    fn plan(results: &[JobResult], comments: &[IssueComment], must_create: bool) -> CommentPlan {
        plan_comment(&CommentInput {
            bot_login: BOT,
            author: "me",
            comments,
            results,
            job_types_to_report: &[JobType::Presubmit],
            must_create,
            template: None,
            about: PROW_ABOUT,
        })
        .unwrap()
    }

    /// The table rows of a body.
    fn rows(body: &str) -> Vec<&str> {
        body.lines()
            .skip_while(|l| !l.starts_with("---"))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .collect()
    }

    /// Prow's `TestParseIssueComment` checks: the comments deleted (any
    /// order), the rows of the new body (each containing the expected
    /// text), the comment edited.
    #[track_caller]
    fn parse_case(
        state: JobState,
        optional: bool,
        comments: &[IssueComment],
        deletes: &[u64],
        entries: &[&str],
        update: Option<u64>,
    ) {
        let p = plan(
            &[result("bla test", state, Some(optional))],
            comments,
            false,
        );
        let mut got = p.delete.clone();
        got.sort();
        assert_eq!(got, deletes, "deletes");
        let body = p.create.clone().or(p.edit.clone().map(|(_, b)| b));
        let got_rows = body.as_deref().map(rows).unwrap_or_default();
        assert_eq!(got_rows.len(), entries.len(), "{got_rows:?}");
        for e in entries {
            assert!(
                got_rows.iter().any(|r| r.contains(e)),
                "{e} in {got_rows:?}"
            );
        }
        assert_eq!(p.edit.map(|(id, _)| id), update, "update");
    }

    #[test]
    fn should_create_a_new_comment() {
        // Prow: TestParseIssueComment "should create a new comment"
        parse_case(
            JobState::Failure,
            false,
            &[],
            &[],
            &["bla test |  | [link]() | true | ``"],
            None,
        );
    }

    #[test]
    fn should_create_a_new_optional_comment() {
        // Prow: TestParseIssueComment "should create a new optional comment"
        parse_case(
            JobState::Failure,
            true,
            &[],
            &[],
            &["bla test |  | [link]() | false | ``"],
            None,
        );
    }

    #[test]
    fn should_not_delete_an_up_to_date_comment() {
        // Prow: TestParseIssueComment "should not delete an up-to-date comment"
        let c = [bot(
            0,
            "--- | --- | ---\nfoo test | something | or other\n\n",
        )];
        parse_case(JobState::Success, false, &c, &[], &[], None);
        assert!(plan(&[result("bla test", JobState::Success, None)], &c, false).is_empty());
    }

    #[test]
    fn should_delete_when_all_tests_pass() {
        // Prow: TestParseIssueComment "should delete when all tests pass"
        let c = [bot(
            123,
            &format!("--- | --- | ---\nbla test | something | or other\n\n{COMMENT_TAG}"),
        )];
        parse_case(JobState::Success, false, &c, &[123], &[], None);
    }

    #[test]
    fn should_delete_a_passing_test_with_r() {
        // Prow: TestParseIssueComment "should delete a passing test with \r"
        let c = [bot(
            123,
            &format!("--- | --- | ---\r\nbla test | something | or other\r\n\r\n{COMMENT_TAG}"),
        )];
        parse_case(JobState::Success, false, &c, &[123], &[], None);
    }

    #[test]
    fn should_update_a_failed_test() {
        // Prow: TestParseIssueComment "should update a failed test"
        let c = [bot(
            123,
            &format!("--- | --- | ---\nbla test | something | or other\n\n{COMMENT_TAG}"),
        )];
        parse_case(JobState::Failure, false, &c, &[123], &["bla test"], None);
        let p = plan(&[result("bla test", JobState::Failure, None)], &c, false);
        assert!(p.create.is_some(), "a new failure makes a new comment");
    }

    #[test]
    fn should_preserve_old_results_when_updating() {
        // Prow: TestParseIssueComment "should preserve old results when updating"
        let c = [bot(
            123,
            &format!("--- | --- | ---\nbla test | something | or other\nfoo test | wow | aye\n\n{COMMENT_TAG}"),
        )];
        parse_case(
            JobState::Failure,
            false,
            &c,
            &[123],
            &["bla test", "foo test"],
            None,
        );
    }

    #[test]
    fn should_merge_duplicates() {
        // Prow: TestParseIssueComment "should merge duplicates"
        let c = [
            bot(123, &format!("--- | --- | ---\nbla test | something | or other\nfoo test | wow such\n\n{COMMENT_TAG}")),
            bot(124, &format!("--- | --- | ---\nfoo test | beep | boop\n\n{COMMENT_TAG}")),
        ];
        parse_case(
            JobState::Failure,
            false,
            &c,
            &[123, 124],
            &["bla test", "foo test"],
            None,
        );
        let p = plan(&[result("bla test", JobState::Failure, None)], &c, false);
        let body = p.create.unwrap();
        assert!(
            rows(&body).contains(&"foo test | beep | boop"),
            "the newer row wins"
        );
    }

    #[test]
    fn should_update_an_old_comment_when_a_test_passes() {
        // Prow: TestParseIssueComment "should update an old comment when a test passes"
        let c = [bot(
            123,
            &format!("--- | --- | ---\nbla test | something | or other\nfoo test | wow | aye\n\n{COMMENT_TAG}"),
        )];
        parse_case(JobState::Success, false, &c, &[], &["foo test"], Some(123));
        // Run again with the edited body: nothing more to do.
        let p = plan(&[result("bla test", JobState::Success, None)], &c, false);
        let (_, edited) = p.edit.unwrap();
        let again = plan(
            &[result("bla test", JobState::Success, None)],
            &[bot(123, &edited)],
            false,
        );
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn other_users_and_unmarked_comments_are_left_alone() {
        let body = format!("--- | --- | ---\nbla test | x | y\n\n{COMMENT_TAG}");
        let c = [
            IssueComment {
                id: 1,
                user: "someone".into(),
                body: body.clone(),
            },
            bot(2, "--- | ---\nbla test | x\n\n"),
        ];
        let p = plan(&[result("bla test", JobState::Failure, None)], &c, false);
        assert_eq!(p.delete, Vec::<u64>::new());
        assert!(p.create.is_some());
        // A GitHub App's comments are by `slug[bot]`.
        let p = plan_comment(&CommentInput {
            bot_login: "bosun[bot]",
            author: "me",
            comments: &[IssueComment {
                id: 9,
                user: "bosun[bot]".into(),
                body,
            }],
            results: &[result("bla test", JobState::Success, None)],
            job_types_to_report: &[JobType::Presubmit],
            must_create: false,
            template: None,
            about: PROW_ABOUT,
        })
        .unwrap();
        assert_eq!(p.delete, [9]);
    }

    /// Prow's `TestCreateComment` expectations end with this.
    fn tail() -> String {
        format!("<details>\n\n{PROW_ABOUT}\n</details>\n{COMMENT_TAG}")
    }

    const FAILED_1: &str = "@chaodaig: The following test **failed**, say `/retest` to rerun all failed tests or `/retest-required` to rerun all mandatory failed tests:";
    const FAILED_N: &str = "@chaodaig: The following tests **failed**, say `/retest` to rerun all failed tests or `/retest-required` to rerun all mandatory failed tests:";
    const HEADER: &str =
        "Test name | Commit | Details | Required | Rerun command\n--- | --- | --- | --- | ---";

    #[test]
    fn single_job_single_failure() {
        // Prow: TestCreateComment "single-job-single-failure"
        let got = compose(
            "chaodaig",
            &["aaa | bbb | ccc | ddd | eee".into()],
            Some(""),
            PROW_ABOUT,
        );
        assert_eq!(
            got,
            format!(
                "{FAILED_1}\n\n{HEADER}\naaa | bbb | ccc | ddd | eee\n\n\n\n{}",
                tail()
            )
        );
    }

    #[test]
    fn single_job_multiple_failure() {
        // Prow: TestCreateComment "single-job-multi;e-failure"
        let got = compose(
            "chaodaig",
            &[
                "aaa | bbb | ccc | ddd | eee".into(),
                "fff | ggg | hhh | iii | jjj".into(),
            ],
            Some(""),
            PROW_ABOUT,
        );
        assert_eq!(
            got,
            format!("{FAILED_N}\n\n{HEADER}\naaa | bbb | ccc | ddd | eee\nfff | ggg | hhh | iii | jjj\n\n\n\n{}", tail())
        );
    }

    #[test]
    fn multiple_job_only_use_first_one() {
        // Prow: TestCreateComment "multiple-job-only-use-first-one"
        let t = ReportTemplate::parse("{{.Spec.Job}}").unwrap();
        let mut a = result("aaa", JobState::Failure, None);
        a.prowjob = serde_json::json!({"spec": {"job": "job-a"}});
        let mut b = result("bbb", JobState::Success, None);
        b.prowjob = serde_json::json!({"spec": {"job": "job-b"}});
        let p = plan_comment(&CommentInput {
            bot_login: BOT,
            author: "chaodaig",
            comments: &[],
            results: &[a, b],
            job_types_to_report: &[JobType::Presubmit],
            must_create: false,
            template: Some(&t),
            about: PROW_ABOUT,
        })
        .unwrap();
        assert_eq!(
            p.create.unwrap(),
            format!(
                "{FAILED_1}\n\n{HEADER}\naaa |  | [link]() | unknown | ``\n\njob-a\n\n{}",
                tail()
            )
        );
    }

    #[test]
    fn multiple_job_all_passed() {
        // Prow: TestCreateComment "multiple-job-all-passed"
        let got = compose("chaodaig", &[], None, PROW_ABOUT);
        assert_eq!(
            got,
            format!("@chaodaig: all tests **passed!**\n\n\n{}", tail())
        );
    }

    #[test]
    fn failed_pj() {
        // Prow: TestReportComment "failed pj"
        let p = plan(&[result("a", JobState::Failure, None)], &[], false);
        assert!(p.create.is_some());
    }

    #[test]
    fn succeeded_pj_when_must_create_is_true() {
        // Prow: TestReportComment "succeeded pj when mustCreate is true"
        let p = plan(&[result("a", JobState::Success, None)], &[], true);
        assert!(p.create.unwrap().starts_with("@me: all tests **passed!**"));
        assert!(plan(&[result("a", JobState::Success, None)], &[], false).is_empty());
    }

    #[test]
    fn aborted_pj_when_must_create_is_true() {
        // Prow: TestReportComment "aborted pj when mustCreate is true"
        assert!(plan(&[result("a", JobState::Aborted, None)], &[], true).is_empty());
    }

    #[test]
    fn unended_and_unreported_runs_make_no_comment() {
        assert!(plan(&[result("a", JobState::Pending, None)], &[], true).is_empty());
        let mut skip = result("a", JobState::Failure, None);
        skip.skip_report = true;
        assert!(plan(&[skip], &[], false).is_empty());
        let mut post = result("a", JobState::Failure, None);
        post.job_type = JobType::Postsubmit;
        assert!(
            plan(&[post.clone()], &[], false).is_empty(),
            "postsubmits not in the types"
        );
        let p = plan_comment(&CommentInput {
            bot_login: BOT,
            author: "me",
            comments: &[],
            results: &[post],
            job_types_to_report: &[JobType::Presubmit, JobType::Postsubmit],
            must_create: false,
            template: None,
            about: PROW_ABOUT,
        })
        .unwrap();
        assert!(
            rows(&p.create.unwrap())[0].contains("| unknown |"),
            "required is unknown but for presubmits"
        );
    }

    #[test]
    fn a_template_that_fails_is_an_error() {
        let t = ReportTemplate::parse("{{.Spec.Nope.Deeper}}").unwrap();
        let r = plan_comment(&CommentInput {
            bot_login: BOT,
            author: "me",
            comments: &[],
            results: &[result("a", JobState::Failure, None)],
            job_types_to_report: &[JobType::Presubmit],
            must_create: false,
            template: Some(&t),
            about: PROW_ABOUT,
        });
        assert!(r.is_err());
        assert!(ReportTemplate::parse("{{if}}").is_err());
    }

    #[test]
    fn bodies_stay_within_githubs_limit() {
        let many: Vec<String> = (0..2000)
            .map(|i| {
                format!(
                    "pull-job-{i:04} | {} | [link](https://x/{i}) | true | `/test pull-job-{i:04}`",
                    "a".repeat(40)
                )
            })
            .collect();
        let body = compose("me", &many, None, PROW_ABOUT);
        assert!(
            body.chars().count() <= BODY_LIMIT,
            "{}",
            body.chars().count()
        );
        assert!(body.ends_with(COMMENT_TAG));
        let kept = rows(&body);
        assert_eq!(
            kept.last(),
            many.last().map(String::as_str).as_ref(),
            "the newest rows are kept"
        );
        let dropped = many.len() - kept.len();
        assert!(
            body.contains(&format!("\n\n{dropped} more failed tests not listed")),
            "{dropped}"
        );
        // The note is not read back as a row.
        let again = plan(
            &[result("other", JobState::Success, None)],
            &[bot(1, &body)],
            false,
        );
        let (_, edited) = again.edit.expect("edited");
        assert_eq!(rows(&edited).len(), kept.len());
        // A huge template is cut after the rows.
        let report = "r".repeat(100_000);
        let body = compose("me", &many[..3], Some(&report), PROW_ABOUT);
        assert_eq!(body.chars().count(), BODY_LIMIT);
        assert_eq!(rows(&body).len(), 3);
        assert!(body.contains("r…\n\n<details>"));
    }

    fn done(name: &str, state: JobState) -> JobResult {
        result(name, state, None)
    }

    #[test]
    fn two_jobs_finished() {
        // Prow: TestPjsToReport "two-jobs-finished"
        let got = latest_per_job(&[
            (1, done("ci-foo", JobState::Success)),
            (1, done("ci-bar", JobState::Failure)),
        ])
        .unwrap();
        let names: Vec<_> = got.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["ci-foo", "ci-bar"]);
    }

    #[test]
    fn one_job_still_running() {
        // Prow: TestPjsToReport "one-job-still-running"
        assert_eq!(
            latest_per_job(&[
                (1, done("ci-foo", JobState::Success)),
                (1, done("ci-bar", JobState::Pending))
            ]),
            None
        );
    }

    #[test]
    fn mix_of_finished_and_running() {
        // Prow: TestPjsToReport "mix-of-finished-and-running"
        assert_eq!(
            latest_per_job(&[
                (1, done("ci-foo", JobState::Success)),
                (1, done("ci-bar", JobState::Failure)),
                (1, done("ci-baz", JobState::Pending)),
            ]),
            None
        );
    }

    #[test]
    fn current_job_only() {
        // Prow: TestPjsToReport "current-job-only"
        let got = latest_per_job(&[(1, done("ci-foo", JobState::Success))]).unwrap();
        assert_eq!(got.len(), 1);
    }

    #[test]
    fn current_job_not_finished() {
        // Prow: TestPjsToReport "current-job-not-finished"
        assert_eq!(
            latest_per_job(&[(1, done("ci-foo", JobState::Pending))]),
            None
        );
    }

    #[test]
    fn the_latest_run_of_a_job_wins_and_skip_report_is_left_out() {
        let mut skip = done("ci-skip", JobState::Failure);
        skip.skip_report = true;
        let got = latest_per_job(&[
            (1, done("ci-foo", JobState::Failure)),
            (3, done("ci-foo", JobState::Success)),
            (2, done("ci-foo", JobState::Error)),
            (1, skip),
        ])
        .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].state, JobState::Success);
    }
}
