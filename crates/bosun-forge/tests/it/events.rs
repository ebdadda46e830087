//! Accepted bodies read as bosun's events, for each forge, through the
//! intake (`Delivery::parse`).

use bosun_forge::hook::{Event, EventError, Push, Repository, RepositoryAction, Secrets};
use serde_json::Value;

use crate::requests::{
    accepted, bytes, fixture, fixture_json, github_example, github_example_bytes,
    github_schema_errors, Request,
};

const ZERO: &str = "0000000000000000000000000000000000000000";

fn secrets() -> Secrets {
    Secrets::parse(b"'*': [{value: abc}]\n")
}

fn github(event: &str, body: Vec<u8>) -> Event {
    let delivery = accepted(Request::github(event, body, b"abc").send(&secrets()));
    delivery.parse().unwrap()
}

fn github_file(event: &str, file: &str) -> Event {
    github(event, github_example_bytes(file))
}

fn hello_world_push() -> Push {
    Push {
        repo: "Codertocat/Hello-World".into(),
        git_ref: "refs/heads/master".into(),
        before: ZERO.into(),
        after: "6113728f27ae82c7b1a177c8d03f9e96e0adf246".into(),
        created: true,
        deleted: false,
        forced: false,
        clone_url: "https://github.com/Codertocat/Hello-World.git".into(),
        default_branch: "master".into(),
        pusher: "Codertocat".into(),
        repo_link: "https://github.com/Codertocat/Hello-World".into(),
        compare: "https://github.com/Codertocat/Hello-World/commit/6113728f27ae82c7b1a177c8d03f9e96e0adf246".into(),
        changed_files: vec!["README.md".into()],
    }
}

#[test]
fn githubs_pushes() {
    assert_eq!(
        github_file("push", "push-branch-created.json"),
        Event::Push(hello_world_push())
    );
    assert_eq!(
        github_file("push", "push-tag-created.json"),
        Event::Push(Push {
            git_ref: "refs/tags/simple-tag".into(),
            compare: "https://github.com/Codertocat/Hello-World/compare/simple-tag".into(),
            changed_files: vec![],
            ..hello_world_push()
        })
    );
    assert_eq!(
        github_file("push", "push-tag-deleted.json"),
        Event::Push(Push {
            git_ref: "refs/tags/simple-tag".into(),
            before: "6113728f27ae82c7b1a177c8d03f9e96e0adf246".into(),
            after: ZERO.into(),
            created: false,
            deleted: true,
            compare:
                "https://github.com/Codertocat/Hello-World/compare/d70c5c6fa638^...000000000000"
                    .into(),
            changed_files: vec![],
            ..hello_world_push()
        })
    );
}

#[test]
fn githubs_forced_push() {
    // No example is forced: the branch push made one, and GitHub's
    // description checks it.
    let mut forced = github_example("push-branch-created.json");
    forced["created"] = false.into();
    forced["forced"] = true.into();
    forced["before"] = "a10867b14bb761a232cd80139fbd4c0d33264240".into();
    assert_eq!(
        github("push", bytes(&forced)),
        Event::Push(Push {
            before: "a10867b14bb761a232cd80139fbd4c0d33264240".into(),
            created: false,
            forced: true,
            ..hello_world_push()
        })
    );
}

#[test]
fn githubs_ping() {
    assert_eq!(github_file("ping", "ping-repository.json"), Event::Ping);
    assert_eq!(github_file("ping", "ping-organization.json"), Event::Ping);
}

fn repository(action: RepositoryAction) -> Event {
    Event::Repository(Repository {
        repo: "Octocoders/Hello-World".into(),
        action,
    })
}

#[test]
fn githubs_repository_changes() {
    assert_eq!(
        github_file("repository", "repository-deleted.json"),
        repository(RepositoryAction::Deleted)
    );
    assert_eq!(
        github_file("repository", "repository-renamed.json"),
        repository(RepositoryAction::Renamed {
            from: "Octocoders/Hello-World".into(),
            to: "Octocoders/Hello-World".into(),
        })
    );
    assert_eq!(
        github_file("repository", "repository-transferred.json"),
        repository(RepositoryAction::Transferred {
            from: "octocat/Hello-World".into(),
            to: "Octocoders/Hello-World".into(),
        })
    );
    // Actions bosun does nothing on.
    assert_eq!(
        github_file("repository", "repository-created.json"),
        Event::Ignored("repository".into())
    );
}

#[test]
fn githubs_repository_changes_made_from_the_examples() {
    // The example's rename keeps the name; one that changes it.
    let mut renamed = github_example("repository-renamed.json");
    renamed["changes"]["repository"]["name"]["from"] = "Hello-Old-World".into();
    assert_eq!(
        github("repository", bytes(&renamed)),
        repository(RepositoryAction::Renamed {
            from: "Octocoders/Hello-Old-World".into(),
            to: "Octocoders/Hello-World".into(),
        })
    );
    // A transfer from an organization.
    let mut transferred = github_example("repository-transferred.json");
    let user = transferred["changes"]["owner"]["from"]["user"].take();
    let from = transferred["changes"]["owner"]["from"]
        .as_object_mut()
        .unwrap();
    from.remove("user");
    let mut org = serde_json::Map::new();
    for key in [
        "login",
        "id",
        "node_id",
        "url",
        "repos_url",
        "events_url",
        "avatar_url",
    ] {
        org.insert(key.into(), user[key].clone());
    }
    org.insert("login".into(), "Octoorg".into());
    for key in [
        "hooks_url",
        "issues_url",
        "members_url",
        "public_members_url",
    ] {
        org.insert(key.into(), "https://api.github.com/orgs/Octoorg/x".into());
    }
    org.insert("description".into(), Value::Null);
    from.insert("organization".into(), Value::Object(org));
    assert_eq!(
        github("repository", bytes(&transferred)),
        repository(RepositoryAction::Transferred {
            from: "Octoorg/Hello-World".into(),
            to: "Octocoders/Hello-World".into(),
        })
    );
    // Archived and unarchived: no example has them; the deleted one's
    // body with their action.
    for (action, archived, expected) in [
        ("archived", true, RepositoryAction::Archived),
        ("unarchived", false, RepositoryAction::Unarchived),
    ] {
        let mut body = github_example("repository-deleted.json");
        body["action"] = action.into();
        body["repository"]["archived"] = archived.into();
        assert_eq!(github("repository", bytes(&body)), repository(expected));
    }
}

#[test]
fn a_github_body_without_a_required_field_is_an_error_naming_it() {
    let mut push = github_example("push-branch-created.json");
    push.as_object_mut().unwrap().remove("after");
    let body = bytes(&push);
    // GitHub would not send it: its description refuses it...
    assert!(!github_schema_errors("push", &body).is_empty());
    // ...and, were it signed, it is an error naming the field, not a panic.
    let delivery = accepted(Request::github_unchecked("push", body, b"abc").send(&secrets()));
    assert_eq!(
        delivery.parse(),
        Err(EventError::Missing {
            field: "after".into()
        })
    );
    let mut push = github_example("push-branch-created.json");
    push["repository"]["clone_url"] = 7.into();
    let delivery =
        accepted(Request::github_unchecked("push", bytes(&push), b"abc").send(&secrets()));
    assert_eq!(
        delivery.parse().unwrap_err().to_string(),
        "the field `repository.clone_url` is not a string"
    );
}

fn gitea(body: Vec<u8>) -> Result<Event, EventError> {
    accepted(Request::gitea("push", body, b"abc").send(&secrets())).parse()
}

fn gitea_push() -> Push {
    Push {
        repo: "bosun/hello".into(),
        git_ref: "refs/heads/main".into(),
        before: "4b0a0e2f3c8d1e6a9b7c5d3e1f0a2b4c6d8e0f1a".into(),
        after: "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432".into(),
        created: false,
        deleted: false,
        forced: false,
        clone_url: "https://gitea.example.test/bosun/hello.git".into(),
        default_branch: "main".into(),
        pusher: "ada".into(),
        repo_link: "https://gitea.example.test/bosun/hello".into(),
        compare: "https://gitea.example.test/bosun/hello/compare/4b0a0e2f3c8d1e6a9b7c5d3e1f0a2b4c6d8e0f1a...9f8e7d6c5b4a39281706f5e4d3c2b1a098765432".into(),
        changed_files: vec![],
    }
}

#[test]
fn giteas_pushes() {
    assert_eq!(
        gitea(fixture("gitea/push.json")),
        Ok(Event::Push(gitea_push()))
    );
    let mut created = fixture_json("gitea/push.json");
    created["before"] = ZERO.into();
    assert_eq!(
        gitea(bytes(&created)),
        Ok(Event::Push(Push {
            before: ZERO.into(),
            created: true,
            ..gitea_push()
        }))
    );
    let mut deleted = fixture_json("gitea/push.json");
    deleted["after"] = ZERO.into();
    deleted["commits"] = Value::Array(vec![]);
    deleted["head_commit"] = Value::Null;
    assert_eq!(
        gitea(bytes(&deleted)),
        Ok(Event::Push(Push {
            after: ZERO.into(),
            deleted: true,
            ..gitea_push()
        }))
    );
    let mut no_pusher = fixture_json("gitea/push.json");
    no_pusher.as_object_mut().unwrap().remove("pusher");
    assert_eq!(
        gitea(bytes(&no_pusher)),
        Err(EventError::Missing {
            field: "pusher.login".into()
        })
    );
}

fn gitlab(event: &str, body: Vec<u8>) -> Result<Event, EventError> {
    accepted(Request::gitlab(event, body, b"abc").send(&secrets())).parse()
}

fn gitlab_push() -> Push {
    Push {
        repo: "bosun/ci/hello".into(),
        git_ref: "refs/heads/main".into(),
        before: "1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d".into(),
        after: "e0d1c2b3a4958677f6e5d4c3b2a1908f7e6d5c4b".into(),
        created: false,
        deleted: false,
        forced: false,
        clone_url: "https://gitlab.example.test/bosun/ci/hello.git".into(),
        default_branch: "main".into(),
        pusher: "grace".into(),
        repo_link: "https://gitlab.example.test/bosun/ci/hello".into(),
        compare: String::new(),
        changed_files: vec![".prow.yaml".into()],
    }
}

#[test]
fn gitlabs_pushes_and_tag_pushes() {
    assert_eq!(
        gitlab("Push Hook", fixture("gitlab/push.json")),
        Ok(Event::Push(gitlab_push()))
    );
    assert_eq!(
        gitlab("Tag Push Hook", fixture("gitlab/tag-push.json")),
        Ok(Event::Push(Push {
            git_ref: "refs/tags/v1.4.0".into(),
            before: ZERO.into(),
            after: "5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b".into(),
            created: true,
            changed_files: vec![],
            ..gitlab_push()
        }))
    );
    // A branch deleted: `after` all zeros, no `checkout_sha`.
    let mut deleted = fixture_json("gitlab/push.json");
    deleted["after"] = ZERO.into();
    deleted["checkout_sha"] = Value::Null;
    deleted["commits"] = Value::Array(vec![]);
    deleted["total_commits_count"] = 0.into();
    assert_eq!(
        gitlab("Push Hook", bytes(&deleted)),
        Ok(Event::Push(Push {
            after: ZERO.into(),
            deleted: true,
            changed_files: vec![],
            ..gitlab_push()
        }))
    );
    let mut no_project_url = fixture_json("gitlab/push.json");
    no_project_url["project"]
        .as_object_mut()
        .unwrap()
        .remove("git_http_url");
    assert_eq!(
        gitlab("Push Hook", bytes(&no_project_url)),
        Err(EventError::Missing {
            field: "project.git_http_url".into()
        })
    );
}
