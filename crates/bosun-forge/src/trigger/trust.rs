//! Who is trusted (Prow's `TrustedUser`) and which pull requests are
//! (`TrustedPullRequest`).

use super::{Host, HostError, Trigger, OK_TO_TEST};

/// Whether a user is trusted, and if not why (Prow's texts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedUser {
    /// Trusted.
    pub trusted: bool,
    /// Why not (empty when trusted): "User is not a member of the org. ..."
    pub reason: String,
}

const NOT_MEMBER: &str = "User is not a member of the org. ";
const NOT_COLLABORATOR: &str = "User is not a collaborator. ";
const NOT_SECONDARY_MEMBER: &str = "User is not a member of the trusted secondary org. ";
const SATISFY: &str = "Satisfy at least one of these conditions to make the user trusted.";

impl TrustedUser {
    fn yes() -> TrustedUser {
        TrustedUser {
            trusted: true,
            reason: String::new(),
        }
    }

    fn no(collaborator: bool, secondary: bool) -> TrustedUser {
        let mut reason = NOT_MEMBER.to_owned();
        if collaborator {
            reason += NOT_COLLABORATOR;
        }
        if secondary {
            reason += NOT_SECONDARY_MEMBER;
        }
        reason += SATISFY;
        TrustedUser {
            trusted: false,
            reason,
        }
    }
}

/// Whether `user` is the bot: its login, or its GitHub App user
/// (`<login>[bot]`).
pub fn is_bot<H: Host + ?Sized>(host: &H, user: &str) -> bool {
    user.strip_suffix("[bot]").unwrap_or(user) == host.bot()
}

/// Prow's `TrustedUser`, in its order: the bot itself; a member of `org`; a
/// collaborator of `org/repo` (unless `only_org_members`); `<app>[bot]` for
/// an app of `trusted_apps`; a member of `trusted_org` (when set and not
/// `org`). Each question is asked only when the earlier ones said no.
pub fn trusted_user<H: Host + ?Sized>(
    host: &H,
    settings: &Trigger,
    org: &str,
    repo: &str,
    user: &str,
) -> Result<TrustedUser, HostError> {
    if is_bot(host, user) || host.is_member(org, user)? {
        return Ok(TrustedUser::yes());
    }
    let collaborators = !settings.only_org_members;
    if collaborators && host.is_collaborator(org, repo, user)? {
        return Ok(TrustedUser::yes());
    }
    if let Some(app) = user.strip_suffix("[bot]") {
        if settings.trusted_apps.iter().any(|a| a == app) {
            return Ok(TrustedUser::yes());
        }
    }
    let second = &settings.trusted_org;
    if second.is_empty() || second == org {
        return Ok(TrustedUser::no(collaborators, false));
    }
    if host.is_member(second, user)? {
        return Ok(TrustedUser::yes());
    }
    Ok(TrustedUser::no(collaborators, true))
}

/// Prow's `TrustedPullRequest`: whether `author`'s pull request may be
/// tested: the author is trusted, or the pull request has the `ok-to-test`
/// label. `labels` are the pull request's labels when known; they are
/// asked for only when the author is not trusted, and returned (`None`
/// when they were not needed).
pub fn trusted_pull_request<H: Host + ?Sized>(
    host: &H,
    settings: &Trigger,
    repo: &str,
    number: i64,
    author: &str,
    labels: Option<Vec<String>>,
) -> Result<(Option<Vec<String>>, bool), HostError> {
    let (org, name) = super::split_repo(repo);
    if trusted_user(host, settings, org, name, author)?.trusted {
        return Ok((labels, true));
    }
    let labels = match labels {
        Some(l) => l,
        None => host.labels(repo, number)?,
    };
    let ok = labels.iter().any(|l| l == OK_TO_TEST);
    Ok((Some(labels), ok))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trigger::fake::FakeHost;

    /// Prow's TestTrustedUser world: `kubernetes` has member `test`,
    /// `test-collaborator` is a collaborator, the bot is `k8s-ci-robot`.
    fn host() -> FakeHost {
        let mut h = FakeHost::new("k8s-ci-robot");
        h.members = vec![("kubernetes".into(), "test".into())];
        h.collaborators = vec!["test-collaborator".into()];
        h
    }

    #[allow(clippy::too_many_arguments)] // one argument per column of Prow's table
    fn check(
        only_org_members: bool,
        trusted_apps: &[&str],
        trusted_org: &str,
        user: &str,
        org: &str,
        repo: &str,
        expected: bool,
        reason: &str,
    ) {
        let settings = Trigger {
            only_org_members,
            trusted_apps: trusted_apps.iter().map(|s| s.to_string()).collect(),
            trusted_org: trusted_org.into(),
            ..Trigger::default()
        };
        let got = trusted_user(&host(), &settings, org, repo, user).unwrap();
        assert_eq!(got.trusted, expected, "{user}");
        assert_eq!(got.reason, reason, "{user}");
    }

    /// Prow's `untrustedReason.String()` texts, written out.
    fn reason(collaborator: bool, secondary: bool) -> String {
        let mut r = String::from("User is not a member of the org. ");
        if collaborator {
            r += "User is not a collaborator. ";
        }
        if secondary {
            r += "User is not a member of the trusted secondary org. ";
        }
        r + "Satisfy at least one of these conditions to make the user trusted."
    }

    #[test]
    fn trusted_user_member_of_trusted_org() {
        // Prow: TestTrustedUser "user is member of trusted org"
        check(false, &[], "", "test", "kubernetes", "kubernetes", true, "");
    }

    #[test]
    fn trusted_user_member_only_org_members() {
        // Prow: TestTrustedUser "user is member of trusted org (only org members enabled)"
        check(true, &[], "", "test", "kubernetes", "kubernetes", true, "");
    }

    #[test]
    fn trusted_user_collaborator() {
        // Prow: TestTrustedUser "user is collaborator"
        check(
            false,
            &[],
            "",
            "test-collaborator",
            "kubernetes",
            "kubernetes",
            true,
            "",
        );
    }

    #[test]
    fn trusted_user_collaborator_only_org_members() {
        // Prow: TestTrustedUser "user is collaborator (only org members enabled)"
        let r = reason(false, false);
        check(
            true,
            &[],
            "",
            "test-collaborator",
            "kubernetes",
            "kubernetes",
            false,
            &r,
        );
        assert_eq!(
            r,
            "User is not a member of the org. Satisfy at least one of these conditions to make the user trusted."
        );
    }

    #[test]
    fn trusted_user_trusted_org_member() {
        // Prow: TestTrustedUser "user is trusted org member"
        check(
            false,
            &[],
            "kubernetes",
            "test",
            "kubernetes-sigs",
            "test",
            true,
            "",
        );
    }

    #[test]
    fn trusted_user_not_org_member() {
        // Prow: TestTrustedUser "user is not org member"
        let r = reason(true, false);
        check(
            false,
            &[],
            "",
            "test-2",
            "kubernetes",
            "kubernetes",
            false,
            &r,
        );
    }

    #[test]
    fn trusted_user_not_org_or_trusted_org_member() {
        // Prow: TestTrustedUser "user is not org member or trusted org member"
        let r = reason(true, true);
        check(
            false,
            &[],
            "kubernetes-sigs",
            "test-2",
            "kubernetes",
            "kubernetes",
            false,
            &r,
        );
        assert_eq!(r, "User is not a member of the org. User is not a collaborator. User is not a member of the trusted secondary org. Satisfy at least one of these conditions to make the user trusted.");
    }

    #[test]
    fn trusted_user_not_org_or_trusted_org_member_only_org_members() {
        // Prow: TestTrustedUser "user is not org member or trusted org member, onlyOrgMembers true"
        let r = reason(false, true);
        check(
            true,
            &[],
            "kubernetes-sigs",
            "test-2",
            "kubernetes",
            "kubernetes",
            false,
            &r,
        );
    }

    #[test]
    fn trusted_user_self_as_bot() {
        // Prow: TestTrustedUser "Self as bot is trusted"
        check(false, &[], "", "k8s-ci-robot", "", "", true, "");
    }

    #[test]
    fn trusted_user_self_as_app() {
        // Prow: TestTrustedUser "Self as app is trusted"
        check(false, &[], "", "k8s-ci-robot[bot]", "", "", true, "");
    }

    #[test]
    fn trusted_user_app_in_trusted_list() {
        // Prow: TestTrustedUser "github-app[bot] is in trusted list"
        check(
            false,
            &["github-app"],
            "",
            "github-app[bot]",
            "",
            "",
            true,
            "",
        );
    }

    #[test]
    fn trusted_user_app_not_in_trusted_list() {
        // Prow: TestTrustedUser "github-app[bot] is not in trusted list"
        let r = reason(true, false);
        check(
            false,
            &["other-app"],
            "",
            "github-app[bot]",
            "",
            "",
            false,
            &r,
        );
    }

    #[test]
    fn trusted_user_app_name_without_bot_suffix() {
        // Prow: TestTrustedUser "github-app (no bot suffix) matches trusted app name, should not be trusted"
        let r = reason(true, false);
        check(false, &["github-app"], "", "github-app", "", "", false, &r);
    }

    #[test]
    fn trusted_user_bot_not_as_suffix() {
        // Prow: TestTrustedUser "github-app[bot]suffix (bot not as suffix) matches trusted app name, should not be trusted"
        let r = reason(true, false);
        check(
            false,
            &["github-app"],
            "",
            "github-app[bot]suffix",
            "",
            "",
            false,
            &r,
        );
    }

    #[test]
    fn trusted_user_asks_nothing_more_once_trusted() {
        let h = host();
        trusted_user(&h, &Trigger::default(), "kubernetes", "k", "test").unwrap();
        assert_eq!(h.calls(), ["is_member kubernetes test"]);
        let h = host();
        trusted_user(&h, &Trigger::default(), "o", "r", "k8s-ci-robot").unwrap();
        assert!(h.calls().is_empty());
    }

    /// Prow's TestTrusted world.
    fn trusted(author: &str, labels: &[&str]) -> bool {
        let mut h = FakeHost::new("k8s-ci-robot");
        h.members = vec![
            ("kubernetes".into(), "trusted-org-member".into()),
            ("kubernetes-sigs".into(), "org-member".into()),
            ("kubernetes-sigs".into(), "k8s-ci-robot".into()),
        ];
        h.collaborators = vec!["repo-collaborator".into()];
        let settings = Trigger {
            trusted_org: "kubernetes".into(),
            ..Trigger::default()
        };
        let labels = labels.iter().map(|s| s.to_string()).collect();
        trusted_pull_request(
            &h,
            &settings,
            "kubernetes-sigs/random-repo",
            1,
            author,
            Some(labels),
        )
        .unwrap()
        .1
    }

    #[test]
    fn trusted_pr_org_member() {
        // Prow: TestTrusted "trust org member"
        assert!(trusted("org-member", &[]));
    }

    #[test]
    fn trusted_pr_member_of_other_trusted_org() {
        // Prow: TestTrusted "trust member of other trusted org"
        assert!(trusted("trusted-org-member", &[]));
    }

    #[test]
    fn trusted_pr_random_with_ok_to_test() {
        // Prow: TestTrusted "accept random PR with ok-to-test"
        assert!(trusted("random-person", &[OK_TO_TEST]));
    }

    #[test]
    fn trusted_pr_random_with_both_labels() {
        // Prow: TestTrusted "accept random PR with both labels"
        assert!(trusted("random-person", &[OK_TO_TEST, "needs-ok-to-test"]));
    }

    #[test]
    fn trusted_pr_random_with_needs_ok_to_test() {
        // Prow: TestTrusted "reject random PR with needs-ok-to-test"
        assert!(!trusted("random-person", &["needs-ok-to-test"]));
    }

    #[test]
    fn trusted_pr_random_with_no_label() {
        // Prow: TestTrusted "reject random PR with no label"
        assert!(!trusted("random-person", &[]));
    }

    #[test]
    fn trusted_pr_asks_for_labels_only_when_needed() {
        let mut h = FakeHost::new("bot");
        h.labels = vec![OK_TO_TEST.into()];
        let (labels, ok) =
            trusted_pull_request(&h, &Trigger::default(), "o/r", 1, "stranger", None).unwrap();
        assert!(ok);
        assert_eq!(labels, Some(vec![OK_TO_TEST.to_string()]));
        assert!(h.calls().contains(&"labels o/r 1".to_string()));
        let (labels, ok) =
            trusted_pull_request(&h, &Trigger::default(), "o/r", 1, "bot", None).unwrap();
        assert!(ok && labels.is_none());
    }
}
