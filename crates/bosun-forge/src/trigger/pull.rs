//! `pull_request` events (Prow's `handlePR`).

use super::commands::ABOUT;
use super::comment::comment_actions;
use super::run::{report_in_repo_failure, run_requested};
use super::select::{filter_presubmits, pull_changes, Filter};
use super::trust::{is_bot, trusted_pull_request, trusted_user};
use super::{
    split_repo, Action, Comment, Host, HostError, Presubmits, PullRequest, Trigger, LGTM,
    NEEDS_OK_TO_TEST, OK_TO_TEST,
};

/// The comment on a trusted author's new draft pull request (Prow's text).
pub const DRAFT_MESSAGE: &str = "Skipping CI for Draft Pull Request.\nIf you want CI signal for your change, please convert it to an actual PR.\nYou can still manually trigger a test run with `/test all`";

/// What a `pull_request` event does, as Prow's trigger decides (nothing at
/// all when the pull request has no presubmits):
///
/// | action | effect |
/// |---|---|
/// | `opened` | trusted author: run the jobs, or on a draft [`DRAFT_MESSAGE`]; untrusted: [`welcome_message`] and the label `needs-ok-to-test` (unless `ok-to-test` is there, or `ignore_ok_to_test`) |
/// | `reopened`, `ready_for_review`, `edited` with a new base | run if the pull request is trusted (and remove `needs-ok-to-test`) |
/// | `synchronize` | abort the runs of older heads, then as `reopened` |
/// | `labeled` `lgtm` | run once if the pull request is not trusted |
/// | `labeled` `ok-to-test` | run, unless the bot added it (its `/ok-to-test` comment already did) |
/// | `closed`, `converted_to_draft` | abort the pull request's runs |
///
/// "Run" starts the jobs `/test all` starts (`always_run`, or a change
/// matcher that matches), never on a draft, and nothing when GitHub says
/// the pull request cannot be merged. Besides, at `opened` the pull
/// request's description is read as a comment by its author
/// ([`on_comment`](super::on_comment)), as Prow's hook does.
pub fn on_pull_request<H: Host + ?Sized>(
    host: &H,
    settings: &Trigger,
    pr: &PullRequest,
) -> Result<Vec<Action>, HostError> {
    let presubmits = host.presubmits(pr)?;
    let mut out = Vec::new();
    if !presubmits.jobs.is_empty() {
        pull_actions(host, settings, pr, &presubmits, &mut out)?;
    }
    if pr.action == "opened" {
        if let Some(body) = Comment::of_pull_request_body(pr) {
            out.extend(comment_actions(
                host,
                settings,
                &body,
                Some((pr, &presubmits)),
            )?);
        }
    }
    // The description's comment may report the same in-repo failure.
    let mut seen_failure = false;
    out.retain(|a| match a {
        Action::InRepoConfigFailed { .. } => !std::mem::replace(&mut seen_failure, true),
        _ => true,
    });
    Ok(out)
}

fn pull_actions<H: Host + ?Sized>(
    host: &H,
    settings: &Trigger,
    pr: &PullRequest,
    presubmits: &Presubmits,
    out: &mut Vec<Action>,
) -> Result<(), HostError> {
    let (org, name) = split_repo(&pr.repo);
    match pr.action.as_str() {
        "opened" => {
            if trusted_user(host, settings, org, name, &pr.author)?.trusted {
                if pr.draft {
                    out.push(comment(pr, DRAFT_MESSAGE.into()));
                } else {
                    build_all(host, pr, presubmits, out)?;
                }
            } else {
                welcome(host, settings, pr, out)?;
            }
        }
        "reopened" | "ready_for_review" => build_if_trusted(host, settings, pr, presubmits, out)?,
        "edited" if pr.base_changed => build_if_trusted(host, settings, pr, presubmits, out)?,
        "synchronize" => {
            out.push(Action::Abort {
                repo: pr.repo.clone(),
                number: pr.number,
                except_head: Some(pr.head_sha.clone()),
            });
            build_if_trusted(host, settings, pr, presubmits, out)?;
        }
        "labeled" => match pr.label.as_deref() {
            Some(LGTM) => {
                let (_, trusted) =
                    trusted_pull_request(host, settings, &pr.repo, pr.number, &pr.author, None)?;
                if !trusted {
                    build_all_but_drafts(host, pr, presubmits, out)?;
                }
            }
            Some(OK_TO_TEST) if !is_bot(host, &pr.sender) => {
                build_all_but_drafts(host, pr, presubmits, out)?;
            }
            _ => {}
        },
        "closed" | "converted_to_draft" => out.push(Action::Abort {
            repo: pr.repo.clone(),
            number: pr.number,
            except_head: None,
        }),
        _ => {}
    }
    Ok(())
}

fn comment(pr: &PullRequest, body: String) -> Action {
    Action::Comment {
        repo: pr.repo.clone(),
        number: pr.number,
        body,
    }
}

/// Prow's `buildAllIfTrusted`: the author trusted or `ok-to-test` there;
/// `needs-ok-to-test` removed if there (labels are only looked at for an
/// untrusted author, as in Prow).
fn build_if_trusted<H: Host + ?Sized>(
    host: &H,
    settings: &Trigger,
    pr: &PullRequest,
    presubmits: &Presubmits,
    out: &mut Vec<Action>,
) -> Result<(), HostError> {
    let (labels, trusted) =
        trusted_pull_request(host, settings, &pr.repo, pr.number, &pr.author, None)?;
    if !trusted {
        return Ok(());
    }
    if labels
        .unwrap_or_default()
        .iter()
        .any(|l| l == NEEDS_OK_TO_TEST)
    {
        out.push(Action::RemoveLabel {
            repo: pr.repo.clone(),
            number: pr.number,
            label: NEEDS_OK_TO_TEST.into(),
        });
    }
    build_all_but_drafts(host, pr, presubmits, out)
}

fn build_all_but_drafts<H: Host + ?Sized>(
    host: &H,
    pr: &PullRequest,
    presubmits: &Presubmits,
    out: &mut Vec<Action>,
) -> Result<(), HostError> {
    if pr.draft {
        return Ok(());
    }
    build_all(host, pr, presubmits, out)
}

/// Prow's `buildAll`: the jobs of the test-all filter on the base branch.
fn build_all<H: Host + ?Sized>(
    host: &H,
    pr: &PullRequest,
    presubmits: &Presubmits,
    out: &mut Vec<Action>,
) -> Result<(), HostError> {
    report_in_repo_failure(pr, presubmits, out);
    let mut changes = pull_changes(host, pr);
    let jobs = filter_presubmits(
        &Filter::TestAll,
        &mut changes,
        &pr.base_ref,
        &presubmits.jobs,
    )?;
    run_requested(host, pr, jobs, false, out)
}

/// Prow's `welcomeMsg`: the label `needs-ok-to-test` (unless `ok-to-test`
/// is already there) and the welcome comment; with `ignore_ok_to_test`
/// only the comment, saying that `/ok-to-test` does not apply.
fn welcome<H: Host + ?Sized>(
    host: &H,
    settings: &Trigger,
    pr: &PullRequest,
    out: &mut Vec<Action>,
) -> Result<(), HostError> {
    let mut merged = None;
    if !settings.ignore_ok_to_test {
        let labels = host.labels(&pr.repo, pr.number)?;
        if !labels.iter().any(|l| l == OK_TO_TEST) {
            out.push(Action::AddLabel {
                repo: pr.repo.clone(),
                number: pr.number,
                label: NEEDS_OK_TO_TEST.into(),
            });
        }
        let prominent = &settings.org_invite.prominent;
        if !prominent.disabled && !pr.author.ends_with("[bot]") {
            // A failed search shows the plain invitation, as in Prow.
            merged = host.merged_pulls(split_repo(&pr.repo).0, &pr.author).ok();
        }
    }
    out.push(comment(pr, welcome_message(settings, pr, merged)));
    Ok(())
}

/// The welcome comment on an untrusted author's new pull request, with
/// Prow's text. `merged_pulls` is the author's merged pull requests in the
/// org when known: from `org_invite.prominent.merged_pr_threshold` (3) on,
/// the invitation to join the org is the prominent one.
///
/// bosun differs from Prow in the links: the org's page is on the forge
/// the pull request is on (Prow always names `github.com`), and the closing
/// lines are [`ABOUT`] instead of Kubernetes' command list.
pub fn welcome_message(
    settings: &Trigger,
    pr: &PullRequest,
    merged_pulls: Option<usize>,
) -> String {
    let (org, _) = split_repo(&pr.repo);
    let (root, _) = super::refs::web_links(pr);
    let author = &pr.author;
    if settings.ignore_ok_to_test {
        return format!(
            "Hi @{author}. Thanks for your PR.\n\nPRs from untrusted users cannot be marked as trusted with `/ok-to-test` in this repo meaning untrusted PR authors can never trigger tests themselves. Collaborators can still trigger tests on the PR using `/test all`.\n\n<details>\n\n{ABOUT}\n</details>\n"
        );
    }
    let more = if !settings.trusted_org.is_empty() && settings.trusted_org != org {
        let t = &settings.trusted_org;
        format!("or [{t}]({root}/orgs/{t}/people) ")
    } else {
        String::new()
    };
    let join_url = if settings.join_org_url.is_empty() {
        format!("{root}/orgs/{org}/people")
    } else {
        settings.join_org_url.clone()
    };
    let prominent = &settings.org_invite.prominent;
    let regular =
        format!("Regular contributors should [join the org]({join_url}) to skip this step.");
    let guidance = match merged_pulls {
        Some(n)
            if !prominent.disabled
                && i64::try_from(n).unwrap_or(i64::MAX) >= prominent.threshold() =>
        {
            if prominent.message.is_empty() {
                format!(">[!TIP]\n>**We noticed you've done this a few times! Consider [joining the org]({join_url}) to skip this step and gain `/lgtm` and other bot rights.** We recommend asking approvers on your previous PRs to sponsor you.")
            } else {
                prominent.message.replace("{join_org_url}", &join_url)
            }
        }
        _ => regular,
    };
    format!(
        "Hi @{author}. Thanks for your PR.\n\nI'm waiting for a [{org}]({root}/orgs/{org}/people) {more}member to verify that this patch is reasonable to test. If it is, they should reply with `/ok-to-test` on its own line. Until that is done, I will not automatically test new commits in this PR, but the usual testing commands by org members will still work.\n\n{guidance}\n\nOnce the patch is verified, the new status will be reflected by the `{OK_TO_TEST}` label.\n\n<details>\n\n{ABOUT}\n</details>\n"
    )
}

#[cfg(test)]
#[path = "pull_tests.rs"]
mod tests;
