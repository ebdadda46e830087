//! Prow's `pkg/plugins/trigger/pull-request_test.go`, one test per case.

use super::*;
use crate::trigger::fake::{presubmit, FakeHost};
use bosun_config::plugins::{OrgInvite, ProminentOrgInvite};

const BOT: &str = "k8s-ci-robot";

/// Prow's TestHandlePullRequest world: `t` is a member of `org`, `u` is
/// not; org/repo has one `always_run` presubmit `jib`; the trigger trusts
/// org members only, `trusted_org: org`.
struct Case {
    author: &'static str,
    action: &'static str,
    label: Option<&'static str>,
    draft: bool,
    ok_to_test: bool,
    base_changed: bool,
    sender: Option<&'static str>,
}

const CASE: Case = Case {
    author: "t",
    action: "opened",
    label: None,
    draft: false,
    ok_to_test: false,
    base_changed: false,
    sender: None,
};

fn world() -> FakeHost {
    let mut h = FakeHost::new(BOT);
    h.members = vec![("org".into(), "t".into())];
    let mut jib = presubmit("jib");
    jib.kind.always_run = true;
    h.presubmits = Presubmits {
        jobs: vec![jib],
        in_repo_error: None,
    };
    h
}

fn settings() -> Trigger {
    let mut t = Trigger {
        trusted_org: "org".into(),
        only_org_members: true,
        ..Trigger::default()
    };
    t.set_defaults();
    t
}

fn pr(c: &Case) -> PullRequest {
    PullRequest {
        repo: "org/repo".into(),
        action: c.action.into(),
        number: 0,
        author: c.author.into(),
        sender: c.sender.unwrap_or(c.author).into(),
        head_sha: "head".into(),
        base_ref: "master".into(),
        draft: c.draft,
        open: c.action != "closed",
        label: c.label.map(Into::into),
        base_changed: c.base_changed,
        html_url: "https://github.com/org/repo/pull/0".into(),
        ..PullRequest::default()
    }
}

fn run(c: Case) -> Vec<Action> {
    let mut h = world();
    if c.ok_to_test {
        h.labels = vec![OK_TO_TEST.into()];
    }
    on_pull_request(&h, &settings(), &pr(&c)).unwrap()
}

/// What Prow's table checks: built, commented, aborted, labels added.
fn summary(actions: &[Action]) -> (bool, bool, bool, Vec<String>) {
    let built = actions.iter().any(|a| matches!(a, Action::Run { .. }));
    let commented = actions.iter().any(|a| matches!(a, Action::Comment { .. }));
    let aborted = actions.iter().any(|a| matches!(a, Action::Abort { .. }));
    let added = actions
        .iter()
        .filter_map(|a| match a {
            Action::AddLabel {
                repo,
                number,
                label,
            } => Some(format!("{repo}#{number}:{label}")),
            _ => None,
        })
        .collect();
    (built, commented, aborted, added)
}

fn expect(c: Case, build: bool, comment: bool, abort: bool, added: &[&str]) {
    let actions = run(c);
    let added: Vec<String> = added.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        summary(&actions),
        (build, comment, abort, added),
        "{actions:#?}"
    );
}

const NEEDS: &str = "org/repo#0:needs-ok-to-test";

#[test]
fn trusted_user_open_pr_should_build() {
    // Prow: TestHandlePullRequest "Trusted user open PR should build"
    expect(Case { ..CASE }, true, false, false, &[]);
}

#[test]
fn trusted_user_open_draft_pr_should_not_build_and_should_comment() {
    // Prow: TestHandlePullRequest "Trusted user open draft PR should not build and should comment"
    let actions = run(Case {
        draft: true,
        ..CASE
    });
    assert_eq!(summary(&actions), (false, true, false, vec![]));
    assert!(matches!(&actions[0], Action::Comment { body, .. } if body == DRAFT_MESSAGE));
}

#[test]
fn untrusted_user_open_pr_with_ok_to_test_should_not_add_needs_ok_to_test() {
    // Prow: TestHandlePullRequest "Untrusted user open PR with ok-to-test should not add needs-ok-to-test"
    expect(
        Case {
            author: "u",
            ok_to_test: true,
            ..CASE
        },
        false,
        true,
        false,
        &[],
    );
}

#[test]
fn untrusted_user_open_pr_without_ok_to_test_should_add_needs_ok_to_test() {
    // Prow: TestHandlePullRequest "Untrusted user open PR without ok-to-test should add needs-ok-to-test"
    expect(
        Case {
            author: "u",
            ..CASE
        },
        false,
        true,
        false,
        &[NEEDS],
    );
}

#[test]
fn untrusted_user_open_pr_should_not_build_and_should_comment() {
    // Prow: TestHandlePullRequest "Untrusted user open PR should not build and should comment"
    let actions = run(Case {
        author: "u",
        ..CASE
    });
    assert_eq!(
        summary(&actions),
        (false, true, false, vec![NEEDS.to_string()])
    );
    let Some(Action::Comment { body, .. }) = actions.last() else {
        panic!("{actions:#?}")
    };
    assert!(body.starts_with("Hi @u. Thanks for your PR.\n\nI'm waiting for a [org](https://github.com/orgs/org/people) member to verify"), "{body}");
}

#[test]
fn untrusted_user_open_draft_pr_should_not_build_and_should_comment() {
    // Prow: TestHandlePullRequest "Untrusted user open draft PR should not build and should comment"
    expect(
        Case {
            author: "u",
            draft: true,
            ..CASE
        },
        false,
        true,
        false,
        &[NEEDS],
    );
}

#[test]
fn trusted_user_reopen_pr_should_build() {
    // Prow: TestHandlePullRequest "Trusted user reopen PR should build"
    expect(
        Case {
            action: "reopened",
            ..CASE
        },
        true,
        false,
        false,
        &[],
    );
}

#[test]
fn trusted_user_reopen_draft_pr_should_not_build() {
    // Prow: TestHandlePullRequest "Trusted user reopen draft PR should not build"
    expect(
        Case {
            action: "reopened",
            draft: true,
            ..CASE
        },
        false,
        false,
        false,
        &[],
    );
}

#[test]
fn trusted_user_switch_pr_from_draft_to_normal_should_build() {
    // Prow: TestHandlePullRequest "Trusted user switch PR from draft to normal should build"
    expect(
        Case {
            action: "ready_for_review",
            ..CASE
        },
        true,
        false,
        false,
        &[],
    );
}

#[test]
fn untrusted_user_switch_pr_from_draft_to_normal_should_not_build() {
    // Prow: TestHandlePullRequest "Untrusted user switch PR from draft to normal should not build"
    expect(
        Case {
            author: "u",
            action: "ready_for_review",
            ..CASE
        },
        false,
        false,
        false,
        &[],
    );
}

#[test]
fn untrusted_user_switch_pr_from_draft_to_normal_with_ok_to_test_should_build() {
    // Prow: TestHandlePullRequest "Untrusted user switch PR from draft to normal with ok-to-test should build"
    let c = Case {
        author: "u",
        action: "ready_for_review",
        ok_to_test: true,
        ..CASE
    };
    expect(c, true, false, false, &[]);
}

#[test]
fn untrusted_user_reopen_pr_with_ok_to_test_should_build() {
    // Prow: TestHandlePullRequest "Untrusted user reopen PR with ok-to-test should build"
    expect(
        Case {
            author: "u",
            action: "reopened",
            ok_to_test: true,
            ..CASE
        },
        true,
        false,
        false,
        &[],
    );
}

#[test]
fn untrusted_user_reopen_pr_without_ok_to_test_should_not_build() {
    // Prow: TestHandlePullRequest "Untrusted user reopen PR without ok-to-test should not build"
    expect(
        Case {
            author: "u",
            action: "reopened",
            ..CASE
        },
        false,
        false,
        false,
        &[],
    );
}

#[test]
fn untrusted_user_reopen_draft_pr_should_not_build() {
    // Prow: TestHandlePullRequest "Untrusted user reopen draft PR should not build"
    expect(
        Case {
            author: "u",
            action: "reopened",
            draft: true,
            ..CASE
        },
        false,
        false,
        false,
        &[],
    );
}

#[test]
fn trusted_user_edit_pr_with_changes_should_build() {
    // Prow: TestHandlePullRequest "Trusted user edit PR with changes should build"
    expect(
        Case {
            action: "edited",
            base_changed: true,
            ..CASE
        },
        true,
        false,
        false,
        &[],
    );
}

#[test]
fn trusted_user_edit_draft_pr_with_changes_should_not_build() {
    // Prow: TestHandlePullRequest "Trusted user edit draft PR with changes should not build"
    let c = Case {
        action: "edited",
        base_changed: true,
        draft: true,
        ..CASE
    };
    expect(c, false, false, false, &[]);
}

#[test]
fn trusted_user_edit_pr_without_changes_should_not_build() {
    // Prow: TestHandlePullRequest "Trusted user edit PR without changes should not build"
    expect(
        Case {
            action: "edited",
            ..CASE
        },
        false,
        false,
        false,
        &[],
    );
}

#[test]
fn untrusted_user_edit_pr_without_changes_and_without_ok_to_test_should_not_build() {
    // Prow: TestHandlePullRequest "Untrusted user edit PR without changes and without ok-to-test should not build"
    expect(
        Case {
            author: "u",
            action: "edited",
            ..CASE
        },
        false,
        false,
        false,
        &[],
    );
}

#[test]
fn untrusted_user_edit_pr_with_changes_and_without_ok_to_test_should_not_build() {
    // Prow: TestHandlePullRequest "Untrusted user edit PR with changes and without ok-to-test should not build"
    let c = Case {
        author: "u",
        action: "edited",
        base_changed: true,
        ..CASE
    };
    expect(c, false, false, false, &[]);
}

#[test]
fn untrusted_user_edit_pr_without_changes_and_with_ok_to_test_should_not_build() {
    // Prow: TestHandlePullRequest "Untrusted user edit PR without changes and with ok-to-test should not build"
    let c = Case {
        author: "u",
        action: "edited",
        ok_to_test: true,
        ..CASE
    };
    expect(c, false, false, false, &[]);
}

#[test]
fn untrusted_user_edit_pr_with_changes_and_with_ok_to_test_should_build() {
    // Prow: TestHandlePullRequest "Untrusted user edit PR with changes and with ok-to-test should build"
    let c = Case {
        author: "u",
        action: "edited",
        ok_to_test: true,
        base_changed: true,
        ..CASE
    };
    expect(c, true, false, false, &[]);
}

#[test]
fn trusted_user_sync_pr_should_build() {
    // Prow: TestHandlePullRequest "Trusted user sync PR should build"
    expect(
        Case {
            action: "synchronize",
            ..CASE
        },
        true,
        false,
        true,
        &[],
    );
}

#[test]
fn untrusted_user_sync_pr_without_ok_to_test_should_not_build() {
    // Prow: TestHandlePullRequest "Untrusted user sync PR without ok-to-test should not build"
    expect(
        Case {
            author: "u",
            action: "synchronize",
            ..CASE
        },
        false,
        false,
        true,
        &[],
    );
}

#[test]
fn untrusted_user_sync_pr_with_ok_to_test_should_build() {
    // Prow: TestHandlePullRequest "Untrusted user sync PR with ok-to-test should build"
    let c = Case {
        author: "u",
        action: "synchronize",
        ok_to_test: true,
        ..CASE
    };
    expect(c, true, false, true, &[]);
}

#[test]
fn trusted_user_labeled_pr_with_lgtm_should_not_build() {
    // Prow: TestHandlePullRequest "Trusted user labeled PR with lgtm should not build"
    expect(
        Case {
            action: "labeled",
            label: Some(LGTM),
            ..CASE
        },
        false,
        false,
        false,
        &[],
    );
}

#[test]
fn untrusted_user_labeled_pr_with_lgtm_should_build() {
    // Prow: TestHandlePullRequest "Untrusted user labeled PR with lgtm should build"
    let c = Case {
        author: "u",
        action: "labeled",
        label: Some(LGTM),
        ..CASE
    };
    expect(c, true, false, false, &[]);
}

#[test]
fn untrusted_user_labeled_pr_without_lgtm_should_not_build() {
    // Prow: TestHandlePullRequest "Untrusted user labeled PR without lgtm should not build"
    let c = Case {
        author: "u",
        action: "labeled",
        label: Some("test"),
        ..CASE
    };
    expect(c, false, false, false, &[]);
}

#[test]
fn trusted_user_closed_pr_should_not_build() {
    // Prow: TestHandlePullRequest "Trusted user closed PR should not build"
    expect(
        Case {
            action: "closed",
            ..CASE
        },
        false,
        false,
        true,
        &[],
    );
}

#[test]
fn trusted_user_labeled_pr_with_ok_to_test_should_build() {
    // Prow: TestHandlePullRequest "Trusted user labeled PR with ok-to-test should build"
    let c = Case {
        action: "labeled",
        label: Some(OK_TO_TEST),
        sender: Some("not-k8s-ci-robot"),
        ..CASE
    };
    expect(c, true, false, false, &[]);
}

#[test]
fn untrusted_user_labeled_pr_with_ok_to_test_should_build() {
    // Prow: TestHandlePullRequest "Untrusted user labeled PR with ok-to-test should build"
    let c = Case {
        author: "u",
        action: "labeled",
        label: Some(OK_TO_TEST),
        sender: Some("not-k8s-ci-robot"),
        ..CASE
    };
    expect(c, true, false, false, &[]);
}

#[test]
fn label_added_by_a_bot_does_not_build() {
    // Prow: TestHandlePullRequest "Label added by a bot. Build should not be triggered in this case."
    let c = Case {
        author: "u",
        action: "labeled",
        label: Some(OK_TO_TEST),
        sender: Some(BOT),
        ..CASE
    };
    expect(c, false, false, false, &[]);
}

#[test]
fn abort_jobs_if_pr_is_closed() {
    // Prow: TestHandlePullRequest "Abort jobs if PR is closed"
    let actions = run(Case {
        action: "closed",
        ok_to_test: true,
        ..CASE
    });
    assert_eq!(
        actions,
        [Action::Abort {
            repo: "org/repo".into(),
            number: 0,
            except_head: None
        }]
    );
}

#[test]
fn abort_jobs_if_pr_is_changed_to_draft() {
    // Prow: TestHandlePullRequest "Abort jobs if PR is changed to draft"
    let actions = run(Case {
        action: "converted_to_draft",
        ok_to_test: true,
        ..CASE
    });
    assert_eq!(
        actions,
        [Action::Abort {
            repo: "org/repo".into(),
            number: 0,
            except_head: None
        }]
    );
}

#[test]
fn abort_old_jobs_and_build_on_push() {
    // Prow: TestHandlePullRequest "Abort old jobs and build on push"
    let actions = run(Case {
        action: "synchronize",
        ok_to_test: true,
        ..CASE
    });
    assert_eq!(
        actions[0],
        Action::Abort {
            repo: "org/repo".into(),
            number: 0,
            except_head: Some("head".into())
        }
    );
    let Action::Run {
        jobs,
        refs,
        pr_number,
        head_sha,
        retest,
    } = &actions[1]
    else {
        panic!("{actions:#?}");
    };
    assert_eq!(jobs[0].base.name, "jib");
    assert_eq!((*pr_number, head_sha.as_str(), *retest), (0, "head", false));
    // The base is the branch's head now, as Prow reads it.
    assert_eq!(refs.base_sha.as_deref(), Some("base-of-master"));
    assert_eq!(actions.len(), 2);
}

#[test]
fn a_pr_without_presubmits_does_nothing() {
    // Prow: handlePR returns at once when the repository has no presubmits.
    let mut h = world();
    h.presubmits.jobs.clear();
    let p = pr(&Case {
        author: "u",
        ..CASE
    });
    assert!(on_pull_request(&h, &settings(), &p).unwrap().is_empty());
}

#[test]
fn an_unmergeable_pr_runs_nothing() {
    // Prow: TestRunRequested "no errors and unmergable PR means we should see no trigger"
    let h = world();
    let mut p = pr(&Case { ..CASE });
    p.mergeable = Some(false);
    assert!(on_pull_request(&h, &settings(), &p).unwrap().is_empty());
}

#[test]
fn reopened_by_untrusted_author_with_both_labels_removes_needs_ok_to_test() {
    let mut h = world();
    h.labels = vec![OK_TO_TEST.into(), NEEDS_OK_TO_TEST.into()];
    let actions = on_pull_request(
        &h,
        &settings(),
        &pr(&Case {
            author: "u",
            action: "reopened",
            ..CASE
        }),
    )
    .unwrap();
    assert_eq!(
        actions[0],
        Action::RemoveLabel {
            repo: "org/repo".into(),
            number: 0,
            label: NEEDS_OK_TO_TEST.into()
        }
    );
    assert!(matches!(actions[1], Action::Run { .. }));
}

#[test]
fn the_description_at_opened_is_read_as_a_comment() {
    // Prow's hook hands an opened pull request's body to the comment handler.
    let mut h = world();
    let mut opt = presubmit("extra");
    opt.kind.trigger = "(?m)^/test extra$".into();
    opt.kind.rerun_command = "/test extra".into();
    h.presubmits.jobs.push(opt);
    h.presubmits.in_repo_error = Some("merge conflict".into());
    let mut p = pr(&Case { ..CASE });
    p.body = "Fixes it.\n/test extra".into();
    let actions = on_pull_request(&h, &settings(), &p).unwrap();
    let runs: Vec<Vec<&str>> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Run { jobs, .. } => Some(jobs.iter().map(|j| j.name()).collect()),
            _ => None,
        })
        .collect();
    assert_eq!(runs, [vec!["jib"], vec!["extra"]]);
    let failures = actions
        .iter()
        .filter(
            |a| matches!(a, Action::InRepoConfigFailed { error, .. } if error == "merge conflict"),
        )
        .count();
    assert_eq!(failures, 1, "{actions:#?}");
}

fn welcome(settings: &Trigger, merged: Option<usize>) -> String {
    let p = PullRequest {
        repo: "org/repo".into(),
        author: "author".into(),
        html_url: "https://github.com/org/repo/pull/1".into(),
        ..PullRequest::default()
    };
    welcome_message(settings, &p, merged)
}

fn invite(disabled: bool, threshold: Option<i64>, message: &str) -> Trigger {
    Trigger {
        join_org_url: "https://example.com/join".into(),
        org_invite: OrgInvite {
            prominent: ProminentOrgInvite {
                disabled,
                merged_pr_threshold: threshold,
                message: message.into(),
            },
        },
        ..Trigger::default()
    }
}

const REGULAR: &str =
    "Regular contributors should [join the org](https://example.com/join) to skip this step.";

#[test]
fn org_invitation_guidance_disabled() {
    // Prow: TestOrgInvitationGuidance "disabled returns regular message without searching"
    assert!(welcome(&invite(true, None, ""), Some(9)).contains(REGULAR));
    let mut h = world();
    h.merged = 9;
    let mut s = invite(true, None, "");
    s.trusted_org = String::new();
    let actions = on_pull_request(
        &h,
        &s,
        &pr(&Case {
            author: "u",
            ..CASE
        }),
    )
    .unwrap();
    assert!(
        !h.calls().iter().any(|c| c.starts_with("merged_pulls")),
        "{actions:#?}"
    );
}

#[test]
fn org_invitation_guidance_custom_message_above_threshold() {
    // Prow: TestOrgInvitationGuidance "custom message above threshold"
    let s = invite(
        false,
        None,
        "Please consider [joining us]({join_org_url}) for full access!",
    );
    assert!(welcome(&s, Some(3))
        .contains("Please consider [joining us](https://example.com/join) for full access!"));
}

#[test]
fn org_invitation_guidance_default_message_above_threshold() {
    // Prow: TestOrgInvitationGuidance "default message above threshold"
    assert!(welcome(&invite(false, None, ""), Some(3)).contains(">[!TIP]"));
}

#[test]
fn org_invitation_guidance_below_threshold() {
    // Prow: TestOrgInvitationGuidance "below threshold returns regular message"
    assert!(welcome(&invite(false, None, ""), Some(0)).contains(REGULAR));
}

#[test]
fn should_highlight_join_org_message_thresholds() {
    // Prow: TestShouldHighlightJoinOrgMessage "fewer than threshold merged PRs",
    // "threshold merged PRs"; TestShouldHighlightJoinOrgMessageCustomThreshold
    // (all six cases)
    let tip = |threshold, merged| {
        welcome(&invite(false, threshold, ""), Some(merged)).contains(">[!TIP]")
    };
    assert!(!tip(None, 2));
    assert!(tip(None, 3));
    assert!(!tip(Some(5), 3));
    assert!(tip(Some(5), 5));
    assert!(tip(Some(1), 1));
    assert!(tip(Some(0), 0));
}

#[test]
fn should_highlight_join_org_message_asks_the_host_for_the_author_in_the_org() {
    // Prow: TestShouldHighlightJoinOrgMessageUsesFilteredQuery (the query
    // is the host's: bosun asks for org and author)
    let mut h = world();
    h.merged = 3;
    let actions = on_pull_request(
        &h,
        &settings(),
        &pr(&Case {
            author: "u",
            ..CASE
        }),
    )
    .unwrap();
    assert!(h.calls().contains(&"merged_pulls org u".to_string()));
    assert!(actions
        .iter()
        .any(|a| matches!(a, Action::Comment { body, .. } if body.contains(">[!TIP]"))));
}

#[test]
fn should_highlight_join_org_message_ignores_search_errors() {
    // Prow: TestShouldHighlightJoinOrgMessageIgnoresSearchErrors: a failed
    // count shows the regular invitation.
    assert!(welcome(&invite(false, None, ""), None).contains(REGULAR));
}

#[test]
fn should_highlight_join_org_message_skips_bot_authors() {
    // Prow: TestShouldHighlightJoinOrgMessageSkipsBotAuthors
    let h = world();
    on_pull_request(
        &h,
        &settings(),
        &pr(&Case {
            author: "ci-robot[bot]",
            ..CASE
        }),
    )
    .unwrap();
    assert!(
        !h.calls().iter().any(|c| c.starts_with("merged_pulls")),
        "{:?}",
        h.calls()
    );
}

#[test]
fn welcome_with_ignore_ok_to_test_adds_no_label() {
    let s = Trigger {
        ignore_ok_to_test: true,
        ..Trigger::default()
    };
    let actions = on_pull_request(
        &world(),
        &s,
        &pr(&Case {
            author: "u",
            ..CASE
        }),
    )
    .unwrap();
    assert_eq!(actions.len(), 1);
    let Action::Comment { body, .. } = &actions[0] else {
        panic!("{actions:#?}")
    };
    assert!(body.contains("Collaborators can still trigger tests on the PR using `/test all`."));
}

#[test]
fn welcome_names_a_second_trusted_org() {
    let s = Trigger {
        trusted_org: "friends".into(),
        ..Trigger::default()
    };
    assert!(welcome(&s, None).contains("[org](https://github.com/orgs/org/people) or [friends](https://github.com/orgs/friends/people) member"));
}
