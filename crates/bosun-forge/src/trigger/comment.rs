//! Comments, reviews and review comments (Prow's `handleGenericComment`).

use super::commands::{
    drop_code_blocks, format_response, help_message, help_note, should_prune_help, Commands,
};
use super::run::{report_in_repo_failure, run_requested};
use super::select::{
    available_presubmits, filter_presubmits, presubmit_filter, pull_changes, trigger_matches,
    Contexts,
};
use super::trust::{is_bot, trusted_pull_request, trusted_user};
use super::{
    split_repo, Action, Comment, CommentAction, Host, HostError, Presubmits, PullRequest, Trigger,
    NEEDS_OK_TO_TEST, OK_TO_TEST,
};

/// The reply to a command on an untrusted pull request by an untrusted user.
pub const CANNOT_TRIGGER: &str =
    "Cannot trigger testing until a trusted user reviews the PR and leaves an `/ok-to-test` message.";
/// [`CANNOT_TRIGGER`] where `ignore_ok_to_test` is set.
pub const CANNOT_TRIGGER_IGNORE_OK_TO_TEST: &str = "PRs from untrusted users cannot be marked as trusted with `/ok-to-test` in this repo meaning untrusted PR authors can never trigger tests themselves. Collaborators can still trigger tests on the PR using `/test`.";
/// The reply to `/ok-to-test cancel` by an untrusted user.
pub const ONLY_TRUSTED_CANCEL: &str = "Only trusted users can revoke `/ok-to-test`.";

/// What a comment does, as Prow's trigger decides. Only a comment just
/// written (`Created`) on an open pull request, not by the bot, and naming
/// a command or a job's trigger outside code blocks, does anything:
///
/// 1. An untrusted commenter on an untrusted pull request gets
///    [`CANNOT_TRIGGER`] and nothing more (an untrusted commenter may test a
///    trusted pull request).
/// 2. `/ok-to-test` (unless `ignore_ok_to_test`) adds `ok-to-test`; with
///    `ok-to-test` there, `needs-ok-to-test` goes. `/ok-to-test cancel` by a
///    trusted user swaps them back and does nothing else; by an untrusted
///    one it gets [`ONLY_TRUSTED_CANCEL`].
/// 3. The jobs: those whose trigger matches, `/retest` (failed contexts on
///    the head and automatic jobs with none yet), `/retest-required` (the
///    same, non-optional), `/test-manual-required`, `/test all` and
///    `/ok-to-test` (automatic jobs), together. `/test ?`, a bare `/test`,
///    `/retest NAME`, and a `/test` that selected nothing get the help
///    comment listing the jobs instead.
/// 4. A `/test` or `/retest` that ran prunes earlier help comments; runs of
///    `/retest` and `/retest-required` carry the retest label. A draft pull
///    request runs what is asked; one GitHub cannot merge runs nothing.
///
/// bosun differs from Prow in two details: the job triggers and filters see
/// the text without code blocks (Prow drops them only to decide whether to
/// act, then filters the raw text, so a quoted `/test job` next to a real
/// `/retest` started `job`); and the labels `/ok-to-test cancel` leaves are
/// decided on the labels as they are after step 2 (Prow decides on the
/// labels read before it, which can leave neither label).
pub fn on_comment<H: Host + ?Sized>(
    host: &H,
    settings: &Trigger,
    c: &Comment,
) -> Result<Vec<Action>, HostError> {
    comment_actions(host, settings, c, None)
}

/// [`on_comment`], with the pull request and its presubmits when already
/// known (a pull request's description at `opened`).
pub(crate) fn comment_actions<H: Host + ?Sized>(
    host: &H,
    settings: &Trigger,
    c: &Comment,
    known: Option<(&PullRequest, &Presubmits)>,
) -> Result<Vec<Action>, HostError> {
    if c.action != CommentAction::Created || !c.is_pull || !c.issue_open {
        return Ok(Vec::new());
    }
    if is_bot(host, &c.author) {
        return Ok(Vec::new());
    }
    let fetched;
    let (pr, presubmits) = match known {
        Some(k) => k,
        None => {
            let pr = host.pull_request(&c.repo, c.number)?;
            let presubmits = host.presubmits(&pr)?;
            fetched = (pr, presubmits);
            (&fetched.0, &fetched.1)
        }
    };
    let text = drop_code_blocks(&c.body);
    let commands = Commands::of(&text);
    if !commands.any() && !presubmits.jobs.iter().any(|j| trigger_matches(j, &text)) {
        return Ok(Vec::new());
    }
    let (org, name) = split_repo(&c.repo);
    let mut out = Vec::new();
    let reply = |text: &str| Action::Comment {
        repo: c.repo.clone(),
        number: c.number,
        body: format_response(&c.body, &c.html_url, &c.author, text),
    };
    let commenter = trusted_user(host, settings, org, name, &c.author)?;
    let mut labels = None;
    if !commenter.trusted {
        let (l, trusted) =
            trusted_pull_request(host, settings, &c.repo, c.number, &c.issue_author, None)?;
        if !trusted {
            out.push(reply(if settings.ignore_ok_to_test {
                CANNOT_TRIGGER_IGNORE_OK_TO_TEST
            } else {
                CANNOT_TRIGGER
            }));
            return Ok(out);
        }
        labels = l;
    }
    let mut labels = match labels {
        Some(l) => l,
        None => host.labels(&c.repo, c.number)?,
    };
    let label = |out: &mut Vec<Action>, labels: &mut Vec<String>, name: &str, add: bool| {
        let (repo, number, label) = (c.repo.clone(), c.number, name.to_owned());
        if add {
            labels.push(label.clone());
            out.push(Action::AddLabel {
                repo,
                number,
                label,
            });
        } else {
            labels.retain(|l| *l != label);
            out.push(Action::RemoveLabel {
                repo,
                number,
                label,
            });
        }
    };
    let has = |labels: &[String], name: &str| labels.iter().any(|l| l == name);
    let honor = !settings.ignore_ok_to_test;
    let ok_to_test = honor && commands.ok_to_test;
    if ok_to_test && !has(&labels, OK_TO_TEST) {
        label(&mut out, &mut labels, OK_TO_TEST, true);
    }
    if (ok_to_test || has(&labels, OK_TO_TEST)) && has(&labels, NEEDS_OK_TO_TEST) {
        label(&mut out, &mut labels, NEEDS_OK_TO_TEST, false);
    }
    if honor && commands.ok_to_test_cancel {
        if !commenter.trusted {
            out.push(reply(ONLY_TRUSTED_CANCEL));
            return Ok(out);
        }
        if has(&labels, OK_TO_TEST) {
            label(&mut out, &mut labels, OK_TO_TEST, false);
        }
        if !has(&labels, NEEDS_OK_TO_TEST) {
            label(&mut out, &mut labels, NEEDS_OK_TO_TEST, true);
        }
        return Ok(out);
    }
    if ok_to_test && settings.trigger_github_workflows {
        out.push(Action::ApproveWorkflowRuns {
            repo: c.repo.clone(),
            head_ref: pr.head_ref.clone(),
            head_sha: pr.head_sha.clone(),
        });
    }
    report_in_repo_failure(pr, presubmits, &mut out);
    let filter = presubmit_filter(honor, &text, || {
        host.statuses(&c.repo, &pr.head_sha)
            .map(|s| Contexts::of(&s))
    })?;
    let mut changes = pull_changes(host, pr);
    let jobs = filter_presubmits(&filter, &mut changes, &pr.base_ref, &presubmits.jobs)?;
    if let Some(note) = help_note(&text, jobs.len()) {
        let available = available_presubmits(&mut changes, &pr.base_ref, &presubmits.jobs)?;
        let message = help_message(
            &c.repo,
            &pr.base_ref,
            note,
            &available.test_all,
            &available.optional,
            &available.required,
        );
        out.push(reply(&message));
        return Ok(out);
    }
    if settings.trigger_github_workflows && (commands.retest || commands.test_all) {
        out.push(Action::RerunFailedWorkflowRuns {
            repo: c.repo.clone(),
            head_ref: pr.head_ref.clone(),
            head_sha: pr.head_sha.clone(),
        });
    }
    if should_prune_help(&text) {
        out.push(Action::PruneHelpComments {
            repo: c.repo.clone(),
            number: c.number,
        });
    }
    let retest = commands.retest || commands.retest_required;
    run_requested(host, pr, jobs, retest, &mut out)?;
    Ok(out)
}

#[cfg(test)]
#[path = "comment_tests.rs"]
mod tests;
