//! A pull request's page, `/pulls/{org}/{repo}/{number}`: its runs grouped
//! by head commit (newest head first; per head, each job's latest run and
//! its older attempts), live. The links to it (and to the forge's page) are
//! `links`'.

use std::collections::HashMap;
use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bosun_store::{Run, RunFilter, StoreError};
use jiff::Timestamp;

use super::fmt;
use super::links::{forge_link, page_href};
use super::page::{Chrome, Ctx, Fragment, Web};
use super::runs::run_time;
use crate::runs::blocking;

/// At most this many of a pull request's runs (the newest) are read for its
/// page; the page says when there were more.
pub const MAX_RUNS: usize = 2000;
/// Runs read from the store at a time.
const BATCH: usize = 500;

/// A run as the pull request's page shows it.
pub struct Attempt {
    id: String,
    short: String,
    state: &'static str,
    job_type: &'static str,
    created: String,
    created_iso: String,
    duration: String,
    description: String,
}

impl Attempt {
    fn of(run: &Run, now: Timestamp) -> Attempt {
        Attempt {
            id: run.id.clone(),
            short: run.id.chars().take(8).collect(),
            state: run.state.as_str(),
            job_type: run.job_type.as_str(),
            created: fmt::time(run.created_at),
            created_iso: run.created_at.to_string(),
            duration: run_time(run, now),
            description: run.description.clone(),
        }
    }
}

/// A job's runs on one head commit: the latest, then the older attempts,
/// newest first.
pub struct JobRuns {
    job: String,
    latest: Attempt,
    older: Vec<Attempt>,
}

/// One head commit of the pull request and its jobs, by name.
pub struct Head {
    sha: String,
    short: String,
    /// When its first run was created.
    first: String,
    jobs: Vec<JobRuns>,
}

/// What the page shows of the pull request.
pub struct PullView {
    /// `org/repo#N`.
    label: String,
    title: String,
    author: String,
    forge: String,
    /// The runs list filtered to this pull request.
    list_href: String,
    heads: Vec<Head>,
    runs: usize,
    /// More than [`MAX_RUNS`] runs: the oldest are not shown.
    truncated: bool,
}

/// The newest [`MAX_RUNS`] runs of pull request `number` of `repo` (newest
/// first), and whether there were more.
fn pull_runs(web: &Web, repo: &str, number: i64) -> Result<(Vec<Run>, bool), StoreError> {
    let mut runs: Vec<Run> = Vec::new();
    loop {
        let filter = RunFilter {
            repo: Some(repo.to_string()),
            pull: Some(number),
            limit: BATCH,
            after: runs.last().map(|r| r.id.clone()),
            ..RunFilter::default()
        };
        let page = web.daemon.shared.store.list(&filter)?;
        let done = page.len() < BATCH;
        runs.extend(page);
        if runs.len() > MAX_RUNS {
            runs.truncate(MAX_RUNS);
            return Ok((runs, true));
        }
        if done {
            return Ok((runs, false));
        }
    }
}

/// Groups `runs` (newest first) of pull request `number` by the head commit
/// each tested (the pull's `sha` in its refs): the newest head first (a
/// head is as new as its first run), and in each head every job (a job's
/// batch runs apart from its presubmit runs) by name, its latest run first.
fn group(runs: &[Run], number: i64, now: Timestamp) -> Vec<Head> {
    struct Building {
        sha: String,
        first: Timestamp,
        jobs: Vec<JobRuns>,
        by_job: HashMap<(String, &'static str), usize>,
    }
    let mut heads: Vec<Building> = Vec::new();
    let mut by_sha: HashMap<String, usize> = HashMap::new();
    for run in runs {
        let sha = run
            .refs
            .iter()
            .flat_map(|r| r.pulls.iter())
            .find(|p| p.number == number)
            .map(|p| p.sha.clone())
            .unwrap_or_default();
        let at = *by_sha.entry(sha.clone()).or_insert_with(|| {
            heads.push(Building {
                sha,
                first: run.created_at,
                jobs: Vec::new(),
                by_job: HashMap::new(),
            });
            heads.len() - 1
        });
        let head = &mut heads[at];
        // Newest first: each run is older than the ones seen before it.
        head.first = head.first.min(run.created_at);
        let key = (run.job.clone(), run.job_type.as_str());
        match head.by_job.get(&key) {
            Some(&j) => head.jobs[j].older.push(Attempt::of(run, now)),
            None => {
                head.by_job.insert(key, head.jobs.len());
                head.jobs.push(JobRuns {
                    job: run.job.clone(),
                    latest: Attempt::of(run, now),
                    older: Vec::new(),
                });
            }
        }
    }
    heads.sort_by_key(|h| std::cmp::Reverse(h.first));
    heads
        .into_iter()
        .map(|mut h| {
            h.jobs
                .sort_by(|a, b| (&a.job, a.latest.job_type).cmp(&(&b.job, b.latest.job_type)));
            Head {
                short: h.sha.chars().take(12).collect(),
                sha: h.sha,
                first: fmt::time(h.first),
                jobs: h.jobs,
            }
        })
        .collect()
}

/// The page's view of pull request `number` of `org/repo` (none when the
/// store holds no run of it), and whether a run shown is still going.
fn view(
    web: &Web,
    org: &str,
    repo: &str,
    number: i64,
) -> Result<Option<(PullView, bool)>, StoreError> {
    let full = format!("{org}/{repo}");
    let (runs, truncated) = pull_runs(web, &full, number)?;
    let Some(newest) = runs.first() else {
        return Ok(None);
    };
    // What the newest run says of the pull request: its title and links.
    let (title, author, forge) = newest
        .refs
        .as_ref()
        .and_then(|refs| {
            let p = refs.pulls.iter().find(|p| p.number == number)?;
            Some((
                p.title.clone().unwrap_or_default(),
                p.author.clone(),
                forge_link(refs, p).unwrap_or_default(),
            ))
        })
        .unwrap_or_default();
    let ticking = runs.iter().any(|r| !r.state.is_final());
    let view = PullView {
        label: format!("{full}#{number}"),
        title,
        author,
        forge,
        list_href: format!(
            "/{}",
            fmt::query(&[("repo", &full), ("pull", &number.to_string())])
        ),
        heads: group(&runs, number, web.now()),
        runs: runs.len(),
        truncated,
    };
    Ok(Some((view, ticking)))
}

#[derive(Template)]
#[template(path = "pull.html")]
struct PullPage {
    chrome: Chrome,
    pull: PullView,
    live: String,
}

#[derive(Template)]
#[template(path = "pull_heads.html")]
struct PullHeads {
    pull: PullView,
}

/// The pull request number of a path, or the page saying it is not one.
fn number(ctx: &Ctx, number: &str) -> Result<i64, Box<Response>> {
    match number.parse::<i64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Box::new(ctx.message(
            StatusCode::NOT_FOUND,
            "No such pull request",
            &format!("{number:?} is not a pull request's number."),
            "/",
        ))),
    }
}

/// `GET /pulls/{org}/{repo}/{number}`.
pub async fn page(
    ctx: Ctx,
    State(web): State<Arc<Web>>,
    Path((org, repo, n)): Path<(String, String, String)>,
) -> Response {
    let n = match number(&ctx, &n) {
        Ok(n) => n,
        Err(page) => return *page,
    };
    let (w, o, r) = (web.clone(), org.clone(), repo.clone());
    match blocking(move || view(&w, &o, &r, n)).await {
        Ok(Some((pull, _))) => {
            let page = PullPage {
                chrome: ctx.chrome(format!("{org}/{repo}#{n}"), "/"),
                live: format!("/live{}", page_href(&org, &repo, n)),
                pull,
            };
            ctx.page(StatusCode::OK, &page)
        }
        Ok(None) => ctx.message(
            StatusCode::NOT_FOUND,
            "No runs",
            &format!(
                "No run of {org}/{repo}#{n} is kept: none was created for this pull \
                 request, or retention has deleted them."
            ),
            "/",
        ),
        Err(e) => ctx.message(
            StatusCode::SERVICE_UNAVAILABLE,
            "Store unavailable",
            &format!("Cannot read the runs of {org}/{repo}#{n}: {e}"),
            "/",
        ),
    }
}

/// `GET /live/pulls/{org}/{repo}/{number}`: the page's heads as they
/// change.
pub async fn live(
    State(web): State<Arc<Web>>,
    Path((org, repo, n)): Path<(String, String, String)>,
) -> Response {
    let Ok(n) = n.parse::<i64>() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let w = web.clone();
    super::page::live(&web, move || match view(&w, &org, &repo, n) {
        Ok(Some((pull, ticking))) => Fragment {
            html: super::page::render(&PullHeads { pull }),
            ended: false,
            ticking,
        },
        Ok(None) => Fragment::gone(),
        Err(_) => Fragment::retry(),
    })
    .into_response()
}
