//! A fake GitHub REST API for tests, never laxer than GitHub: every request
//! is checked against GitHub's REST description before it is answered, and
//! what bosun reported (statuses, comments, labels) is kept for tests to
//! assert.
//!
//! [`FakeGitHub::start`] serves HTTP/1.1 on 127.0.0.1, a random port, in
//! background threads (std sockets, no async runtime). Each request is
//! checked in this order, each refusal answered as GitHub answers it and,
//! where the request is malformed, recorded in [`FakeGitHub::violations`]
//! (which tests assert is empty):
//!
//! 1. `User-Agent` present, else 403 (GitHub's text on the missing header).
//! 2. Method and path an operation of the description (the vendored part
//!    of `@octokit/openapi`, `tests/fixtures/github/openapi-rest.json`,
//!    holding the operations bosun's client uses), else 404 `Not Found`.
//! 3. An injected failure ([`FakeGitHub::fail_next`]) for it, answered
//!    instead (not a violation).
//! 4. `Authorization: Bearer <t>` or `token <t>`: an App JWT (RS256, the
//!    App's key, `iss`, `iat`, `exp` at most 10 minutes after `iat`) on the
//!    App's operations (`GET /app`, `POST /app/installations/{id}/access_tokens`,
//!    `GET /orgs/{org}/installation`, `GET /repos/{owner}/{repo}/installation`),
//!    a token the fake issued or knows elsewhere (a user's from
//!    [`FakeGitHub::token`]/[`FakeGitHub::add_token`], or an unexpired
//!    installation token, only on its own organization's repositories):
//!    else 401 `Requires authentication`, `Bad credentials` or GitHub's JWT
//!    texts, or 403 `Resource not accessible by integration`.
//! 5. The rate budget ([`FakeGitHub::set_rate_limit`]): spent, 403 `API
//!    rate limit exceeded` (not a violation). Every answer carries
//!    `X-RateLimit-Limit/Remaining/Used/Reset/Resource`.
//! 6. `Accept`, if sent, a JSON media type (else 415); `X-GitHub-Api-Version`,
//!    if sent, `2022-11-28`, the version whose shapes the fake answers.
//! 7. Path parameters by their schemas (else 404), query parameters by
//!    theirs (else 422; an unknown one is a violation only), `per_page` at
//!    most 100 (more is a violation, capped as GitHub caps it).
//! 8. The body: JSON (else 400 `Problems parsing JSON`), valid by the
//!    operation's request schema (else 422 `Validation Failed`, GitHub's
//!    `errors` shape).
//! 9. What the description does not say and GitHub enforces: a status
//!    `description` of at most 140 characters, at most 1,000 statuses per
//!    SHA and context ("This SHA and context has reached the maximum number
//!    of statuses.", not a violation), a status only on a known commit
//!    ("No commit found for SHA: ..."), a comment body of at most 65,536
//!    characters, a label name of at most 50.
//!
//! Answers are shaped as the description's response schemas, and the fake
//! checks each answer it sends against them (a mismatch is a violation
//! too, so that the fake cannot drift from GitHub's shapes). List
//! operations paginate (`per_page` 30 by default, `Link` with `next`,
//! `last`, `first`, `prev`).
//!
//! Tests register what GitHub would know ([`FakeGitHub::add_commit`],
//! [`FakeGitHub::add_pull`], [`FakeGitHub::set_member`], ...), read back
//! what bosun did ([`FakeGitHub::statuses`], [`FakeGitHub::comments`],
//! [`FakeGitHub::labels`], [`FakeGitHub::requests`]) and inject failures
//! ([`FakeGitHub::fail_next`], [`FakeGitHub::down`]). Every method takes
//! `&self` and is thread-safe.

mod app_auth;
mod describe;
mod handle;
mod server;
mod shapes;
mod state;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use state::{latest, App, Injection, Rate, Shared, State, Token};

pub use app_auth::app_jwt;
pub use shapes::API_VERSION;
pub use state::{Comment, Failure, PullSpec, RecordedRequest, Status};

/// The login of [`FakeGitHub::token`]'s user.
pub const BOT_LOGIN: &str = "bosun-bot";

/// The fake GitHub; serves until dropped.
pub struct FakeGitHub {
    shared: Arc<Shared>,
    server: server::Server,
}

impl FakeGitHub {
    /// Serves a fake GitHub on 127.0.0.1, a random port, with one user
    /// token ([`FakeGitHub::token`], user [`BOT_LOGIN`]), no App, no
    /// repositories, and a full rate budget (5,000 an hour).
    pub fn start() -> FakeGitHub {
        let now = Timestamp::now();
        let state = State {
            started: now,
            offset: Duration::ZERO,
            next_id: 1000,
            ids: HashMap::new(),
            tokens: HashMap::from([(
                default_token(),
                Token::User {
                    login: BOT_LOGIN.into(),
                },
            )]),
            app: None,
            installations: BTreeMap::new(),
            repos: BTreeMap::new(),
            commits: HashSet::new(),
            statuses: HashMap::new(),
            pulls: HashMap::new(),
            issues: HashMap::new(),
            comments: HashMap::new(),
            labels: HashMap::new(),
            members: HashSet::new(),
            collaborators: HashSet::new(),
            injections: Vec::new(),
            rate: Rate {
                limit: 5000,
                remaining: 5000,
                reset: now.as_second() + 3600,
            },
            requests: Vec::new(),
            violations: Vec::new(),
        };
        let slot: Arc<Mutex<Option<Arc<Shared>>>> = Arc::new(Mutex::new(None));
        let handler_slot = slot.clone();
        let server = server::Server::start(Arc::new(move |request| {
            let shared = handler_slot
                .lock()
                .unwrap()
                .clone()
                .expect("the fake is set up");
            handle::handle(&shared, request)
        }));
        let shared = Arc::new(Shared {
            url: format!("http://{}", server.addr()),
            state: Mutex::new(state),
        });
        *slot.lock().unwrap() = Some(shared.clone());
        FakeGitHub { shared, server }
    }

    /// Its base URL (`http://127.0.0.1:<port>`), what bosun's client takes
    /// as GitHub's API endpoint.
    pub fn url(&self) -> String {
        self.shared.url.clone()
    }

    /// A valid user token (user [`BOT_LOGIN`]).
    pub fn token(&self) -> String {
        default_token()
    }

    /// Makes `token` a valid token of user `login`.
    pub fn add_token(&self, token: &str, login: &str) {
        self.shared.state().tokens.insert(
            token.to_owned(),
            Token::User {
                login: login.to_owned(),
            },
        );
    }

    /// Registers the GitHub App `app_id` (slug `bosun`, so its bot is
    /// `bosun[bot]`) whose JWTs are verified with `public_key_pem` (PEM
    /// `PUBLIC KEY` or `RSA PUBLIC KEY`).
    pub fn app(&self, app_id: u64, public_key_pem: &str) {
        self.shared.state().app = Some(App {
            id: app_id,
            slug: "bosun".into(),
            key: app_auth::rsa_public_key(public_key_pem),
        });
    }

    /// Installs the App on organization (or user) `org`; its installation
    /// id. Its tokens, from `POST /app/installations/{id}/access_tokens`,
    /// expire after an hour (of the fake's clock) and reach `org`'s
    /// repositories only.
    pub fn install_app(&self, org: &str) -> u64 {
        let mut state = self.shared.state();
        assert!(state.app.is_some(), "install_app after app");
        let id = state.fresh_id();
        state.installations.insert(id, org.to_ascii_lowercase());
        id
    }

    /// Moves the fake's clock `by` ahead (tokens expire, rate limits
    /// reset, JWTs are checked against it).
    pub fn advance(&self, by: Duration) {
        self.shared.state().offset += by;
    }

    /// Registers commit `sha` of repository `repo` (`owner/name`), which
    /// also makes the repository known.
    pub fn add_commit(&self, repo: &str, sha: &str) {
        let mut state = self.shared.state();
        let key = state.add_repo(repo);
        state.commits.insert((key, sha.to_owned()));
    }

    /// Registers pull request `pull` of `repo`, its head and base commits,
    /// and its labels.
    pub fn add_pull(&self, repo: &str, pull: PullSpec) {
        let mut state = self.shared.state();
        let key = state.add_repo(repo);
        state.commits.insert((key.clone(), pull.head_sha.clone()));
        state.commits.insert((key.clone(), pull.base_sha.clone()));
        state
            .labels
            .insert((key.clone(), pull.number), pull.labels.clone());
        state.pulls.insert((key, pull.number), pull);
    }

    /// Registers issue `number` of `repo` by `author` (comments and labels
    /// take an issue or a pull request).
    pub fn add_issue(&self, repo: &str, number: u64, author: &str) {
        let mut state = self.shared.state();
        let key = state.add_repo(repo);
        state.issues.insert((key, number), author.to_owned());
    }

    /// Makes `user` a member of organization `org`.
    pub fn set_member(&self, org: &str, user: &str) {
        self.shared
            .state()
            .members
            .insert((org.to_ascii_lowercase(), user.to_ascii_lowercase()));
    }

    /// Makes `user` a collaborator of `repo`.
    pub fn set_collaborator(&self, repo: &str, user: &str) {
        let mut state = self.shared.state();
        let key = state.add_repo(repo);
        state.collaborators.insert((key, user.to_ascii_lowercase()));
    }

    /// Every status created on `sha` of `repo`, oldest first.
    pub fn statuses(&self, repo: &str, sha: &str) -> Vec<Status> {
        let key = (repo.to_ascii_lowercase(), sha.to_owned());
        self.shared
            .state()
            .statuses
            .get(&key)
            .cloned()
            .unwrap_or_default()
    }

    /// The latest status of each context on `sha` of `repo` (contexts
    /// compared case-insensitively, as GitHub does), in the order their
    /// contexts first appeared.
    pub fn latest_statuses(&self, repo: &str, sha: &str) -> Vec<Status> {
        latest(&self.statuses(repo, sha))
    }

    /// The comments on issue or pull request `number` of `repo`, oldest
    /// first.
    pub fn comments(&self, repo: &str, number: u64) -> Vec<Comment> {
        let key = (repo.to_ascii_lowercase(), number);
        self.shared
            .state()
            .comments
            .get(&key)
            .cloned()
            .unwrap_or_default()
    }

    /// The labels of issue or pull request `number` of `repo`, in the order
    /// they were added.
    pub fn labels(&self, repo: &str, number: u64) -> Vec<String> {
        let key = (repo.to_ascii_lowercase(), number);
        self.shared
            .state()
            .labels
            .get(&key)
            .cloned()
            .unwrap_or_default()
    }

    /// Answers the next `n` requests with `method` (`"*"`: any) whose path
    /// matches `path_glob` (a glob: `*` also crosses `/`; `/repos/*/statuses/*`)
    /// with `failure`, once they are routed to a described operation and
    /// before anything else is checked.
    pub fn fail_next(&self, method: &str, path_glob: &str, n: usize, failure: Failure) {
        let glob = globset::Glob::new(path_glob)
            .unwrap_or_else(|e| panic!("{path_glob}: {e}"))
            .compile_matcher();
        self.shared.state().injections.push(Injection {
            method: method.to_ascii_uppercase(),
            glob,
            remaining: n,
            failure,
        });
    }

    /// Down: every connection closed unanswered (new ones at once, a
    /// kept-alive one at its next request); up again: answered.
    pub fn down(&self, down: bool) {
        self.server.set_down(down);
    }

    /// Every request answered, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.state().requests.clone()
    }

    /// Every request GitHub would refuse as malformed (and the fake
    /// refused), and every answer of the fake's own that its description
    /// does not allow: `"<METHOD> <path>: <why>"`. Tests assert it is empty.
    pub fn violations(&self) -> Vec<String> {
        self.shared.state().violations.clone()
    }

    /// The rate budget: `remaining` requests of 5,000 until `reset_in` from
    /// now (the fake's clock), then 5,000 again.
    pub fn set_rate_limit(&self, remaining: u32, reset_in: Duration) {
        let mut state = self.shared.state();
        let reset = (state.now() + reset_in).as_second();
        state.rate.remaining = remaining;
        state.rate.reset = reset;
    }
}

impl std::fmt::Debug for FakeGitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeGitHub")
            .field("url", &self.shared.url)
            .finish()
    }
}

/// The test App's private key (`tests/fixtures/github/app-private-key.pem`,
/// PEM `RSA PRIVATE KEY` as GitHub gives an App's key), made for these
/// tests only.
pub fn app_private_key_pem() -> String {
    String::from_utf8(super::fixture("github/app-private-key.pem")).unwrap()
}

/// The test App's public key (PEM `PUBLIC KEY`), for [`FakeGitHub::app`].
pub fn app_public_key_pem() -> String {
    String::from_utf8(super::fixture("github/app-public-key.pem")).unwrap()
}

/// The operations of the vendored REST description, each as its method
/// and path template (`("POST", "/repos/{owner}/{repo}/statuses/{sha}")`):
/// exactly those bosun's client uses, and all the fake serves.
pub fn operations() -> Vec<(String, String)> {
    describe::description()
        .operations
        .iter()
        .map(|op| (op.method.clone(), op.template.clone()))
        .collect()
}

/// What GitHub's REST description says is wrong with `body` as answer
/// `status` to the operation `method` `template` (as [`operations`] names
/// it): its response schema for that status, else GitHub's error shapes
/// (`basic-error`, `validation-error` for a 422). Empty when it fits.
pub fn response_errors(method: &str, template: &str, status: u16, body: &Value) -> Vec<String> {
    let description = describe::description();
    let op = description
        .operations
        .iter()
        .find(|op| op.method == method && op.template == template)
        .unwrap_or_else(|| panic!("no operation {method} {template} in the description"));
    description.response_errors(Some(op), status, body)
}

fn default_token() -> String {
    format!("ghp_{}", "b0sun".repeat(7) + "0")
}
