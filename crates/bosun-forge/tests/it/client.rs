//! The forge client against a small HTTP server on 127.0.0.1 (a thread
//! over a `TcpListener`, one request per connection) that records every
//! request and answers as a test says: paths, methods and bodies sent,
//! pagination, rate limits, errors, token files, GitHub App tokens, Gitea.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bosun_forge::client::{Auth, Client, ClientConfig, ErrorKind, Flavour, NewStatus};
use serde_json::{json, Value};

/// A request as the server read it.
#[derive(Debug, Clone)]
struct Req {
    method: String,
    /// Path and query.
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Req {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

/// An answer: status, headers, body.
struct Reply(u16, Vec<(String, String)>, String);

fn ok(status: u16, body: Value) -> Reply {
    Reply(status, vec![], body.to_string())
}

fn empty(status: u16) -> Reply {
    Reply(status, vec![], String::new())
}

type Handler = dyn Fn(&Req, &str) -> Reply + Send + Sync;

/// The server: its base URL and the requests it got.
struct Fake {
    base: String,
    seen: Arc<Mutex<Vec<Req>>>,
}

impl Fake {
    /// Serves `handler` (given the request and the server's base URL).
    fn serve(handler: impl Fn(&Req, &str) -> Reply + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let (b, s) = (base.clone(), seen.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    continue;
                }
                let mut parts = line.split_whitespace();
                let (method, path) = (
                    parts.next().unwrap().to_string(),
                    parts.next().unwrap().to_string(),
                );
                let mut headers = Vec::new();
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    let h = h.trim_end();
                    if h.is_empty() {
                        break;
                    }
                    let (k, v) = h.split_once(':').unwrap();
                    headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
                let len = headers
                    .iter()
                    .find(|(k, _)| k == "content-length")
                    .map_or(0, |(_, v)| v.parse().unwrap());
                let mut body = vec![0; len];
                reader.read_exact(&mut body).unwrap();
                let req = Req {
                    method,
                    path,
                    headers,
                    body: String::from_utf8(body).unwrap(),
                };
                let Reply(status, hs, body) = handler(&req, &b);
                s.lock().unwrap().push(req);
                let mut out = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                    body.len()
                );
                if !body.is_empty() {
                    out.push_str("Content-Type: application/json\r\n");
                }
                for (k, v) in hs {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                out.push_str(&body);
                let _ = conn.write_all(out.as_bytes());
            }
        });
        Fake { base, seen }
    }

    fn seen(&self) -> Vec<Req> {
        self.seen.lock().unwrap().clone()
    }

    /// Method and path of every request so far.
    fn calls(&self) -> Vec<String> {
        self.seen()
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }

    fn client(&self, auth: Auth) -> Client {
        Client::new(ClientConfig {
            endpoint: self.base.clone(),
            flavour: Flavour::GitHub,
            auth,
            user_agent: "bosun-test".into(),
        })
        .unwrap()
    }
}

fn token_file(dir: &Path, token: &str) -> Auth {
    let path = dir.join("token");
    std::fs::write(&path, format!("{token}\n")).unwrap();
    Auth::Token { path }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn github_calls_send_their_paths_methods_and_bodies() {
    let fake = Fake::serve(|r, _| match (r.method.as_str(), r.path.as_str()) {
        ("POST", "/repos/acme/widgets/statuses/abc123") => ok(201, json!({"id": 1})),
        ("POST", "/repos/acme/widgets/issues/7/comments") => ok(201, json!({"id": 9001})),
        ("PATCH", "/repos/acme/widgets/issues/comments/9001") => ok(200, json!({"id": 9001})),
        ("DELETE", "/repos/acme/widgets/issues/comments/9001") => empty(204),
        ("DELETE", "/repos/acme/widgets/issues/comments/9002") => {
            ok(404, json!({"message": "Not Found"}))
        }
        ("POST", "/repos/acme/widgets/issues/7/labels") => ok(200, json!([{"name": "lgtm"}])),
        ("DELETE", "/repos/acme/widgets/issues/7/labels/needs%20rebase") => {
            ok(404, json!({"message": "Label does not exist"}))
        }
        ("DELETE", "/repos/acme/widgets/issues/7/labels/lgtm") => ok(200, json!([])),
        ("GET", "/repos/acme/widgets/issues/7/labels?per_page=100") => ok(
            200,
            json!([{"id": 1, "name": "lgtm"}, {"id": 2, "name": "ok-to-test"}]),
        ),
        ("GET", "/repos/acme/widgets/pulls/7") => ok(
            200,
            json!({
                "number": 7, "state": "open", "title": "Fix it", "draft": true, "merged": false,
                "mergeable": null, "html_url": "https://github.com/acme/widgets/pull/7",
                "user": {"login": "alice"}, "labels": [{"name": "lgtm"}],
                "head": {"sha": "abc123", "ref": "fix"}, "base": {"sha": "def456", "ref": "main"}
            }),
        ),
        ("GET", "/orgs/acme/members/alice") => empty(204),
        ("GET", "/orgs/acme/members/mallory") => empty(404),
        ("GET", "/orgs/acme/members/bob") => Reply(
            302,
            vec![("Location".into(), "/orgs/acme/public_members/bob".into())],
            String::new(),
        ),
        ("GET", "/orgs/acme/public_members/bob") => empty(204),
        ("GET", "/repos/acme/widgets/collaborators/alice") => empty(204),
        ("GET", "/repos/acme/widgets/collaborators/mallory") => empty(404),
        ("GET", "/user") => ok(200, json!({"login": "bosun-bot"})),
        _ => ok(
            500,
            json!({"message": format!("unexpected {} {}", r.method, r.path)}),
        ),
    });
    let dir = tempfile::tempdir().unwrap();
    let c = fake.client(token_file(dir.path(), "t1"));
    let status = NewStatus {
        state: "failure".into(),
        target_url: "https://bosun.example.com/runs/1".into(),
        description: "Job failed.".into(),
        context: "pull-unit".into(),
    };
    c.create_status("acme/widgets", "abc123", &status).unwrap();
    assert_eq!(c.create_comment("acme/widgets", 7, "hello").unwrap(), 9001);
    c.edit_comment("acme/widgets", 9001, "hello again").unwrap();
    c.delete_comment("acme/widgets", 9001).unwrap();
    c.delete_comment("acme/widgets", 9002).unwrap();
    c.add_label("acme/widgets", 7, "lgtm").unwrap();
    c.remove_label("acme/widgets", 7, "needs rebase").unwrap();
    c.remove_label("acme/widgets", 7, "lgtm").unwrap();
    assert_eq!(
        c.issue_labels("acme/widgets", 7).unwrap(),
        ["lgtm", "ok-to-test"]
    );
    let pr = c.pull_request("acme/widgets", 7).unwrap();
    assert_eq!(
        (
            pr.number,
            pr.author.as_str(),
            pr.head_sha.as_str(),
            pr.head_ref.as_str()
        ),
        (7, "alice", "abc123", "fix")
    );
    assert_eq!(
        (pr.base_sha.as_str(), pr.base_ref.as_str()),
        ("def456", "main")
    );
    assert_eq!(
        (pr.draft, pr.merged, pr.open, pr.mergeable),
        (true, false, true, None)
    );
    assert_eq!(
        (pr.title.as_str(), pr.labels.clone()),
        ("Fix it", vec!["lgtm".to_string()])
    );
    assert_eq!(pr.html_url, "https://github.com/acme/widgets/pull/7");
    assert!(c.is_member("acme", "alice").unwrap());
    assert!(!c.is_member("acme", "mallory").unwrap());
    assert!(
        c.is_member("acme", "bob").unwrap(),
        "302: the public membership"
    );
    assert!(
        c.is_member("alice", "alice").unwrap(),
        "an account is its own org's member"
    );
    assert!(c.is_collaborator("acme/widgets", "alice").unwrap());
    assert!(!c.is_collaborator("acme/widgets", "mallory").unwrap());
    assert_eq!(c.bot_login().unwrap(), "bosun-bot");
    assert_eq!(c.bot_login().unwrap(), "bosun-bot");

    let seen = fake.seen();
    assert_eq!(
        fake.calls(),
        [
            "POST /repos/acme/widgets/statuses/abc123",
            "POST /repos/acme/widgets/issues/7/comments",
            "PATCH /repos/acme/widgets/issues/comments/9001",
            "DELETE /repos/acme/widgets/issues/comments/9001",
            "DELETE /repos/acme/widgets/issues/comments/9002",
            "POST /repos/acme/widgets/issues/7/labels",
            "DELETE /repos/acme/widgets/issues/7/labels/needs%20rebase",
            "DELETE /repos/acme/widgets/issues/7/labels/lgtm",
            "GET /repos/acme/widgets/issues/7/labels?per_page=100",
            "GET /repos/acme/widgets/pulls/7",
            "GET /orgs/acme/members/alice",
            "GET /orgs/acme/members/mallory",
            "GET /orgs/acme/members/bob",
            "GET /orgs/acme/public_members/bob",
            "GET /repos/acme/widgets/collaborators/alice",
            "GET /repos/acme/widgets/collaborators/mallory",
            "GET /user",
        ]
    );
    assert_eq!(
        seen[0].json(),
        json!({"state": "failure", "target_url": "https://bosun.example.com/runs/1",
               "description": "Job failed.", "context": "pull-unit"})
    );
    assert_eq!(seen[1].json(), json!({"body": "hello"}));
    assert_eq!(seen[2].json(), json!({"body": "hello again"}));
    assert_eq!(seen[5].json(), json!({"labels": ["lgtm"]}));
    for r in &seen {
        assert_eq!(r.header("authorization"), Some("Bearer t1"), "{}", r.path);
        assert_eq!(r.header("user-agent"), Some("bosun-test"));
        assert_eq!(r.header("accept"), Some("application/vnd.github+json"));
        assert_eq!(r.header("x-github-api-version"), Some("2022-11-28"));
    }
    // No target URL: the field is left out.
    c.create_status(
        "acme/widgets",
        "abc123",
        &NewStatus {
            target_url: String::new(),
            ..status
        },
    )
    .unwrap();
    assert_eq!(fake.seen().last().unwrap().json().get("target_url"), None);
}

#[test]
fn listings_follow_link_headers_on_the_endpoint_only() {
    let fake = Fake::serve(|r, base| {
        let link = |n: u32| {
            vec![("Link".to_string(), format!("<{base}/repositories/1/issues/7/comments?page={n}>; rel=\"next\", <{base}/repositories/1/issues/7/comments?page=3>; rel=\"last\""))]
        };
        let comment =
            |id: u64| json!({"id": id, "user": {"login": "bosun-bot"}, "body": format!("c{id}")});
        match r.path.as_str() {
            "/repos/acme/widgets/issues/7/comments?per_page=100" => Reply(200, link(2), json!([comment(1), comment(2)]).to_string()),
            "/repositories/1/issues/7/comments?page=2" => Reply(200, link(3), json!([comment(3)]).to_string()),
            "/repositories/1/issues/7/comments?page=3" => ok(200, json!([comment(4)])),
            "/repos/acme/widgets/commits/abc/status?per_page=100" => Reply(
                200,
                vec![("Link".into(), format!("<{base}/repos/acme/widgets/commits/abc/status?per_page=100&page=2>; rel=\"next\""))],
                json!({"state": "pending", "statuses": [{"context": "a", "state": "success"}]}).to_string(),
            ),
            "/repos/acme/widgets/commits/abc/status?per_page=100&page=2" => ok(200, json!({"state": "pending", "statuses": [{"context": "b", "state": "pending"}]})),
            "/repos/acme/widgets/issues/8/comments?per_page=100" => Reply(
                200,
                vec![("Link".into(), "<https://elsewhere.example.com/x?page=2>; rel=\"next\"".into())],
                "[]".into(),
            ),
            _ => empty(500),
        }
    });
    let c = fake.client(Auth::None);
    let comments = c.list_issue_comments("acme/widgets", 7).unwrap();
    let ids: Vec<u64> = comments.iter().map(|c| c.id).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    assert_eq!(
        (comments[3].user.as_str(), comments[3].body.as_str()),
        ("bosun-bot", "c4")
    );
    assert_eq!(
        c.combined_statuses("acme/widgets", "abc").unwrap(),
        [
            ("a".to_string(), "success".to_string()),
            ("b".to_string(), "pending".to_string())
        ]
    );
    let e = c.list_issue_comments("acme/widgets", 8).unwrap_err();
    assert!(e.message.contains("is not under"), "{e}");
    assert_eq!(fake.seen().len(), 6, "no request left the endpoint");
    assert!(fake
        .seen()
        .iter()
        .all(|r| r.header("authorization").is_none()));
}

#[test]
fn rate_limit_headers_say_when_to_retry() {
    let reset = now_secs() + 120;
    let fake = Fake::serve(move |r, _| {
        let limit = |remaining: &str| {
            vec![
                ("X-RateLimit-Limit".to_string(), "5000".to_string()),
                ("X-RateLimit-Remaining".to_string(), remaining.to_string()),
                ("X-RateLimit-Reset".to_string(), reset.to_string()),
            ]
        };
        match r.path.as_str() {
            "/repos/acme/widgets/pulls/1" => Reply(
                403,
                limit("0"),
                json!({"message": "API rate limit exceeded for user ID 1."}).to_string(),
            ),
            "/repos/acme/widgets/pulls/2" => Reply(
                429,
                vec![("Retry-After".into(), "30".into())],
                String::new(),
            ),
            "/repos/acme/widgets/pulls/3" => ok(
                403,
                json!({"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}),
            ),
            "/repos/acme/widgets/pulls/4" => {
                Reply(200, limit("4999"), json!({"number": 4}).to_string())
            }
            "/repos/acme/widgets/pulls/5" => {
                Reply(200, limit("0"), json!({"number": 5}).to_string())
            }
            _ => empty(500),
        }
    });
    let c = fake.client(Auth::None);
    assert_eq!(c.rate_limited_until(), None);
    let e = c.pull_request("acme/widgets", 1).unwrap_err();
    assert_eq!((e.status, e.kind), (Some(403), ErrorKind::Retry));
    assert_eq!(e.message, "API rate limit exceeded for user ID 1.");
    let wait = e.retry_after.unwrap();
    assert!(
        wait > Duration::from_secs(110) && wait <= Duration::from_secs(122),
        "{wait:?}"
    );
    let until = c.rate_limited_until().expect("limited");
    assert!(until > SystemTime::now() + Duration::from_secs(100));

    let e = c.pull_request("acme/widgets", 2).unwrap_err();
    assert_eq!(
        (e.status, e.kind, e.retry_after),
        (Some(429), ErrorKind::Retry, Some(Duration::from_secs(30)))
    );
    let e = c.pull_request("acme/widgets", 3).unwrap_err();
    assert_eq!(
        (e.kind, e.retry_after),
        (ErrorKind::Retry, Some(Duration::from_secs(60)))
    );
    assert!(c.rate_limited_until().is_some());
    // Requests left again: no longer limited.
    c.pull_request("acme/widgets", 4).unwrap();
    assert_eq!(c.rate_limited_until(), None);
    // A success spending the last request: limited until the reset.
    c.pull_request("acme/widgets", 5).unwrap();
    assert!(c.rate_limited_until().is_some());
}

#[test]
fn not_found_and_unprocessable_are_permanent_server_errors_are_retried() {
    let fake = Fake::serve(|r, _| match r.path.as_str() {
        "/repos/acme/widgets/statuses/gone" => ok(
            422,
            json!({"message": "No commit found for SHA: gone", "documentation_url": "https://docs.github.com/rest"}),
        ),
        "/repos/acme/widgets/statuses/full" => ok(
            422,
            json!({"message": "Validation Failed", "errors": [{"message": "This SHA and context has reached the maximum number of statuses."}]}),
        ),
        "/repos/acme/widgets/pulls/404" => ok(404, json!({"message": "Not Found"})),
        "/repos/acme/widgets/pulls/500" => Reply(500, vec![], "oops".into()),
        "/repos/acme/widgets/pulls/502" => Reply(
            502,
            vec![("Retry-After".into(), "5".into())],
            "<html>bad gateway</html>".into(),
        ),
        "/repos/acme/widgets/pulls/401" => ok(401, json!({"message": "Bad credentials"})),
        _ => empty(500),
    });
    let c = fake.client(Auth::None);
    let s = NewStatus {
        state: "success".into(),
        target_url: String::new(),
        description: "d".into(),
        context: "c".into(),
    };
    let e = c.create_status("acme/widgets", "gone", &s).unwrap_err();
    assert_eq!((e.status, e.kind), (Some(422), ErrorKind::Permanent));
    assert!(e.status_is_unreportable());
    let e = c.create_status("acme/widgets", "full", &s).unwrap_err();
    assert_eq!((e.status, e.kind), (Some(422), ErrorKind::Permanent));
    let e = c.pull_request("acme/widgets", 404).unwrap_err();
    assert_eq!(
        (e.status, e.kind, e.message.as_str()),
        (Some(404), ErrorKind::Permanent, "Not Found")
    );
    let e = c.pull_request("acme/widgets", 500).unwrap_err();
    assert_eq!(
        (e.status, e.kind, e.message.as_str()),
        (Some(500), ErrorKind::Retry, "oops")
    );
    let e = c.pull_request("acme/widgets", 502).unwrap_err();
    assert_eq!(
        (e.kind, e.retry_after),
        (ErrorKind::Retry, Some(Duration::from_secs(5)))
    );
    let e = c.pull_request("acme/widgets", 401).unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::Retry, "Bad credentials")
    );

    // Nothing listening: no status, retry.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = Client::new(ClientConfig {
        endpoint: format!("http://127.0.0.1:{port}"),
        ..ClientConfig::default()
    })
    .unwrap();
    let e = c.pull_request("acme/widgets", 1).unwrap_err();
    assert_eq!((e.status, e.kind), (None, ErrorKind::Retry));
}

#[test]
fn the_token_file_is_read_again_when_it_changes() {
    let fake = Fake::serve(|_, _| ok(200, json!({"login": "x", "number": 1})));
    let dir = tempfile::tempdir().unwrap();
    let auth = token_file(dir.path(), "first");
    let Auth::Token { path } = &auth else {
        unreachable!()
    };
    let path = path.clone();
    let c = fake.client(auth);
    c.pull_request("acme/widgets", 1).unwrap();
    std::fs::write(&path, "  second-token \n").unwrap();
    c.pull_request("acme/widgets", 1).unwrap();
    c.pull_request("acme/widgets", 1).unwrap();
    let auths: Vec<_> = fake
        .seen()
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        auths,
        ["Bearer first", "Bearer second-token", "Bearer second-token"]
    );
    std::fs::remove_file(&path).unwrap();
    let e = c.pull_request("acme/widgets", 1).unwrap_err();
    assert_eq!((e.status, e.kind), (None, ErrorKind::Retry));
    assert_eq!(fake.seen().len(), 3, "no request without the token");
}

/// A fresh RSA key pair in PEM (PKCS#1 private key, as GitHub gives Apps),
/// made by the `openssl` command.
fn rsa_keys(dir: &Path) -> (std::path::PathBuf, Vec<u8>) {
    let key = dir.join("app.pem");
    let out = std::process::Command::new("openssl")
        .args(["genrsa", "-traditional", "-out"])
        .arg(&key)
        .arg("2048")
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = std::process::Command::new("openssl")
        .args(["rsa", "-pubout", "-in"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success());
    (key, out.stdout)
}

#[test]
fn github_app_signs_jwts_and_exchanges_installation_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = rsa_keys(dir.path());
    let decoding = jsonwebtoken::DecodingKey::from_rsa_pem(&public).unwrap();
    let exchanges = Arc::new(Mutex::new(0u32));
    let ex = exchanges.clone();
    let fake = Fake::serve(move |r, _| {
        let auth = r.header("authorization").unwrap_or_default().to_string();
        let jwt_ok = || {
            let Some(jwt) = auth.strip_prefix("Bearer ") else {
                return false;
            };
            let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
            v.set_issuer(&["42"]);
            v.set_required_spec_claims(&["exp", "iat", "iss"]);
            let Ok(t) = jsonwebtoken::decode::<Value>(jwt, &decoding, &v) else {
                return false;
            };
            let (iat, exp) = (
                t.claims["iat"].as_u64().unwrap(),
                t.claims["exp"].as_u64().unwrap(),
            );
            let now = now_secs();
            iat <= now - 30 && exp <= now + 600 && exp > now
        };
        let app_call = r.path.starts_with("/app") || r.path.ends_with("/installation");
        if app_call && !jwt_ok() {
            return ok(
                401,
                json!({"message": "A JSON web token could not be decoded"}),
            );
        }
        let expiring = |id: u64, secs: i64| {
            *ex.lock().unwrap() += 1;
            let n = *ex.lock().unwrap();
            let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(secs);
            ok(
                201,
                json!({"token": format!("ghs_{id}_{n}"), "expires_at": at.to_string()}),
            )
        };
        match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/app") => ok(200, json!({"id": 42, "slug": "bosun-app"})),
            ("GET", "/repos/acme/widgets/installation") => ok(200, json!({"id": 7})),
            ("GET", "/orgs/solo/installation") => ok(404, json!({"message": "Not Found"})),
            ("GET", "/users/solo/installation") => ok(200, json!({"id": 8})),
            ("GET", "/orgs/short/installation") => ok(200, json!({"id": 9})),
            ("POST", "/app/installations/7/access_tokens") => expiring(7, 3600),
            ("POST", "/app/installations/8/access_tokens") => expiring(8, 3600),
            // Expires within the refresh margin: replaced at every use.
            ("POST", "/app/installations/9/access_tokens") => expiring(9, 240),
            (_, p) if p.starts_with("/repos/acme/widgets/pulls/401") => {
                ok(401, json!({"message": "Bad credentials"}))
            }
            ("GET", _) if auth.starts_with("Bearer ghs_") => empty(204),
            _ => ok(500, json!({"message": "unexpected"})),
        }
    });
    let c = fake.client(Auth::App {
        app_id: "42".into(),
        private_key_path: key,
    });
    assert_eq!(c.bot_login().unwrap(), "bosun-app[bot]");
    assert!(c.is_collaborator("acme/widgets", "bob").unwrap());
    assert!(c.is_collaborator("acme/widgets", "carol").unwrap());
    assert!(
        c.is_member("acme", "bob").unwrap(),
        "the account's installation is reused"
    );
    assert!(c.is_member("solo", "bob").unwrap());
    assert!(c.is_member("short", "bob").unwrap());
    assert!(c.is_member("short", "carol").unwrap());
    // A refused token is forgotten: the next call gets a new one.
    assert_eq!(
        c.pull_request("acme/widgets", 401).unwrap_err().status,
        Some(401)
    );
    assert!(c.is_collaborator("acme/widgets", "dave").unwrap());

    let seen = fake.seen();
    let calls: Vec<String> = seen
        .iter()
        .map(|r| {
            format!(
                "{} {} {}",
                r.method,
                r.path,
                r.header("authorization")
                    .map_or("-", |a| if a.starts_with("Bearer ghs_") {
                        &a[7..]
                    } else {
                        "jwt"
                    })
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            "GET /app jwt",
            "GET /repos/acme/widgets/installation jwt",
            "POST /app/installations/7/access_tokens jwt",
            "GET /repos/acme/widgets/collaborators/bob ghs_7_1",
            "GET /repos/acme/widgets/collaborators/carol ghs_7_1",
            "GET /orgs/acme/members/bob ghs_7_1",
            "GET /orgs/solo/installation jwt",
            "GET /users/solo/installation jwt",
            "POST /app/installations/8/access_tokens jwt",
            "GET /orgs/solo/members/bob ghs_8_2",
            "GET /orgs/short/installation jwt",
            "POST /app/installations/9/access_tokens jwt",
            "GET /orgs/short/members/bob ghs_9_3",
            "POST /app/installations/9/access_tokens jwt",
            "GET /orgs/short/members/carol ghs_9_4",
            "GET /repos/acme/widgets/pulls/401 ghs_7_1",
            "POST /app/installations/7/access_tokens jwt",
            "GET /repos/acme/widgets/collaborators/dave ghs_7_5",
        ]
    );
}

#[test]
fn gitea_calls_go_under_api_v1() {
    let fake = Fake::serve(|r, base| {
        match (r.method.as_str(), r.path.as_str()) {
        ("POST", "/api/v1/repos/acme/widgets/statuses/abc") => ok(201, json!({"id": 1})),
        ("GET", "/api/v1/repos/acme/widgets/commits/abc/status?limit=50") => Reply(
            200,
            vec![("Link".into(), format!("<{base}/api/v1/repos/acme/widgets/commits/abc/status?limit=50&page=2>; rel=\"next\""))],
            json!({"state": "success", "statuses": [{"context": "pull-unit", "status": "success"}]}).to_string(),
        ),
        ("GET", "/api/v1/repos/acme/widgets/commits/abc/status?limit=50&page=2") => ok(200, json!({"statuses": [{"context": "pull-e2e", "status": "warning"}]})),
        ("GET", "/api/v1/repos/acme/widgets/issues/3/labels?limit=50") => ok(200, json!([{"id": 11, "name": "lgtm"}, {"id": 12, "name": "approved"}])),
        ("DELETE", "/api/v1/repos/acme/widgets/issues/3/labels/11") => empty(204),
        ("GET", "/api/v1/repos/acme/widgets/pulls/3") => ok(200, json!({
            "number": 3, "state": "closed", "merged": true, "mergeable": true, "title": "t",
            "html_url": "https://gitea.example.com/acme/widgets/pulls/3", "user": {"login": "alice"},
            "labels": [], "head": {"sha": "abc", "ref": "fix"}, "base": {"sha": "def", "ref": "main"}
        })),
        ("GET", "/api/v1/orgs/acme/members/bob") => Reply(302, vec![("Location".into(), format!("{base}/api/v1/orgs/acme/public_members/bob"))], String::new()),
        ("GET", "/api/v1/orgs/acme/public_members/bob") => empty(404),
        ("GET", "/api/v1/user") => ok(200, json!({"login": "bosun", "id": 1})),
        _ => ok(500, json!({"message": "unexpected"})),
    }
    });
    let dir = tempfile::tempdir().unwrap();
    let c = Client::new(ClientConfig {
        endpoint: format!("{}/api/v1/", fake.base),
        flavour: Flavour::Gitea,
        auth: token_file(dir.path(), "gt"),
        user_agent: "bosun-test".into(),
    })
    .unwrap();
    let s = NewStatus {
        state: "pending".into(),
        target_url: "https://bosun.example.com/runs/2".into(),
        description: "Job triggered.".into(),
        context: "pull-unit".into(),
    };
    c.create_status("acme/widgets", "abc", &s).unwrap();
    assert_eq!(
        c.combined_statuses("acme/widgets", "abc").unwrap(),
        [
            ("pull-unit".to_string(), "success".to_string()),
            ("pull-e2e".to_string(), "warning".to_string())
        ]
    );
    c.remove_label("acme/widgets", 3, "lgtm").unwrap();
    c.remove_label("acme/widgets", 3, "not-there").unwrap();
    let pr = c.pull_request("acme/widgets", 3).unwrap();
    assert_eq!(
        (pr.open, pr.merged, pr.draft, pr.mergeable),
        (false, true, false, Some(true))
    );
    assert!(!c.is_member("acme", "bob").unwrap());
    assert_eq!(c.bot_login().unwrap(), "bosun");
    assert_eq!(
        fake.calls(),
        [
            "POST /api/v1/repos/acme/widgets/statuses/abc",
            "GET /api/v1/repos/acme/widgets/commits/abc/status?limit=50",
            "GET /api/v1/repos/acme/widgets/commits/abc/status?limit=50&page=2",
            "GET /api/v1/repos/acme/widgets/issues/3/labels?limit=50",
            "DELETE /api/v1/repos/acme/widgets/issues/3/labels/11",
            "GET /api/v1/repos/acme/widgets/issues/3/labels?limit=50",
            "GET /api/v1/repos/acme/widgets/pulls/3",
            "GET /api/v1/orgs/acme/members/bob",
            "GET /api/v1/orgs/acme/public_members/bob",
            "GET /api/v1/user",
        ]
    );
    let seen = fake.seen();
    assert_eq!(seen[0].json()["state"], "pending");
    for r in &seen {
        assert_eq!(r.header("authorization"), Some("token gt"));
        assert_eq!(r.header("accept"), Some("application/json"));
        assert_eq!(r.header("x-github-api-version"), None);
    }
}
