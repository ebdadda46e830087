//! A [`Host`] for the trigger's unit tests (Prow's `fakegithub` in what the
//! trigger asks of it), and jobs as Prow's test tables write them.

use std::cell::RefCell;
use std::sync::Arc;

use bosun_config::types::{JobSource, PostsubmitFields, PresubmitFields};
use bosun_config::{Job, Origin, Postsubmit, Presubmit};

use super::{Host, HostError, Presubmits, PullRequest};

/// Answers from fixed data and remembers what it was asked.
pub(crate) struct FakeHost {
    pub bot: String,
    /// (org, user) memberships.
    pub members: Vec<(String, String)>,
    pub collaborators: Vec<String>,
    pub labels: Vec<String>,
    /// The pull request `pull_request` gives.
    pub pr: PullRequest,
    pub statuses: Vec<(String, String)>,
    pub presubmits: Presubmits,
    pub changed: Vec<String>,
    pub changed_fails: bool,
    pub merged: usize,
    pub calls: RefCell<Vec<String>>,
}

impl FakeHost {
    pub fn new(bot: &str) -> FakeHost {
        FakeHost {
            bot: bot.into(),
            members: Vec::new(),
            collaborators: Vec::new(),
            labels: Vec::new(),
            pr: PullRequest::default(),
            statuses: Vec::new(),
            presubmits: Presubmits::default(),
            changed: Vec::new(),
            changed_fails: false,
            merged: 0,
            calls: RefCell::new(Vec::new()),
        }
    }

    pub fn calls(&self) -> Vec<String> {
        self.calls.borrow().clone()
    }

    fn call(&self, what: String) {
        self.calls.borrow_mut().push(what);
    }
}

impl Host for FakeHost {
    fn bot(&self) -> &str {
        &self.bot
    }

    fn is_member(&self, org: &str, user: &str) -> Result<bool, HostError> {
        self.call(format!("is_member {org} {user}"));
        Ok(self.members.iter().any(|(o, u)| o == org && u == user))
    }

    fn is_collaborator(&self, org: &str, repo: &str, user: &str) -> Result<bool, HostError> {
        self.call(format!("is_collaborator {org}/{repo} {user}"));
        Ok(self
            .collaborators
            .iter()
            .any(|c| c.eq_ignore_ascii_case(user)))
    }

    fn labels(&self, repo: &str, number: i64) -> Result<Vec<String>, HostError> {
        self.call(format!("labels {repo} {number}"));
        Ok(self.labels.clone())
    }

    fn pull_request(&self, repo: &str, number: i64) -> Result<PullRequest, HostError> {
        self.call(format!("pull_request {repo} {number}"));
        Ok(self.pr.clone())
    }

    fn branch_head(&self, repo: &str, branch: &str) -> Result<String, HostError> {
        self.call(format!("branch_head {repo} {branch}"));
        Ok(format!("base-of-{branch}"))
    }

    fn statuses(&self, repo: &str, sha: &str) -> Result<Vec<(String, String)>, HostError> {
        self.call(format!("statuses {repo} {sha}"));
        Ok(self.statuses.clone())
    }

    fn presubmits(&self, pr: &PullRequest) -> Result<Presubmits, HostError> {
        self.call(format!("presubmits {} {}", pr.repo, pr.number));
        Ok(self.presubmits.clone())
    }

    fn changed_files(&self, pr: &PullRequest) -> Result<Vec<String>, HostError> {
        self.call(format!("changed_files {} {}", pr.repo, pr.number));
        if self.changed_fails {
            return Err(HostError::new("error getting changes"));
        }
        Ok(self.changed.clone())
    }

    fn merged_pulls(&self, org: &str, author: &str) -> Result<usize, HostError> {
        self.call(format!("merged_pulls {org} {author}"));
        Ok(self.merged)
    }
}

fn origin() -> Origin {
    Origin {
        file: Arc::from("test.yaml"),
        mark: Default::default(),
        keys: Box::new([]),
    }
}

/// A presubmit as Prow's tables write one: a name, nothing else set
/// (context defaults to the name, trigger and rerun command are empty
/// unless set).
pub(crate) fn presubmit(name: &str) -> Presubmit {
    let base = bosun_config::types::JobBase {
        name: name.into(),
        ..Default::default()
    };
    Job {
        base,
        kind: PresubmitFields {
            context: name.into(),
            ..PresubmitFields::default()
        },
        presets: Vec::new(),
        cluster_written: false,
        source: JobSource::Central,
        origin: origin(),
    }
}

/// A presubmit with Prow's test tables' usual trigger
/// `(?m)^/test (?:.*? )?NAME(?: .*?)?$` and rerun command `/test NAME`.
pub(crate) fn triggered(name: &str, context: &str) -> Presubmit {
    let mut job = presubmit(name);
    job.kind.context = context.into();
    job.kind.trigger = format!("(?m)^/test (?:.*? )?{name}(?: .*?)?$");
    job.kind.rerun_command = format!("/test {name}");
    job
}

/// A postsubmit with just a name.
pub(crate) fn postsubmit(name: &str) -> Postsubmit {
    let base = bosun_config::types::JobBase {
        name: name.into(),
        ..Default::default()
    };
    Job {
        base,
        kind: PostsubmitFields::default(),
        presets: Vec::new(),
        cluster_written: false,
        source: JobSource::Central,
        origin: origin(),
    }
}
