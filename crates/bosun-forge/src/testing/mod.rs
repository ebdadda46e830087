//! For tests, of this crate and of others (feature `test-support`):
//! webhook requests as each forge sends them (every header it sets), the
//! vendored example payloads (`tests/fixtures`, their origin in its
//! README), and GitHub's webhook description that every GitHub payload a
//! test sends is validated against first; [`github_api`], a fake GitHub
//! REST API that checks every request against GitHub's REST description.
#![allow(missing_docs, clippy::missing_panics_doc)]

pub mod github_api;

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::hook::secrets::{github_signature, hmac_sha256};
use crate::hook::{Delivery, Intake, Reply, Secrets};
use hmac::{Hmac, Mac};
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use serde_json::{json, Value};

/// The bytes of `tests/fixtures/<path>`.
pub fn fixture(path: &str) -> Vec<u8> {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path);
    std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// `tests/fixtures/<path>` as JSON, to derive a variant from.
pub fn fixture_json(path: &str) -> Value {
    serde_json::from_slice(&fixture(path)).unwrap()
}

/// Fields GitHub's description requires of a push's repository that the
/// push examples of `@octokit/webhooks-examples` 7.6.1 predate, with the
/// values of a public repository with no topics.
pub fn push_repository_fields_added() -> [(&'static str, Value); 3] {
    [
        ("has_discussions", json!(false)),
        ("topics", json!([])),
        ("visibility", json!("public")),
    ]
}

/// Fields GitHub's description now requires that the examples predate
/// (as for the push examples, `requests::push_repository_fields_added`):
/// (object, field, value), each added where missing by [`github_example`].
/// `the_examples_lack_only_the_fields_added` checks nothing else is missing.
pub fn example_fields_added() -> Vec<(&'static str, &'static str, Value)> {
    let reactions = json!({"url": "https://api.github.com/reactions", "total_count": 0,
        "+1": 0, "-1": 0, "laugh": 0, "hooray": 0, "confused": 0, "heart": 0,
        "rocket": 0, "eyes": 0});
    vec![
        ("pull_request", "auto_merge", Value::Null),
        ("pull_request", "active_lock_reason", Value::Null),
        ("pull_request", "draft", false.into()),
        ("pull_request/base/repo", "has_discussions", false.into()),
        ("pull_request/base/repo", "topics", json!([])),
        ("pull_request/base/repo", "visibility", "public".into()),
        ("pull_request/head/repo", "has_discussions", false.into()),
        ("pull_request/head/repo", "topics", json!([])),
        ("pull_request/head/repo", "visibility", "public".into()),
        ("comment", "performed_via_github_app", Value::Null),
        ("comment", "reactions", reactions.clone()),
        ("issue", "active_lock_reason", Value::Null),
        ("issue", "reactions", reactions),
        ("issue/labels/*", "description", Value::Null),
        // A review comment's position fields.
        ("comment(review)", "line", Value::Null),
        ("comment(review)", "original_line", Value::Null),
        ("comment(review)", "original_start_line", Value::Null),
        ("comment(review)", "start_line", Value::Null),
        ("comment(review)", "side", "RIGHT".into()),
        ("comment(review)", "start_side", Value::Null),
    ]
}

/// The objects of `body` at `path` (`a/b`, `a/*` for each item of a list,
/// `comment(review)` for a review comment's `comment`).
pub fn objects_at<'v>(
    body: &'v mut Value,
    path: &str,
) -> Vec<&'v mut serde_json::Map<String, Value>> {
    if path == "comment(review)" {
        let is_review = body["comment"].get("pull_request_review_id").is_some();
        return match body.get_mut("comment").and_then(Value::as_object_mut) {
            Some(c) if is_review => vec![c],
            _ => vec![],
        };
    }
    let mut at = vec![body];
    for part in path.split('/') {
        at = at
            .into_iter()
            .flat_map(|v| match (part, v) {
                ("*", Value::Array(items)) => items.iter_mut().collect::<Vec<_>>(),
                (key, Value::Object(m)) => m.get_mut(key).into_iter().collect(),
                _ => vec![],
            })
            .collect();
    }
    at.into_iter().filter_map(Value::as_object_mut).collect()
}

/// The GitHub example `tests/fixtures/github/<file>` as GitHub sends it
/// now: a push example gets the repository fields it predates
/// ([`push_repository_fields_added`]) where missing; the others are valid
/// as they are (`github_schema` checks both).
pub fn github_example(file: &str) -> Value {
    let mut body = fixture_json(&format!("github/{file}"));
    if file.starts_with("push-") {
        let repository = body["repository"].as_object_mut().unwrap();
        for (field, value) in push_repository_fields_added() {
            repository.entry(field).or_insert(value);
        }
    }
    for (path, field, value) in example_fields_added() {
        for object in objects_at(&mut body, path) {
            object.entry(field).or_insert(value.clone());
        }
    }
    body
}

/// GitHub's example push (`push-branch-created.json`) as GitHub sends a
/// push of `before..after` to the branch `main` of `repo` (`org/name`),
/// its clone URL `clone_url` and default branch `main`; `forced` as GitHub
/// says it.
pub fn github_push(
    repo: &str,
    clone_url: &str,
    before: &str,
    after: &str,
    forced: bool,
) -> Vec<u8> {
    let mut body = github_example("push-branch-created.json");
    let (org, name) = repo.split_once('/').expect("org/name");
    body["ref"] = json!("refs/heads/main");
    body["before"] = json!(before);
    body["after"] = json!(after);
    body["created"] = json!(false);
    body["forced"] = json!(forced);
    body["compare"] = json!(format!(
        "https://github.com/{repo}/compare/{before}...{after}"
    ));
    let r = &mut body["repository"];
    r["name"] = json!(name);
    r["full_name"] = json!(repo);
    r["owner"]["login"] = json!(org);
    r["owner"]["name"] = json!(org);
    r["clone_url"] = json!(clone_url);
    r["default_branch"] = json!("main");
    bytes(&body)
}

/// A pull request as [`github_pull_request`] sends it.
#[derive(Debug, Clone)]
pub struct PullEvent<'a> {
    /// `opened`, `synchronize`, `closed`, ...
    pub action: &'a str,
    /// `org/name`.
    pub repo: &'a str,
    /// Its clone URL.
    pub clone_url: &'a str,
    /// Its number.
    pub number: u64,
    /// Its author (also the sender).
    pub author: &'a str,
    /// The head commit (its branch is `pr-NUMBER`).
    pub head: &'a str,
    /// The base commit (on `main`).
    pub base: &'a str,
    /// A draft.
    pub draft: bool,
}

/// GitHub's example `pull_request` event (`pull-request-opened.json`) as
/// GitHub sends `e`: a closed one closed, a `synchronize` with `before`
/// (the base) and `after` (the head); checked against GitHub's webhook
/// description before it is returned.
pub fn github_pull_request(e: &PullEvent<'_>) -> Vec<u8> {
    let mut body = github_example("pull-request-opened.json");
    body["action"] = json!(e.action);
    body["number"] = json!(e.number);
    let (org, name) = e.repo.split_once('/').expect("org/name");
    let set = |r: &mut Value| {
        r["name"] = json!(name);
        r["full_name"] = json!(e.repo);
        r["owner"]["login"] = json!(org);
        r["clone_url"] = json!(e.clone_url);
    };
    set(&mut body["repository"]);
    set(&mut body["pull_request"]["base"]["repo"]);
    set(&mut body["pull_request"]["head"]["repo"]);
    let pr = &mut body["pull_request"];
    pr["number"] = json!(e.number);
    pr["user"]["login"] = json!(e.author);
    pr["head"]["sha"] = json!(e.head);
    pr["head"]["ref"] = json!(format!("pr-{}", e.number));
    pr["base"]["sha"] = json!(e.base);
    pr["base"]["ref"] = json!("main");
    pr["draft"] = json!(e.draft);
    pr["html_url"] = json!(format!("https://github.com/{}/pull/{}", e.repo, e.number));
    if e.action == "closed" {
        pr["state"] = json!("closed");
        pr["closed_at"] = json!("2026-12-06T10:00:00Z");
    }
    body["sender"]["login"] = json!(e.author);
    if e.action == "synchronize" {
        body["before"] = json!(e.base);
        body["after"] = json!(e.head);
    }
    let raw = bytes(&body);
    let errors = github_schema_errors("pull_request", &raw);
    assert!(
        errors.is_empty(),
        "not a valid pull_request event: {errors:#?}"
    );
    raw
}

/// [`github_example`] as the bytes GitHub sends.
pub fn github_example_bytes(file: &str) -> Vec<u8> {
    bytes(&github_example(file))
}

/// A JSON value as the bytes a forge sends.
pub fn bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec_pretty(value).unwrap()
}

/// GitHub's webhook description (the vendored part of
/// `@octokit/openapi-webhooks`' `generated/api.github.com.json`).
fn description() -> &'static Value {
    static DESCRIPTION: OnceLock<Value> = OnceLock::new();
    DESCRIPTION.get_or_init(|| fixture_json("github/openapi-webhooks.json"))
}

/// The description's schema for a GitHub delivery of `event`: its
/// `webhooks` entry is `<event>-<action>` for events with actions, else
/// `<event>`; the entry's request body names the schema.
fn schema_ref(event: &str, body: &Value) -> String {
    let webhooks = &description()["webhooks"];
    // The description names events with `-` where the header has `_`
    // (`pull-request-opened` for `pull_request` with `opened`).
    let event = event.replace('_', "-");
    let key = match body.get("action").and_then(Value::as_str) {
        Some(action)
            if webhooks
                .get(format!("{event}-{}", action.replace('_', "-")))
                .is_some() =>
        {
            format!("{event}-{}", action.replace('_', "-"))
        }
        _ => event.clone(),
    };
    let entry = webhooks
        .get(&key)
        .unwrap_or_else(|| panic!("GitHub's description has no webhook `{key}` here"));
    entry["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// What GitHub's description says is wrong with `body` as a delivery of
/// `event` (none when it is a valid payload). The schema is the description
/// itself with a `$ref` to the event's schema at its root, so that every
/// `$ref` resolves within the document.
pub fn github_schema_errors(event: &str, body: &[u8]) -> Vec<String> {
    let body: Value = serde_json::from_slice(body).expect("a GitHub payload is JSON");
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": schema_ref(event, &body),
        "components": description()["components"],
    });
    let validator = jsonschema::draft202012::new(&schema).expect("the description compiles");
    validator
        .iter_errors(&body)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn assert_github_payload(event: &str, body: &[u8]) {
    let errors = github_schema_errors(event, body);
    assert!(
        errors.is_empty(),
        "not a valid GitHub `{event}` payload: {errors:#?}"
    );
}

/// A webhook request.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

const DELIVERY: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

fn sha1_signature(key: &[u8], body: &[u8]) -> String {
    let mut mac = <Hmac<sha1::Sha1> as Mac>::new_from_slice(key).unwrap();
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

impl Request {
    /// A GitHub delivery of `event` signed with `token`, with every header
    /// GitHub sends; `body` must be a valid payload of that event by GitHub's
    /// description (the test fails otherwise).
    pub fn github(event: &str, body: Vec<u8>, token: &[u8]) -> Request {
        assert_github_payload(event, &body);
        Request::github_unchecked(event, body, token)
    }

    /// As [`Request::github`], for a body that is not a GitHub payload on
    /// purpose (a body that is not JSON at all).
    pub fn github_unchecked(event: &str, body: Vec<u8>, token: &[u8]) -> Request {
        let signature = github_signature(token, &body);
        let sha1 = format!("sha1={}", sha1_signature(token, &body));
        let length = body.len().to_string();
        Request::post(body).with_all(&[
            ("Content-Type", "application/json"),
            ("Content-Length", &length),
            ("User-Agent", "GitHub-Hookshot/044aadd"),
            ("X-GitHub-Delivery", DELIVERY),
            ("X-GitHub-Event", event),
            ("X-GitHub-Hook-ID", "292430182"),
            ("X-GitHub-Hook-Installation-Target-ID", "79929171"),
            ("X-GitHub-Hook-Installation-Target-Type", "repository"),
            ("X-Hub-Signature", &sha1),
            ("X-Hub-Signature-256", &signature),
        ])
    }

    /// A Gitea delivery of `event` signed with `token`, with every header
    /// Gitea sends (`services/webhook/deliver.go`): its own, Gogs' and
    /// GitHub's.
    pub fn gitea(event: &str, body: Vec<u8>, token: &[u8]) -> Request {
        let sha256 = hex::encode(hmac_sha256(token, &body));
        let sha1 = sha1_signature(token, &body);
        let id = "f6266f16-1bf3-46a5-9ea4-602e06ead473";
        let length = body.len().to_string();
        Request::post(body).with_all(&[
            ("Content-Type", "application/json"),
            ("Content-Length", &length),
            ("X-Gitea-Delivery", id),
            ("X-Gitea-Event", event),
            ("X-Gitea-Event-Type", event),
            ("X-Gitea-Signature", &sha256),
            ("X-Gogs-Delivery", id),
            ("X-Gogs-Event", event),
            ("X-Gogs-Event-Type", event),
            ("X-Gogs-Signature", &sha256),
            ("X-Hub-Signature", &format!("sha1={sha1}")),
            ("X-Hub-Signature-256", &format!("sha256={sha256}")),
            ("X-GitHub-Delivery", id),
            ("X-GitHub-Event", event),
            ("X-GitHub-Event-Type", event),
        ])
    }

    /// A GitLab delivery of `event` (`Push Hook`) carrying `token`, with
    /// every header GitLab sends.
    pub fn gitlab(event: &str, body: Vec<u8>, token: &[u8]) -> Request {
        let length = body.len().to_string();
        Request::post(body)
            .with_all(&[
                ("Content-Type", "application/json"),
                ("Content-Length", &length),
                ("User-Agent", "GitLab/18.6.0"),
                ("Idempotency-Key", "a5461c4d-9c7f-4af9-add6-cddebe3c426f"),
                ("X-Gitlab-Event", event),
                (
                    "X-Gitlab-Webhook-UUID",
                    "3c5c0404-c866-44bc-a5f6-452bb1bfc76e",
                ),
                ("X-Gitlab-Instance", "https://gitlab.example.test"),
                (
                    "X-Gitlab-Event-UUID",
                    "9cebe914-4827-408f-b014-cfa23a47a35f",
                ),
            ])
            .with_bytes("X-Gitlab-Token", token)
    }

    fn post(body: Vec<u8>) -> Request {
        Request {
            method: Method::POST,
            headers: HeaderMap::new(),
            body,
        }
    }

    fn with_all(mut self, headers: &[(&str, &str)]) -> Request {
        for (name, value) in headers {
            self = self.with(name, value);
        }
        self
    }

    /// With header `name` set to `value` (replacing it).
    pub fn with(self, name: &str, value: &str) -> Request {
        self.with_bytes(name, value.as_bytes())
    }

    /// With header `name` set to the bytes `value` (replacing it).
    pub fn with_bytes(mut self, name: &str, value: &[u8]) -> Request {
        self.headers.insert(
            HeaderName::try_from(name).unwrap(),
            HeaderValue::from_bytes(value).unwrap(),
        );
        self
    }

    /// Without header `name`.
    pub fn without(mut self, name: &str) -> Request {
        self.headers.remove(name);
        self
    }

    /// With another method.
    pub fn method(mut self, method: Method) -> Request {
        self.method = method;
        self
    }

    /// Checked by the default intake against `secrets`.
    pub fn send(self, secrets: &Secrets) -> Result<Delivery, Reply> {
        self.send_to(&Intake::new(), secrets)
    }

    /// Checked by `intake` against `secrets`.
    pub fn send_to(self, intake: &Intake, secrets: &Secrets) -> Result<Delivery, Reply> {
        intake.check(&self.method, &self.headers, self.body, secrets)
    }
}

/// The refusal of a request that was to be refused: its status and body.
#[track_caller]
pub fn refusal(outcome: Result<Delivery, Reply>) -> (u16, String) {
    match outcome {
        Ok(delivery) => panic!("accepted: {delivery:?}"),
        Err(reply) => (reply.status.as_u16(), reply.body),
    }
}

/// The delivery of a request that was to be accepted.
#[track_caller]
pub fn accepted(outcome: Result<Delivery, Reply>) -> Delivery {
    match outcome {
        Ok(delivery) => delivery,
        Err(reply) => panic!("refused: {} {:?}", reply.status, reply.body),
    }
}
