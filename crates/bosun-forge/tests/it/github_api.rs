//! The fake GitHub REST API (`bosun_forge::testing::github_api`) driven
//! over HTTP with `ureq`: each check seen refusing a malformed request as
//! GitHub does, the limits GitHub enforces beyond its description,
//! pagination, App authentication, injected failures, and every answer of
//! every operation checked against GitHub's REST description.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bosun_forge::testing::github_api::{
    app_jwt, app_private_key_pem, app_public_key_pem, operations, response_errors, Failure,
    FakeGitHub, PullSpec, BOT_LOGIN,
};
use serde_json::{json, Value};

const REPO: &str = "bosun-ci/hello";
const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

/// An answer: status, headers (lowercase names), body (JSON, or a string
/// when not JSON, `Null` when empty).
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A client as bosun's sends requests: `User-Agent`, `Accept`, the API
/// version, a token.
struct Client {
    agent: ureq::Agent,
    base: String,
    auth: Option<String>,
    user_agent: bool,
}

impl Client {
    fn new(gh: &FakeGitHub, token: &str) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .user_agent(ureq::config::AutoHeaderValue::None)
            .build()
            .into();
        Client {
            agent,
            base: gh.url(),
            auth: Some(format!("Bearer {token}")),
            user_agent: true,
        }
    }

    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Answer, ureq::Error> {
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28");
        if self.user_agent {
            request = request.header("User-Agent", "bosun-test");
        }
        if let Some(auth) = &self.auth {
            request = request.header("Authorization", auth);
        }
        let bytes = body
            .map(|b| serde_json::to_vec(b).unwrap())
            .unwrap_or_default();
        if body.is_some() {
            request = request.header("Content-Type", "application/json");
        }
        let mut response = self.agent.run(request.body(bytes).unwrap())?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        let text = response.body_mut().read_to_string().unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Answer {
        self.send(method, path, body.as_ref())
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    fn get(&self, path: &str) -> Answer {
        self.call("GET", path, None)
    }

    fn post(&self, path: &str, body: Value) -> Answer {
        self.call("POST", path, Some(body))
    }
}

fn fake() -> (FakeGitHub, Client) {
    let gh = FakeGitHub::start();
    gh.add_commit(REPO, SHA);
    let client = Client::new(&gh, &gh.token());
    (gh, client)
}

fn status_path() -> String {
    format!("/repos/{REPO}/statuses/{SHA}")
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[track_caller]
fn assert_no_violations(gh: &FakeGitHub) {
    let violations = gh.violations();
    assert!(violations.is_empty(), "violations: {violations:#?}");
}

#[track_caller]
fn assert_one_violation(gh: &FakeGitHub, containing: &str) {
    let violations = gh.violations();
    assert!(
        violations.len() == 1 && violations[0].contains(containing),
        "expected one violation with {containing:?}: {violations:#?}"
    );
}

#[test]
fn a_status_is_kept_and_answered_in_githubs_shape() {
    let (gh, client) = fake();
    let answer = client.post(
        &status_path(),
        json!({"state": "pending", "context": "unit", "description": "Job triggered.", "target_url": "https://ci.example/1"}),
    );
    assert_eq!(answer.status, 201, "{}", answer.body);
    assert_eq!(answer.body["state"], "pending");
    assert_eq!(answer.body["context"], "unit");
    assert_eq!(answer.body["creator"]["login"], BOT_LOGIN);
    assert!(answer.header("location").unwrap().ends_with(&status_path()));
    for header in ["limit", "remaining", "used", "reset", "resource"] {
        assert!(
            answer.header(&format!("x-ratelimit-{header}")).is_some(),
            "{header}"
        );
    }
    assert_eq!(answer.header("x-ratelimit-remaining"), Some("4999"));
    client.post(
        &status_path(),
        json!({"state": "success", "context": "UNIT", "target_url": null}),
    );
    let statuses = gh.statuses(REPO, SHA);
    assert_eq!(
        statuses
            .iter()
            .map(|s| (s.context.as_str(), s.state.as_str()))
            .collect::<Vec<_>>(),
        [("unit", "pending"), ("UNIT", "success")]
    );
    assert_eq!(statuses[0].description.as_deref(), Some("Job triggered."));
    let latest = gh.latest_statuses(REPO, SHA);
    assert_eq!(latest.len(), 1, "contexts compare case-insensitively");
    assert_eq!(latest[0].state, "success");
    assert_no_violations(&gh);
}

#[test]
fn a_status_state_outside_githubs_list_is_refused_422() {
    let (gh, client) = fake();
    let answer = client.post(
        &status_path(),
        json!({"state": "passed", "context": "unit"}),
    );
    assert_eq!(answer.status, 422);
    assert_eq!(answer.body["message"], "Validation Failed");
    assert_eq!(answer.body["errors"][0]["field"], "state");
    assert!(gh.statuses(REPO, SHA).is_empty());
    assert_one_violation(&gh, "body");
}

#[test]
fn a_status_without_a_state_is_refused_422() {
    let (gh, client) = fake();
    let answer = client.post(&status_path(), json!({"context": "unit"}));
    assert_eq!(answer.status, 422);
    assert_eq!(answer.body["errors"][0]["code"], "missing_field");
    assert_one_violation(&gh, "state");
}

#[test]
fn a_status_description_over_140_characters_is_refused_422() {
    let (gh, client) = fake();
    // 140 characters of 3 bytes each: GitHub counts characters.
    let ok = client.post(
        &status_path(),
        json!({"state": "success", "description": "\u{2001}".repeat(140)}),
    );
    assert_eq!(ok.status, 201, "{}", ok.body);
    let answer = client.post(
        &status_path(),
        json!({"state": "success", "description": "x".repeat(141)}),
    );
    assert_eq!(answer.status, 422);
    assert_eq!(
        answer.body["errors"][0]["message"],
        "description is too long (maximum is 140 characters)"
    );
    assert_eq!(gh.statuses(REPO, SHA).len(), 1);
    assert_one_violation(&gh, "description");
}

#[test]
fn the_1001st_status_of_a_sha_and_context_is_refused_422() {
    let (gh, client) = fake();
    for i in 0..1000 {
        let context = if i % 2 == 0 { "unit" } else { "Unit" };
        let answer = client.post(
            &status_path(),
            json!({"state": "pending", "context": context}),
        );
        assert_eq!(answer.status, 201, "status {i}");
    }
    let answer = client.post(
        &status_path(),
        json!({"state": "success", "context": "unit"}),
    );
    assert_eq!(answer.status, 422);
    assert_eq!(
        answer.body["errors"][0]["message"],
        "This SHA and context has reached the maximum number of statuses."
    );
    let other = client.post(
        &status_path(),
        json!({"state": "success", "context": "lint"}),
    );
    assert_eq!(other.status, 201, "another context still takes statuses");
    assert_eq!(gh.statuses(REPO, SHA).len(), 1001);
    assert_no_violations(&gh);
}

#[test]
fn a_status_on_an_unknown_commit_is_refused_422() {
    let (gh, client) = fake();
    let other = "f".repeat(40);
    let answer = client.post(
        &format!("/repos/{REPO}/statuses/{other}"),
        json!({"state": "success"}),
    );
    assert_eq!(answer.status, 422);
    assert_eq!(
        answer.body["message"],
        format!("No commit found for SHA: {other}")
    );
    assert_no_violations(&gh);
}

#[test]
fn missing_or_unknown_credentials_get_401() {
    let (gh, mut client) = fake();
    client.auth = None;
    let answer = client.get("/user");
    assert_eq!(answer.status, 401);
    assert_eq!(answer.body["message"], "Requires authentication");
    client.auth = Some("Bearer ghp_not_issued".into());
    let answer = client.get("/user");
    assert_eq!(answer.status, 401);
    assert_eq!(answer.body["message"], "Bad credentials");
    client.auth = Some(format!("Basic {}", gh.token()));
    assert_eq!(client.get("/user").status, 401);
    assert_eq!(gh.violations().len(), 3);
    client.auth = Some(format!("token {}", gh.token()));
    let answer = client.get("/user");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body["login"], BOT_LOGIN);
    gh.add_token("ghp_other", "someone");
    client.auth = Some("Bearer ghp_other".into());
    assert_eq!(client.get("/user").body["login"], "someone");
    assert_eq!(gh.violations().len(), 3);
}

#[test]
fn an_unknown_path_or_method_gets_404_not_found() {
    let (gh, client) = fake();
    let answer = client.get(&format!("/repos/{REPO}/status/{SHA}"));
    assert_eq!(answer.status, 404);
    assert_eq!(answer.body["message"], "Not Found");
    assert!(answer.body["documentation_url"].is_string());
    assert_one_violation(&gh, "no such operation");
    let answer = client.call("PUT", &status_path(), Some(json!({"state": "success"})));
    assert_eq!(answer.status, 404);
    assert_eq!(gh.violations().len(), 2);
}

#[test]
fn a_missing_user_agent_gets_403() {
    let (gh, mut client) = fake();
    client.user_agent = false;
    let answer = client.get("/user");
    assert_eq!(answer.status, 403);
    assert!(answer.body.as_str().unwrap().contains("User-Agent"));
    assert_one_violation(&gh, "User-Agent");
}

#[test]
fn query_parameters_are_checked_against_their_schemas() {
    let (gh, client) = fake();
    let path = format!("/repos/{REPO}/commits/{SHA}/statuses");
    let answer = client.get(&format!("{path}?page=two"));
    assert_eq!(answer.status, 422);
    assert_one_violation(&gh, "page");
    // GitHub caps per_page at 100 without a word: answered, but a violation.
    let answer = client.get(&format!("{path}?per_page=101"));
    assert_eq!(answer.status, 200);
    assert_eq!(gh.violations().len(), 2);
    assert!(gh.violations()[1].contains("per_page=101"));
    let answer = client.get(&format!("{path}?per_pag=10"));
    assert_eq!(answer.status, 200);
    assert_eq!(
        gh.violations().len(),
        3,
        "an unknown parameter is a violation"
    );
    let answer = client.get(&format!("/repos/{REPO}/pulls/first"));
    assert_eq!(answer.status, 404, "a path parameter off its schema");
    assert_eq!(gh.violations().len(), 4);
}

#[test]
fn a_body_that_is_not_json_gets_400() {
    let (gh, client) = fake();
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("{}{}", gh.url(), status_path()))
        .header("User-Agent", "bosun-test")
        .header("Authorization", format!("Bearer {}", gh.token()))
        .body("state=success")
        .unwrap();
    let mut response = client.agent.run(request).unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.body_mut().read_json().unwrap();
    assert_eq!(body["message"], "Problems parsing JSON");
    assert_one_violation(&gh, "not JSON");
}

#[test]
fn lists_paginate_with_link_headers() {
    let (gh, client) = fake();
    for i in 0..65 {
        client.post(
            &status_path(),
            json!({"state": "success", "context": format!("job-{i}")}),
        );
    }
    let first = client.get(&format!("/repos/{REPO}/commits/{SHA}/statuses"));
    assert_eq!(
        first.body.as_array().unwrap().len(),
        30,
        "30 a page by default"
    );
    assert_eq!(first.body[0]["context"], "job-64", "newest first");
    let link = first.header("link").unwrap();
    assert!(link.contains("page=2>; rel=\"next\""), "{link}");
    assert!(link.contains("page=3>; rel=\"last\""), "{link}");
    // Follow `next` to the end, as a client does.
    let mut seen = Vec::new();
    let mut next = Some(format!("/repos/{REPO}/commits/{SHA}/statuses?per_page=20"));
    while let Some(path) = next {
        let page = client.get(&path);
        seen.extend(
            page.body
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["context"].clone()),
        );
        next = page.header("link").and_then(|link| {
            link.split(", ")
                .find(|l| l.ends_with("rel=\"next\""))
                .map(|l| {
                    l[1..l.find('>').unwrap()]
                        .trim_start_matches(&gh.url())
                        .to_owned()
                })
        });
    }
    assert_eq!(seen.len(), 65);
    let combined = client.get(&format!(
        "/repos/{REPO}/commits/{SHA}/status?per_page=50&page=2"
    ));
    assert_eq!(combined.body["total_count"], 65);
    assert_eq!(combined.body["statuses"].as_array().unwrap().len(), 15);
    assert!(combined.header("link").unwrap().contains("rel=\"prev\""));
    assert_no_violations(&gh);
}

#[test]
fn injected_failures_answer_the_next_matching_requests() {
    let (gh, client) = fake();
    gh.fail_next("POST", "/repos/*/statuses/*", 2, Failure::Status(502));
    assert_eq!(
        client
            .post(&status_path(), json!({"state": "success"}))
            .status,
        502
    );
    assert_eq!(
        client.get("/user").status,
        200,
        "another path is not failed"
    );
    assert_eq!(
        client
            .post(&status_path(), json!({"state": "success"}))
            .status,
        502
    );
    assert_eq!(
        client
            .post(&status_path(), json!({"state": "success"}))
            .status,
        201
    );
    assert_eq!(gh.statuses(REPO, SHA).len(), 1);

    gh.fail_next("*", "/user", 1, Failure::NotFound);
    assert_eq!(client.get("/user").status, 404);

    gh.fail_next(
        "GET",
        "/user",
        1,
        Failure::RateLimit {
            reset_in: Duration::from_secs(120),
            secondary: false,
        },
    );
    let limited = client.get("/user");
    assert_eq!(limited.status, 403);
    assert_eq!(limited.header("x-ratelimit-remaining"), Some("0"));
    let reset: i64 = limited
        .header("x-ratelimit-reset")
        .unwrap()
        .parse()
        .unwrap();
    assert!((reset - now() - 120).abs() <= 2, "reset {reset}");

    gh.fail_next(
        "GET",
        "/user",
        1,
        Failure::RateLimit {
            reset_in: Duration::from_secs(30),
            secondary: true,
        },
    );
    let secondary = client.get("/user");
    assert_eq!(secondary.status, 403);
    assert_eq!(secondary.header("retry-after"), Some("30"));
    assert!(secondary.body["message"]
        .as_str()
        .unwrap()
        .contains("secondary rate limit"));
    assert_eq!(client.get("/user").status, 200);

    let statuses: Vec<u16> = gh.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [502, 200, 502, 201, 404, 403, 403, 200]);
    assert_no_violations(&gh);
}

#[test]
fn down_answers_nothing_until_up_again() {
    use std::io::{Read, Write};
    let (gh, client) = fake();
    assert_eq!(client.get("/user").status, 200);
    gh.down(true);
    let error = client.send("GET", "/user", None).map(|a| a.status);
    assert!(error.is_err(), "answered while down: {error:?}");
    // A new connection is closed without a byte of answer.
    let mut raw = std::net::TcpStream::connect(gh.url().trim_start_matches("http://")).unwrap();
    let _ = raw.write_all(b"GET /user HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut answer = Vec::new();
    let _ = raw.read_to_end(&mut answer);
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    gh.down(false);
    assert_eq!(client.get("/user").status, 200);
    assert_eq!(gh.requests().len(), 2);
}

#[test]
fn a_spent_rate_budget_gets_403_until_it_resets() {
    let (gh, client) = fake();
    gh.set_rate_limit(1, Duration::from_secs(60));
    let last = client.get("/user");
    assert_eq!(last.status, 200);
    assert_eq!(last.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(last.header("x-ratelimit-used"), Some("5000"));
    let refused = client.get("/user");
    assert_eq!(refused.status, 403);
    assert!(refused.body["message"]
        .as_str()
        .unwrap()
        .starts_with("API rate limit exceeded"));
    gh.advance(Duration::from_secs(61));
    let again = client.get("/user");
    assert_eq!(again.status, 200);
    assert_eq!(again.header("x-ratelimit-remaining"), Some("4999"));
    assert_no_violations(&gh);
}

#[test]
fn an_app_gets_expiring_installation_tokens_for_its_organizations() {
    let gh = FakeGitHub::start();
    gh.add_commit(REPO, SHA);
    gh.add_commit("elsewhere/repo", SHA);
    gh.app(4242, &app_public_key_pem());
    let installation = gh.install_app("bosun-ci");
    let jwt = app_jwt(4242, &app_private_key_pem(), now() - 60, now() + 540);
    let app = Client::new(&gh, &jwt);
    assert_eq!(app.get("/app").body["id"], 4242);
    let found = app.get("/orgs/bosun-ci/installation");
    assert_eq!(found.body["id"], installation);
    assert_eq!(
        app.get(&format!("/repos/{REPO}/installation")).body["id"],
        installation
    );
    assert_eq!(app.get("/orgs/nobody/installation").status, 404);
    let minted = app.post(
        &format!("/app/installations/{installation}/access_tokens"),
        json!({}),
    );
    assert_eq!(minted.status, 201, "{}", minted.body);
    let token = minted.body["token"].as_str().unwrap().to_owned();
    assert_no_violations(&gh);

    let bot = Client::new(&gh, &token);
    let status = bot.post(
        &status_path(),
        json!({"state": "success", "context": "unit"}),
    );
    assert_eq!(status.status, 201);
    assert_eq!(gh.statuses(REPO, SHA)[0].creator, "bosun[bot]");
    assert_eq!(bot.get("/user").status, 403, "an installation is no user");
    assert_eq!(
        bot.post(
            &format!("/repos/elsewhere/repo/statuses/{SHA}"),
            json!({"state": "success"})
        )
        .status,
        404
    );
    assert_eq!(bot.get("/app").status, 401, "a token is no JWT");
    assert_eq!(
        app.get(&format!("/repos/{REPO}/commits/{SHA}/status"))
            .status,
        403,
        "a JWT is no token"
    );
    assert_eq!(gh.violations().len(), 4, "{:#?}", gh.violations());

    gh.advance(Duration::from_secs(3600));
    let expired = bot.post(
        &status_path(),
        json!({"state": "success", "context": "unit"}),
    );
    assert_eq!(expired.status, 401);
    assert_eq!(expired.body["message"], "Bad credentials");
    assert_eq!(app.get("/app").status, 401, "the JWT expired too");
}

#[test]
fn app_jwts_are_checked_as_github_checks_them() {
    let gh = FakeGitHub::start();
    gh.app(4242, &app_public_key_pem());
    let key = app_private_key_pem();
    let message = |jwt: String| Client::new(&gh, &jwt).get("/app").body["message"].clone();
    assert_eq!(
        message(app_jwt(4242, &key, now() - 60, now() + 600)),
        "'Expiration time' claim ('exp') is too far in the future"
    );
    assert!(message(app_jwt(4242, &key, now() - 700, now() - 100))
        .as_str()
        .unwrap()
        .starts_with("'Expiration time' claim ('exp') must be"));
    assert!(message(app_jwt(4242, &key, now() + 300, now() + 600))
        .as_str()
        .unwrap()
        .starts_with("'Issued at' claim ('iat')"));
    assert_eq!(
        message(app_jwt(7, &key, now() - 60, now() + 300)),
        "A JSON web token could not be decoded"
    );
    let mut forged = app_jwt(4242, &key, now() - 60, now() + 300);
    forged.truncate(forged.len() - 4);
    forged.push_str("AAAA");
    assert_eq!(message(forged), "A JSON web token could not be decoded");
    assert_eq!(gh.violations().len(), 5);
}

#[test]
fn comments_are_kept_edited_and_deleted() {
    let (gh, client) = fake();
    gh.add_pull(
        REPO,
        PullSpec {
            number: 7,
            ..PullSpec::default()
        },
    );
    let path = format!("/repos/{REPO}/issues/7/comments");
    let created = client.post(&path, json!({"body": "<!-- test report -->\nfailed"}));
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_u64().unwrap();
    let edited = client.call(
        "PATCH",
        &format!("/repos/{REPO}/issues/comments/{id}"),
        Some(json!({"body": "passed"})),
    );
    assert_eq!(edited.body["body"], "passed");
    assert_eq!(gh.comments(REPO, 7)[0].body, "passed");
    let listed = client.get(&path);
    assert_eq!(listed.body.as_array().unwrap().len(), 1);
    let deleted = client.call(
        "DELETE",
        &format!("/repos/{REPO}/issues/comments/{id}"),
        None,
    );
    assert_eq!(deleted.status, 204);
    assert!(gh.comments(REPO, 7).is_empty());
    assert_eq!(
        client
            .call(
                "DELETE",
                &format!("/repos/{REPO}/issues/comments/{id}"),
                None
            )
            .status,
        404
    );
    assert_eq!(
        client
            .post(
                &format!("/repos/{REPO}/issues/8/comments"),
                json!({"body": "x"})
            )
            .status,
        404
    );
    assert_no_violations(&gh);

    let ok = client.post(&path, json!({"body": "x".repeat(65536)}));
    assert_eq!(ok.status, 201);
    let long = client.post(&path, json!({"body": "x".repeat(65537)}));
    assert_eq!(long.status, 422);
    assert_eq!(
        long.body["errors"][0]["message"],
        "body is too long (maximum is 65536 characters)"
    );
    assert_one_violation(&gh, "comment body");
}

#[test]
fn labels_are_added_listed_and_removed() {
    let (gh, client) = fake();
    gh.add_pull(
        REPO,
        PullSpec {
            number: 3,
            labels: vec!["lgtm".into()],
            ..PullSpec::default()
        },
    );
    let path = format!("/repos/{REPO}/issues/3/labels");
    let added = client.post(&path, json!({"labels": ["needs-rebase", {"name": "LGTM"}]}));
    assert_eq!(added.status, 200, "{}", added.body);
    assert_eq!(gh.labels(REPO, 3), ["lgtm", "needs-rebase"]);
    let removed = client.call("DELETE", &format!("{path}/needs-rebase"), None);
    assert_eq!(removed.body.as_array().unwrap().len(), 1);
    let absent = client.call("DELETE", &format!("{path}/do-not-merge%2Fhold"), None);
    assert_eq!(absent.status, 404);
    assert_eq!(absent.body["message"], "Label does not exist");
    assert_eq!(client.get(&path).body[0]["name"], "lgtm");
    assert_no_violations(&gh);
    // The description takes `{"labels": [...]}` only.
    assert_eq!(client.post(&path, json!(["bare"])).status, 422);
    let long = client.post(&path, json!({"labels": ["l".repeat(51)]}));
    assert_eq!(long.status, 422);
    assert_eq!(gh.violations().len(), 2);
}

/// Every operation of the description called, its answers (success and
/// refusal) checked against the description's response schemas here, on
/// what came over the wire.
#[test]
fn every_answer_fits_githubs_response_schemas() {
    let gh = FakeGitHub::start();
    gh.app(4242, &app_public_key_pem());
    let installation = gh.install_app("bosun-ci");
    gh.add_commit(REPO, SHA);
    gh.set_member("bosun-ci", "alice");
    gh.set_collaborator(REPO, "bob");
    let pull = PullSpec {
        number: 5,
        author: "alice".into(),
        labels: vec!["lgtm".into()],
        mergeable: None,
        ..PullSpec::default()
    };
    gh.add_pull(REPO, pull.clone());
    gh.add_pull(
        REPO,
        PullSpec {
            number: 6,
            draft: true,
            merged: true,
            closed: true,
            body: Some("text".into()),
            ..pull
        },
    );
    let user = Client::new(&gh, &gh.token());
    let app = Client::new(
        &gh,
        &app_jwt(4242, &app_private_key_pem(), now() - 60, now() + 300),
    );
    let r = format!("/repos/{REPO}");
    let mut exercised = BTreeSet::new();
    let mut check = |client: &Client,
                     method: &str,
                     template: &str,
                     path: String,
                     body: Option<Value>,
                     expect: u16| {
        let answer = client.call(method, &path, body);
        assert_eq!(answer.status, expect, "{method} {path}: {}", answer.body);
        let errors = if answer.body.is_null() {
            Vec::new()
        } else {
            response_errors(method, template, answer.status, &answer.body)
        };
        assert!(
            errors.is_empty(),
            "{method} {path} {}: {errors:#?}",
            answer.status
        );
        exercised.insert((method.to_owned(), template.to_owned()));
        answer
    };
    let statuses = "/repos/{owner}/{repo}/statuses/{sha}";
    check(
        &user,
        "POST",
        statuses,
        format!("{r}/statuses/{SHA}"),
        Some(json!({"state": "failure", "context": "unit", "description": "Job failed."})),
        201,
    );
    check(
        &user,
        "POST",
        statuses,
        format!("{r}/statuses/{SHA}"),
        Some(json!({"state": "bad"})),
        422,
    );
    check(
        &user,
        "POST",
        statuses,
        format!("{r}/statuses/{}", "9".repeat(40)),
        Some(json!({"state": "success"})),
        422,
    );
    check(
        &user,
        "GET",
        "/repos/{owner}/{repo}/commits/{ref}/status",
        format!("{r}/commits/{SHA}/status"),
        None,
        200,
    );
    check(
        &user,
        "GET",
        "/repos/{owner}/{repo}/commits/{ref}/status",
        format!("{r}/commits/nope/status"),
        None,
        404,
    );
    check(
        &user,
        "GET",
        "/repos/{owner}/{repo}/commits/{ref}/statuses",
        format!("{r}/commits/{SHA}/statuses"),
        None,
        200,
    );
    let comments = "/repos/{owner}/{repo}/issues/{issue_number}/comments";
    let created = check(
        &user,
        "POST",
        comments,
        format!("{r}/issues/5/comments"),
        Some(json!({"body": "hello"})),
        201,
    );
    check(
        &user,
        "POST",
        comments,
        format!("{r}/issues/5/comments"),
        Some(json!({})),
        422,
    );
    check(
        &user,
        "GET",
        comments,
        format!("{r}/issues/5/comments?since=2000-01-01T00:00:00Z"),
        None,
        200,
    );
    check(
        &user,
        "GET",
        comments,
        format!("{r}/issues/99/comments"),
        None,
        404,
    );
    let comment = "/repos/{owner}/{repo}/issues/comments/{comment_id}";
    let id = &created.body["id"];
    check(
        &user,
        "PATCH",
        comment,
        format!("{r}/issues/comments/{id}"),
        Some(json!({"body": "edited"})),
        200,
    );
    check(
        &user,
        "DELETE",
        comment,
        format!("{r}/issues/comments/{id}"),
        None,
        204,
    );
    let labels = "/repos/{owner}/{repo}/issues/{issue_number}/labels";
    check(
        &user,
        "GET",
        labels,
        format!("{r}/issues/5/labels"),
        None,
        200,
    );
    check(
        &user,
        "POST",
        labels,
        format!("{r}/issues/5/labels"),
        Some(json!({"labels": ["approved"]})),
        200,
    );
    check(
        &user,
        "POST",
        labels,
        format!("{r}/issues/5/labels"),
        Some(json!({"labels": []})),
        422,
    );
    let label = "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}";
    check(
        &user,
        "DELETE",
        label,
        format!("{r}/issues/5/labels/approved"),
        None,
        200,
    );
    check(
        &user,
        "DELETE",
        label,
        format!("{r}/issues/5/labels/approved"),
        None,
        404,
    );
    let pulls = "/repos/{owner}/{repo}/pulls/{pull_number}";
    let got = check(&user, "GET", pulls, format!("{r}/pulls/5"), None, 200);
    assert_eq!(got.body["head"]["sha"], "1".repeat(40));
    assert_eq!(got.body["author_association"], "MEMBER");
    assert_eq!(got.body["labels"][0]["name"], "lgtm");
    check(&user, "GET", pulls, format!("{r}/pulls/6"), None, 200);
    check(&user, "GET", pulls, format!("{r}/pulls/404"), None, 404);
    let member = "/orgs/{org}/members/{username}";
    check(
        &user,
        "GET",
        member,
        "/orgs/bosun-ci/members/alice".into(),
        None,
        204,
    );
    check(
        &user,
        "GET",
        member,
        "/orgs/bosun-ci/members/mallory".into(),
        None,
        404,
    );
    let collaborator = "/repos/{owner}/{repo}/collaborators/{username}";
    check(
        &user,
        "GET",
        collaborator,
        format!("{r}/collaborators/bob"),
        None,
        204,
    );
    check(
        &user,
        "GET",
        collaborator,
        format!("{r}/collaborators/mallory"),
        None,
        404,
    );
    check(&user, "GET", "/user", "/user".into(), None, 200);
    check(&user, "GET", "/app", "/app".into(), None, 401);
    check(&app, "GET", "/app", "/app".into(), None, 200);
    check(
        &app,
        "GET",
        "/orgs/{org}/installation",
        "/orgs/bosun-ci/installation".into(),
        None,
        200,
    );
    check(
        &app,
        "GET",
        "/repos/{owner}/{repo}/installation",
        format!("{r}/installation"),
        None,
        200,
    );
    check(
        &app,
        "GET",
        "/repos/{owner}/{repo}/installation",
        "/repos/nobody/x/installation".into(),
        None,
        404,
    );
    let tokens = "/app/installations/{installation_id}/access_tokens";
    check(
        &app,
        "POST",
        tokens,
        format!("/app/installations/{installation}/access_tokens"),
        Some(json!({"permissions": {"statuses": "write"}})),
        201,
    );
    check(
        &app,
        "POST",
        tokens,
        "/app/installations/1/access_tokens".into(),
        None,
        404,
    );
    let all: BTreeSet<(String, String)> = operations().into_iter().collect();
    assert_eq!(
        exercised, all,
        "every operation of the description exercised"
    );
    // The refusals above were meant; the fake found nothing wrong with its
    // own answers.
    assert!(
        gh.violations()
            .iter()
            .all(|v| !v.contains("the fake's answer")),
        "{:#?}",
        gh.violations()
    );
}
