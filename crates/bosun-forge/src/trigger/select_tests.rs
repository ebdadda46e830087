//! Prow's `pkg/pjutil/filter_test.go` and the branch and change cases of
//! `pkg/config/jobs_test.go`, one test per case.

use std::convert::Infallible;

use super::*;
use crate::trigger::fake::{postsubmit, presubmit, triggered};

fn v(m: bool, f: bool, d: bool) -> Verdict {
    Verdict {
        matches: m,
        forced: f,
        default: d,
    }
}

fn verdicts(filter: &Filter, jobs: &[Presubmit]) -> Vec<Verdict> {
    jobs.iter().map(|j| filter.check(j)).collect()
}

fn always(name: &str, context: &str) -> Presubmit {
    let mut j = presubmit(name);
    j.kind.always_run = true;
    j.kind.context = context.into();
    j
}

fn run_if_changed(name: &str, context: &str, pattern: &str) -> Presubmit {
    let mut j = presubmit(name);
    j.kind.context = context.into();
    j.kind.run_if_changed = Some(pattern.into());
    j
}

fn skip_if_only_changed(name: &str, context: &str, pattern: &str) -> Presubmit {
    let mut j = presubmit(name);
    j.kind.context = context.into();
    j.kind.skip_if_only_changed = Some(pattern.into());
    j
}

fn with_trigger(mut j: Presubmit, trigger_of: &str) -> Presubmit {
    let t = triggered(trigger_of, "");
    j.kind.trigger = t.kind.trigger;
    j.kind.rerun_command = t.kind.rerun_command;
    j
}

#[test]
fn test_all_filter_matches_jobs_which_do_not_require_human_triggering() {
    // Prow: TestTestAllFilter "test all filter matches jobs which do not require human triggering"
    let mut literal = triggered("literal-test-all-trigger", "runs-if-triggered");
    literal.kind.trigger = r"(?m)^/test (?:.*? )?all(?: .*?)?$".into();
    let jobs = [
        always("always-runs", "always-runs"),
        run_if_changed("runs-if-changed", "runs-if-changed", "sometimes"),
        skip_if_only_changed("runs-if-changed", "runs-if-changed", "sometimes"),
        triggered("trigger", "runs-if-triggered"),
        literal,
    ];
    assert_eq!(
        verdicts(&Filter::TestAll, &jobs),
        [
            v(true, false, false),
            v(true, false, false),
            v(true, false, false),
            v(false, false, false),
            v(false, false, false)
        ]
    );
}

#[test]
fn command_filter_loose_trigger() {
    // Prow: TestCommandFilter "loose-trigger" (the filter's name is Prow's
    // log field; bosun's filters have none)
    let mut j = presubmit("trigger");
    j.kind.trigger = "/test job-a".into();
    j.kind.rerun_command = "/test job-a".into();
    let f = Filter::Command("something/test job-abcdefg".into());
    assert_eq!(verdicts(&f, &[j]), [v(true, true, true)]);
}

#[test]
fn command_filter_matches_jobs_whose_triggers_match_the_body() {
    // Prow: TestCommandFilter "command filter matches jobs whose triggers match the body"
    let jobs = [
        triggered("trigger", "trigger"),
        triggered("other-trigger", "other-trigger"),
    ];
    let f = Filter::Command("/test trigger".into());
    assert_eq!(
        verdicts(&f, &jobs),
        [v(true, true, true), v(false, false, true)]
    );
}

#[test]
fn command_filter_truncate_name() {
    // Prow: TestCommandFilter "truncate-name" (only the verdict: bosun's
    // filters have no name to truncate)
    let f = Filter::Command(
        "/test trigger\nfill in random content so that it exceeds the limit of half*2 chars".into(),
    );
    assert_eq!(
        verdicts(&f, &[triggered("trigger", "trigger")]),
        [v(true, true, true)]
    );
}

fn named(name: &str, context: &str) -> Presubmit {
    let mut j = presubmit(name);
    j.kind.context = context.into();
    j
}

fn names(jobs: &[Presubmit]) -> Vec<(String, String)> {
    jobs.iter()
        .map(|j| (j.base.name.clone(), j.kind.context.clone()))
        .collect()
}

/// Prow's TestFilterPresubmits: branch `foobar`, no changed files (or an
/// error getting them).
fn filter_case(
    check: impl Fn(&Presubmit) -> Verdict,
    jobs: &[Presubmit],
    changes_error: bool,
) -> Result<Vec<(String, String)>, &'static str> {
    let mut changes = ChangedFiles::new(|| {
        if changes_error {
            Err("error getting changes")
        } else {
            Ok(vec![])
        }
    });
    filter_presubmits_by(check, &mut changes, "foobar", jobs).map(|j| names(&j))
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn filter_presubmits_nothing_matches() {
    // Prow: TestFilterPresubmits "nothing matches, nothing to run or skip"
    let jobs = [named("ignored", "first"), named("ignored", "second")];
    assert_eq!(
        filter_case(|_| v(false, false, false), &jobs, false),
        Ok(vec![])
    );
}

#[test]
fn filter_presubmits_everything_matches_and_is_forced() {
    // Prow: TestFilterPresubmits "everything matches and is forced to run, nothing to skip"
    let jobs = [
        named("should-trigger", "first"),
        named("should-trigger", "second"),
    ];
    assert_eq!(
        filter_case(|_| v(true, true, true), &jobs, false),
        Ok(pairs(&[
            ("should-trigger", "first"),
            ("should-trigger", "second")
        ]))
    );
}

#[test]
fn filter_presubmits_error_detecting_run_if_changed() {
    // Prow: TestFilterPresubmits "error detecting if something should run, nothing to run or skip"
    let jobs = [
        run_if_changed("errors", "first", "oopsie"),
        named("ignored", "second"),
    ];
    assert_eq!(
        filter_case(|_| v(true, false, false), &jobs, true),
        Err("error getting changes")
    );
}

#[test]
fn filter_presubmits_error_detecting_skip_if_only_changed() {
    // Prow: TestFilterPresubmits "error detecting if something should run, nothing to skip"
    let jobs = [
        skip_if_only_changed("errors", "first", "oopsie"),
        named("ignored", "second"),
    ];
    assert_eq!(
        filter_case(|_| v(true, false, false), &jobs, true),
        Err("error getting changes")
    );
}

#[test]
fn filter_presubmits_some_match_and_are_forced() {
    // Prow: TestFilterPresubmits "some things match and are forced to run, nothing to skip"
    let jobs = [named("should-trigger", "first"), named("ignored", "second")];
    assert_eq!(
        filter_case(
            |j| v(j.base.name == "should-trigger", true, true),
            &jobs,
            false
        ),
        Ok(pairs(&[("should-trigger", "first")]))
    );
}

#[test]
fn filter_presubmits_some_forced_others_skipped() {
    // Prow: TestFilterPresubmits "everything matches and some things are forced to run, others should be skipped"
    let jobs = [
        named("should-trigger", "first"),
        named("should-trigger", "second"),
        named("should-skip", "third"),
        named("should-skip", "fourth"),
    ];
    let check = |j: &Presubmit| {
        let t = j.base.name == "should-trigger";
        v(true, t, t)
    };
    assert_eq!(
        filter_case(check, &jobs, false),
        Ok(pairs(&[
            ("should-trigger", "first"),
            ("should-trigger", "second")
        ]))
    );
}

#[test]
fn filter_presubmits_forced_supersede_skipped_with_shared_contexts() {
    // Prow: TestFilterPresubmits "everything matches and some that are forces to run supersede some that are skipped due to shared contexts"
    let jobs = [
        named("should-trigger", "first"),
        named("should-trigger", "second"),
        named("should-skip", "third"),
        named("should-not-skip", "second"),
    ];
    let check = |j: &Presubmit| {
        let t = j.base.name == "should-trigger";
        v(true, t, t)
    };
    assert_eq!(
        filter_case(check, &jobs, false),
        Ok(pairs(&[
            ("should-trigger", "first"),
            ("should-trigger", "second")
        ]))
    );
}

/// Prow's TestPresubmitFilter statuses on the head.
fn statuses() -> Contexts {
    Contexts::of(&[
        ("existing-successful".into(), "success".into()),
        ("existing-pending".into(), "pending".into()),
        ("existing-error".into(), "error".into()),
        ("existing-failure".into(), "failure".into()),
    ])
}

fn presubmit_filter_case(honor: bool, body: &str, jobs: &[Presubmit], expected: &[Verdict]) {
    let filter = presubmit_filter(honor, body, || Ok::<_, Infallible>(statuses())).unwrap();
    assert_eq!(verdicts(&filter, jobs), expected);
}

fn automatic_and_triggered() -> Vec<Presubmit> {
    vec![
        always("always-runs", "always-runs"),
        run_if_changed("runs-if-changed", "runs-if-changed", "sometimes"),
        skip_if_only_changed("runs-if-changed", "runs-if-changed", "sometimes"),
        triggered("trigger", "runs-if-triggered"),
    ]
}

#[test]
fn presubmit_filter_test_all_selects_tests_without_explicit_trigger() {
    // Prow: TestPresubmitFilter "test all comment selects all tests that don't need an explicit trigger"
    let f = v(true, false, false);
    presubmit_filter_case(
        false,
        "/test all",
        &automatic_and_triggered(),
        &[f, f, f, v(false, false, false)],
    );
}

#[test]
fn presubmit_filter_honored_ok_to_test() {
    // Prow: TestPresubmitFilter "honored ok-to-test comment selects all tests that don't need an explicit trigger"
    let f = v(true, false, false);
    presubmit_filter_case(
        true,
        "/ok-to-test",
        &automatic_and_triggered(),
        &[f, f, f, v(false, false, false)],
    );
}

#[test]
fn presubmit_filter_not_honored_ok_to_test() {
    // Prow: TestPresubmitFilter "not honored ok-to-test comment selects no tests"
    presubmit_filter_case(
        false,
        "/ok-to-test",
        &automatic_and_triggered(),
        &[Verdict::default(); 4],
    );
}

#[test]
fn presubmit_filter_statuses_not_gathered_unless_retest() {
    // Prow: TestPresubmitFilter "statuses are not gathered unless retest is specified (will error but we should not see it)"
    let filter = presubmit_filter(false, "not a command", || Err("failure")).unwrap();
    assert_eq!(
        filter,
        Filter::Any(vec![Filter::Command("not a command".into())])
    );
}

#[test]
fn presubmit_filter_status_error_with_retest_is_propagated() {
    // Prow: TestPresubmitFilter "statuses are gathered when retest is specified and gather error is propagated"
    assert_eq!(
        presubmit_filter(false, "/retest", || Err::<Contexts, _>("failure")),
        Err("failure")
    );
}

fn retest_jobs(failure_optional: bool) -> Vec<Presubmit> {
    let mut failure = named("failure-job", "existing-failure");
    failure.kind.optional = failure_optional;
    vec![
        named("successful-job", "existing-successful"),
        named("pending-job", "existing-pending"),
        failure,
        named("error-job", "existing-error"),
        always("missing-always-runs", "missing-always-runs"),
    ]
}

#[test]
fn presubmit_filter_retest_selects_failed_and_missing() {
    // Prow: TestPresubmitFilter "retest command selects for errored or failed contexts and required but missing contexts"
    let no = Verdict::default();
    presubmit_filter_case(
        false,
        "/retest",
        &retest_jobs(false),
        &[
            no,
            no,
            v(true, false, true),
            v(true, false, true),
            v(true, false, false),
        ],
    );
}

#[test]
fn presubmit_filter_retest_required_skips_optional() {
    // Prow: TestPresubmitFilter "retest command selects for errored or failed contexts unless they are optional"
    let no = Verdict::default();
    presubmit_filter_case(
        false,
        "/retest-required",
        &retest_jobs(true),
        &[no, no, no, v(true, false, true), v(true, false, false)],
    );
}

#[test]
fn presubmit_filter_test_manual_required() {
    // Prow: TestPresubmitFilter "test-manual-required triggers only required manual jobs without file conditions"
    let mut optional = triggered("manual-optional", "manual-optional");
    optional.kind.optional = true;
    let jobs = [
        with_trigger(named("manual-required", "manual-required"), "manual"),
        optional,
        always("always-runs", "always-runs"),
        with_trigger(
            run_if_changed("run-if-changed", "run-if-changed", "sometimes"),
            "conditional",
        ),
        with_trigger(
            skip_if_only_changed("skip-if-only-changed", "skip-if-only-changed", "sometimes"),
            "skip",
        ),
    ];
    let no = Verdict::default();
    presubmit_filter_case(
        false,
        "/test-manual-required",
        &jobs,
        &[v(true, true, false), no, no, no, no],
    );
}

#[test]
fn presubmit_filter_explicit_test_command() {
    // Prow: TestPresubmitFilter "explicit test command filters for jobs that match"
    let mut jobs = Vec::new();
    for t in ["trigger", "other-trigger"] {
        jobs.push(with_trigger(always("always-runs", "always-runs"), t));
        jobs.push(with_trigger(
            run_if_changed("runs-if-changed", "runs-if-changed", "sometimes"),
            t,
        ));
        jobs.push(with_trigger(
            skip_if_only_changed("runs-if-changed", "runs-if-changed", "sometimes"),
            t,
        ));
        jobs.push(with_trigger(
            named("runs-if-triggered", "runs-if-triggered"),
            t,
        ));
    }
    let y = v(true, true, true);
    let no = Verdict::default();
    presubmit_filter_case(false, "/test trigger", &jobs, &[y, y, y, y, no, no, no, no]);
}

#[test]
fn presubmit_filter_union_of_several_commands() {
    // Prow: TestPresubmitFilter "comments matching more than one case will select the union of presubmits"
    let jobs = [
        with_trigger(
            always("always-runs", "existing-successful"),
            "other-trigger",
        ),
        with_trigger(
            run_if_changed("runs-if-changed", "existing-successful", "sometimes"),
            "other-trigger",
        ),
        with_trigger(
            skip_if_only_changed("runs-if-changed", "existing-successful", "sometimes"),
            "other-trigger",
        ),
        triggered("trigger", "runs-if-triggered"),
        named("successful-job", "existing-successful"),
        named("pending-job", "existing-pending"),
        named("failure-job", "existing-failure"),
        named("error-job", "existing-error"),
        always("missing-always-runs", "missing-always-runs"),
    ];
    let auto = v(true, false, false);
    let no = Verdict::default();
    presubmit_filter_case(
        false,
        "/test trigger\n/test all\n/retest",
        &jobs,
        &[
            auto,
            auto,
            auto,
            v(true, true, true),
            no,
            no,
            v(true, false, true),
            v(true, false, true),
            auto,
        ],
    );
}

#[test]
fn retest_filter_matches_failed_contexts() {
    // Prow: TestRetestFilter "retest filter matches jobs that produce contexts which have failed"
    let c = Contexts {
        failed: ["failed".to_string()].into(),
        all: ["failed".to_string(), "succeeded".to_string()].into(),
    };
    let jobs = [named("failed", "failed"), named("succeeded", "succeeded")];
    assert_eq!(
        verdicts(&Filter::Retest(c), &jobs),
        [v(true, false, true), v(false, false, false)]
    );
}

#[test]
fn retest_filter_matches_automatic_jobs_not_yet_run() {
    // Prow: TestRetestFilter "retest filter matches jobs that would run automatically and haven't yet "
    let c = Contexts {
        failed: Default::default(),
        all: ["finished".to_string()].into(),
    };
    let jobs = [
        named("finished", "finished"),
        always("not-yet-run", "not-yet-run"),
    ];
    assert_eq!(
        verdicts(&Filter::Retest(c), &jobs),
        [v(false, false, false), v(true, false, false)]
    );
}

#[test]
fn run_against_branch() {
    // Prow: TestRunAgainstBranch
    let s = |l: &[&str]| l.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let cases = [
        (s(&[]), s(&["s"])),
        (s(&["r"]), s(&[])),
        (s(&["r"]), s(&["s"])),
        (s(&["s", "r"]), s(&["s"])),
    ];
    for (branches, skip) in &cases {
        assert!(
            !branch_matches(branches, skip, "s"),
            "{branches:?} {skip:?}"
        );
        assert!(branch_matches(branches, skip, "r"), "{branches:?} {skip:?}");
    }
    assert!(branch_matches(&[], &[], "s"));
}

#[test]
fn branches_are_unanchored_as_prow_compiles_them() {
    let main = ["main".to_string()];
    assert!(branch_matches(&main, &[], "maintenance"));
    assert!(!branch_matches(&["^main$".to_string()], &[], "maintenance"));
    assert!(!branch_matches(&[], &main, "maintenance"));
    assert!(branch_matches(
        &["release-.*".to_string(), "main".to_string()],
        &[],
        "release-1.2"
    ));
}

/// Prow's TestPresubmitShouldRun: (job, branch, files or an error, forced,
/// default) to the answer.
fn presubmit_case(
    job: Presubmit,
    branch: &str,
    files: Result<&[&str], &'static str>,
    forced: bool,
    default: bool,
) -> Result<bool, &'static str> {
    let mut changes =
        ChangedFiles::new(|| files.map(|f| f.iter().map(|s| s.to_string()).collect()));
    presubmit_should_run(&job, branch, &mut changes, forced, default)
}

fn on_branches(mut j: Presubmit, branches: &[&str], skip: &[&str]) -> Presubmit {
    j.kind.branches = branches.iter().map(|s| s.to_string()).collect();
    j.kind.skip_branches = skip.iter().map(|s| s.to_string()).collect();
    j
}

const FILES: &[&str] = &["onefile", "two-file", "pkg/controller/three_file"];
const FILES_GO: &[&str] = &["onefile", "two-file", "pkg/controller/three_file.go"];

#[test]
fn presubmit_should_run_skipped_branch() {
    // Prow: TestPresubmitShouldRun "job skipped on the branch won't run"
    let j = on_branches(always("j", "j"), &[], &["master"]);
    assert_eq!(
        presubmit_case(j, "master", Ok(&[]), false, false),
        Ok(false)
    );
}

#[test]
fn presubmit_should_run_enabled_branch() {
    // Prow: TestPresubmitShouldRun "job enabled on the branch will run"
    let j = on_branches(always("j", "j"), &["something"], &[]);
    assert_eq!(
        presubmit_case(j, "something", Ok(&[]), false, false),
        Ok(true)
    );
}

#[test]
fn presubmit_should_run_other_branches_only() {
    // Prow: TestPresubmitShouldRun "job running only on other branches won't run"
    let j = on_branches(always("j", "j"), &["master"], &[]);
    assert_eq!(
        presubmit_case(j, "release-1.11", Ok(&[]), false, false),
        Ok(false)
    );
}

#[test]
fn presubmit_should_run_branch_not_skipped() {
    // Prow: TestPresubmitShouldRun "job on a branch that's not skipped will run"
    let j = on_branches(always("j", "j"), &[], &["master"]);
    assert_eq!(presubmit_case(j, "other", Ok(&[]), false, false), Ok(true));
}

#[test]
fn presubmit_should_run_always_run() {
    // Prow: TestPresubmitShouldRun "job with always_run: true should run"
    assert_eq!(
        presubmit_case(always("j", "j"), "master", Ok(&[]), false, false),
        Ok(true)
    );
}

#[test]
fn presubmit_should_run_nothing_set() {
    // Prow: TestPresubmitShouldRun "job with always_run: false and no run_if_changed or skip_if_only_changed should not run"
    assert_eq!(
        presubmit_case(named("j", "j"), "master", Ok(&[]), false, false),
        Ok(false)
    );
}

#[test]
fn presubmit_should_run_run_if_changed_file_error() {
    // Prow: TestPresubmitShouldRun "job with run_if_changed but file get errors should not run"
    let j = run_if_changed("j", "j", "file");
    assert_eq!(
        presubmit_case(j, "master", Err("oops"), false, false),
        Err("oops")
    );
}

#[test]
fn presubmit_should_run_skip_if_only_changed_file_error() {
    // Prow: TestPresubmitShouldRun "job with skip_if_only_changed but file get errors should not run"
    let j = skip_if_only_changed("j", "j", "file");
    assert_eq!(
        presubmit_case(j, "master", Err("oops"), false, false),
        Err("oops")
    );
}

#[test]
fn presubmit_should_run_run_if_changed_not_matching() {
    // Prow: TestPresubmitShouldRun "job with run_if_changed not matching should not run"
    let j = run_if_changed("j", "j", "^file$");
    assert_eq!(
        presubmit_case(j, "master", Ok(&["something"]), false, false),
        Ok(false)
    );
}

#[test]
fn presubmit_should_run_skip_if_only_changed_all_matching() {
    // Prow: TestPresubmitShouldRun "job with skip_if_only_changed all matching should not run"
    let j = skip_if_only_changed("j", "j", "file$");
    assert_eq!(
        presubmit_case(j, "master", Ok(FILES), false, false),
        Ok(false)
    );
}

#[test]
fn presubmit_should_run_run_if_changed_not_matching_default_true() {
    // Prow: TestPresubmitShouldRun "job with run_if_changed not matching should run when default=true"
    let j = run_if_changed("j", "j", "^file$");
    assert_eq!(
        presubmit_case(j, "master", Ok(&["something"]), false, true),
        Ok(true)
    );
}

#[test]
fn presubmit_should_run_skip_if_only_changed_all_matching_default_true() {
    // Prow: TestPresubmitShouldRun "job with skip_if_only_changed all matching should run when default=true"
    let j = skip_if_only_changed("j", "j", "file$");
    assert_eq!(
        presubmit_case(j, "master", Ok(FILES), false, true),
        Ok(true)
    );
}

#[test]
fn presubmit_should_run_run_if_changed_matching() {
    // Prow: TestPresubmitShouldRun "job with run_if_changed matching should run"
    let j = run_if_changed("j", "j", "^file$");
    assert_eq!(
        presubmit_case(j, "master", Ok(&["file"]), false, false),
        Ok(true)
    );
}

#[test]
fn presubmit_should_run_skip_if_only_changed_partially_matching() {
    // Prow: TestPresubmitShouldRun "job with skip_if_all_changed partially matching should run"
    let j = skip_if_only_changed("j", "j", "file$");
    assert_eq!(
        presubmit_case(j, "master", Ok(FILES_GO), false, false),
        Ok(true)
    );
}

#[test]
fn presubmit_should_run_forced_asks_no_files() {
    let j = run_if_changed("j", "j", "^file$");
    assert_eq!(
        presubmit_case(j, "master", Err("not asked"), true, false),
        Ok(true)
    );
}

fn postsubmit_case(
    j: Postsubmit,
    branch: &str,
    files: Result<&[&str], &'static str>,
) -> Result<bool, &'static str> {
    let mut changes =
        ChangedFiles::new(|| files.map(|f| f.iter().map(|s| s.to_string()).collect()));
    postsubmit_should_run(&j, branch, &mut changes)
}

fn post(
    branches: &[&str],
    skip: &[&str],
    run: Option<&str>,
    skip_only: Option<&str>,
    always: Option<bool>,
) -> Postsubmit {
    let mut j = postsubmit("p");
    j.kind.branches = branches.iter().map(|s| s.to_string()).collect();
    j.kind.skip_branches = skip.iter().map(|s| s.to_string()).collect();
    j.kind.run_if_changed = run.map(Into::into);
    j.kind.skip_if_only_changed = skip_only.map(Into::into);
    j.kind.always_run = always;
    j
}

#[test]
fn postsubmit_should_run_branches() {
    // Prow: TestPostsubmitShouldRun "job skipped on the branch won't run",
    // "job enabled on the branch will run", "job running only on other
    // branches won't run", "job on a branch that's not skipped will run"
    assert_eq!(
        postsubmit_case(post(&[], &["master"], None, None, None), "master", Ok(&[])),
        Ok(false)
    );
    assert_eq!(
        postsubmit_case(
            post(&["something"], &[], None, None, None),
            "something",
            Ok(&[])
        ),
        Ok(true)
    );
    assert_eq!(
        postsubmit_case(
            post(&["master"], &[], None, None, None),
            "release-1.11",
            Ok(&[])
        ),
        Ok(false)
    );
    assert_eq!(
        postsubmit_case(post(&[], &["master"], None, None, None), "other", Ok(&[])),
        Ok(true)
    );
    // "job skipped on the branch will not run, even if `always_run` set to
    // true explicitly", "job enabled on the branch (with `always_run`
    // explicitly set to false explicitly) will not run"
    assert_eq!(
        postsubmit_case(
            post(&[], &["master"], None, None, Some(true)),
            "master",
            Ok(&[])
        ),
        Ok(false)
    );
    assert_eq!(
        postsubmit_case(
            post(&["master"], &[], None, None, Some(false)),
            "master",
            Ok(&[])
        ),
        Ok(false)
    );
}

#[test]
fn postsubmit_should_run_changes() {
    // Prow: TestPostsubmitShouldRun "job with no run_if_changed should run",
    // the file-error, matching and not-matching cases, and those with
    // `always_run` explicitly false or true.
    let m = "master";
    assert_eq!(
        postsubmit_case(post(&[], &[], None, None, None), m, Ok(&[])),
        Ok(true)
    );
    assert_eq!(
        postsubmit_case(post(&[], &[], Some("file"), None, None), m, Err("e")),
        Err("e")
    );
    assert_eq!(
        postsubmit_case(post(&[], &[], None, Some("file"), None), m, Err("e")),
        Err("e")
    );
    assert_eq!(
        postsubmit_case(
            post(&[], &[], Some("^file$"), None, None),
            m,
            Ok(&["something"])
        ),
        Ok(false)
    );
    assert_eq!(
        postsubmit_case(post(&[], &[], None, Some("file$"), None), m, Ok(FILES)),
        Ok(false)
    );
    assert_eq!(
        postsubmit_case(post(&[], &[], Some("^file$"), None, None), m, Ok(&["file"])),
        Ok(true)
    );
    assert_eq!(
        postsubmit_case(post(&[], &[], None, Some("file$"), None), m, Ok(FILES_GO)),
        Ok(true)
    );
    assert_eq!(
        postsubmit_case(
            post(&[], &[], Some("^file$"), None, Some(false)),
            m,
            Ok(&["file"])
        ),
        Ok(true)
    );
    assert_eq!(
        postsubmit_case(
            post(&[], &[], None, Some("file$"), Some(false)),
            m,
            Ok(FILES_GO)
        ),
        Ok(true)
    );
    assert_eq!(
        postsubmit_case(post(&[], &[], None, None, Some(true)), m, Ok(&[])),
        Ok(true)
    );
    assert_eq!(
        postsubmit_case(post(&[], &[], None, None, Some(false)), m, Ok(&[])),
        Ok(false)
    );
}

#[test]
fn changed_files_are_asked_for_once() {
    let count = std::cell::Cell::new(0);
    let mut changes = ChangedFiles::new(|| {
        count.set(count.get() + 1);
        Ok::<_, Infallible>(vec!["a".to_string()])
    });
    assert!(!changes.fetched());
    let jobs = [
        run_if_changed("x", "x", "a"),
        run_if_changed("y", "y", "b"),
        run_if_changed("z", "z", "a"),
    ];
    let got = filter_presubmits(&Filter::TestAll, &mut changes, "main", &jobs).unwrap();
    assert_eq!(names(&got), pairs(&[("x", "x"), ("z", "z")]));
    assert_eq!(count.get(), 1);
}
