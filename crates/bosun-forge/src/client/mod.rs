//! A synchronous REST client for the forge calls bosun makes: commit
//! statuses, issue comments, labels, pull requests, membership, for GitHub
//! (`https://api.github.com`, or a GitHub Enterprise `https://HOST/api/v3`)
//! and Gitea/Forgejo's GitHub-like API (`https://HOST/api/v1`).
//!
//! Each call is one attempt (pages followed through `Link` headers): it
//! succeeds, or gives a [`ForgeError`] saying whether to try again and
//! when. The caller retries; [`Client::rate_limited_until`] says when the
//! forge last said no requests are left, so that every caller can pause.
//! Credentials ([`Auth`]): none, a token file read again when it changes,
//! or a GitHub App (a JWT for `/app`, an installation token per account,
//! found with `GET /repos/{owner}/{repo}/installation` or `GET
//! /orgs/{org}/installation` and replaced 5 minutes before it expires).
//!
//! Why `ureq` and not octocrab: octocrab is well kept and typed, but it
//! is async on tokio and hyper, which `tools/check-layers.py` keeps out of
//! this crate (its callers are the daemon's blocking tasks and tools);
//! its errors do not carry every answer's rate-limit headers, status and
//! body, which each call here turns into [`ForgeError::retry_after`],
//! [`Client::rate_limited_until`] and a permanent-or-retry decision; and it
//! speaks GitHub only, where the same calls also go to Gitea. The calls
//! are few and their JSON is read by hand into the plain types below.

mod auth;
mod error;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use ureq::http::{HeaderMap, Method, Request};

use crate::report::status::segment;
pub use crate::report::{IssueComment, NewStatus};
pub use auth::TOKEN_REFRESH_BEFORE;
use auth::{parse_token, App, Watched};
pub use error::{ErrorKind, ForgeError};

/// Prow's `--github-endpoint` default.
pub const DEFAULT_ENDPOINT: &str = "https://api.github.com";

/// How long one request may take, connection to last byte.
const TIMEOUT: Duration = Duration::from_secs(60);
/// The most pages one listing follows.
const MAX_PAGES: usize = 1000;
/// The largest answer read.
const MAX_BODY: u64 = 64 << 20;

/// Which forge's API the endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flavour {
    /// GitHub or GitHub Enterprise.
    #[default]
    GitHub,
    /// Gitea or Forgejo (`/api/v1`).
    Gitea,
}

/// The credentials a client sends.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Auth {
    /// None (public data only, GitHub's unauthenticated rate limit).
    #[default]
    None,
    /// A token read from a file (Prow's `--github-token-path`), read again
    /// when the file changes.
    Token {
        /// The token file.
        path: PathBuf,
    },
    /// A GitHub App (Prow's `--github-app-id` and
    /// `--github-app-private-key-path`); GitHub only.
    App {
        /// The App's id.
        app_id: String,
        /// Its private key, in PEM; read again when the file changes.
        private_key_path: PathBuf,
    },
}

/// How to reach the forge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// The API's base URL (Prow's `--github-endpoint`): `https://api.github.com`
    /// (the default), `https://HOST/api/v3` for GitHub Enterprise,
    /// `http(s)://HOST/api/v1` for Gitea.
    pub endpoint: String,
    /// Which API it is.
    pub flavour: Flavour,
    /// The credentials.
    pub auth: Auth,
    /// The `User-Agent` sent (GitHub refuses requests without one).
    pub user_agent: String,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            endpoint: DEFAULT_ENDPOINT.into(),
            flavour: Flavour::GitHub,
            auth: Auth::None,
            user_agent: "bosun".into(),
        }
    }
}

/// A pull request as bosun needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestInfo {
    /// Its number.
    pub number: u64,
    /// Its author's login.
    pub author: String,
    /// The head commit.
    pub head_sha: String,
    /// The head branch.
    pub head_ref: String,
    /// The base branch.
    pub base_ref: String,
    /// The base branch's commit the forge compares against.
    pub base_sha: String,
    /// Whether it is a draft.
    pub draft: bool,
    /// Whether it was merged.
    pub merged: bool,
    /// Whether it is open.
    pub open: bool,
    /// Whether it can be merged; `None` while the forge has not computed it.
    pub mergeable: Option<bool>,
    /// Its title.
    pub title: String,
    /// Its page.
    pub html_url: String,
    /// Its labels' names.
    pub labels: Vec<String>,
}

/// The credentials in use.
enum Credentials {
    None,
    Token(Watched<String>),
    App(App),
}

/// Whose credentials a call needs (a GitHub App has one installation per
/// account).
#[derive(Clone, Copy)]
enum Scope<'a> {
    /// A repository, `owner/name`.
    Repo(&'a str, &'a str),
    /// An organization.
    Org(&'a str),
    /// The App itself (a JWT), or the token's user.
    App,
}

/// An answer read whole.
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> Result<Value, ForgeError> {
        serde_json::from_str(&self.body).map_err(|e| {
            ForgeError::unexpected(Some(self.status), format!("the answer is not JSON: {e}"))
        })
    }
}

/// A forge REST client; share it between threads (`&self` everywhere).
pub struct Client {
    endpoint: String,
    flavour: Flavour,
    user_agent: String,
    agent: ureq::Agent,
    credentials: Credentials,
    limited_until: Mutex<Option<SystemTime>>,
    bot: Mutex<Option<String>>,
}

impl Client {
    /// A client for `config`; an error when the endpoint is not an
    /// `http(s)://` URL, or a GitHub App is given for Gitea.
    pub fn new(config: ClientConfig) -> Result<Client, ForgeError> {
        let endpoint = config.endpoint.trim().trim_end_matches('/').to_string();
        let after_scheme = endpoint
            .strip_prefix("https://")
            .or_else(|| endpoint.strip_prefix("http://"));
        if after_scheme.is_none_or(|rest| rest.is_empty() || rest.starts_with('/')) {
            return Err(ForgeError::unexpected(
                None,
                format!(
                    "the forge endpoint {:?} is not an http(s):// URL",
                    config.endpoint
                ),
            ));
        }
        let credentials = match config.auth {
            Auth::None => Credentials::None,
            Auth::Token { path } => Credentials::Token(Watched::new(path, "token file")),
            Auth::App { .. } if config.flavour == Flavour::Gitea => {
                return Err(ForgeError::unexpected(
                    None,
                    "GitHub App authentication is for GitHub: give Gitea a token file",
                ))
            }
            Auth::App {
                app_id,
                private_key_path,
            } => Credentials::App(App::new(app_id, private_key_path)),
        };
        let tls = ureq::tls::TlsConfig::builder()
            .root_certs(ureq::tls::RootCerts::PlatformVerifier)
            .build();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(TIMEOUT))
            .tls_config(tls)
            .build()
            .into();
        Ok(Client {
            endpoint,
            flavour: config.flavour,
            user_agent: config.user_agent,
            agent,
            credentials,
            limited_until: Mutex::new(None),
            bot: Mutex::new(None),
        })
    }

    /// The forge's API flavour.
    pub fn flavour(&self) -> Flavour {
        self.flavour
    }

    /// Until when the forge said no more requests may be made (the last
    /// answer had `X-RateLimit-Remaining: 0`, or a rate-limit refusal with
    /// `Retry-After`); `None` once that time has passed.
    pub fn rate_limited_until(&self) -> Option<SystemTime> {
        let until = *self.limited_until.lock().unwrap_or_else(|e| e.into_inner());
        until.filter(|t| *t > SystemTime::now())
    }

    // --- Commit statuses.

    /// `POST /repos/{repo}/statuses/{sha}`: sets a commit status.
    pub fn create_status(
        &self,
        repo: &str,
        sha: &str,
        status: &NewStatus,
    ) -> Result<(), ForgeError> {
        let (o, r) = split_repo(repo)?;
        let path = format!(
            "/repos/{}/{}/statuses/{}",
            segment(o),
            segment(r),
            segment(sha)
        );
        let body = serde_json::to_value(status).unwrap_or_default();
        self.expect(
            Method::POST,
            &path,
            Scope::Repo(o, r),
            Some(&body),
            &[200, 201],
        )
        .map(drop)
    }

    /// `GET /repos/{repo}/commits/{sha}/status`, every page: each status's
    /// context and state, as the forge lists them (latest per context).
    pub fn combined_statuses(
        &self,
        repo: &str,
        sha: &str,
    ) -> Result<Vec<(String, String)>, ForgeError> {
        let (o, r) = split_repo(repo)?;
        let path = format!(
            "/repos/{}/{}/commits/{}/status",
            segment(o),
            segment(r),
            segment(sha)
        );
        let mut out = Vec::new();
        for page in self.pages(&path, Scope::Repo(o, r))? {
            for s in page["statuses"].as_array().into_iter().flatten() {
                // Gitea names the state `status`.
                let state = s.get("state").or_else(|| s.get("status"));
                out.push((str_of(&s["context"]), state.map(str_of).unwrap_or_default()));
            }
        }
        Ok(out)
    }

    // --- Comments.

    /// `GET /repos/{repo}/issues/{number}/comments`, every page, oldest first.
    pub fn list_issue_comments(
        &self,
        repo: &str,
        number: u64,
    ) -> Result<Vec<IssueComment>, ForgeError> {
        let (o, r) = split_repo(repo)?;
        let path = format!(
            "/repos/{}/{}/issues/{number}/comments",
            segment(o),
            segment(r)
        );
        let mut out = Vec::new();
        for page in self.pages(&path, Scope::Repo(o, r))? {
            for c in items(&page)? {
                out.push(IssueComment {
                    id: c["id"].as_u64().unwrap_or_default(),
                    user: str_of(&c["user"]["login"]),
                    body: str_of(&c["body"]),
                });
            }
        }
        Ok(out)
    }

    /// `POST /repos/{repo}/issues/{number}/comments`: the new comment's id.
    pub fn create_comment(&self, repo: &str, number: u64, body: &str) -> Result<u64, ForgeError> {
        let (o, r) = split_repo(repo)?;
        let path = format!(
            "/repos/{}/{}/issues/{number}/comments",
            segment(o),
            segment(r)
        );
        let a = self.expect(
            Method::POST,
            &path,
            Scope::Repo(o, r),
            Some(&json!({ "body": body })),
            &[200, 201],
        )?;
        Ok(a.json()?["id"].as_u64().unwrap_or_default())
    }

    /// `PATCH /repos/{repo}/issues/comments/{id}`.
    pub fn edit_comment(&self, repo: &str, id: u64, body: &str) -> Result<(), ForgeError> {
        let (o, r) = split_repo(repo)?;
        let path = format!("/repos/{}/{}/issues/comments/{id}", segment(o), segment(r));
        self.expect(
            Method::PATCH,
            &path,
            Scope::Repo(o, r),
            Some(&json!({ "body": body })),
            &[200, 201],
        )
        .map(drop)
    }

    /// `DELETE /repos/{repo}/issues/comments/{id}`; a comment already gone
    /// (404) is no error.
    pub fn delete_comment(&self, repo: &str, id: u64) -> Result<(), ForgeError> {
        let (o, r) = split_repo(repo)?;
        let path = format!("/repos/{}/{}/issues/comments/{id}", segment(o), segment(r));
        self.expect(
            Method::DELETE,
            &path,
            Scope::Repo(o, r),
            None,
            &[200, 204, 404],
        )
        .map(drop)
    }

    // --- Labels.

    /// `POST /repos/{repo}/issues/{number}/labels` with the label's name.
    pub fn add_label(&self, repo: &str, number: u64, label: &str) -> Result<(), ForgeError> {
        let (o, r) = split_repo(repo)?;
        let path = format!(
            "/repos/{}/{}/issues/{number}/labels",
            segment(o),
            segment(r)
        );
        self.expect(
            Method::POST,
            &path,
            Scope::Repo(o, r),
            Some(&json!({ "labels": [label] })),
            &[200, 201],
        )
        .map(drop)
    }

    /// Removes a label from an issue or pull request: GitHub's `DELETE
    /// /repos/{repo}/issues/{number}/labels/{name}`, Gitea's by the label's
    /// id (looked up among the issue's labels). A label that is not there
    /// (404, or not on the issue) is no error.
    pub fn remove_label(&self, repo: &str, number: u64, label: &str) -> Result<(), ForgeError> {
        let (o, r) = split_repo(repo)?;
        let base = format!(
            "/repos/{}/{}/issues/{number}/labels",
            segment(o),
            segment(r)
        );
        let target = match self.flavour {
            Flavour::GitHub => segment(label),
            Flavour::Gitea => {
                let found = self
                    .label_values(&base, Scope::Repo(o, r))?
                    .into_iter()
                    .find(|l| l["name"].as_str() == Some(label))
                    .and_then(|l| l["id"].as_u64());
                match found {
                    Some(id) => id.to_string(),
                    None => return Ok(()),
                }
            }
        };
        self.expect(
            Method::DELETE,
            &format!("{base}/{target}"),
            Scope::Repo(o, r),
            None,
            &[200, 204, 404],
        )
        .map(drop)
    }

    /// `GET /repos/{repo}/issues/{number}/labels`, every page: the names.
    pub fn issue_labels(&self, repo: &str, number: u64) -> Result<Vec<String>, ForgeError> {
        let (o, r) = split_repo(repo)?;
        let path = format!(
            "/repos/{}/{}/issues/{number}/labels",
            segment(o),
            segment(r)
        );
        Ok(self
            .label_values(&path, Scope::Repo(o, r))?
            .iter()
            .map(|l| str_of(&l["name"]))
            .collect())
    }

    fn label_values(&self, path: &str, scope: Scope<'_>) -> Result<Vec<Value>, ForgeError> {
        let mut out = Vec::new();
        for page in self.pages(path, scope)? {
            out.extend(items(&page)?.iter().cloned());
        }
        Ok(out)
    }

    // --- Pull requests and people.

    /// `GET /repos/{repo}/pulls/{number}`.
    pub fn pull_request(&self, repo: &str, number: u64) -> Result<PullRequestInfo, ForgeError> {
        let (o, r) = split_repo(repo)?;
        let path = format!("/repos/{}/{}/pulls/{number}", segment(o), segment(r));
        let v = self
            .expect(Method::GET, &path, Scope::Repo(o, r), None, &[200])?
            .json()?;
        Ok(PullRequestInfo {
            number: v["number"].as_u64().unwrap_or(number),
            author: str_of(&v["user"]["login"]),
            head_sha: str_of(&v["head"]["sha"]),
            head_ref: str_of(&v["head"]["ref"]),
            base_ref: str_of(&v["base"]["ref"]),
            base_sha: str_of(&v["base"]["sha"]),
            draft: v["draft"].as_bool().unwrap_or(false),
            merged: v["merged"].as_bool().unwrap_or(false),
            open: v["state"].as_str() == Some("open"),
            mergeable: v["mergeable"].as_bool(),
            title: str_of(&v["title"]),
            html_url: str_of(&v["html_url"]),
            labels: v["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|l| str_of(&l["name"]))
                .collect(),
        })
    }

    /// Whether `user` is a member of `org` (`GET /orgs/{org}/members/{user}`:
    /// 204 yes, 404 no). An account is its own org's member, as Prow has it
    /// (personal repositories). When the forge answers 302 (the client is
    /// not a member of `org`, so it may only see public membership), the
    /// redirect to `/orgs/{org}/public_members/{user}` is followed.
    pub fn is_member(&self, org: &str, user: &str) -> Result<bool, ForgeError> {
        if org.eq_ignore_ascii_case(user) {
            return Ok(true);
        }
        let path = format!("/orgs/{}/members/{}", segment(org), segment(user));
        let a = self.expect(Method::GET, &path, Scope::Org(org), None, &[204, 404, 302])?;
        match a.status {
            204 => Ok(true),
            404 => Ok(false),
            _ => {
                let public = format!("/orgs/{}/public_members/{}", segment(org), segment(user));
                let location = a
                    .headers
                    .get("location")
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| self.same_origin_path(l))
                    .unwrap_or(public);
                let a = self.expect(Method::GET, &location, Scope::Org(org), None, &[204, 404])?;
                Ok(a.status == 204)
            }
        }
    }

    /// Whether `user` is a collaborator of `repo` (`GET
    /// /repos/{repo}/collaborators/{user}`: 204 yes, 404 no); the owner
    /// always is.
    pub fn is_collaborator(&self, repo: &str, user: &str) -> Result<bool, ForgeError> {
        let (o, r) = split_repo(repo)?;
        if o.eq_ignore_ascii_case(user) {
            return Ok(true);
        }
        let path = format!(
            "/repos/{}/{}/collaborators/{}",
            segment(o),
            segment(r),
            segment(user)
        );
        let a = self.expect(Method::GET, &path, Scope::Repo(o, r), None, &[204, 404])?;
        Ok(a.status == 204)
    }

    /// The login the client's comments are made by: the token's user (`GET
    /// /user`), or a GitHub App's `slug[bot]` (`GET /app`). Asked once.
    pub fn bot_login(&self) -> Result<String, ForgeError> {
        if let Some(b) = self.bot.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(b);
        }
        let login = match self.credentials {
            Credentials::App(_) => {
                let v = self
                    .expect(Method::GET, "/app", Scope::App, None, &[200])?
                    .json()?;
                format!("{}[bot]", str_of(&v["slug"]))
            }
            _ => str_of(
                &self
                    .expect(Method::GET, "/user", Scope::App, None, &[200])?
                    .json()?["login"],
            ),
        };
        if login.is_empty() || login == "[bot]" {
            return Err(ForgeError::unexpected(Some(200), "the forge gave no login"));
        }
        *self.bot.lock().unwrap_or_else(|e| e.into_inner()) = Some(login.clone());
        Ok(login)
    }

    // --- Requests.

    /// Sends one request and reads the whole answer; the rate-limit
    /// headers are noted.
    fn send(
        &self,
        method: Method,
        url: &str,
        scope: Scope<'_>,
        body: Option<&Value>,
    ) -> Result<Answer, ForgeError> {
        let (authorization, installation) = self.authorization(scope)?;
        let mut req = Request::builder()
            .method(method)
            .uri(url)
            .header("user-agent", &self.user_agent);
        req = match self.flavour {
            Flavour::GitHub => req
                .header("accept", "application/vnd.github+json")
                .header("x-github-api-version", "2022-11-28"),
            Flavour::Gitea => req.header("accept", "application/json"),
        };
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        let bad =
            |e: ureq::http::Error| ForgeError::unexpected(None, format!("bad request {url}: {e}"));
        let sent = match body {
            Some(b) => {
                let bytes = serde_json::to_vec(b).unwrap_or_default();
                let req = req
                    .header("content-type", "application/json")
                    .body(bytes)
                    .map_err(bad)?;
                self.agent.run(req)
            }
            None => self.agent.run(req.body(()).map_err(bad)?),
        };
        let mut resp = sent.map_err(|e| ForgeError::unreachable(format!("{url}: {e}")))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .map_err(|e| ForgeError::unreachable(format!("{url}: reading the answer: {e}")))?;
        self.note_limits(status, &headers, &body);
        if let (401, Some(id), Credentials::App(app)) = (status, installation, &self.credentials) {
            app.forget(id);
        }
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// Sends a request to `path` under the endpoint and checks its status
    /// is one of `ok`.
    fn expect(
        &self,
        method: Method,
        path: &str,
        scope: Scope<'_>,
        body: Option<&Value>,
        ok: &[u16],
    ) -> Result<Answer, ForgeError> {
        let url = format!("{}{path}", self.endpoint);
        let a = self.send(method, &url, scope, body)?;
        if ok.contains(&a.status) {
            Ok(a)
        } else {
            Err(ForgeError::from_answer(
                a.status,
                &a.headers,
                &a.body,
                SystemTime::now(),
            ))
        }
    }

    /// Every page of a listing: `path` with the largest page size, then
    /// each `Link: <...>; rel="next"` (on the endpoint's origin only, so
    /// that credentials go nowhere else).
    fn pages(&self, path: &str, scope: Scope<'_>) -> Result<Vec<Value>, ForgeError> {
        let size = match self.flavour {
            Flavour::GitHub => "per_page=100",
            Flavour::Gitea => "limit=50",
        };
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut url = format!("{}{path}{sep}{size}", self.endpoint);
        let mut out = Vec::new();
        for _ in 0..MAX_PAGES {
            let a = self.send(Method::GET, &url, scope, None)?;
            if a.status != 200 {
                return Err(ForgeError::from_answer(
                    a.status,
                    &a.headers,
                    &a.body,
                    SystemTime::now(),
                ));
            }
            out.push(a.json()?);
            let next = a
                .headers
                .get_all("link")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .find_map(next_link);
            match next.as_deref().map(|n| (n, self.same_origin_path(n))) {
                None => return Ok(out),
                Some((_, Some(p))) => url = format!("{}{p}", self.endpoint),
                Some((n, None)) => {
                    return Err(ForgeError::unexpected(
                        Some(200),
                        format!("the next page {n:?} is not under {}", self.endpoint),
                    ))
                }
            }
        }
        Err(ForgeError::unexpected(
            Some(200),
            format!("more than {MAX_PAGES} pages at {path}"),
        ))
    }

    /// The path (under the endpoint) of a URL on the endpoint, or of an
    /// absolute path; `None` for anything elsewhere.
    fn same_origin_path(&self, url: &str) -> Option<String> {
        if let Some(rest) = url.strip_prefix(&self.endpoint) {
            return (rest.is_empty() || rest.starts_with(['/', '?'])).then(|| rest.to_string());
        }
        if url.starts_with('/') && !url.starts_with("//") {
            // A path on the endpoint's host: keep it only under the API's base path.
            let origin_end = self
                .endpoint
                .find("://")
                .map(|i| i + 3)
                .and_then(|s| self.endpoint[s..].find('/').map(|j| s + j));
            let base_path = origin_end.map(|i| &self.endpoint[i..]).unwrap_or("");
            return url
                .strip_prefix(base_path)
                .filter(|rest| rest.starts_with('/'))
                .map(str::to_string);
        }
        None
    }

    /// The `Authorization` header for `scope`, and the installation whose
    /// token it carries.
    fn authorization(&self, scope: Scope<'_>) -> Result<(Option<String>, Option<u64>), ForgeError> {
        match &self.credentials {
            Credentials::None => Ok((None, None)),
            Credentials::Token(file) => {
                let t = file.get(parse_token)?;
                Ok((
                    Some(match self.flavour {
                        Flavour::GitHub => format!("Bearer {t}"),
                        Flavour::Gitea => format!("token {t}"),
                    }),
                    None,
                ))
            }
            Credentials::App(app) => match scope {
                Scope::App => Ok((
                    Some(format!("Bearer {}", app.jwt(SystemTime::now())?)),
                    None,
                )),
                Scope::Repo(o, r) => self.installation_auth(app, o, Some(r)),
                Scope::Org(o) => self.installation_auth(app, o, None),
            },
        }
    }

    /// An installation token for `account`'s installation, looked up and
    /// exchanged when not cached.
    fn installation_auth(
        &self,
        app: &App,
        account: &str,
        repo: Option<&str>,
    ) -> Result<(Option<String>, Option<u64>), ForgeError> {
        let id = match app.installation(account) {
            Some(id) => id,
            None => {
                let id = self.find_installation(account, repo)?;
                app.set_installation(account, id);
                id
            }
        };
        let now = SystemTime::now();
        if let Some(t) = app.token(id, now) {
            return Ok((Some(format!("Bearer {t}")), Some(id)));
        }
        let path = format!("/app/installations/{id}/access_tokens");
        let v = self
            .expect(Method::POST, &path, Scope::App, None, &[200, 201])?
            .json()?;
        let token = str_of(&v["token"]);
        let expires = v["expires_at"]
            .as_str()
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            .map(SystemTime::from)
            .ok_or_else(|| {
                ForgeError::unexpected(Some(201), "the installation token has no expires_at")
            })?;
        if token.is_empty() {
            return Err(ForgeError::unexpected(
                Some(201),
                "the forge gave an empty installation token",
            ));
        }
        app.set_token(id, token.clone(), expires);
        Ok((Some(format!("Bearer {token}")), Some(id)))
    }

    /// The App's installation on `account`: `GET
    /// /repos/{account}/{repo}/installation` for a repository, else `GET
    /// /orgs/{account}/installation`, then `GET /users/{account}/installation`.
    fn find_installation(&self, account: &str, repo: Option<&str>) -> Result<u64, ForgeError> {
        let a = segment(account);
        let paths = match repo {
            Some(r) => vec![format!("/repos/{a}/{}/installation", segment(r))],
            None => vec![
                format!("/orgs/{a}/installation"),
                format!("/users/{a}/installation"),
            ],
        };
        let mut last = None;
        for path in paths {
            match self.expect(Method::GET, &path, Scope::App, None, &[200]) {
                Ok(ans) => {
                    return ans.json()?["id"].as_u64().ok_or_else(|| {
                        ForgeError::unexpected(Some(200), format!("{path}: no installation id"))
                    })
                }
                Err(e) if e.status == Some(404) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        let mut e = last.unwrap_or_else(|| ForgeError::unexpected(Some(404), "Not Found"));
        e.message = format!(
            "the GitHub App is not installed on {account}: {}",
            e.message
        );
        Err(e)
    }

    /// Notes when the forge says requests may go on again.
    fn note_limits(&self, status: u16, headers: &HeaderMap, body: &str) {
        let now = SystemTime::now();
        let mut until = self.limited_until.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(status, 403 | 429) {
            let e = ForgeError::from_answer(status, headers, body, now);
            let rate = e.message.to_ascii_lowercase().contains("rate limit")
                || error::rate_limit_reset(headers, now).is_some()
                || status == 429;
            if let (true, Some(wait)) = (rate, e.retry_after) {
                *until = Some(now + wait);
                return;
            }
        }
        if let Some(wait) = error::rate_limit_reset(headers, now) {
            *until = Some(now + wait);
        } else if headers.contains_key("x-ratelimit-remaining") {
            *until = None;
        }
    }
}

/// `org/repo` split; an error naming it otherwise.
fn split_repo(repo: &str) -> Result<(&str, &str), ForgeError> {
    match repo.split_once('/') {
        Some((o, r)) if !o.is_empty() && !r.is_empty() && !r.contains('/') => Ok((o, r)),
        _ => Err(ForgeError::unexpected(
            None,
            format!("{repo:?} is not ORG/REPO"),
        )),
    }
}

/// A JSON string's value, or empty.
fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// A page of a listing: its items.
fn items(page: &Value) -> Result<&Vec<Value>, ForgeError> {
    page.as_array()
        .ok_or_else(|| ForgeError::unexpected(Some(200), "the listing is not a JSON array"))
}

/// The `rel="next"` URL of a `Link` header (RFC 8288, as GitHub and Gitea
/// write it: `<URL>; rel="next", <URL>; rel="last"`). Written here: a
/// dozen lines against a crate for one header.
fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|part| {
        let (url, params) = part.trim().strip_prefix('<')?.split_once('>')?;
        params
            .split(';')
            .filter_map(|p| p.trim().strip_prefix("rel="))
            .any(|rel| {
                rel.trim_matches('"')
                    .split_whitespace()
                    .any(|r| r == "next")
            })
            .then(|| url.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_links_are_read_from_link_headers() {
        let h = r#"<https://api.github.com/repositories/1/issues/2/comments?page=2>; rel="next", <https://api.github.com/repositories/1/issues/2/comments?page=5>; rel="last""#;
        assert_eq!(
            next_link(h).as_deref(),
            Some("https://api.github.com/repositories/1/issues/2/comments?page=2")
        );
        assert_eq!(
            next_link(r#"<https://x/?page=1>; rel="prev", <https://x/?page=1>; rel="first""#),
            None
        );
        assert_eq!(
            next_link("<https://x/?page=3>; rel=next").as_deref(),
            Some("https://x/?page=3")
        );
        assert_eq!(next_link("garbage"), None);
    }

    #[test]
    fn endpoints_must_be_urls_and_apps_are_githubs() {
        let c = |endpoint: &str, flavour, auth| {
            Client::new(ClientConfig {
                endpoint: endpoint.into(),
                flavour,
                auth,
                user_agent: "t".into(),
            })
        };
        assert!(c("https://api.github.com/", Flavour::GitHub, Auth::None).is_ok());
        assert!(c("api.github.com", Flavour::GitHub, Auth::None).is_err());
        assert!(c("https://", Flavour::GitHub, Auth::None).is_err());
        let app = Auth::App {
            app_id: "1".into(),
            private_key_path: "/k".into(),
        };
        assert!(c("https://gitea.example.com/api/v1", Flavour::Gitea, app).is_err());
        let gh = c(
            "https://ghe.example.com/api/v3/",
            Flavour::GitHub,
            Auth::None,
        )
        .unwrap();
        assert_eq!(
            gh.same_origin_path("https://ghe.example.com/api/v3/x?page=2")
                .as_deref(),
            Some("/x?page=2")
        );
        assert_eq!(
            gh.same_origin_path("/api/v3/orgs/o/public_members/u")
                .as_deref(),
            Some("/orgs/o/public_members/u")
        );
        assert_eq!(
            gh.same_origin_path("https://evil.example.com/api/v3/x"),
            None
        );
        assert_eq!(gh.same_origin_path("https://ghe.example.com/api/v3x"), None);
        assert_eq!(gh.same_origin_path("/other/x"), None);
        assert!(split_repo("org/repo").is_ok());
        assert!(
            split_repo("org").is_err() && split_repo("a/b/c").is_err() && split_repo("/b").is_err()
        );
    }
}
