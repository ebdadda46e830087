//! What a webhook request gets: the checks Prow's hook makes, in its order,
//! with its status codes and texts, for GitHub; the same checks with each
//! forge's own headers for Gitea (and Forgejo, which sends Gitea's headers
//! too) and GitLab; and a cap on the body, which Prow does not have.
//!
//! The checks run in two steps so that an oversized body is refused before
//! it is read: [`Intake::check_head`] looks at the method and the headers
//! (the declared `Content-Length` included), [`Intake::check_body`] at the
//! bytes. [`Intake::check`] does both. Either answers a [`Reply`] when it
//! refuses; an accepted request is a [`Delivery`], answered
//! [`Reply::accepted`] once it is recorded.
//!
//! For GitHub, in Prow's order (`ValidateWebhook`, `ValidatePayload`):
//!
//! | # | check | status | body |
//! |---|---|---|---|
//! | 1 | the method is POST | 405 | `405 Method not allowed` |
//! | 2 | `X-GitHub-Event` is not empty | 400 | `400 Bad Request: Missing X-GitHub-Event Header` |
//! | 3 | `X-GitHub-Delivery` is not empty | 400 | `400 Bad Request: Missing X-GitHub-Delivery Header` |
//! | 4 | `X-Hub-Signature-256` is not empty | 403 | `403 Forbidden: Missing X-Hub-Signature-256` |
//! | 5 | `Content-Type` **equals** `application/json` | 400 | `400 Bad Request: Hook only accepts content-type: application/json - please reconfigure this hook on GitHub` |
//! | 6 | the body (declared, then read) is at most [`Intake::max_body`] bytes | 413 | `413 Payload Too Large: Hook only accepts bodies of at most N bytes` |
//! | 7 | the body is JSON, the signature `sha256=` and hex, a level of the secret file applies, one of its tokens signed the body | 403 | `403 Forbidden: Invalid X-Hub-Signature-256 - <msg>` |
//! | ok | | 200 | `Event received. Have a nice day.` |
//!
//! `<msg>` is Prow's: `invalid payload`, `invalid signature`,
//! `failed to get an appropriate hmac secret`,
//! `misconfigured webhook secret from organization/repo: <org/repo>`.
//! Error bodies end in a newline and are sent as Go's `http.Error` sends
//! them (see [`Reply::headers`]). Prow answers a body it cannot read with a
//! 500 ([`Reply::read_failed`]).
//!
//! The forge is told by its event header, looked for in this order:
//! `X-Gitlab-Event`, `X-Gitea-Event`, `X-GitHub-Event` (Gitea sends GitHub's
//! headers as well as its own, with its own payloads). A request with none
//! of them is taken as GitHub's and fails check 2.
//!
//! - **Gitea**: the event is `X-Gitea-Event`, the delivery id
//!   `X-Gitea-Delivery`, the signature `X-Gitea-Signature`, the bare hex of
//!   the body's HMAC-SHA256 keyed by the hook's secret; its texts name those
//!   headers and Gitea.
//! - **GitLab**: the event is `X-Gitlab-Event` (`Push Hook`, ...), the
//!   delivery id `Idempotency-Key` (the same across GitLab's retries), else
//!   `X-Gitlab-Event-UUID`; `X-Gitlab-Token` is the secret itself, compared
//!   in constant time with the tokens of the applicable level. Its texts name
//!   those headers and GitLab; a token that is none of them gets Prow's
//!   `misconfigured webhook secret` message, as a wrong signature does.
//!
//! The secret file's level is chosen by the payload's repository
//! (`repository.full_name`; GitLab: `project.path_with_namespace`), else, for
//! GitHub and Gitea, its organization (`organization.login`), as
//! [`Secrets::tokens_for`] says. No request is accepted without a signature
//! or token made with one of those tokens; a token with an empty value
//! matches nothing.
//!
//! Every event that passes is accepted and answered alike, `ping` and events
//! bosun reads nothing from included; the latter are marked
//! [`Delivery::ignored`].

use std::fmt;

use http::header::{CONTENT_LENGTH, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use serde_json::Value;
use subtle::ConstantTimeEq;

pub use super::forge::Forge;

use super::events::{self, Event, EventError};
use super::secrets::{verify_hmac_sha256, Secrets};

/// The largest body accepted by default: 25 MiB, GitHub's cap on a payload
/// ("Payloads are capped at 25 MB"; GitHub does not deliver larger events),
/// read as the larger of the two ways to say 25 MB.
pub const DEFAULT_MAX_BODY: u64 = 25 * 1024 * 1024;

/// The body of the answer to an accepted delivery (Prow's, without a newline).
pub const ACCEPTED_TEXT: &str = "Event received. Have a nice day.";

/// The content type of every answer (what Go's `http.Error` sets, and what
/// Go sniffs for the plain-text answer to an accepted delivery).
pub const REPLY_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// What to answer: a status and a plain-text body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: StatusCode,
    /// The body: Prow's text, with a newline after an error's.
    pub body: String,
}

impl Reply {
    /// The answer to an accepted delivery: 200, [`ACCEPTED_TEXT`].
    pub fn accepted() -> Reply {
        Reply {
            status: StatusCode::OK,
            body: ACCEPTED_TEXT.to_owned(),
        }
    }

    /// Prow's answer when the body could not be read: 500,
    /// `500 Internal Server Error: Failed to read request body`.
    pub fn read_failed() -> Reply {
        Reply::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "500 Internal Server Error: Failed to read request body",
        )
    }

    /// An error answer, as Go's `http.Error` writes `text`.
    pub fn error(status: StatusCode, text: impl Into<String>) -> Reply {
        let mut body = text.into();
        body.push('\n');
        Reply { status, body }
    }

    /// Whether this is the answer to an accepted delivery.
    pub fn is_accepted(&self) -> bool {
        self.status == StatusCode::OK
    }

    /// The headers to send with it: `Content-Type: text/plain; charset=utf-8`,
    /// and for an error also `X-Content-Type-Options: nosniff`, as Go's
    /// `http.Error` sets them.
    pub fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(REPLY_CONTENT_TYPE));
        if !self.is_accepted() {
            headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
        }
        headers
    }
}

/// A request whose method and headers passed: what [`Intake::check_body`]
/// checks its body against.
#[derive(Clone, PartialEq, Eq)]
pub struct Head {
    /// The forge that sent it.
    pub forge: Forge,
    /// The event, as the forge's event header names it (`push`, `Push Hook`).
    pub event: String,
    /// The forge's id of this delivery.
    pub delivery_id: String,
    /// The signature (GitHub, Gitea) or token (GitLab) as sent.
    credential: Vec<u8>,
}

/// GitLab's token is the secret itself: it is never printed, only its length.
impl fmt::Debug for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Head")
            .field("forge", &self.forge)
            .field("event", &self.event)
            .field("delivery_id", &self.delivery_id)
            .field(
                "credential",
                &format_args!("<{} bytes>", self.credential.len()),
            )
            .finish()
    }
}

/// An accepted delivery: what is recorded before it is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The forge that sent it.
    pub forge: Forge,
    /// The event, as the forge's event header names it (`push`, `Push Hook`).
    pub event: String,
    /// The forge's id of this delivery: GitHub's `X-GitHub-Delivery` (kept
    /// when a delivery is redelivered), Gitea's `X-Gitea-Delivery`, GitLab's
    /// `Idempotency-Key` (kept across retries) or `X-Gitlab-Event-UUID`.
    pub delivery_id: String,
    /// The repository's full name (`org/repo`; GitLab: the project's
    /// `path_with_namespace`), when the payload names one.
    pub repo: Option<String>,
    /// The body as received, the bytes the signature was checked over.
    pub body: Vec<u8>,
    /// Whether bosun reads nothing from this event ([`events::reads`]): it is
    /// accepted and answered as any other, and [`Delivery::parse`] gives
    /// [`Event::Ignored`].
    pub ignored: bool,
}

impl Delivery {
    /// The answer to it: [`Reply::accepted`].
    pub fn reply(&self) -> Reply {
        Reply::accepted()
    }

    /// The event as bosun reads it ([`events::parse`]).
    pub fn parse(&self) -> Result<Event, EventError> {
        events::parse(self.forge, &self.event, &self.body)
    }
}

/// The webhook intake's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intake {
    max_body: u64,
}

impl Default for Intake {
    fn default() -> Intake {
        Intake::new()
    }
}

impl Intake {
    /// Bodies up to [`DEFAULT_MAX_BODY`].
    pub fn new() -> Intake {
        Intake {
            max_body: DEFAULT_MAX_BODY,
        }
    }

    /// Bodies up to `bytes`.
    pub fn with_max_body(bytes: u64) -> Intake {
        Intake { max_body: bytes }
    }

    /// The largest body accepted, in bytes. Whoever reads the body need read
    /// no more than one byte past it: [`Intake::check_body`] refuses any
    /// body longer than this.
    pub fn max_body(&self) -> u64 {
        self.max_body
    }

    /// Checks a request whole: [`Intake::check_head`], then
    /// [`Intake::check_body`].
    pub fn check(
        &self,
        method: &Method,
        headers: &HeaderMap,
        body: Vec<u8>,
        secrets: &Secrets,
    ) -> Result<Delivery, Reply> {
        let head = self.check_head(method, headers)?;
        self.check_body(head, body, secrets)
    }

    /// The checks that need no body: the method, the forge's headers, the
    /// content type and the declared `Content-Length` (checks 1 to 6).
    pub fn check_head(&self, method: &Method, headers: &HeaderMap) -> Result<Head, Reply> {
        if method != Method::POST {
            return Err(Reply::error(
                StatusCode::METHOD_NOT_ALLOWED,
                "405 Method not allowed",
            ));
        }
        let forge = if !header(headers, "X-Gitlab-Event").is_empty() {
            Forge::GitLab
        } else if !header(headers, "X-Gitea-Event").is_empty() {
            Forge::Gitea
        } else {
            Forge::GitHub
        };
        let (event_header, delivery_headers): (&str, &[&str]) = match forge {
            Forge::GitHub => ("X-GitHub-Event", &["X-GitHub-Delivery"]),
            Forge::Gitea => ("X-Gitea-Event", &["X-Gitea-Delivery"]),
            Forge::GitLab => (
                "X-Gitlab-Event",
                &["Idempotency-Key", "X-Gitlab-Event-UUID"],
            ),
        };
        let event = text(header(headers, event_header));
        if event.is_empty() {
            return Err(bad_request(format!("Missing {event_header} Header")));
        }
        let delivery_id = delivery_headers
            .iter()
            .map(|name| text(header(headers, name)))
            .find(|id| !id.is_empty())
            .ok_or_else(|| {
                bad_request(format!("Missing {} Header", delivery_headers.join(" or ")))
            })?;
        let credential = header(headers, forge.credential_header());
        if credential.is_empty() {
            return Err(Reply::error(
                StatusCode::FORBIDDEN,
                format!("403 Forbidden: Missing {}", forge.credential_header()),
            ));
        }
        if header(headers, CONTENT_TYPE.as_str()) != b"application/json" {
            return Err(bad_request(format!(
                "Hook only accepts content-type: application/json - please reconfigure this hook on {}",
                forge.display()
            )));
        }
        let declared = std::str::from_utf8(header(headers, CONTENT_LENGTH.as_str()))
            .ok()
            .and_then(|length| length.trim().parse::<u64>().ok());
        if declared.is_some_and(|length| length > self.max_body) {
            return Err(self.too_large());
        }
        Ok(Head {
            forge,
            event,
            delivery_id,
            credential: credential.to_vec(),
        })
    }

    /// The checks of the body: its size, then (check 7) that it is JSON and
    /// signed, or carries the token, with a token of the secret file's level
    /// for its repository.
    pub fn check_body(
        &self,
        head: Head,
        body: Vec<u8>,
        secrets: &Secrets,
    ) -> Result<Delivery, Reply> {
        if body.len() as u64 > self.max_body {
            return Err(self.too_large());
        }
        let invalid = |msg: &str| {
            Reply::error(
                StatusCode::FORBIDDEN,
                format!(
                    "403 Forbidden: Invalid {} - {msg}",
                    head.forge.credential_header()
                ),
            )
        };
        let Some(keys) = Keys::read(head.forge, &body) else {
            return Err(invalid("invalid payload"));
        };
        let signature = match head.forge {
            Forge::GitHub => Some(
                head.credential
                    .strip_prefix(b"sha256=")
                    .and_then(|hex| hex::decode(hex).ok())
                    .ok_or_else(|| invalid("invalid signature"))?,
            ),
            Forge::Gitea => {
                Some(hex::decode(&head.credential).map_err(|_| invalid("invalid signature"))?)
            }
            Forge::GitLab => None,
        };
        let org_repo = keys.org_repo();
        let Some(tokens) = secrets.tokens_for(org_repo) else {
            return Err(invalid("failed to get an appropriate hmac secret"));
        };
        let matches = tokens
            .iter()
            .filter(|token| !token.value().is_empty())
            .any(|token| match &signature {
                Some(signature) => verify_hmac_sha256(token.value(), &body, signature),
                None => bool::from(token.value().ct_eq(&head.credential)),
            });
        if !matches {
            return Err(invalid(&format!(
                "misconfigured webhook secret from organization/repo: {org_repo}"
            )));
        }
        let ignored = !events::reads(head.forge, &head.event);
        Ok(Delivery {
            forge: head.forge,
            event: head.event,
            delivery_id: head.delivery_id,
            repo: keys.repo,
            body,
            ignored,
        })
    }

    /// The answer to a body longer than [`Intake::max_body`] (413), for a
    /// reader that stops reading one byte past it.
    pub fn too_large(&self) -> Reply {
        Reply::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "413 Payload Too Large: Hook only accepts bodies of at most {} bytes",
                self.max_body
            ),
        )
    }
}

fn bad_request(text: String) -> Reply {
    Reply::error(StatusCode::BAD_REQUEST, format!("400 Bad Request: {text}"))
}

/// A header's first value as bytes, empty when absent (Go's `Header.Get`).
fn header<'h>(headers: &'h HeaderMap, name: &str) -> &'h [u8] {
    headers
        .get(name)
        .map(HeaderValue::as_bytes)
        .unwrap_or_default()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What the payload says of where it comes from, read as Prow reads it
/// (Go's `GenericEvent`): the body must be a JSON object (or `null`) whose
/// `repository` and `organization`, when present and not null, are objects,
/// with string `full_name` and `login`.
struct Keys {
    repo: Option<String>,
    org: Option<String>,
}

impl Keys {
    fn read(forge: Forge, body: &[u8]) -> Option<Keys> {
        let value: Value = serde_json::from_slice(body).ok()?;
        let (repo_path, org_path): (&[&str], &[&str]) = match forge {
            Forge::GitHub | Forge::Gitea => {
                (&["repository", "full_name"], &["organization", "login"])
            }
            Forge::GitLab => (&["project", "path_with_namespace"], &[]),
        };
        Some(Keys {
            repo: string_at(&value, repo_path)?,
            org: string_at(&value, org_path)?,
        })
    }

    /// The key of the secret file's lookup: the repository, else the
    /// organization, else empty.
    fn org_repo(&self) -> &str {
        self.repo
            .as_deref()
            .or(self.org.as_deref())
            .unwrap_or_default()
    }
}

/// The non-empty string at `path`: `Some(None)` when it or an object on the
/// way is absent, null or empty; `None` when something on the way has
/// another type (Go's `json.Unmarshal` into the struct would fail).
fn string_at(value: &Value, path: &[&str]) -> Option<Option<String>> {
    let mut at = value;
    for key in path {
        match at {
            Value::Null => return Some(None),
            Value::Object(map) => at = map.get(*key).unwrap_or(&Value::Null),
            _ => return None,
        }
    }
    match at {
        Value::Null => Some(None),
        Value::String(s) if s.is_empty() => Some(None),
        Value::String(s) => Some(Some(s.clone())),
        _ if path.is_empty() => Some(None),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::secrets::{github_signature, PROW_EXAMPLE as PROW_FILE};

    /// Prow's own test vectors, their signatures as Prow's tests write them:
    /// bodies that are not GitHub payloads, only signed JSON.
    fn check(body: &str, signature: &str) -> Result<Delivery, Reply> {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("X-GitHub-Event", "ping"),
            ("X-GitHub-Delivery", "1"),
            ("X-Hub-Signature-256", signature),
            ("Content-Type", "application/json"),
        ] {
            headers.insert(name, HeaderValue::from_str(value).unwrap());
        }
        Intake::new().check(
            &Method::POST,
            &headers,
            body.as_bytes().to_vec(),
            &Secrets::parse(PROW_FILE.as_bytes()),
        )
    }

    #[test]
    fn prows_vectors_are_accepted_at_their_levels() {
        // No repository, no organization: `*`.
        let global = "sha256=19092633e5aa9a849dfcc9d2df4e76db2df1fcba7f38915f2c7833bd8a510f2f";
        let delivery = check("{}", global).unwrap();
        assert_eq!(delivery.repo, None);
        // The organization `org1`: its level.
        let org = r#"{"organization": {"login": "org1"}}"#;
        let org1 = "sha256=87e9dcd175b5188a43e6ba0511da057b51f38f5a88088b198f26db13f1409280";
        check(org, org1).unwrap();
        // Hex is read in either case.
        check(org, &org1.to_uppercase().replace("SHA256=", "sha256=")).unwrap();
        // `*`'s token does not sign for `org1`, which has a level.
        let reply = check(org, &secrets_signature(b"abc", org)).unwrap_err();
        assert_eq!(
            reply.body,
            "403 Forbidden: Invalid X-Hub-Signature-256 - misconfigured webhook secret from organization/repo: org1\n"
        );
        // `*`'s older token signs too (rotation).
        check("{}", &secrets_signature(b"key", "{}")).unwrap();
    }

    fn secrets_signature(key: &[u8], body: &str) -> String {
        github_signature(key, body.as_bytes())
    }
}
