//! What bosun reports to the forge about its runs, decided as Prow's crier
//! decides it for GitHub, as plain data: the caller (the daemon) gathers
//! the inputs and sends what is decided with [`crate::client`].
//!
//! - [`status`]: a run's **commit status**: which runs are reported
//!   (`github_reporter.job_types_to_report`, `skip_report`, no batches),
//!   the state ([`github_state`], Prow's map), the context (the job's
//!   `context` or its name), the description (the run's own or Prow's text
//!   for the state, with Prow's base-SHA suffix, cut to GitHub's 140 bytes)
//!   and the target URL (Prow's `job_url_template`, else bosun's run page,
//!   always absolute).
//! - [`comment`]: the **failed-tests comment** on a pull request (Prow's
//!   `<!-- test report -->` comment): from the bot's existing comments and
//!   the runs' latest results, which comments to delete, create or edit
//!   ([`CommentPlan`]), with Prow's texts, `plank.report_templates` and
//!   GitHub's 65,536-character body limit.

pub mod comment;
pub mod status;

pub use comment::{
    latest_per_job, plan_comment, CommentInput, CommentPlan, IssueComment, JobResult,
    ReportTemplate, BODY_LIMIT, COMMENT_TAG, PROW_ABOUT,
};
pub use status::{
    context, context_description_with_base_sha, default_description, description, github_state,
    run_page, should_report, status_report, target_url, JobState, NewStatus, RunStatus,
    StatusReport,
};
