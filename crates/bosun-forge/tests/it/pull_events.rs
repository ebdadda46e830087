//! GitHub's pull request and comment events read as bosun's events, through
//! the intake: the vendored examples, and the ones made from them here, each
//! validated against GitHub's webhook description before it is sent.
//!
//! GitHub's description names these webhooks with dashes
//! (`pull-request-opened` for the event `pull_request`, action `opened`),
//! which `requests::github_schema_errors` does not look up yet: the payloads
//! here are checked by [`schema_errors`].

use std::sync::OnceLock;

use bosun_forge::hook::{
    Comment, CommentAction, CommentKind, Event, EventError, PullRequest, Push, Secrets,
};
use serde_json::{json, Value};

use crate::requests::{
    accepted, bytes, fixture_json, github_example, github_schema_errors, Request,
};

fn secrets() -> Secrets {
    Secrets::parse(b"'*': [{value: abc}]\n")
}

/// What GitHub's description says is wrong with `body` as a delivery of
/// `event`: the `webhooks` entry `<event>-<action>` with `_` written `-`.
fn schema_errors(event: &str, body: &[u8]) -> Vec<String> {
    if event == "push" {
        return github_schema_errors(event, body);
    }
    static DESCRIPTION: OnceLock<Value> = OnceLock::new();
    let description = DESCRIPTION.get_or_init(|| fixture_json("github/openapi-webhooks.json"));
    let body: Value = serde_json::from_slice(body).unwrap();
    let action = body["action"].as_str().expect("an action");
    let key = format!("{event}-{action}").replace('_', "-");
    let entry = description["webhooks"]
        .get(&key)
        .unwrap_or_else(|| panic!("GitHub's description has no webhook `{key}` here"));
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": entry["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "components": description["components"],
    });
    let validator = jsonschema::draft202012::new(&schema).expect("the description compiles");
    validator
        .iter_errors(&body)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// A delivery of `body`, which must be a valid payload of `event` by
/// GitHub's description.
fn github(event: &str, body: Vec<u8>) -> Result<Event, EventError> {
    let errors = schema_errors(event, &body);
    assert!(
        errors.is_empty(),
        "not a valid GitHub `{event}` payload: {errors:#?}"
    );
    accepted(Request::github_unchecked(event, body, b"abc").send(&secrets())).parse()
}

/// The example `tests/fixtures/github/<file>` as GitHub sends it now (with
/// [`fields_added`] where missing).
fn example(file: &str) -> Value {
    github_example(file)
}

fn github_example_bytes(file: &str) -> Vec<u8> {
    bytes(&example(file))
}

/// The same body sent without the schema check (for bodies GitHub would
/// not send).
fn github_unchecked(event: &str, body: &Value) -> Result<Event, EventError> {
    accepted(Request::github_unchecked(event, bytes(body), b"abc").send(&secrets())).parse()
}

const HEAD: &str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";

/// `pull-request-*.json`: the same pull request (Codertocat/Hello-World#2)
/// in each.
fn hello_pr(action: &str) -> PullRequest {
    PullRequest {
        repo: "Codertocat/Hello-World".into(),
        action: action.into(),
        number: 2,
        author: "Codertocat".into(),
        sender: "Codertocat".into(),
        head_sha: HEAD.into(),
        head_ref: "changes".into(),
        base_ref: "master".into(),
        base_sha: "f95f852bd8fca8fcc58a9a2d6c842781e32a215e".into(),
        draft: false,
        merged: false,
        open: true,
        mergeable: Some(true),
        label: None,
        labels: vec!["bug".into()],
        base_changed: false,
        title: "Update the README with new information.".into(),
        body: "This is a pretty simple change that we need to pull into master.".into(),
        html_url: "https://github.com/Codertocat/Hello-World/pull/2".into(),
        clone_url: "https://github.com/Codertocat/Hello-World.git".into(),
    }
}

#[test]
fn the_vendored_pull_request_and_comment_examples_are_githubs() {
    for (event, file) in [
        ("pull_request", "pull-request-opened.json"),
        ("pull_request", "pull-request-reopened.json"),
        ("pull_request", "pull-request-synchronize.json"),
        ("pull_request", "pull-request-labeled.json"),
        ("pull_request", "pull-request-closed.json"),
        ("pull_request", "pull-request-converted-to-draft.json"),
        ("pull_request", "pull-request-ready-for-review.json"),
        ("issue_comment", "issue-comment-created.json"),
        ("pull_request_review", "pull-request-review-submitted.json"),
        ("pull_request_review", "pull-request-review-dismissed.json"),
        (
            "pull_request_review_comment",
            "pull-request-review-comment-created.json",
        ),
    ] {
        let errors = schema_errors(event, &github_example_bytes(file));
        assert!(errors.is_empty(), "{file}: {errors:#?}");
        // As vendored, only the fields added are missing.
        let added = bosun_forge::testing::example_fields_added();
        for error in schema_errors(event, &bytes(&github_example(file))) {
            assert!(
                added
                    .iter()
                    .any(|(_, field, _)| error
                        .ends_with(&format!("\"{field}\" is a required property"))),
                "{file}: {error}"
            );
        }
        // And a payload without a required field is not GitHub's.
        let mut broken = example(file);
        broken.as_object_mut().unwrap().remove("repository");
        assert!(!schema_errors(event, &bytes(&broken)).is_empty(), "{file}");
    }
}

#[test]
fn githubs_pull_request_actions() {
    let read = |file: &str| github("pull_request", github_example_bytes(file)).unwrap();
    assert_eq!(
        read("pull-request-opened.json"),
        Event::PullRequest(PullRequest {
            mergeable: None,
            labels: vec![],
            ..hello_pr("opened")
        })
    );
    assert_eq!(
        read("pull-request-reopened.json"),
        Event::PullRequest(PullRequest {
            mergeable: None,
            ..hello_pr("reopened")
        })
    );
    assert_eq!(
        read("pull-request-synchronize.json"),
        Event::PullRequest(PullRequest {
            mergeable: None,
            ..hello_pr("synchronize")
        })
    );
    assert_eq!(
        read("pull-request-labeled.json"),
        Event::PullRequest(PullRequest {
            label: Some("bug".into()),
            ..hello_pr("labeled")
        })
    );
    assert_eq!(
        read("pull-request-closed.json"),
        Event::PullRequest(PullRequest {
            open: false,
            ..hello_pr("closed")
        })
    );
    assert_eq!(
        read("pull-request-converted-to-draft.json"),
        Event::PullRequest(PullRequest {
            draft: true,
            ..hello_pr("converted_to_draft")
        })
    );
    assert_eq!(
        read("pull-request-ready-for-review.json"),
        Event::PullRequest(hello_pr("ready_for_review"))
    );
}

#[test]
fn githubs_pull_request_edited_tells_a_changed_base() {
    // No `edited` example: made from `opened`, GitHub's description checks it.
    let mut edited = example("pull-request-opened.json");
    edited["action"] = "edited".into();
    edited["changes"] = json!({"base": {"ref": {"from": "main"}, "sha": {"from": "1234"}}});
    let expected = PullRequest {
        mergeable: None,
        labels: vec![],
        base_changed: true,
        ..hello_pr("edited")
    };
    assert_eq!(
        github("pull_request", bytes(&edited)),
        Ok(Event::PullRequest(expected.clone()))
    );
    edited["changes"] = json!({"title": {"from": "Old title"}});
    assert_eq!(
        github("pull_request", bytes(&edited)),
        Ok(Event::PullRequest(PullRequest {
            base_changed: false,
            ..expected
        }))
    );
    // A merged pull request says so; an unlabeled one names the label.
    let mut merged = example("pull-request-closed.json");
    merged["pull_request"]["merged"] = true.into();
    merged["pull_request"]["merged_at"] = "2019-05-15T15:20:40Z".into();
    let Ok(Event::PullRequest(pr)) = github("pull_request", bytes(&merged)) else {
        panic!("not a pull request");
    };
    assert!(pr.merged && !pr.open);
    let mut unlabeled = example("pull-request-labeled.json");
    unlabeled["action"] = "unlabeled".into();
    let Ok(Event::PullRequest(pr)) = github_unchecked("pull_request", &unlabeled) else {
        panic!("not a pull request");
    };
    assert_eq!(pr.label.as_deref(), Some("bug"));
}

fn issue_comment(is_pull: bool) -> Comment {
    Comment {
        repo: "Codertocat/Hello-World".into(),
        number: 1,
        is_pull,
        kind: CommentKind::IssueComment,
        action: CommentAction::Created,
        body: "You are totally right! I'll get this fixed right away.".into(),
        author: "Codertocat".into(),
        issue_author: "Codertocat".into(),
        issue_open: true,
        html_url: "https://github.com/Codertocat/Hello-World/issues/1#issuecomment-492700400"
            .into(),
        head_sha: None,
        clone_url: "https://github.com/Codertocat/Hello-World.git".into(),
    }
}

#[test]
fn githubs_issue_comments_on_issues_and_pull_requests() {
    assert_eq!(
        github(
            "issue_comment",
            github_example_bytes("issue-comment-created.json")
        ),
        Ok(Event::Comment(issue_comment(false)))
    );
    // No example comments on a pull request: an issue that is one carries
    // `issue.pull_request`.
    let mut on_pull = example("issue-comment-created.json");
    on_pull["issue"]["pull_request"] = json!({
        "url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1",
        "html_url": "https://github.com/Codertocat/Hello-World/pull/1",
        "diff_url": "https://github.com/Codertocat/Hello-World/pull/1.diff",
        "patch_url": "https://github.com/Codertocat/Hello-World/pull/1.patch",
        "merged_at": null
    });
    on_pull["comment"]["body"] = "/retest".into();
    on_pull["comment"]["user"]["login"] = "reviewer".into();
    assert_eq!(
        github("issue_comment", bytes(&on_pull)),
        Ok(Event::Comment(Comment {
            body: "/retest".into(),
            author: "reviewer".into(),
            ..issue_comment(true)
        }))
    );
    let mut edited = on_pull.clone();
    edited["action"] = "edited".into();
    edited["changes"] = json!({"body": {"from": "/test all"}});
    let Ok(Event::Comment(c)) = github("issue_comment", bytes(&edited)) else {
        panic!("not a comment");
    };
    assert_eq!(c.action, CommentAction::Edited);
    let mut closed = on_pull;
    closed["issue"]["state"] = "closed".into();
    closed["issue"]["closed_at"] = "2019-05-15T15:20:40Z".into();
    let Ok(Event::Comment(c)) = github_unchecked("issue_comment", &closed) else {
        panic!("not a comment");
    };
    assert!(!c.issue_open);
}

#[test]
fn githubs_reviews_and_review_comments_as_prows_hook_reads_them() {
    let review = |action| Comment {
        repo: "Codertocat/Hello-World".into(),
        number: 2,
        is_pull: true,
        kind: CommentKind::Review,
        action,
        body: String::new(),
        author: "Codertocat".into(),
        issue_author: "Codertocat".into(),
        issue_open: true,
        html_url: "https://github.com/Codertocat/Hello-World/pull/2#pullrequestreview-237895671"
            .into(),
        head_sha: Some(HEAD.into()),
        clone_url: "https://github.com/Codertocat/Hello-World.git".into(),
    };
    // submitted is Created, dismissed is Deleted (Prow's GeneralizeCommentAction).
    assert_eq!(
        github(
            "pull_request_review",
            github_example_bytes("pull-request-review-submitted.json")
        ),
        Ok(Event::Comment(review(CommentAction::Created)))
    );
    assert_eq!(
        github(
            "pull_request_review",
            github_example_bytes("pull-request-review-dismissed.json")
        ),
        Ok(Event::Comment(review(CommentAction::Deleted)))
    );
    assert_eq!(
        github(
            "pull_request_review_comment",
            github_example_bytes("pull-request-review-comment-created.json")
        ),
        Ok(Event::Comment(Comment {
            kind: CommentKind::ReviewComment,
            body: "Maybe you should use more emoji on this line.".into(),
            html_url: "https://github.com/Codertocat/Hello-World/pull/2#discussion_r284312630"
                .into(),
            ..review(CommentAction::Created)
        }))
    );
    // An action that is not about the text is ignored.
    let mut other = example("pull-request-review-submitted.json");
    other["action"] = "requested".into();
    assert_eq!(
        github_unchecked("pull_request_review", &other),
        Ok(Event::Ignored("pull_request_review".into()))
    );
}

#[test]
fn a_pull_request_body_at_opened_is_a_comment_by_its_author() {
    let pr = hello_pr("opened");
    let c = Comment::of_pull_request_body(&pr).unwrap();
    assert_eq!(c.kind, CommentKind::PullRequestBody);
    assert_eq!(c.action, CommentAction::Created);
    assert_eq!(
        (c.author.as_str(), c.number, c.is_pull),
        ("Codertocat", 2, true)
    );
    assert_eq!(c.body, pr.body);
    assert_eq!(c.head_sha.as_deref(), Some(HEAD));
    assert!(Comment::of_pull_request_body(&hello_pr("synchronize")).is_none());
    let edited = Comment::of_pull_request_body(&hello_pr("edited")).unwrap();
    assert_eq!(edited.action, CommentAction::Edited);
}

#[test]
fn a_missing_or_mistyped_pull_request_field_is_named() {
    let mut no_head = example("pull-request-synchronize.json");
    no_head["pull_request"]["head"]
        .as_object_mut()
        .unwrap()
        .remove("sha");
    assert_eq!(
        github_unchecked("pull_request", &no_head),
        Err(EventError::Missing {
            field: "pull_request.head.sha".into()
        })
    );
    let mut number = example("pull-request-synchronize.json");
    number["pull_request"]["number"] = "2".into();
    assert_eq!(
        github_unchecked("pull_request", &number),
        Err(EventError::WrongType {
            field: "pull_request.number".into(),
            expected: "an integer"
        })
    );
    let mut draft = example("pull-request-synchronize.json");
    draft["pull_request"]["draft"] = "yes".into();
    assert_eq!(
        github_unchecked("pull_request", &draft),
        Err(EventError::WrongType {
            field: "pull_request.draft".into(),
            expected: "a boolean"
        })
    );
    let mut label = example("pull-request-synchronize.json");
    label["pull_request"]["labels"][0]["name"] = 1.into();
    assert_eq!(
        github_unchecked("pull_request", &label),
        Err(EventError::WrongType {
            field: "pull_request.labels.0.name".into(),
            expected: "a string"
        })
    );
    let mut author = example("issue-comment-created.json");
    author["comment"].as_object_mut().unwrap().remove("user");
    assert_eq!(
        github_unchecked("issue_comment", &author),
        Err(EventError::Missing {
            field: "comment.user.login".into()
        })
    );
}

#[test]
fn a_push_lists_its_commits_files_once() {
    // Prow's trigger takes the union of every commit's added, removed and
    // modified files.
    let mut push = example("push-branch-created.json");
    let commit = push["commits"][0].clone();
    let mut second = commit.clone();
    second["id"] = "a10867b14bb761a232cd80139fbd4c0d33264240".into();
    second["added"] = json!(["hack/verify.sh"]);
    second["removed"] = json!(["old.txt"]);
    second["modified"] = json!(["README.md"]);
    push["commits"] = json!([commit, second]);
    let Ok(Event::Push(Push { changed_files, .. })) = github("push", bytes(&push)) else {
        panic!("not a push");
    };
    assert_eq!(changed_files, ["README.md", "hack/verify.sh", "old.txt"]);
    push["commits"][1]["modified"] = json!([7]);
    assert_eq!(
        github_unchecked("push", &push),
        Err(EventError::WrongType {
            field: "commits.1.modified.0".into(),
            expected: "a string"
        })
    );
}
