//! What a decision on a pull request ends with, for pull request events
//! and comments alike: one run of the selected jobs (Prow's `runRequested`)
//! and the report of an in-repo configuration that could not be read.

use super::{pull_refs, Action, Host, HostError, Presubmits, PullRequest};
use bosun_config::Presubmit;

/// [`Action::InRepoConfigFailed`] when the in-repo configuration failed.
pub(crate) fn report_in_repo_failure(
    pr: &PullRequest,
    presubmits: &Presubmits,
    out: &mut Vec<Action>,
) {
    if let Some(error) = &presubmits.in_repo_error {
        out.push(Action::InRepoConfigFailed {
            repo: pr.repo.clone(),
            number: pr.number,
            head_sha: pr.head_sha.clone(),
            error: error.clone(),
        });
    }
}

/// Prow's `runRequested`: nothing when GitHub says the pull request cannot
/// be merged (`mergeable: false`) or nothing was selected; else one run of
/// the jobs on the base branch's current head.
pub(crate) fn run_requested<H: Host + ?Sized>(
    host: &H,
    pr: &PullRequest,
    jobs: Vec<Presubmit>,
    retest: bool,
    out: &mut Vec<Action>,
) -> Result<(), HostError> {
    if pr.mergeable == Some(false) || jobs.is_empty() {
        return Ok(());
    }
    let base_sha = host.branch_head(&pr.repo, &pr.base_ref)?;
    out.push(Action::Run {
        jobs,
        refs: pull_refs(pr, &base_sha),
        pr_number: pr.number,
        head_sha: pr.head_sha.clone(),
        retest,
    });
    Ok(())
}
