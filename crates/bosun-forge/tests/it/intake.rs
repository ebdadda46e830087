//! Prow hook's checks, row by row with their status and exact body, the
//! body cap, each forge's headers, and what an accepted delivery is.

use bosun_forge::hook::intake::{ACCEPTED_TEXT, DEFAULT_MAX_BODY, REPLY_CONTENT_TYPE};
use bosun_forge::hook::secrets::github_signature;
use bosun_forge::hook::{Forge, Intake, Reply, Secrets};
use http::header::{CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use http::{HeaderMap, Method, StatusCode};

use crate::requests::{accepted, fixture, github_example_bytes, refusal, Request};

const PUSH: &str = "push-branch-created.json";
const PUSH_REPO: &str = "Codertocat/Hello-World";

const CONTENT_TYPE_TEXT: &str = "400 Bad Request: Hook only accepts content-type: \
     application/json - please reconfigure this hook on GitHub\n";

fn secrets() -> Secrets {
    Secrets::parse(b"'*': [{value: abc, created_at: 2020-10-02T15:00:00Z}]\n")
}

/// A GitHub push that passes every check.
fn push() -> Request {
    Request::github("push", github_example_bytes(PUSH), b"abc")
}

fn invalid(msg: &str) -> String {
    format!("403 Forbidden: Invalid X-Hub-Signature-256 - {msg}\n")
}

#[test]
fn each_of_prows_checks_answers_its_status_and_text() {
    let signature = github_signature(b"abc", &github_example_bytes(PUSH));
    let hex = signature.strip_prefix("sha256=").unwrap().to_owned();
    let rows: Vec<(&str, Request, u16, String)> = vec![
        (
            "1 GET",
            push().method(Method::GET),
            405,
            "405 Method not allowed\n".into(),
        ),
        (
            "1 PUT",
            push().method(Method::PUT),
            405,
            "405 Method not allowed\n".into(),
        ),
        (
            "2 no event",
            push().without("X-GitHub-Event"),
            400,
            "400 Bad Request: Missing X-GitHub-Event Header\n".into(),
        ),
        (
            "2 empty event",
            push().with("X-GitHub-Event", ""),
            400,
            "400 Bad Request: Missing X-GitHub-Event Header\n".into(),
        ),
        (
            "3 no delivery",
            push().without("X-GitHub-Delivery"),
            400,
            "400 Bad Request: Missing X-GitHub-Delivery Header\n".into(),
        ),
        (
            "4 no signature (the SHA-1 one, X-Hub-Signature, is there)",
            push().without("X-Hub-Signature-256"),
            403,
            "403 Forbidden: Missing X-Hub-Signature-256\n".into(),
        ),
        (
            "4 empty signature",
            push().with("X-Hub-Signature-256", ""),
            403,
            "403 Forbidden: Missing X-Hub-Signature-256\n".into(),
        ),
        (
            "5 no content type",
            push().without("Content-Type"),
            400,
            CONTENT_TYPE_TEXT.into(),
        ),
        (
            "5 a charset is not application/json",
            push().with("Content-Type", "application/json; charset=utf-8"),
            400,
            CONTENT_TYPE_TEXT.into(),
        ),
        (
            "5 a form",
            push().with("Content-Type", "application/x-www-form-urlencoded"),
            400,
            CONTENT_TYPE_TEXT.into(),
        ),
        (
            "5 case counts",
            push().with("Content-Type", "Application/JSON"),
            400,
            CONTENT_TYPE_TEXT.into(),
        ),
        (
            "6 declared over the cap",
            push().with("Content-Length", &(DEFAULT_MAX_BODY + 1).to_string()),
            413,
            format!(
                "413 Payload Too Large: Hook only accepts bodies of at most {DEFAULT_MAX_BODY} bytes\n"
            ),
        ),
        (
            "7 not JSON",
            Request::github_unchecked("push", b"{\"ref\": ".to_vec(), b"abc"),
            403,
            invalid("invalid payload"),
        ),
        (
            "7 JSON, but not an object",
            Request::github_unchecked("push", b"[]".to_vec(), b"abc"),
            403,
            invalid("invalid payload"),
        ),
        (
            "7 repository of another type",
            Request::github_unchecked("push", br#"{"repository": "o/r"}"#.to_vec(), b"abc"),
            403,
            invalid("invalid payload"),
        ),
        (
            "7 no sha256= prefix",
            push().with("X-Hub-Signature-256", &hex),
            403,
            invalid("invalid signature"),
        ),
        (
            "7 a sha1= signature",
            push().with("X-Hub-Signature-256", &format!("sha1={hex}")),
            403,
            invalid("invalid signature"),
        ),
        (
            "7 not hex",
            push().with("X-Hub-Signature-256", "sha256=not-hex"),
            403,
            invalid("invalid signature"),
        ),
        (
            "7 odd hex",
            push().with("X-Hub-Signature-256", &format!("{signature}0")),
            403,
            invalid("invalid signature"),
        ),
        (
            "7 signed with another token",
            Request::github("push", github_example_bytes(PUSH), b"abd"),
            403,
            invalid(&format!(
                "misconfigured webhook secret from organization/repo: {PUSH_REPO}"
            )),
        ),
        (
            "7 the signature of another body",
            push().with(
                "X-Hub-Signature-256",
                &github_signature(b"abc", &github_example_bytes("push-tag-created.json")),
            ),
            403,
            invalid(&format!(
                "misconfigured webhook secret from organization/repo: {PUSH_REPO}"
            )),
        ),
    ];
    for (row, request, status, body) in rows {
        assert_eq!(
            refusal(request.send(&secrets())),
            (status, body),
            "row {row}"
        );
    }
    // The row no level applies to: its own secret file.
    let elsewhere = Secrets::parse(b"someone/else: [{value: abc}]\n");
    assert_eq!(
        refusal(push().send(&elsewhere)),
        (403, invalid("failed to get an appropriate hmac secret"))
    );
}

#[test]
fn a_request_failing_several_checks_gets_the_first_ones_answer() {
    let all_wrong = push()
        .without("X-GitHub-Event")
        .without("X-GitHub-Delivery")
        .without("X-Hub-Signature-256")
        .with("Content-Type", "text/plain")
        .with("Content-Length", &(DEFAULT_MAX_BODY + 1).to_string());
    let steps = [
        (all_wrong.clone().method(Method::GET), 405),
        (all_wrong.clone(), 400),
        (all_wrong.clone().with("X-GitHub-Event", "push"), 400),
        (
            all_wrong
                .clone()
                .with("X-GitHub-Event", "push")
                .with("X-GitHub-Delivery", "1"),
            403,
        ),
        (
            all_wrong
                .clone()
                .with("X-GitHub-Event", "push")
                .with("X-GitHub-Delivery", "1")
                .with("X-Hub-Signature-256", "x"),
            400,
        ),
        (
            all_wrong
                .clone()
                .with("X-GitHub-Event", "push")
                .with("X-GitHub-Delivery", "1")
                .with("X-Hub-Signature-256", "x")
                .with("Content-Type", "application/json"),
            413,
        ),
    ];
    let mut texts = vec![];
    for (request, status) in steps {
        let (got, text) = refusal(request.send(&secrets()));
        assert_eq!(got, status, "{text}");
        texts.push(text);
    }
    assert_eq!(texts[1], "400 Bad Request: Missing X-GitHub-Event Header\n");
    assert_eq!(
        texts[2],
        "400 Bad Request: Missing X-GitHub-Delivery Header\n"
    );
    assert_eq!(texts[4], CONTENT_TYPE_TEXT);
    // In check 7, the payload before the signature's form, and the form
    // before the secret file.
    let no_level = Secrets::parse(b"x: []\n");
    let bad_both = Request::github_unchecked("push", b"nope".to_vec(), b"abc")
        .with("X-Hub-Signature-256", "nope");
    assert_eq!(
        refusal(bad_both.send(&no_level)),
        (403, invalid("invalid payload"))
    );
    let bad_form = push().with("X-Hub-Signature-256", "nope");
    assert_eq!(
        refusal(bad_form.send(&no_level)),
        (403, invalid("invalid signature"))
    );
}

#[test]
fn an_accepted_delivery_is_what_was_sent_and_answered_as_prow_does() {
    let body = github_example_bytes(PUSH);
    let delivery = accepted(push().send(&secrets()));
    assert_eq!(delivery.forge, Forge::GitHub);
    assert_eq!(delivery.event, "push");
    assert_eq!(delivery.delivery_id, "72d3162e-cc78-11e3-81ab-4c9367dc0958");
    assert_eq!(delivery.repo.as_deref(), Some(PUSH_REPO));
    assert_eq!(delivery.body, body);
    assert!(!delivery.ignored);

    let reply = delivery.reply();
    assert_eq!(reply, Reply::accepted());
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, "Event received. Have a nice day.");
    assert_eq!(reply.body, ACCEPTED_TEXT);
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, REPLY_CONTENT_TYPE.parse().unwrap());
    assert_eq!(reply.headers(), headers);
}

#[test]
fn a_refusal_is_sent_as_gos_http_error_sends_it() {
    let reply = push().method(Method::GET).send(&secrets()).unwrap_err();
    let headers = reply.headers();
    assert_eq!(headers[CONTENT_TYPE], "text/plain; charset=utf-8");
    assert_eq!(headers[X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(headers.len(), 2);
    let failed = Reply::read_failed();
    assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        failed.body,
        "500 Internal Server Error: Failed to read request body\n"
    );
}

#[test]
fn ping_and_events_bosun_does_not_read_are_accepted() {
    let ping = accepted(
        Request::github("ping", github_example_bytes("ping-repository.json"), b"abc")
            .send(&secrets()),
    );
    assert_eq!(ping.event, "ping");
    assert!(!ping.ignored);
    assert_eq!(ping.reply(), Reply::accepted());

    let star = accepted(
        Request::github("star", github_example_bytes("star-created.json"), b"abc").send(&secrets()),
    );
    assert_eq!(star.event, "star");
    assert!(star.ignored);
    assert_eq!(star.repo.as_deref(), Some("Codertocat/Hello-World"));
    assert_eq!(star.reply().status, StatusCode::OK);

    // Signed all the same: an event bosun does not read is not accepted
    // without its signature.
    assert_eq!(
        refusal(
            Request::github("star", github_example_bytes("star-created.json"), b"x")
                .send(&secrets())
        )
        .0,
        403
    );

    let gitea_issue = br#"{"action": "opened", "repository": {"full_name": "bosun/hello"}}"#;
    let issue = accepted(Request::gitea("issues", gitea_issue.to_vec(), b"abc").send(&secrets()));
    assert!(issue.ignored);
    assert_eq!(issue.event, "issues");

    let note = br#"{"object_kind": "note", "project": {"path_with_namespace": "bosun/ci/hello"}}"#;
    let note = accepted(Request::gitlab("Note Hook", note.to_vec(), b"abc").send(&secrets()));
    assert!(note.ignored);
    assert_eq!(note.event, "Note Hook");
    assert_eq!(note.repo.as_deref(), Some("bosun/ci/hello"));
}

#[test]
fn a_body_over_the_cap_is_refused_declared_or_read() {
    let body = github_example_bytes(PUSH);
    let exact = Intake::with_max_body(body.len() as u64);
    accepted(push().send_to(&exact, &secrets()));

    let small = Intake::with_max_body(body.len() as u64 - 1);
    let text = format!(
        "413 Payload Too Large: Hook only accepts bodies of at most {} bytes\n",
        body.len() - 1
    );
    // Declared: refused from the headers, before the body is read.
    let request = push();
    let head = small
        .check_head(&request.method, &request.headers)
        .unwrap_err();
    assert_eq!(
        (head.status.as_u16(), head.body.clone()),
        (413, text.clone())
    );
    // Not declared (chunked): refused from the bytes.
    let request = push().without("Content-Length");
    let head = small.check_head(&request.method, &request.headers).unwrap();
    let reply = small
        .check_body(head, request.body, &secrets())
        .unwrap_err();
    assert_eq!((reply.status.as_u16(), reply.body), (413, text.clone()));
    // Declared short, sent long: the bytes decide.
    let lying = push().with("Content-Length", "10");
    assert_eq!(refusal(lying.send_to(&small, &secrets())), (413, text));

    // The default cap is GitHub's 25 MB.
    assert_eq!(Intake::new().max_body(), 25 * 1024 * 1024);
    assert_eq!(Intake::default(), Intake::new());
    let mut huge = vec![b' '; DEFAULT_MAX_BODY as usize + 1];
    huge[..2].copy_from_slice(b"{}");
    let reply = Request::github_unchecked("push", huge, b"abc")
        .without("Content-Length")
        .send(&secrets())
        .unwrap_err();
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
}

mod gitea {
    use super::*;

    fn push() -> Request {
        Request::gitea("push", fixture("gitea/push.json"), b"abc")
    }

    fn invalid(msg: &str) -> String {
        format!("403 Forbidden: Invalid X-Gitea-Signature - {msg}\n")
    }

    #[test]
    fn giteas_delivery_is_accepted_by_its_own_headers() {
        let delivery = accepted(push().send(&secrets()));
        assert_eq!(delivery.forge, Forge::Gitea);
        assert_eq!(delivery.event, "push");
        assert_eq!(delivery.delivery_id, "f6266f16-1bf3-46a5-9ea4-602e06ead473");
        assert_eq!(delivery.repo.as_deref(), Some("bosun/hello"));
        assert_eq!(delivery.body, fixture("gitea/push.json"));
        // Its own delivery id, not GitHub's copy of it.
        let delivery = accepted(push().with("X-Gitea-Delivery", "gitea-1").send(&secrets()));
        assert_eq!(delivery.delivery_id, "gitea-1");
    }

    #[test]
    fn giteas_signature_is_the_one_checked() {
        // GitHub's signature header right, Gitea's wrong: refused.
        let wrong = hex::encode([7u8; 32]);
        assert_eq!(
            refusal(push().with("X-Gitea-Signature", &wrong).send(&secrets())),
            (
                403,
                invalid("misconfigured webhook secret from organization/repo: bosun/hello")
            )
        );
        // Missing, though GitHub's is there.
        assert_eq!(
            refusal(push().without("X-Gitea-Signature").send(&secrets())),
            (403, "403 Forbidden: Missing X-Gitea-Signature\n".into())
        );
        // Bare hex only.
        let prefixed = format!(
            "sha256={}",
            push().headers["X-Gitea-Signature"].to_str().unwrap()
        );
        assert_eq!(
            refusal(push().with("X-Gitea-Signature", &prefixed).send(&secrets())),
            (403, invalid("invalid signature"))
        );
        // Signed with another token.
        assert_eq!(
            refusal(Request::gitea("push", fixture("gitea/push.json"), b"abd").send(&secrets())),
            (
                403,
                invalid("misconfigured webhook secret from organization/repo: bosun/hello")
            )
        );
        // Uppercase hex is hex.
        let upper = push().headers["X-Gitea-Signature"]
            .to_str()
            .unwrap()
            .to_uppercase();
        accepted(push().with("X-Gitea-Signature", &upper).send(&secrets()));
    }

    #[test]
    fn giteas_other_checks_name_its_headers() {
        assert_eq!(
            refusal(push().without("X-Gitea-Delivery").send(&secrets())),
            (
                400,
                "400 Bad Request: Missing X-Gitea-Delivery Header\n".into()
            )
        );
        assert_eq!(
            refusal(push().method(Method::GET).send(&secrets())),
            (405, "405 Method not allowed\n".into())
        );
        assert_eq!(
            refusal(push().with("Content-Type", "application/x-www-form-urlencoded").send(&secrets())),
            (
                400,
                "400 Bad Request: Hook only accepts content-type: application/json - please reconfigure this hook on Gitea\n"
                    .into()
            )
        );
        assert_eq!(
            refusal(Request::gitea("push", b"payload=%7B%7D".to_vec(), b"abc").send(&secrets())),
            (403, invalid("invalid payload"))
        );
        // Without X-Gitea-Event it is a GitHub delivery, checked by GitHub's
        // headers (which Gitea sends too): Gitea's signature is not read.
        let wrong = hex::encode([7u8; 32]);
        let as_github = accepted(
            push()
                .without("X-Gitea-Event")
                .with("X-Gitea-Signature", &wrong)
                .with("X-GitHub-Delivery", "github-copy")
                .send(&secrets()),
        );
        assert_eq!(as_github.forge, Forge::GitHub);
        assert_eq!(as_github.delivery_id, "github-copy");
    }
}

mod gitlab {
    use super::*;

    fn push() -> Request {
        Request::gitlab("Push Hook", fixture("gitlab/push.json"), b"abc")
    }

    fn invalid(msg: &str) -> String {
        format!("403 Forbidden: Invalid X-Gitlab-Token - {msg}\n")
    }

    #[test]
    fn gitlabs_delivery_is_accepted_by_its_token() {
        let delivery = accepted(push().send(&secrets()));
        assert_eq!(delivery.forge, Forge::GitLab);
        assert_eq!(delivery.event, "Push Hook");
        assert_eq!(delivery.delivery_id, "a5461c4d-9c7f-4af9-add6-cddebe3c426f");
        assert_eq!(delivery.repo.as_deref(), Some("bosun/ci/hello"));
        assert_eq!(delivery.body, fixture("gitlab/push.json"));
        // Without Idempotency-Key (GitLab before 17.4), the event's UUID.
        let delivery = accepted(push().without("Idempotency-Key").send(&secrets()));
        assert_eq!(delivery.delivery_id, "9cebe914-4827-408f-b014-cfa23a47a35f");
    }

    #[test]
    fn a_missing_or_wrong_token_is_refused() {
        assert_eq!(
            refusal(push().without("X-Gitlab-Token").send(&secrets())),
            (403, "403 Forbidden: Missing X-Gitlab-Token\n".into())
        );
        for wrong in ["abd", "ab", "abcd", "ABC", " abc"] {
            assert_eq!(
                refusal(push().with("X-Gitlab-Token", wrong).send(&secrets())),
                (
                    403,
                    invalid("misconfigured webhook secret from organization/repo: bosun/ci/hello")
                ),
                "{wrong:?}"
            );
        }
        assert_eq!(
            refusal(push().send(&Secrets::parse(b"other: [{value: abc}]"))),
            (403, invalid("failed to get an appropriate hmac secret"))
        );
        assert_eq!(
            refusal(Request::gitlab("Push Hook", b"{".to_vec(), b"abc").send(&secrets())),
            (403, invalid("invalid payload"))
        );
    }

    #[test]
    fn the_token_is_never_printed() {
        let request = push().with("X-Gitlab-Token", "s3cret-token");
        let head = Intake::new()
            .check_head(&request.method, &request.headers)
            .unwrap();
        let printed = format!("{head:?}");
        // Neither as text nor as bytes (`[115, 51, 99, ...]`).
        assert!(!printed.contains("s3cret"), "{printed}");
        assert!(!printed.contains("115, 51, 99"), "{printed}");
        assert!(printed.contains("credential: <12 bytes>"), "{printed}");
    }

    #[test]
    fn gitlabs_other_checks_name_its_headers() {
        assert_eq!(
            refusal(
                push()
                    .without("Idempotency-Key")
                    .without("X-Gitlab-Event-UUID")
                    .send(&secrets())
            ),
            (
                400,
                "400 Bad Request: Missing Idempotency-Key or X-Gitlab-Event-UUID Header\n".into()
            )
        );
        assert_eq!(
            refusal(push().with("Content-Type", "text/plain").send(&secrets())),
            (
                400,
                "400 Bad Request: Hook only accepts content-type: application/json - please reconfigure this hook on GitLab\n"
                    .into()
            )
        );
    }

    #[test]
    fn gitlab_is_told_first_then_gitea_then_github() {
        // A GitLab request that also says it is Gitea's and GitHub's is
        // checked as GitLab's: its token, not a signature.
        let all = push()
            .with("X-Gitea-Event", "push")
            .with("X-GitHub-Event", "push");
        assert_eq!(accepted(all.clone().send(&secrets())).forge, Forge::GitLab);
        assert_eq!(
            refusal(all.without("X-Gitlab-Token").send(&secrets())),
            (403, "403 Forbidden: Missing X-Gitlab-Token\n".into())
        );
        // Gitea's request carries GitHub's headers and is Gitea's.
        let gitea = Request::gitea("push", fixture("gitea/push.json"), b"abc");
        assert_eq!(accepted(gitea.send(&secrets())).forge, Forge::Gitea);
        // An empty X-Gitlab-Event tells nothing.
        let github = super::push().with("X-Gitlab-Event", "");
        assert_eq!(accepted(github.send(&secrets())).forge, Forge::GitHub);
    }
}
