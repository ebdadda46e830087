//! Prow's `pkg/plugins/trigger/generic-comment_test.go`, one test per case.

use std::collections::BTreeSet;

use super::*;
use crate::trigger::commands::{
    RETEST_WITH_TARGET_NOTE, TARGET_NOT_FOUND_NOTE, TEST_ALL_NOTHING_NOTE, TEST_WITHOUT_TARGET_NOTE,
};
use crate::trigger::fake::{presubmit, triggered, FakeHost};
use crate::trigger::{CommentKind, LGTM};
use bosun_config::Presubmit;

const BOT: &str = "k8s-ci-robot";

/// Prow's `testcase` of TestHandleGenericComment.
struct T {
    author: &'static str,
    pr_author: &'static str,
    body: String,
    open: bool,
    is_pull: bool,
    branch: &'static str,
    should_build: bool,
    added: &'static [&'static str],
    removed: &'static [&'static str],
    starts_exactly: &'static str,
    presubmits: Option<Vec<Presubmit>>,
    labels: &'static [&'static str],
    ignore_ok_to_test: bool,
    /// `None`: not checked; `Some("")`: no comment; else every comment
    /// contains it.
    comment: Option<String>,
    prune_help: bool,
}

fn d() -> T {
    T {
        author: "trusted-member",
        pr_author: "",
        body: String::new(),
        open: true,
        is_pull: true,
        branch: "master",
        should_build: false,
        added: &[],
        removed: &[],
        starts_exactly: "",
        presubmits: None,
        labels: &[],
        ignore_ok_to_test: false,
        comment: None,
        prune_help: false,
    }
}

/// The default jobs: `job` (always run, on master) and `jib` (by its
/// trigger only).
fn default_jobs() -> Vec<Presubmit> {
    let mut job = triggered("job", "pull-job");
    job.kind.always_run = true;
    job.kind.branches = vec!["master".into()];
    vec![job, triggered("jib", "pull-jib")]
}

fn world(t: &T) -> FakeHost {
    let mut h = FakeHost::new(BOT);
    h.members = vec![("org".into(), "trusted-member".into())];
    h.collaborators = vec![BOT.into()];
    h.labels = t.labels.iter().map(|s| s.to_string()).collect();
    h.pr = PullRequest {
        repo: "org/repo".into(),
        number: 0,
        author: t.pr_author.into(),
        head_sha: "cafe".into(),
        head_ref: "pr-branch".into(),
        base_ref: t.branch.into(),
        open: t.open,
        html_url: "https://github.com/org/repo/pull/0".into(),
        ..PullRequest::default()
    };
    h.changed = vec!["CHANGED".into()];
    h.statuses = vec![
        ("pull-job".into(), "pending".into()),
        ("pull-jib".into(), "failure".into()),
        ("pull-jub".into(), "success".into()),
    ];
    h.presubmits = Presubmits {
        jobs: t.presubmits.clone().unwrap_or_else(default_jobs),
        in_repo_error: None,
    };
    h
}

fn event(t: &T) -> Comment {
    Comment {
        repo: "org/repo".into(),
        number: 0,
        is_pull: t.is_pull,
        kind: CommentKind::IssueComment,
        action: CommentAction::Created,
        body: t.body.clone(),
        author: t.author.into(),
        issue_author: t.pr_author.into(),
        issue_open: t.open,
        html_url: "https://github.com/org/repo/pull/0#issuecomment-1".into(),
        head_sha: None,
        clone_url: "https://github.com/org/repo.git".into(),
    }
}

fn run(t: &T) -> Vec<Action> {
    let settings = Trigger {
        ignore_ok_to_test: t.ignore_ok_to_test,
        ..Trigger::default()
    };
    on_comment(&world(t), &settings, &event(t)).unwrap()
}

/// Prow's `validate`.
fn check(t: T) {
    let actions = run(&t);
    let started: BTreeSet<&str> = actions
        .iter()
        .flat_map(|a| match a {
            Action::Run { jobs, .. } => jobs.iter().map(|j| j.kind.context.as_str()).collect(),
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(!started.is_empty(), t.should_build, "{actions:#?}");
    if !t.starts_exactly.is_empty() {
        assert_eq!(started, BTreeSet::from([t.starts_exactly]), "{actions:#?}");
    }
    let labels = |add: bool| -> Vec<String> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::AddLabel {
                    repo,
                    number,
                    label,
                } if add => Some(format!("{repo}#{number}:{label}")),
                Action::RemoveLabel {
                    repo,
                    number,
                    label,
                } if !add => Some(format!("{repo}#{number}:{label}")),
                _ => None,
            })
            .collect()
    };
    let expected = |l: &[&str]| {
        l.iter()
            .map(|l| format!("org/repo#0:{l}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(labels(true), expected(t.added), "added labels");
    assert_eq!(labels(false), expected(t.removed), "removed labels");
    let comments: Vec<&str> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Comment { body, .. } => Some(body.as_str()),
            _ => None,
        })
        .collect();
    match t.comment.as_deref() {
        None => {}
        Some("") => assert!(comments.is_empty(), "{comments:#?}"),
        Some(text) => {
            assert!(
                !comments.is_empty(),
                "expected a comment containing {text:?}"
            );
            for c in &comments {
                assert!(c.contains(text), "expected {text:?} in {c:?}");
            }
        }
    }
    let pruned = actions
        .iter()
        .any(|a| matches!(a, Action::PruneHelpComments { .. }));
    assert_eq!(pruned, t.prune_help, "prune help: {actions:#?}");
}

const HELP: &str = "The following commands are available to trigger required jobs:\n```\n/test jib\n```\n```\n/test job\n```\n\n";
const HELP_TEST_ALL_JOB: &str =
    "Use `/test all` to run the following jobs that were automatically triggered:\n```\njob\n```\n\n";

fn code_block(text: &str, newline: bool) -> String {
    format!("```\n{text}\n```{}", if newline { "\n" } else { "" })
}

fn body(s: &str) -> String {
    s.to_owned()
}

fn with_branches(mut j: Presubmit, branches: &[&str]) -> Presubmit {
    j.kind.branches = branches.iter().map(|b| b.to_string()).collect();
    j
}

fn run_if_changed(name: &str, pattern: &str) -> Presubmit {
    let mut j = triggered(name, &format!("pull-{name}"));
    j.kind.run_if_changed = Some(pattern.into());
    j
}

fn skip_if_only_changed(name: &str, pattern: &str) -> Presubmit {
    let mut j = triggered(name, &format!("pull-{name}"));
    j.kind.skip_if_only_changed = Some(pattern.into());
    j
}

fn always(name: &str) -> Presubmit {
    let mut j = triggered(name, &format!("pull-{name}"));
    j.kind.always_run = true;
    j
}

fn exact(name: &str) -> Presubmit {
    let mut j = triggered(name, &format!("pull-{name}"));
    j.kind.trigger = format!("(?m)^/test {name}$");
    j
}

#[test]
fn not_a_pr() {
    // Prow: TestHandleGenericComment "Not a PR."
    check(T {
        body: body("/ok-to-test"),
        is_pull: false,
        ..d()
    });
}

#[test]
fn closed_pr() {
    // Prow: TestHandleGenericComment "Closed PR."
    check(T {
        body: body("/ok-to-test"),
        open: false,
        ..d()
    });
}

#[test]
fn comment_by_a_bot() {
    // Prow: TestHandleGenericComment "Comment by a bot."
    check(T {
        author: BOT,
        body: body("/ok-to-test"),
        ..d()
    });
}

#[test]
fn irrelevant_comment_leads_to_no_action() {
    // Prow: TestHandleGenericComment "Irrelevant comment leads to no action."
    check(T {
        body: body("Nice weather outside, right?"),
        comment: Some(String::new()),
        ..d()
    });
}

#[test]
fn non_trusted_members_ok_to_test() {
    // Prow: TestHandleGenericComment "Non-trusted member's ok to test."
    check(T {
        author: "untrusted-member",
        body: body("/ok-to-test"),
        comment: Some(CANNOT_TRIGGER.into()),
        ..d()
    });
}

#[test]
fn accept_test_from_non_trusted_member_if_pr_author_is_trusted() {
    // Prow: TestHandleGenericComment "accept /test from non-trusted member if PR author is trusted"
    check(T {
        author: "untrusted-member",
        pr_author: "trusted-member",
        body: body("/test all"),
        should_build: true,
        prune_help: true,
        ..d()
    });
}

#[test]
fn reject_test_from_non_trusted_member_when_pr_author_is_untrusted() {
    // Prow: TestHandleGenericComment "reject /test from non-trusted member when PR author is untrusted"
    check(T {
        author: "untrusted-member",
        pr_author: "untrusted-member",
        body: body("/test all"),
        comment: Some(format!("@untrusted-member: {CANNOT_TRIGGER}")),
        ..d()
    });
}

#[test]
fn non_trusted_member_after_ok_to_test() {
    // Prow: TestHandleGenericComment `Non-trusted member after "/ok-to-test".`
    check(T {
        author: "untrusted-member",
        body: body("/test all"),
        should_build: true,
        prune_help: true,
        labels: &[OK_TO_TEST],
        ..d()
    });
}

#[test]
fn non_trusted_member_after_ok_to_test_needs_ok_to_test_not_deleted() {
    // Prow: TestHandleGenericComment `Non-trusted member after "/ok-to-test", needs-ok-to-test label wasn't deleted.`
    check(T {
        author: "untrusted-member",
        body: body("/test all"),
        should_build: true,
        prune_help: true,
        labels: &[NEEDS_OK_TO_TEST, OK_TO_TEST],
        removed: &[NEEDS_OK_TO_TEST],
        ..d()
    });
}

#[test]
fn trusted_members_ok_to_test_ignore_ok_to_test() {
    // Prow: TestHandleGenericComment "Trusted member's ok to test, IgnoreOkToTest"
    check(T {
        body: body("/ok-to-test"),
        ignore_ok_to_test: true,
        ..d()
    });
}

#[test]
fn trusted_members_ok_to_test() {
    // Prow: TestHandleGenericComment "Trusted member's ok to test"
    check(T {
        body: body("looks great, thanks!\n/ok-to-test"),
        should_build: true,
        added: &[OK_TO_TEST],
        ..d()
    });
}

#[test]
fn trusted_members_ok_to_test_trailing_space() {
    // Prow: TestHandleGenericComment "Trusted member's ok to test, trailing space."
    check(T {
        body: body("looks great, thanks!\n/ok-to-test \r"),
        should_build: true,
        added: &[OK_TO_TEST],
        ..d()
    });
}

#[test]
fn trusted_members_not_ok_to_test() {
    // Prow: TestHandleGenericComment "Trusted member's not ok to test."
    // (nothing at all: no comment either)
    check(T {
        body: body("not /ok-to-test"),
        comment: Some(String::new()),
        ..d()
    });
}

#[test]
fn trusted_members_test_this() {
    // Prow: TestHandleGenericComment "Trusted member's test this."
    check(T {
        body: body("/test all"),
        should_build: true,
        prune_help: true,
        ..d()
    });
}

#[test]
fn wrong_branch() {
    // Prow: TestHandleGenericComment "Wrong branch"
    check(T {
        body: body("/test all"),
        branch: "other",
        ..d()
    });
}

#[test]
fn retest_with_one_running_and_one_failed() {
    // Prow: TestHandleGenericComment "Retest with one running and one failed"
    check(T {
        body: body("/retest"),
        should_build: true,
        starts_exactly: "pull-jib",
        prune_help: true,
        ..d()
    });
}

#[test]
fn retest_with_one_running_and_one_failed_trailing_space() {
    // Prow: TestHandleGenericComment "Retest with one running and one failed, trailing space."
    check(T {
        body: body("/retest \r"),
        should_build: true,
        starts_exactly: "pull-jib",
        prune_help: true,
        ..d()
    });
}

#[test]
fn test_of_silly_regex_job() {
    // Prow: TestHandleGenericComment "test of silly regex job"
    let mut jab = presubmit("jab");
    jab.kind.branches = vec!["master".into()];
    jab.kind.context = "pull-jab".into();
    jab.kind.trigger = "Nice weather outside, right?".into();
    jab.kind.rerun_command = "Nice weather outside, right?".into();
    check(T {
        body: body("Nice weather outside, right?"),
        presubmits: Some(vec![jab]),
        should_build: true,
        starts_exactly: "pull-jab",
        ..d()
    });
}

#[test]
fn needs_ok_to_test_removed_when_no_presubmit_runs_by_default() {
    // Prow: TestHandleGenericComment "needs-ok-to-test label is removed when no presubmit runs by default"
    check(T {
        body: body("/ok-to-test"),
        presubmits: Some(vec![
            triggered("job", "pull-job"),
            triggered("jib", "pull-jib"),
        ]),
        labels: &[NEEDS_OK_TO_TEST],
        added: &[OK_TO_TEST],
        removed: &[NEEDS_OK_TO_TEST],
        ..d()
    });
}

#[test]
fn wrong_branch_with_skip_report() {
    // Prow: TestHandleGenericComment "Wrong branch w/ SkipReport"
    let mut job = with_branches(always("job"), &["master"]);
    job.kind.skip_report = true;
    check(T {
        body: body("/test all"),
        branch: "other",
        presubmits: Some(vec![job]),
        ..d()
    });
}

#[test]
fn retest_of_run_if_changed_job_not_run_changes_require_it() {
    // Prow: TestHandleGenericComment "Retest of run_if_changed job that hasn't run. Changes require job"
    let mut jab = run_if_changed("jab", "CHANGED");
    jab.kind.skip_report = true;
    check(T {
        body: body("/retest"),
        presubmits: Some(vec![jab]),
        should_build: true,
        starts_exactly: "pull-jab",
        prune_help: true,
        ..d()
    });
}

#[test]
fn retest_of_skip_if_only_changed_job_not_run_changes_require_it() {
    // Prow: TestHandleGenericComment "Retest of skip_if_only_changed job that hasn't run. Changes require job"
    let mut jab = skip_if_only_changed("jab", "CHANGED2");
    jab.kind.skip_report = true;
    check(T {
        body: body("/retest"),
        presubmits: Some(vec![jab]),
        should_build: true,
        starts_exactly: "pull-jab",
        prune_help: true,
        ..d()
    });
}

#[test]
fn retest_of_run_if_changed_job_that_failed_changes_require_it() {
    // Prow: TestHandleGenericComment "Retest of run_if_changed job that failed. Changes require job"
    check(T {
        body: body("/retest"),
        presubmits: Some(vec![run_if_changed("jib", "CHANGED")]),
        should_build: true,
        starts_exactly: "pull-jib",
        prune_help: true,
        ..d()
    });
}

#[test]
fn retest_of_skip_if_only_changed_job_that_failed_changes_require_it() {
    // Prow: TestHandleGenericComment "Retest of skip_if_only_changed job that failed. Changes require job"
    check(T {
        body: body("/retest"),
        presubmits: Some(vec![skip_if_only_changed("jib", "CHANGED2")]),
        should_build: true,
        starts_exactly: "pull-jib",
        prune_help: true,
        ..d()
    });
}

#[test]
fn test_of_run_if_changed_job_that_has_passed() {
    // Prow: TestHandleGenericComment "/test of run_if_changed job that has passed"
    check(T {
        body: body("/test jub"),
        presubmits: Some(vec![run_if_changed("jub", "CHANGED")]),
        should_build: true,
        starts_exactly: "pull-jub",
        prune_help: true,
        ..d()
    });
}

#[test]
fn test_of_skip_if_only_changed_job_that_has_passed() {
    // Prow: TestHandleGenericComment "/test of skip_if_only_changed job that has passed"
    check(T {
        body: body("/test jub"),
        presubmits: Some(vec![skip_if_only_changed("jub", "CHANGED2")]),
        should_build: true,
        starts_exactly: "pull-jub",
        prune_help: true,
        ..d()
    });
}

#[test]
fn retest_triggers_failed_job() {
    // Prow: TestHandleGenericComment "Retest triggers failed job"
    check(T {
        body: body("/retest"),
        presubmits: Some(vec![triggered("jib", "pull-jib")]),
        should_build: true,
        prune_help: true,
        ..d()
    });
}

#[test]
fn retest_triggers_failed_job_that_is_optional() {
    // Prow: TestHandleGenericComment "Retest triggers failed job that is optional"
    let mut jib = triggered("jib", "pull-jib");
    jib.kind.optional = true;
    check(T {
        body: body("/retest"),
        presubmits: Some(vec![jib]),
        should_build: true,
        prune_help: true,
        ..d()
    });
}

#[test]
fn retest_required_triggers_failed_job() {
    // Prow: TestHandleGenericComment "Retest-Required doesn't triggers failed job" (it does: the
    // table's name says otherwise, its expectation builds)
    let actions = run(&T {
        body: body("/retest-required"),
        presubmits: Some(vec![triggered("jib", "pull-jib")]),
        ..d()
    });
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Run { retest: true, .. })),
        "{actions:#?}"
    );
    check(T {
        body: body("/retest-required"),
        presubmits: Some(vec![triggered("jib", "pull-jib")]),
        should_build: true,
        prune_help: true,
        ..d()
    });
}

#[test]
fn retest_required_does_not_trigger_failed_optional_job() {
    // Prow: TestHandleGenericComment "Retest-Required doesn't trigger failed job that is optional"
    let mut jib = triggered("jib", "pull-jib");
    jib.kind.optional = true;
    check(T {
        body: body("/retest-required"),
        presubmits: Some(vec![jib]),
        prune_help: true,
        ..d()
    });
}

#[test]
fn test_manual_required_triggers_missing_required_manual_job() {
    // Prow: TestHandleGenericComment "Test-Manual-Required triggers missing required manual job"
    check(T {
        body: body("/test-manual-required"),
        presubmits: Some(vec![triggered("jab", "pull-jab")]),
        should_build: true,
        starts_exactly: "pull-jab",
        prune_help: true,
        ..d()
    });
}

#[test]
fn test_manual_required_does_not_trigger_missing_optional_job() {
    // Prow: TestHandleGenericComment "Test-Manual-Required doesn't trigger missing optional job"
    let mut jab = triggered("jab", "pull-jab");
    jab.kind.optional = true;
    check(T {
        body: body("/test-manual-required"),
        presubmits: Some(vec![jab]),
        prune_help: true,
        ..d()
    });
}

#[test]
fn test_manual_required_does_not_trigger_always_run_or_conditional_jobs() {
    // Prow: TestHandleGenericComment "Test-Manual-Required does not trigger always_run or conditional jobs"
    check(T {
        body: body("/test-manual-required"),
        presubmits: Some(vec![
            always("always-run"),
            run_if_changed("conditional", "CHANGED"),
        ]),
        prune_help: true,
        ..d()
    });
}

#[test]
fn retest_of_run_if_changed_job_that_failed_changes_do_not_require_it() {
    // Prow: TestHandleGenericComment "Retest of run_if_changed job that failed. Changes do not require the job"
    check(T {
        body: body("/retest"),
        presubmits: Some(vec![run_if_changed("jib", "CHANGED2")]),
        should_build: true,
        prune_help: true,
        ..d()
    });
}

#[test]
fn retest_of_skip_if_only_changed_job_that_failed_changes_do_not_require_it() {
    // Prow: TestHandleGenericComment "Retest of skip_if_only_changed job that failed. Changes do not require the job"
    check(T {
        body: body("/retest"),
        presubmits: Some(vec![skip_if_only_changed("jib", "CHANGED")]),
        should_build: true,
        prune_help: true,
        ..d()
    });
}

#[test]
fn run_if_changed_job_triggered_by_ok_to_test() {
    // Prow: TestHandleGenericComment "Run if changed job triggered by /ok-to-test"
    check(T {
        body: body("/ok-to-test"),
        presubmits: Some(vec![run_if_changed("jab", "CHANGED")]),
        should_build: true,
        starts_exactly: "pull-jab",
        labels: &[NEEDS_OK_TO_TEST],
        added: &[OK_TO_TEST],
        removed: &[NEEDS_OK_TO_TEST],
        ..d()
    });
}

#[test]
fn non_skipped_job_triggered_by_ok_to_test() {
    // Prow: TestHandleGenericComment "Run if non-skipped job triggered by /ok-to-test"
    check(T {
        body: body("/ok-to-test"),
        presubmits: Some(vec![skip_if_only_changed("jab", "CHANGED2")]),
        should_build: true,
        starts_exactly: "pull-jab",
        labels: &[NEEDS_OK_TO_TEST],
        added: &[OK_TO_TEST],
        removed: &[NEEDS_OK_TO_TEST],
        ..d()
    });
}

fn sharded() -> Vec<Presubmit> {
    vec![
        with_branches(triggered("jab", "pull-jab"), &["master"]),
        with_branches(triggered("jab", "pull-jab"), &["release"]),
    ]
}

#[test]
fn test_of_branch_sharded_job() {
    // Prow: TestHandleGenericComment "/test of branch-sharded job"
    let actions = run(&T {
        body: body("/test jab"),
        presubmits: Some(sharded()),
        ..d()
    });
    let Some(Action::Run { jobs, .. }) = actions.last() else {
        panic!("{actions:#?}")
    };
    assert_eq!(jobs.len(), 1, "only the master shard");
    check(T {
        body: body("/test jab"),
        presubmits: Some(sharded()),
        should_build: true,
        starts_exactly: "pull-jab",
        prune_help: true,
        ..d()
    });
}

#[test]
fn branch_sharded_job_no_shard_matches_base_branch() {
    // Prow: TestHandleGenericComment "branch-sharded job. no shard matches base branch"
    check(T {
        branch: "branch",
        body: body("/test jab"),
        presubmits: Some(sharded()),
        ..d()
    });
}

#[test]
fn retest_of_run_if_changed_job_that_need_not_run_and_has_not_run() {
    // Prow: TestHandleGenericComment "/retest of RunIfChanged job that doesn't need to run and hasn't run"
    check(T {
        body: body("/retest"),
        presubmits: Some(vec![run_if_changed("jeb", "CHANGED2")]),
        prune_help: true,
        ..d()
    });
}

#[test]
fn retest_of_skip_if_only_changed_job_that_need_not_run_and_has_not_run() {
    // Prow: TestHandleGenericComment "/retest of SkipIfOnlyChanged job that doesn't need to run and hasn't run"
    check(T {
        body: body("/retest"),
        presubmits: Some(vec![skip_if_only_changed("jeb", "CHANGED")]),
        prune_help: true,
        ..d()
    });
}

#[test]
fn explicit_test_for_run_if_changed_job_that_need_not_run() {
    // Prow: TestHandleGenericComment "explicit /test for RunIfChanged job that doesn't need to run"
    // (`/test pull-jeb` names no job: the help comment answers, which the
    // table does not check)
    check(T {
        body: body("/test pull-jeb"),
        presubmits: Some(vec![run_if_changed("jeb", "CHANGED2")]),
        ..d()
    });
}

#[test]
fn explicit_test_for_skip_if_only_changed_job_that_need_not_run() {
    // Prow: TestHandleGenericComment "explicit /test for SkipIfOnlyChanged job that doesn't need to run"
    check(T {
        body: body("/test pull-jeb"),
        presubmits: Some(vec![skip_if_only_changed("jeb", "CHANGED")]),
        ..d()
    });
}

#[test]
fn test_all_of_run_if_changed_job_that_passed_and_needs_to_run() {
    // Prow: TestHandleGenericComment "/test all of run_if_changed job that has passed and needs to run"
    check(T {
        body: body("/test all"),
        presubmits: Some(vec![run_if_changed("jub", "CHANGED")]),
        should_build: true,
        starts_exactly: "pull-jub",
        prune_help: true,
        ..d()
    });
}

#[test]
fn test_all_of_skip_if_only_changed_job_that_passed_and_needs_to_run() {
    // Prow: TestHandleGenericComment "/test all of skip_if_only_changed job that has passed and needs to run"
    check(T {
        body: body("/test all"),
        presubmits: Some(vec![skip_if_only_changed("jub", "CHANGED2")]),
        should_build: true,
        starts_exactly: "pull-jub",
        prune_help: true,
        ..d()
    });
}

#[test]
fn test_all_of_run_if_changed_job_that_passed_and_need_not_run() {
    // Prow: TestHandleGenericComment "/test all of run_if_changed job that has passed and doesn't need to run"
    // (nothing runs: the help comment says so, unchecked by the table)
    check(T {
        body: body("/test all"),
        presubmits: Some(vec![run_if_changed("jub", "CHANGED2")]),
        ..d()
    });
}

#[test]
fn test_all_of_skip_if_only_changed_job_that_passed_and_need_not_run() {
    // Prow: TestHandleGenericComment "/test all of skip_if_only_changed job that has passed and doesn't need to run"
    check(T {
        body: body("/test all"),
        presubmits: Some(vec![skip_if_only_changed("jub", "CHANGED")]),
        ..d()
    });
}

#[test]
fn accept_test_all_from_trusted_user() {
    // Prow: TestHandleGenericComment "accept /test all from trusted user"
    check(T {
        pr_author: "trusted-member",
        body: body("/test all"),
        should_build: true,
        prune_help: true,
        ..d()
    });
}

#[test]
fn non_trusted_member_after_lgtm_and_approve() {
    // Prow: TestHandleGenericComment `Non-trusted member after "/lgtm" and "/approve"`
    check(T {
        author: "untrusted-member",
        pr_author: "untrusted-member",
        body: body("/retest"),
        labels: &[LGTM, "approved"],
        ..d()
    });
}

fn job_and_jib_always() -> Vec<Presubmit> {
    vec![always("job"), always("jib")]
}

#[test]
fn help_command_lists_available_presubmits() {
    // Prow: TestHandleGenericComment `help command "/test ?" lists available presubmits`
    check(T {
        body: body("/test ?"),
        presubmits: Some(job_and_jib_always()),
        comment: Some(format!("{HELP}Use `/test all` to run all jobs.")),
        ..d()
    });
}

#[test]
fn ignore_test_question_mark_in_code_block() {
    // Prow: TestHandleGenericComment `ignore "/test ?" in code block`
    check(T {
        body: code_block("/test ?", false),
        presubmits: Some(job_and_jib_always()),
        comment: Some(String::new()),
        ..d()
    });
}

#[test]
fn help_command_uses_unique_rerun_commands() {
    // Prow: TestHandleGenericComment `help command "/test ?" uses unique RerunCommand field of presubmits`
    let custom = |name: &str, command: &str, always_run: bool| {
        let mut j = presubmit(name);
        j.kind.context = format!("pull-{name}");
        j.kind.always_run = always_run;
        j.kind.trigger = command.into();
        j.kind.rerun_command = command.into();
        j
    };
    check(T {
        body: body("/test ?"),
        presubmits: Some(vec![
            custom("jub", "/rerun_command", true),
            custom("jib", "/command_foo", true),
            custom("jab", "/rerun_command", false),
        ]),
        comment: Some(
            "@trusted-member: The following commands are available to trigger required jobs:\n```\n/command_foo\n```\n```\n/rerun_command\n```\n\nUse `/test all` to run all jobs."
                .into(),
        ),
        ..d()
    });
}

#[test]
fn test_with_no_target_results_in_a_help_message() {
    // Prow: TestHandleGenericComment "/test with no target results in a help message"
    check(T {
        body: body("/test"),
        comment: Some(format!(
            "{TEST_WITHOUT_TARGET_NOTE}{HELP}{HELP_TEST_ALL_JOB}"
        )),
        ..d()
    });
}

#[test]
fn ignore_test_with_no_target_in_a_code_block() {
    // Prow: TestHandleGenericComment "ignore `/test` with no target in a code block"
    check(T {
        body: body("```\n/test\n```"),
        comment: Some(String::new()),
        ..d()
    });
}

#[test]
fn ignore_test_with_no_target_in_a_tilde_code_block() {
    // Prow: TestHandleGenericComment "ignore `/test` with no target in a tilde code block"
    check(T {
        body: body("~~~\n/test\n~~~"),
        comment: Some(String::new()),
        ..d()
    });
}

#[test]
fn test_with_no_target_but_question_mark_on_the_next_line() {
    // Prow: TestHandleGenericComment "/test with no target but ? in the next line results in an invalid test command message"
    check(T {
        body: body("/test \r\n?"),
        comment: Some(format!(
            "{TEST_WITHOUT_TARGET_NOTE}{HELP}{HELP_TEST_ALL_JOB}"
        )),
        ..d()
    });
}

#[test]
fn retest_with_trailing_words_results_in_a_help_message() {
    // Prow: TestHandleGenericComment "/retest with trailing words results in a help message"
    check(T {
        body: body("/retest FOO"),
        comment: Some(format!(
            "{RETEST_WITH_TARGET_NOTE}{HELP}{HELP_TEST_ALL_JOB}"
        )),
        ..d()
    });
}

#[test]
fn retest_with_trailing_words_in_a_code_block() {
    // Prow: TestHandleGenericComment "/retest with trailing words in a code block"
    check(T {
        body: code_block("/retest FOO", false),
        comment: Some(String::new()),
        ..d()
    });
}

#[test]
fn retest_without_target_but_with_lines_following_is_valid() {
    // Prow: TestHandleGenericComment "/retest without target but with lines following it, is valid"
    check(T {
        body: body("/retest \r\n/other-command"),
        should_build: true,
        starts_exactly: "pull-jib",
        prune_help: true,
        ..d()
    });
}

#[test]
fn test_with_unknown_target_results_in_a_help_message() {
    // Prow: TestHandleGenericComment "/test with unknown target results in a help message"
    check(T {
        body: body("/test FOO"),
        comment: Some(format!("{TARGET_NOT_FOUND_NOTE}{HELP}{HELP_TEST_ALL_JOB}")),
        ..d()
    });
}

#[test]
fn test_with_unknown_target_in_code_block_is_ignored() {
    // Prow: TestHandleGenericComment "/test with unknown target in code block. Should be ignored"
    check(T {
        body: code_block("/test FOO", false),
        comment: Some(String::new()),
        ..d()
    });
}

#[test]
fn two_tests_with_unknown_target_one_in_a_code_block_first() {
    // Prow: TestHandleGenericComment "two `/test` with unknown target. One in a code block, and one is not."
    check(T {
        body: code_block("/test FOO", true) + "/test BAR",
        comment: Some(format!("{TARGET_NOT_FOUND_NOTE}{HELP}{HELP_TEST_ALL_JOB}")),
        ..d()
    });
}

#[test]
fn two_tests_with_unknown_target_one_in_a_code_block_last() {
    // Prow: TestHandleGenericComment "two `/test` with unknown target. One out of a code block, and one is inside."
    check(T {
        body: format!("/test FOO\n{}", code_block("/test BAR", false)),
        comment: Some(format!("{TARGET_NOT_FOUND_NOTE}{HELP}{HELP_TEST_ALL_JOB}")),
        ..d()
    });
}

#[test]
fn multiple_code_blocks_are_ignored() {
    // Prow: TestHandleGenericComment "multiple code blocks; should be ignored."
    check(T {
        body: code_block("/test FOO", true)
            + &code_block("/test BAR", true)
            + &code_block("/test BAZ", false),
        comment: Some(String::new()),
        ..d()
    });
}

#[test]
fn test_mixed_with_multiple_code_blocks() {
    // Prow: TestHandleGenericComment "/test mixed with multiple code blocks; should be ignored."
    check(T {
        body: code_block("/test FOO", true)
            + &code_block("/test BAR", true)
            + "/test BAZ\n"
            + "Will trigger the help message.\n"
            + &code_block("/test QUX", false),
        comment: Some(format!("{TARGET_NOT_FOUND_NOTE}{HELP}{HELP_TEST_ALL_JOB}")),
        ..d()
    });
}

#[test]
fn help_comment_lists_only_eligible_jobs_under_test_all() {
    // Prow: TestHandleGenericComment "help comment should list only eligible jobs under '/test all'"
    let mut job = exact("job");
    job.kind.always_run = true;
    check(T {
        body: body("/test ?"),
        presubmits: Some(vec![job, triggered("jib", "pull-jib")]),
        comment: Some(format!("{HELP}{HELP_TEST_ALL_JOB}")),
        ..d()
    });
}

#[test]
fn when_no_jobs_run_with_test_all_respond_accordingly() {
    // Prow: TestHandleGenericComment "when no jobs can be run with /test all, respond accordingly"
    check(T {
        body: body("/test all"),
        presubmits: Some(vec![exact("job"), exact("jib")]),
        comment: Some(format!("{TEST_ALL_NOTHING_NOTE}{HELP}")),
        ..d()
    });
}

#[test]
fn when_no_jobs_run_with_test_all_ignore_if_inside_a_code_block() {
    // Prow: TestHandleGenericComment "when no jobs can be run with /test all, ignore if inside a code block"
    check(T {
        body: code_block("/test all", false),
        presubmits: Some(vec![exact("job"), exact("jib")]),
        comment: Some(String::new()),
        ..d()
    });
}

#[test]
fn available_presubmits_do_not_list_those_excluded_by_branch() {
    // Prow: TestHandleGenericComment "available presubmits should not list those excluded by branch"
    let mut excluded = exact("job-excluded");
    excluded.base.name = "job-excluded-by-brancher".into();
    excluded.kind.context = "pull-job-excluded-by-brancher".into();
    excluded.kind.always_run = true;
    excluded.kind.skip_branches = vec!["master".into()];
    let mut job = exact("job");
    job.kind.always_run = true;
    check(T {
        body: body("/test ?"),
        presubmits: Some(vec![excluded, job, triggered("jib", "pull-jib")]),
        comment: Some(format!("{HELP}{HELP_TEST_ALL_JOB}")),
        ..d()
    });
}

#[test]
fn help_command_differs_between_optional_and_required_jobs() {
    // Prow: TestHandleGenericComment `help command "/test ?" differs between optional and required jobs`
    let mut jub = always("jub");
    jub.kind.optional = true;
    check(T {
        body: body("/test ?"),
        presubmits: Some(vec![always("job"), always("jib"), jub]),
        comment: Some(format!(
            "{HELP}The following commands are available to trigger optional jobs:\n```\n/test jub\n```\n\nUse `/test all` to run all jobs."
        )),
        ..d()
    });
}

/// Prow's TestApproveGitHubActionsWorkflowRuns: (body,
/// trigger_github_workflows, ignore_ok_to_test) to whether pending runs are
/// approved.
fn approves(body: &str, workflows: bool, ignore: bool) -> bool {
    let t = T {
        body: body.into(),
        pr_author: "author",
        presubmits: Some(vec![with_branches(always("test-job"), &["master"])]),
        ..d()
    };
    let settings = Trigger {
        trigger_github_workflows: workflows,
        ignore_ok_to_test: ignore,
        ..Trigger::default()
    };
    let actions = on_comment(&world(&t), &settings, &event(&t)).unwrap();
    let approved = actions
        .iter()
        .filter(|a| matches!(a, Action::ApproveWorkflowRuns { .. }))
        .collect::<Vec<_>>();
    if let Some(Action::ApproveWorkflowRuns {
        repo,
        head_ref,
        head_sha,
    }) = approved.first()
    {
        assert_eq!(
            (repo.as_str(), head_ref.as_str(), head_sha.as_str()),
            ("org/repo", "pr-branch", "cafe")
        );
    }
    !approved.is_empty()
}

#[test]
fn approve_workflows_on_ok_to_test_when_enabled() {
    // Prow: TestApproveGitHubActionsWorkflowRuns "/ok-to-test with TriggerGitHubWorkflows enabled - should approve",
    // "/ok-to-test with multiple pending runs", "/ok-to-test with no pending
    // runs" (which runs are pending is the host's to find)
    assert!(approves("/ok-to-test", true, false));
}

#[test]
fn approve_workflows_not_when_disabled() {
    // Prow: TestApproveGitHubActionsWorkflowRuns "/ok-to-test with TriggerGitHubWorkflows disabled - should not approve"
    assert!(!approves("/ok-to-test", false, false));
}

#[test]
fn approve_workflows_not_on_test_all() {
    // Prow: TestApproveGitHubActionsWorkflowRuns "/test all should not approve workflows"
    assert!(!approves("/test all", true, false));
}

#[test]
fn approve_workflows_not_on_retest() {
    // Prow: TestApproveGitHubActionsWorkflowRuns "/retest should not approve workflows"
    assert!(!approves("/retest", true, false));
}

#[test]
fn approve_workflows_not_with_ignore_ok_to_test() {
    // Prow: TestApproveGitHubActionsWorkflowRuns "IgnoreOkToTest=true with TriggerGitHubWorkflows=true - should not approve"
    assert!(!approves("/ok-to-test", true, true));
}

#[test]
fn failed_workflows_rerun_on_retest_and_test_all() {
    let kinds = |body: &str| {
        let t = T {
            body: body.into(),
            ..d()
        };
        let settings = Trigger {
            trigger_github_workflows: true,
            ..Trigger::default()
        };
        on_comment(&world(&t), &settings, &event(&t))
            .unwrap()
            .iter()
            .any(|a| matches!(a, Action::RerunFailedWorkflowRuns { .. }))
    };
    assert!(kinds("/retest"));
    assert!(kinds("/test all"));
    assert!(!kinds("/test jib"));
}

#[test]
fn ok_to_test_cancel_by_a_trusted_user_swaps_the_labels() {
    let t = T {
        body: body("/ok-to-test cancel"),
        labels: &[OK_TO_TEST],
        ..d()
    };
    assert_eq!(
        run(&t),
        [
            Action::RemoveLabel {
                repo: "org/repo".into(),
                number: 0,
                label: OK_TO_TEST.into()
            },
            Action::AddLabel {
                repo: "org/repo".into(),
                number: 0,
                label: NEEDS_OK_TO_TEST.into()
            },
        ]
    );
    // With both labels there, Prow removes both (its label snapshot is
    // stale); bosun leaves `needs-ok-to-test`.
    let t = T {
        body: body("/ok-to-test cancel"),
        labels: &[OK_TO_TEST, NEEDS_OK_TO_TEST],
        ..d()
    };
    let actions = run(&t);
    assert_eq!(
        actions,
        [
            Action::RemoveLabel {
                repo: "org/repo".into(),
                number: 0,
                label: NEEDS_OK_TO_TEST.into()
            },
            Action::RemoveLabel {
                repo: "org/repo".into(),
                number: 0,
                label: OK_TO_TEST.into()
            },
            Action::AddLabel {
                repo: "org/repo".into(),
                number: 0,
                label: NEEDS_OK_TO_TEST.into()
            },
        ]
    );
}

#[test]
fn ok_to_test_cancel_by_an_untrusted_user_on_a_trusted_pr_is_refused() {
    let t = T {
        author: "stranger",
        body: body("/ok-to-test cancel"),
        labels: &[OK_TO_TEST],
        ..d()
    };
    let actions = run(&t);
    assert_eq!(actions.len(), 1, "{actions:#?}");
    assert!(
        matches!(&actions[0], Action::Comment { body, .. } if body.contains(ONLY_TRUSTED_CANCEL))
    );
}

#[test]
fn untrusted_reply_with_ignore_ok_to_test() {
    let t = T {
        author: "stranger",
        body: body("/test all"),
        ignore_ok_to_test: true,
        ..d()
    };
    check(T {
        comment: Some(CANNOT_TRIGGER_IGNORE_OK_TO_TEST.into()),
        ..t
    });
}

#[test]
fn a_quoted_test_does_not_start_its_job_next_to_a_real_retest() {
    // bosun's deviation: Prow filters the raw text, so `/test job` inside a
    // code block would start `job` here.
    let t = T {
        body: code_block("/test job", true) + "/retest",
        presubmits: Some(vec![
            triggered("job", "pull-job"),
            triggered("jib", "pull-jib"),
        ]),
        should_build: true,
        starts_exactly: "pull-jib",
        prune_help: true,
        ..d()
    };
    check(t);
}

#[test]
fn only_created_comments_act() {
    let t = T {
        body: body("/test all"),
        ..d()
    };
    let h = world(&t);
    for action in [CommentAction::Edited, CommentAction::Deleted] {
        let c = Comment {
            action,
            ..event(&t)
        };
        assert!(on_comment(&h, &Trigger::default(), &c).unwrap().is_empty());
    }
    assert!(h.calls().is_empty(), "nothing asked: {:?}", h.calls());
}

#[test]
fn statuses_and_files_are_asked_only_when_needed() {
    let t = T {
        body: body("/test jib"),
        ..d()
    };
    let h = world(&t);
    on_comment(&h, &Trigger::default(), &event(&t)).unwrap();
    let calls = h.calls();
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("statuses") || c.starts_with("changed_files")),
        "{calls:?}"
    );
}
