//! Which presubmits and postsubmits an event starts, with Prow's `trigger`
//! plugin's rules: its trust rules (members, collaborators, trusted apps, a
//! trusted org, `ok-to-test`), its comment commands (`/test`, `/retest`,
//! `/retest-required`, `/test-manual-required`, `/ok-to-test`,
//! `/ok-to-test cancel`, `/test ?`) with each job's own trigger, its job
//! filters (`always_run`, `run_if_changed`, `skip_if_only_changed`,
//! `branches`, `skip_branches`, `optional`) and its reply texts and labels.
//!
//! Everything here is synchronous and decides only: what the forge knows
//! (membership, labels, statuses, changed files, the jobs of a pull request)
//! is asked of a [`Host`] the daemon implements, and what to do comes back as
//! plain [`Action`]s (runs to start or abort, comments, labels) for the
//! daemon to carry out in order. Nothing is remembered between calls.
//!
//! - [`on_pull_request`]: a `pull_request` event (and, for `opened`, its
//!   description read as a comment, as Prow's hook does).
//! - [`on_comment`]: an issue comment, review or review comment.
//! - [`on_push`]: the postsubmits a push starts; [`push_refs`] what they
//!   check out.
//! - [`pull_refs`]: what a pull request's presubmits check out.
//!
//! Prow's parity, and where bosun differs, is written down at each function.

mod commands;
mod comment;
mod pull;
mod push;
mod refs;
mod run;
mod select;
mod trust;

use std::fmt;

use bosun_config::types::Refs;
use bosun_config::Presubmit;

pub use crate::hook::events::{Comment, CommentAction, CommentKind, PullRequest, Push};
pub use bosun_config::plugins::Trigger;
pub use commands::{
    drop_code_blocks, format_response, help_message, help_note, is_help_comment, should_prune_help,
    Commands, ABOUT, RETEST_WITH_TARGET_NOTE, TARGET_NOT_FOUND_NOTE, TEST_ALL_NOTHING_NOTE,
    TEST_WITHOUT_TARGET_NOTE,
};
pub use comment::{
    on_comment, CANNOT_TRIGGER, CANNOT_TRIGGER_IGNORE_OK_TO_TEST, ONLY_TRUSTED_CANCEL,
};
pub use pull::{on_pull_request, welcome_message, DRAFT_MESSAGE};
pub use push::{on_push, push_refs};
pub use refs::pull_refs;
pub use select::{
    available_presubmits, branch_matches, filter_presubmits, needs_explicit_trigger,
    postsubmit_should_run, presubmit_filter, presubmit_should_run, runs_against_changes,
    trigger_matches, Available, ChangedFiles, Contexts, Filter, Verdict,
};
pub use trust::{is_bot, trusted_pull_request, trusted_user, TrustedUser};

/// The label that makes an untrusted author's pull request trusted.
pub const OK_TO_TEST: &str = "ok-to-test";
/// The label on an untrusted author's pull request until it is trusted.
pub const NEEDS_OK_TO_TEST: &str = "needs-ok-to-test";
/// The label whose addition tests an untrusted pull request once.
pub const LGTM: &str = "lgtm";
/// The label of runs started by `/retest` or `/retest-required` (value
/// `true`), so that retests can be told apart.
pub const RETEST_LABEL: &str = "prow.k8s.io/retest";

/// Why the host could not answer (its message, shown as is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostError(pub String);

impl HostError {
    /// A host error saying `message`.
    pub fn new(message: impl Into<String>) -> HostError {
        HostError(message.into())
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HostError {}

/// A pull request's presubmits: the central ones and those of its in-repo
/// configuration as merged into the base.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Presubmits {
    /// The jobs (central only when `in_repo_error` is set).
    pub jobs: Vec<Presubmit>,
    /// Why the in-repo configuration could not be read (a merge conflict,
    /// a bad file), when it could not: the jobs are then the central ones,
    /// as Prow falls back to its static presubmits.
    pub in_repo_error: Option<String>,
}

/// What the trigger asks of the forge and of the configuration. The daemon
/// implements it; every call may fail with a [`HostError`], which ends the
/// decision with that error (no action is returned).
///
/// `repo` is `org/repo` throughout.
pub trait Host {
    /// The bot's own login (its `[bot]` app user is the bot too).
    fn bot(&self) -> &str;
    /// Whether `user` is a member of `org`.
    fn is_member(&self, org: &str, user: &str) -> Result<bool, HostError>;
    /// Whether `user` is a collaborator of `org/repo`.
    fn is_collaborator(&self, org: &str, repo: &str, user: &str) -> Result<bool, HostError>;
    /// The current labels of an issue or pull request.
    fn labels(&self, repo: &str, number: i64) -> Result<Vec<String>, HostError>;
    /// The pull request as it is now (for comments, whose payloads do not
    /// carry it); its `action` may be empty.
    fn pull_request(&self, repo: &str, number: i64) -> Result<PullRequest, HostError>;
    /// The commit a branch points at now (Prow reads the base SHA of a run
    /// this way, not from the event).
    fn branch_head(&self, repo: &str, branch: &str) -> Result<String, HostError>;
    /// The statuses on a commit: (context, state) with GitHub's states
    /// (`error`, `failure`, `pending`, `success`).
    fn statuses(&self, repo: &str, sha: &str) -> Result<Vec<(String, String)>, HostError>;
    /// The pull request's presubmits (see [`Presubmits`]).
    fn presubmits(&self, pr: &PullRequest) -> Result<Presubmits, HostError>;
    /// The files the pull request changes. Asked only when a job's
    /// `run_if_changed` or `skip_if_only_changed` must be evaluated, and at
    /// most once per call of an entry point.
    fn changed_files(&self, pr: &PullRequest) -> Result<Vec<String>, HostError>;
    /// How many pull requests `author` has had merged in `org`, for the
    /// prominent invitation to join the org (Prow's `org_invite`). Asked
    /// only for an untrusted author's new pull request; an error or the
    /// default (0) shows the plain invitation.
    fn merged_pulls(&self, org: &str, author: &str) -> Result<usize, HostError> {
        let _ = (org, author);
        Ok(0)
    }
}

/// What to do, in order.
// An event gives a handful of actions: `Run`'s size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Start these presubmits on a pull request.
    Run {
        /// The jobs.
        jobs: Vec<Presubmit>,
        /// What they check out ([`pull_refs`]).
        refs: Refs,
        /// The pull request.
        pr_number: i64,
        /// Its head commit.
        head_sha: String,
        /// Started by `/retest` or `/retest-required`: the runs get the
        /// label [`RETEST_LABEL`]` = true`.
        retest: bool,
    },
    /// Abort the pull request's presubmit runs that have not finished: all
    /// of them, or those of every head but `except_head` (a new head was
    /// pushed). Prow's text for them is "Aborted by trigger plugin.".
    Abort {
        /// `org/repo`.
        repo: String,
        /// The pull request.
        number: i64,
        /// The head whose runs are kept.
        except_head: Option<String>,
    },
    /// Comment on the issue or pull request.
    Comment {
        /// `org/repo`.
        repo: String,
        /// The issue or pull request.
        number: i64,
        /// The text.
        body: String,
    },
    /// Add a label.
    AddLabel {
        /// `org/repo`.
        repo: String,
        /// The issue or pull request.
        number: i64,
        /// The label.
        label: String,
    },
    /// Remove a label.
    RemoveLabel {
        /// `org/repo`.
        repo: String,
        /// The issue or pull request.
        number: i64,
        /// The label.
        label: String,
    },
    /// Delete the bot's earlier help comments on the pull request (those
    /// for which [`is_help_comment`] is true): a `/test` or `/retest` worked.
    PruneHelpComments {
        /// `org/repo`.
        repo: String,
        /// The pull request.
        number: i64,
    },
    /// Approve the GitHub Actions runs of the head waiting for approval
    /// (`/ok-to-test` with `trigger_github_workflows`).
    ApproveWorkflowRuns {
        /// `org/repo`.
        repo: String,
        /// The head branch.
        head_ref: String,
        /// The head commit.
        head_sha: String,
    },
    /// Rerun the head's failed GitHub Actions runs (`/retest` or `/test all`
    /// with `trigger_github_workflows`).
    RerunFailedWorkflowRuns {
        /// `org/repo`.
        repo: String,
        /// The head branch.
        head_ref: String,
        /// The head commit.
        head_sha: String,
    },
    /// The pull request's in-repo configuration could not be read: only
    /// central presubmits were considered. Prow only logs this; bosun tells
    /// the daemon, which may tell the author.
    InRepoConfigFailed {
        /// `org/repo`.
        repo: String,
        /// The pull request.
        number: i64,
        /// Its head commit.
        head_sha: String,
        /// Why ([`Presubmits::in_repo_error`]).
        error: String,
    },
}

/// `org/repo` split; a name without `/` is all org.
pub(crate) fn split_repo(repo: &str) -> (&str, &str) {
    repo.split_once('/').unwrap_or((repo, ""))
}

#[cfg(test)]
mod fake;
