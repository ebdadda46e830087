//! The fake's state, shared by `FakeGitHub` (the tests' side) and `handle`
//! (the requests it answers): what GitHub would know (repositories, commits,
//! pulls, issues, members, collaborators, tokens, the App and its
//! installations), what bosun did there (statuses, comments, labels), the
//! failures to inject, the rate budget, the requests answered and the
//! violations seen.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use jiff::Timestamp;

/// A pull request as a test registers it
/// ([`FakeGitHub::add_pull`](super::FakeGitHub::add_pull)); head and base
/// are branches of the same repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullSpec {
    /// Its number (also its issue's).
    pub number: u64,
    /// Its author's login.
    pub author: String,
    /// Its title.
    pub title: String,
    /// Its description, if any.
    pub body: Option<String>,
    /// The head branch.
    pub head_ref: String,
    /// The head commit (registered as a commit of the repository).
    pub head_sha: String,
    /// The base branch.
    pub base_ref: String,
    /// The base commit (registered as a commit of the repository).
    pub base_sha: String,
    /// A draft.
    pub draft: bool,
    /// Whether it merges cleanly; `None` while GitHub has not computed it.
    pub mergeable: Option<bool>,
    /// Its labels' names.
    pub labels: Vec<String>,
    /// Closed.
    pub closed: bool,
    /// Merged (and closed).
    pub merged: bool,
}

impl Default for PullSpec {
    /// Pull request 1 by `author`, `feature` onto `main`, open, mergeable.
    fn default() -> PullSpec {
        PullSpec {
            number: 1,
            author: "author".into(),
            title: "A change".into(),
            body: None,
            head_ref: "feature".into(),
            head_sha: "1".repeat(40),
            base_ref: "main".into(),
            base_sha: "2".repeat(40),
            draft: false,
            mergeable: Some(true),
            labels: Vec::new(),
            closed: false,
            merged: false,
        }
    }
}

/// A commit status as GitHub keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Its id.
    pub id: u64,
    /// Its context (as sent; GitHub compares contexts case-insensitively).
    pub context: String,
    /// `error`, `failure`, `pending` or `success`.
    pub state: String,
    /// Its description, if sent.
    pub description: Option<String>,
    /// Its target URL, if sent.
    pub target_url: Option<String>,
    /// When it was created (the fake's clock).
    pub created_at: Timestamp,
    /// Who created it (a login; an App's is `<slug>[bot]`).
    pub creator: String,
}

/// An issue or pull request comment as GitHub keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// Its id.
    pub id: u64,
    /// Its text.
    pub body: String,
    /// Its author's login.
    pub author: String,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last edited (or created).
    pub updated_at: Timestamp,
}

/// A failure [`FakeGitHub::fail_next`](super::FakeGitHub::fail_next)
/// answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// That status (a 5xx: GitHub's `Server Error` body).
    Status(u16),
    /// 404 `Not Found`.
    NotFound,
    /// 422 with GitHub's message (`No commit found for SHA: ...`, the
    /// 1,000 statuses cap), as GitHub refuses a request it will never take.
    Unprocessable(String),
    /// 403 over a rate limit: the primary one (`X-RateLimit-Remaining: 0`,
    /// `X-RateLimit-Reset` in `reset_in`) or a secondary one
    /// (`Retry-After: reset_in`, in seconds).
    RateLimit {
        /// When the limit resets.
        reset_in: Duration,
        /// A secondary limit.
        secondary: bool,
    },
}

/// A request as the fake answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// Its method.
    pub method: String,
    /// Its path, as sent (still escaped).
    pub path: String,
    /// Its query string, without `?` (empty when none).
    pub query: String,
    /// Its body (UTF-8, lossily).
    pub body: String,
    /// The status answered.
    pub status: u16,
}

pub(super) enum Token {
    User { login: String },
    Installation { id: u64, expires_at: Timestamp },
}

pub(super) struct App {
    pub(super) id: u64,
    pub(super) slug: String,
    pub(super) key: Vec<u8>,
}

pub(super) struct Injection {
    pub(super) method: String,
    pub(super) glob: globset::GlobMatcher,
    pub(super) remaining: usize,
    pub(super) failure: Failure,
}

pub(super) struct Rate {
    pub(super) limit: u32,
    pub(super) remaining: u32,
    pub(super) reset: i64,
}

/// A repository-scoped key: the repository (`owner/name`, lowercase, as
/// GitHub's names are case-insensitive) and a number or SHA.
pub(super) type Key<T> = (String, T);

pub(super) struct State {
    pub(super) started: Timestamp,
    pub(super) offset: Duration,
    pub(super) next_id: u64,
    pub(super) ids: HashMap<String, u64>,
    pub(super) tokens: HashMap<String, Token>,
    pub(super) app: Option<App>,
    /// Installation id → organization (lowercase).
    pub(super) installations: BTreeMap<u64, String>,
    /// Lowercase `owner/name` → as registered.
    pub(super) repos: BTreeMap<String, String>,
    pub(super) commits: HashSet<Key<String>>,
    pub(super) statuses: HashMap<Key<String>, Vec<Status>>,
    pub(super) pulls: HashMap<Key<u64>, PullSpec>,
    pub(super) issues: HashMap<Key<u64>, String>,
    pub(super) comments: HashMap<Key<u64>, Vec<Comment>>,
    pub(super) labels: HashMap<Key<u64>, Vec<String>>,
    pub(super) members: HashSet<(String, String)>,
    pub(super) collaborators: HashSet<(String, String)>,
    pub(super) injections: Vec<Injection>,
    pub(super) rate: Rate,
    pub(super) requests: Vec<RecordedRequest>,
    pub(super) violations: Vec<String>,
}

impl State {
    pub(super) fn now(&self) -> Timestamp {
        Timestamp::now() + self.offset
    }

    /// An id for `what` (`user:<login>`, `repo:<name>`, ...), the same each
    /// time.
    pub(super) fn id(&mut self, what: &str) -> u64 {
        if let Some(id) = self.ids.get(what) {
            return *id;
        }
        let id = self.fresh_id();
        self.ids.insert(what.to_owned(), id);
        id
    }

    pub(super) fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub(super) fn add_repo(&mut self, repo: &str) -> String {
        assert!(
            repo.split('/').count() == 2,
            "a repository is owner/name: {repo}"
        );
        let key = repo.to_ascii_lowercase();
        self.repos
            .entry(key.clone())
            .or_insert_with(|| repo.to_owned());
        key
    }
}

pub(super) struct Shared {
    pub(super) url: String,
    pub(super) state: Mutex<State>,
}

impl Shared {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock leaves the state as
        // it was: still worth reading.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The latest of each context (case-insensitively), in first-seen order.
pub(super) fn latest(statuses: &[Status]) -> Vec<Status> {
    let mut order: Vec<String> = Vec::new();
    let mut last: HashMap<String, Status> = HashMap::new();
    for s in statuses {
        let context = s.context.to_lowercase();
        if !last.contains_key(&context) {
            order.push(context.clone());
        }
        last.insert(context, s.clone());
    }
    order
        .into_iter()
        .map(|c| last.remove(&c).unwrap())
        .collect()
}
