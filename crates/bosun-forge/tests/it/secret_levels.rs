//! Prow's secret file through the intake: which level's tokens a delivery is
//! checked against, rotation, the legacy single token, for each forge.

use bosun_forge::hook::Secrets;

use crate::requests::{accepted, fixture, github_example_bytes, refusal, Request};

fn misconfigured(header: &str, org_repo: &str) -> (u16, String) {
    (
        403,
        format!(
            "403 Forbidden: Invalid {header} - misconfigured webhook secret from organization/repo: {org_repo}\n"
        ),
    )
}

fn no_secret(header: &str) -> (u16, String) {
    (
        403,
        format!("403 Forbidden: Invalid {header} - failed to get an appropriate hmac secret\n"),
    )
}

/// A push to `Octocoders/Hello-World` (organization `Octocoders`) signed
/// with `token`.
fn octocoders_repo(token: &str) -> Request {
    Request::github(
        "repository",
        github_example_bytes("repository-renamed.json"),
        token.as_bytes(),
    )
}

/// An organization hook's ping: no repository, organization `Octocoders`.
fn octocoders_org(token: &str) -> Request {
    Request::github(
        "ping",
        github_example_bytes("ping-organization.json"),
        token.as_bytes(),
    )
}

/// A push to `Codertocat/Hello-World` (no organization) signed with `token`.
fn codertocat_repo(token: &str) -> Request {
    Request::github(
        "push",
        github_example_bytes("push-branch-created.json"),
        token.as_bytes(),
    )
}

const FILE: &str = "
'*':
  - value: global
    created_at: 2020-10-02T15:00:00Z
Octocoders:
  - value: org-token
    created_at: 2021-01-01T00:00:00Z
Octocoders/Hello-World:
  - value: repo-token
    created_at: 2021-06-01T00:00:00Z
";

#[test]
fn the_repositorys_level_shuts_its_organizations_out() {
    let secrets = Secrets::parse(FILE.as_bytes());
    accepted(octocoders_repo("repo-token").send(&secrets));
    // The organization's token is right for the organization, but the
    // repository has a level of its own.
    let header = "X-Hub-Signature-256";
    assert_eq!(
        refusal(octocoders_repo("org-token").send(&secrets)),
        misconfigured(header, "Octocoders/Hello-World")
    );
    assert_eq!(
        refusal(octocoders_repo("global").send(&secrets)),
        misconfigured(header, "Octocoders/Hello-World")
    );
}

#[test]
fn an_organizations_level_serves_its_repositories_and_itself() {
    let secrets = Secrets::parse(FILE.as_bytes());
    // The organization's hook: no repository, so the organization's level.
    accepted(octocoders_org("org-token").send(&secrets));
    assert_eq!(
        refusal(octocoders_org("repo-token").send(&secrets)),
        misconfigured("X-Hub-Signature-256", "Octocoders")
    );
    // Another repository of the organization: its level.
    let other = "'*': [{value: global}]\nOctocoders: [{value: org-token}]\n";
    let secrets = Secrets::parse(other.as_bytes());
    accepted(octocoders_repo("org-token").send(&secrets));
    assert_eq!(
        refusal(octocoders_repo("global").send(&secrets)),
        misconfigured("X-Hub-Signature-256", "Octocoders/Hello-World")
    );
}

#[test]
fn the_global_level_serves_the_rest_and_nothing_serves_none() {
    let secrets = Secrets::parse(FILE.as_bytes());
    accepted(codertocat_repo("global").send(&secrets));
    assert_eq!(
        refusal(codertocat_repo("org-token").send(&secrets)),
        misconfigured("X-Hub-Signature-256", "Codertocat/Hello-World")
    );
    let without_global = "Octocoders: [{value: org-token}]\n";
    let secrets = Secrets::parse(without_global.as_bytes());
    assert_eq!(
        refusal(codertocat_repo("org-token").send(&secrets)),
        no_secret("X-Hub-Signature-256")
    );
    // An empty file accepts nothing.
    assert_eq!(
        refusal(codertocat_repo("").send(&Secrets::parse(b""))),
        no_secret("X-Hub-Signature-256")
    );
}

#[test]
fn during_a_rotation_the_old_and_the_new_token_are_accepted() {
    let rotating = "
Codertocat/Hello-World:
  - value: new-token
    created_at: 2026-11-01T00:00:00Z
  - value: old-token
    created_at: 2025-11-01T00:00:00Z
";
    let secrets = Secrets::parse(rotating.as_bytes());
    accepted(codertocat_repo("new-token").send(&secrets));
    accepted(codertocat_repo("old-token").send(&secrets));
    assert_eq!(
        refusal(codertocat_repo("older-token").send(&secrets)),
        misconfigured("X-Hub-Signature-256", "Codertocat/Hello-World")
    );
}

#[test]
fn a_legacy_file_is_one_token_for_everything() {
    let secrets = Secrets::parse(b"  legacy-token\n\n");
    assert!(secrets.is_legacy());
    accepted(codertocat_repo("legacy-token").send(&secrets));
    accepted(octocoders_org("legacy-token").send(&secrets));
    accepted(octocoders_repo("legacy-token").send(&secrets));
    // Trimmed: the white space is not part of it.
    assert_eq!(
        refusal(codertocat_repo("  legacy-token\n\n").send(&secrets)),
        misconfigured("X-Hub-Signature-256", "Codertocat/Hello-World")
    );
    let gitlab = Request::gitlab("Push Hook", fixture("gitlab/push.json"), b"legacy-token");
    accepted(gitlab.send(&secrets));
}

#[test]
fn a_token_with_an_empty_value_matches_nothing() {
    let secrets = Secrets::parse(b"'*': [{value: ''}, {created_at: 2020-10-02T15:00:00Z}]\n");
    assert_eq!(
        refusal(codertocat_repo("").send(&secrets)),
        misconfigured("X-Hub-Signature-256", "Codertocat/Hello-World")
    );
}

#[test]
fn gitea_and_gitlab_use_the_same_levels() {
    let file = "
'*': [{value: global}]
bosun: [{value: org-token}]
bosun/hello: [{value: repo-token}]
";
    let secrets = Secrets::parse(file.as_bytes());
    let gitea = |token: &str| Request::gitea("push", fixture("gitea/push.json"), token.as_bytes());
    accepted(gitea("repo-token").send(&secrets));
    assert_eq!(
        refusal(gitea("org-token").send(&secrets)),
        misconfigured("X-Gitea-Signature", "bosun/hello")
    );
    // GitLab's project `bosun/ci/hello` (a subgroup): its top group's level.
    let gitlab =
        |token: &str| Request::gitlab("Push Hook", fixture("gitlab/push.json"), token.as_bytes());
    accepted(gitlab("org-token").send(&secrets));
    assert_eq!(
        refusal(gitlab("repo-token").send(&secrets)),
        misconfigured("X-Gitlab-Token", "bosun/ci/hello")
    );
    let with_project = format!("{file}bosun/ci/hello: [{{value: project-token}}]\n");
    let secrets = Secrets::parse(with_project.as_bytes());
    accepted(gitlab("project-token").send(&secrets));
    assert_eq!(
        refusal(gitlab("org-token").send(&secrets)),
        misconfigured("X-Gitlab-Token", "bosun/ci/hello")
    );
}
