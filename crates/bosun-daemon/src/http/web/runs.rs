//! The runs pages: `/` (the runs, newest first, filtered and paginated on
//! the server, live), `/runs/{id}` (a run: details, its log followed while
//! it runs, its artifacts, abort and rerun), and their actions.

use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Form;
use bosun_store::template::SpecSnapshot;
use bosun_store::{Run, RunFilter, RunState, StoreError};
use jiff::Timestamp;
use serde::Deserialize;

use super::links::PullLink;
use super::page::{see_other, Chrome, CsrfForm, Ctx, Fragment, Web};
use super::{fmt, joburl};
use crate::artifacts::{ArtifactPath, Found, Listing};
use crate::http::pulls::PullFilter;
use crate::runs::{blocking, CreateError, RunRequest};

/// Runs on a page.
pub const PAGE_SIZE: usize = 50;
/// How much of a log the run page shows (its end).
const LOG_TAIL: u64 = 64 * 1024;

/// A run as a row of the list.
pub struct RunRow {
    id: String,
    short: String,
    job: String,
    job_type: &'static str,
    state: &'static str,
    cluster: String,
    /// The configured cluster, when the run went elsewhere.
    configured: String,
    created: String,
    created_iso: String,
    duration: String,
    description: String,
}

/// How long a run has run (or ran): from its start to its end, or to now.
pub(super) fn run_time(run: &Run, now: Timestamp) -> String {
    match (run.pending_at, run.completed_at) {
        (Some(p), Some(c)) => fmt::duration(c.as_second() - p.as_second()),
        (Some(p), None) => fmt::duration(now.as_second() - p.as_second()),
        (None, Some(_)) => "did not start".into(),
        (None, None) => format!(
            "waiting {}",
            fmt::duration(now.as_second() - run.created_at.as_second())
        ),
    }
}

impl RunRow {
    pub fn of(run: &Run, now: Timestamp) -> RunRow {
        let cluster = run
            .cluster
            .clone()
            .unwrap_or_else(|| run.configured_cluster.clone());
        RunRow {
            id: run.id.clone(),
            short: run.id.chars().take(8).collect(),
            job: run.job.clone(),
            job_type: run.job_type.as_str(),
            state: run.state.as_str(),
            configured: if cluster == run.configured_cluster {
                String::new()
            } else {
                run.configured_cluster.clone()
            },
            cluster,
            created: fmt::time(run.created_at),
            created_iso: run.created_at.to_string(),
            duration: run_time(run, now),
            description: run.description.clone(),
        }
    }
}

/// A `<select>` option.
pub struct Opt {
    value: String,
    selected: bool,
}

fn options<'a>(values: impl IntoIterator<Item = &'a str>, selected: &str) -> Vec<Opt> {
    values
        .into_iter()
        .map(|v| Opt {
            value: v.to_string(),
            selected: v == selected,
        })
        .collect()
}

/// `/` and `/live/runs` query: filters and page.
#[derive(Debug, Default, Deserialize)]
pub struct RunsQuery {
    #[serde(default)]
    job: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    cluster: String,
    #[serde(default, rename = "type")]
    job_type: String,
    /// A repository, `org/repo`.
    #[serde(default)]
    repo: String,
    /// A pull request of `repo`, by number.
    #[serde(default)]
    pull: String,
    #[serde(default)]
    page: String,
    /// Keyset cursor: the page after this run (older ones).
    #[serde(default)]
    after: String,
    /// Keyset cursor: the page before this run (newer ones).
    #[serde(default)]
    before: String,
}

impl RunsQuery {
    /// The page number (from 1).
    fn page(&self) -> usize {
        self.page.parse::<usize>().unwrap_or(1).clamp(1, 1_000_000)
    }

    /// The store's filter for this page (one more run than shown: whether
    /// there is a next page), or why the filters are not valid.
    fn filter(&self) -> Result<RunFilter, String> {
        let state = match self.state.as_str() {
            "" => None,
            s => Some(s.parse::<RunState>()?),
        };
        let pulls = PullFilter::parse(Some(&self.repo), Some(&self.pull), None)?;
        let some = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_string());
        let (after, before) = (some(&self.after), some(&self.before));
        Ok(RunFilter {
            job: some(&self.job),
            state,
            cluster: some(&self.cluster),
            job_type: some(&self.job_type),
            repo: pulls.repo,
            pull: pulls.pull,
            limit: PAGE_SIZE + 1,
            // A cursor page seeks to its run; a bare page number (an old
            // link) skips, which costs more the deeper it is.
            offset: if after.is_some() || before.is_some() {
                0
            } else {
                (self.page() - 1) * PAGE_SIZE
            },
            after,
            before,
            ..RunFilter::default()
        })
    }

    fn pairs(&self) -> [(&'static str, &str); 6] {
        [
            ("job", self.job.as_str()),
            ("state", self.state.as_str()),
            ("cluster", self.cluster.as_str()),
            ("type", self.job_type.as_str()),
            ("repo", self.repo.as_str()),
            ("pull", self.pull.as_str()),
        ]
    }

    /// `base` with the same filters, the `cursors` and page `page` (left
    /// out when 1).
    fn url(&self, base: &str, cursors: &[(&'static str, &str)], page: usize) -> String {
        let page = page.to_string();
        let mut pairs = self.pairs().to_vec();
        pairs.extend_from_slice(cursors);
        if page != "1" {
            pairs.push(("page", &page));
        }
        format!("{base}{}", fmt::query(&pairs))
    }

    /// The URL of page `page` under `base`, found by the cursor `(name, run
    /// id)`; the first page is the newest runs, found by none.
    fn href(&self, base: &str, page: usize, cursor: Option<(&'static str, &str)>) -> String {
        let cursor: &[_] = match &cursor {
            Some(c) if page != 1 => std::slice::from_ref(c),
            _ => &[],
        };
        self.url(base, cursor, page)
    }

    /// This page's own URL under `base` (its live rows follow it).
    fn this(&self, base: &str) -> String {
        let cursors = [
            ("after", self.after.as_str()),
            ("before", self.before.as_str()),
        ];
        self.url(base, &cursors, self.page())
    }

    fn filtered(&self) -> bool {
        self.pairs().iter().any(|(_, v)| !v.is_empty())
    }
}

#[derive(Template)]
#[template(path = "runs.html")]
struct RunsPage {
    chrome: Chrome,
    job: String,
    repo: String,
    pull: String,
    states: Vec<Opt>,
    clusters: Vec<Opt>,
    types: Vec<Opt>,
    rows: Vec<RunRow>,
    filtered: bool,
    error: String,
    page: usize,
    prev: String,
    next: String,
    live: String,
}

#[derive(Template)]
#[template(path = "run_rows.html")]
struct RunRows {
    rows: Vec<RunRow>,
    filtered: bool,
}

/// One page of runs, newest first, whether there is another beyond it
/// (older, or newer for a page counted back from a run), and whether one of
/// them is still active (its row changes with time).
fn runs_page(web: &Web, filter: &RunFilter) -> Result<(Vec<RunRow>, bool, bool), StoreError> {
    let mut runs = web.daemon.shared.store.list(filter)?;
    let more = runs.len() > PAGE_SIZE;
    if more && filter.counted_back() {
        // Counted back: the extra run is the newest, beyond this page.
        runs.remove(0);
    }
    runs.truncate(PAGE_SIZE);
    let now = web.now();
    let ticking = runs.iter().any(|r| !r.state.is_final());
    Ok((
        runs.iter().map(|r| RunRow::of(r, now)).collect(),
        more,
        ticking,
    ))
}

/// `GET /`: the runs.
pub async fn list(ctx: Ctx, State(web): State<Arc<Web>>, Query(q): Query<RunsQuery>) -> Response {
    let clusters = web.daemon.shared.clusters();
    let mut page = RunsPage {
        chrome: ctx.chrome("Runs", "/"),
        job: q.job.clone(),
        repo: q.repo.clone(),
        pull: q.pull.clone(),
        states: options(RunState::ALL.iter().map(|s| s.as_str()), &q.state),
        clusters: options(clusters.defs.keys().map(String::as_str), &q.cluster),
        types: options(
            ["periodic", "presubmit", "postsubmit", "batch"],
            &q.job_type,
        ),
        rows: Vec::new(),
        filtered: q.filtered(),
        error: String::new(),
        page: q.page(),
        prev: String::new(),
        next: String::new(),
        live: q.this("/live/runs"),
    };
    let status = match q.filter() {
        Err(e) => {
            page.error = e;
            StatusCode::BAD_REQUEST
        }
        Ok(filter) => {
            let w = web.clone();
            let backwards = filter.counted_back();
            match blocking(move || runs_page(&w, &filter)).await {
                Ok((rows, more, _)) => {
                    let (first, last) = match (rows.first(), rows.last()) {
                        (Some(f), Some(l)) => (f.id.clone(), l.id.clone()),
                        _ => Default::default(),
                    };
                    // Counted back and nothing newer beyond: the newest runs,
                    // page 1 (however many left the filter meanwhile).
                    let number = if backwards && !more { 1 } else { q.page() };
                    page.page = number;
                    // Newer: there are some when this page was counted back
                    // and found more, or was reached going older. Counted
                    // from the first row shown, or from this page's cursor
                    // when it shows none.
                    let newer = if backwards { more } else { number > 1 };
                    if newer {
                        let from = if first.is_empty() {
                            q.after.trim()
                        } else {
                            &first
                        };
                        let back = number.saturating_sub(1).max(1);
                        page.prev = q.href("/", back, Some(("before", from)));
                    }
                    // Older: some were found, or this page was counted back
                    // from a run older than all of it (with no rows, that run
                    // is the newest: the first page holds it).
                    if backwards && last.is_empty() {
                        page.next = q.href("/", 1, None);
                    } else if (backwards || more) && !last.is_empty() {
                        page.next = q.href("/", number + 1, Some(("after", &last)));
                    }
                    page.rows = rows;
                    StatusCode::OK
                }
                Err(StoreError::NotFound(id)) => {
                    page.error = format!(
                        "run {id}, which this page was counted from, is gone (runs end \
                         their retention); start again from the newest"
                    );
                    page.prev = q.href("/", 1, None);
                    StatusCode::NOT_FOUND
                }
                Err(e) => {
                    page.error = format!("cannot read the runs: {e}");
                    StatusCode::SERVICE_UNAVAILABLE
                }
            }
        }
    };
    ctx.page(status, &page)
}

/// `GET /live/runs`: the rows of the list's page, as they change.
pub async fn live_list(State(web): State<Arc<Web>>, Query(q): Query<RunsQuery>) -> Response {
    let Ok(filter) = q.filter() else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let filtered = q.filtered();
    let w = web.clone();
    super::page::live(&web, move || match runs_page(&w, &filter) {
        Ok((rows, _, ticking)) => Fragment {
            html: super::page::render(&RunRows { rows, filtered }),
            ended: false,
            ticking,
        },
        Err(_) => Fragment::retry(),
    })
    .into_response()
}

/// A run, as its page shows it.
pub struct RunView {
    id: String,
    job: String,
    job_type: &'static str,
    state: &'static str,
    ended: bool,
    description: String,
    periodic: String,
    periodic_href: String,
    configured_cluster: String,
    cluster: String,
    created: String,
    pending: String,
    completed: String,
    duration: String,
    build_id: String,
    scheduled_at: String,
    attempt: u32,
    revivals: u32,
    refs: Vec<String>,
    /// The pull requests its refs test, with their links.
    pulls: Vec<PullLink>,
    labels: Vec<(String, String)>,
}

/// `org/repo@base (sha) +#N (sha) by author`.
fn describe_refs(r: &bosun_config::types::Refs) -> String {
    let mut s = format!("{}/{}", r.org, r.repo);
    if let Some(b) = r.base_ref.as_deref().filter(|b| !b.is_empty()) {
        s.push_str(&format!("@{b}"));
    }
    if let Some(sha) = r.base_sha.as_deref().filter(|s| !s.is_empty()) {
        s.push_str(&format!(" ({})", sha.chars().take(12).collect::<String>()));
    }
    for p in &r.pulls {
        s.push_str(&format!(" + #{}", p.number));
        if !p.sha.is_empty() {
            s.push_str(&format!(
                " ({})",
                p.sha.chars().take(12).collect::<String>()
            ));
        }
        if !p.author.is_empty() {
            s.push_str(&format!(" by {}", p.author));
        }
    }
    s
}

impl RunView {
    fn of(run: &Run, now: Timestamp) -> RunView {
        let opt = |t: Option<Timestamp>| t.map(fmt::time).unwrap_or_default();
        RunView {
            id: run.id.clone(),
            job: run.job.clone(),
            job_type: run.job_type.as_str(),
            state: run.state.as_str(),
            ended: run.state.is_final(),
            description: run.description.clone(),
            periodic: run.periodic.clone().unwrap_or_default(),
            periodic_href: run
                .periodic
                .as_deref()
                .map(|p| format!("/periodics{}", fmt::query(&[("q", p)])))
                .unwrap_or_default(),
            configured_cluster: run.configured_cluster.clone(),
            cluster: run.cluster.clone().unwrap_or_default(),
            created: fmt::time(run.created_at),
            pending: opt(run.pending_at),
            completed: opt(run.completed_at),
            duration: run_time(run, now),
            build_id: run.build_id.clone(),
            scheduled_at: opt(run.scheduled_at),
            attempt: run.attempt,
            revivals: run.pod_revival_count,
            refs: run
                .refs
                .as_deref()
                .into_iter()
                .chain(run.extra_refs.iter())
                .map(describe_refs)
                .collect(),
            pulls: run.refs.as_deref().map(PullLink::all).unwrap_or_default(),
            labels: run
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// One entry of an artifacts listing.
pub struct ArtifactEntry {
    name: String,
    kind: String,
    size: String,
    modified: String,
    /// Where a directory is browsed (this page) or a file fetched (the API).
    href: String,
}

/// The artifacts section of a run's page.
#[derive(Default)]
pub struct Artifacts {
    /// The directory shown (`""`: the top).
    path: String,
    /// The directory above, on this page (none at the top).
    up: String,
    entries: Vec<ArtifactEntry>,
    truncated: bool,
    /// Why there is nothing to list.
    message: String,
    /// The API's listing of this directory.
    api_href: String,
}

#[derive(Template)]
#[template(path = "run.html")]
struct RunPage {
    chrome: Chrome,
    run: RunView,
    live: String,
    log: String,
    log_cut: bool,
    has_log: bool,
    log_href: String,
    follow: String,
    artifacts: Artifacts,
    job_url: String,
    job_url_error: String,
}

#[derive(Template)]
#[template(path = "run_details.html")]
struct RunDetails {
    chrome: Chrome,
    run: RunView,
}

#[derive(Debug, Default, Deserialize)]
pub struct RunPageQuery {
    #[serde(default)]
    artifacts: String,
}

/// The end of the run's log (at most [`LOG_TAIL`] bytes; whether it was
/// cut), if the run has a log on this machine.
fn log_tail(web: &Web, run: &Run) -> Option<(String, bool)> {
    let alias = run
        .cluster
        .clone()
        .unwrap_or_else(|| run.configured_cluster.clone());
    let path = web
        .daemon
        .shared
        .clusters()
        .executors
        .get(&alias)
        .and_then(|e| e.log_path(&run.id))?;
    let Ok(mut f) = std::fs::File::open(path) else {
        return Some((String::new(), false));
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(LOG_TAIL);
    let _ = f.seek(SeekFrom::Start(start));
    let mut bytes = Vec::new();
    let _ = f.take(LOG_TAIL).read_to_end(&mut bytes);
    Some((String::from_utf8_lossy(&bytes).into_owned(), start > 0))
}

/// The run `id`, or the page saying it does not exist.
async fn find(ctx: &Ctx, web: &Arc<Web>, id: String) -> Result<Run, Box<Response>> {
    let store = web.daemon.shared.store.clone();
    let key = id.clone();
    match blocking(move || store.get(&key)).await {
        Ok(Some(run)) => Ok(run),
        Ok(None) => Err(Box::new(ctx.message(
            StatusCode::NOT_FOUND,
            "No such run",
            &format!("There is no run {id} (it may have been deleted by retention)."),
            "/",
        ))),
        Err(e) => Err(Box::new(ctx.message(
            StatusCode::SERVICE_UNAVAILABLE,
            "Store unavailable",
            &format!("Cannot read run {id}: {e}"),
            "/",
        ))),
    }
}

/// The listing of `path` among the run's artifacts, as
/// [`crate::artifacts::open`] finds it (why not, when it refuses); a file's
/// bytes are not read here (its link goes to the API).
async fn artifacts(web: &Web, run: &Run, path: &str) -> Artifacts {
    let path = path.trim_matches('/').to_string();
    let found = match ArtifactPath::parse(&path) {
        Ok(wanted) => {
            let (clusters, run) = (web.daemon.shared.clusters(), run.clone());
            let store = web.daemon.shared_store();
            blocking(move || crate::artifacts::find(store.as_deref(), &clusters, &run, &wanted))
                .await
        }
        Err(e) => Err(e),
    };
    let api_base = format!("/api/v1/runs/{}/artifacts", run.id);
    let mut out = Artifacts {
        api_href: format!("{api_base}/{}", fmt::path_escape(&path)),
        up: match path.rsplit_once('/') {
            Some((parent, _)) => format!("?artifacts={}", fmt::query_escape(parent)),
            None if path.is_empty() => String::new(),
            None => "?".into(),
        },
        path: path.clone(),
        ..Artifacts::default()
    };
    let listing = match found {
        Ok(Found::Dir(listing)) => listing,
        // A file lists nothing.
        Ok(Found::File(..) | Found::Stored(_)) => Listing::default(),
        Err(e) => {
            out.message = e.to_string();
            return out;
        }
    };
    out.truncated = listing.truncated;
    let prefix = if path.is_empty() {
        String::new()
    } else {
        format!("{path}/")
    };
    for e in listing.entries {
        let full = format!("{prefix}{}", e.name);
        let href = match e.kind {
            "dir" => format!("?artifacts={}", fmt::query_escape(&full)),
            "file" => format!("{api_base}/{}", fmt::path_escape(&full)),
            // Links and anything else are listed, never followed.
            _ => String::new(),
        };
        out.entries.push(ArtifactEntry {
            size: e.size.map(fmt::bytes).unwrap_or_default(),
            modified: e.modified.map(fmt::time).unwrap_or_default(),
            name: e.name,
            kind: e.kind.to_string(),
            href,
        });
    }
    if out.entries.is_empty() {
        out.message = "This directory is empty.".into();
    }
    out
}

/// `GET /runs/{id}`.
pub async fn page(
    ctx: Ctx,
    State(web): State<Arc<Web>>,
    Path(id): Path<String>,
    Query(q): Query<RunPageQuery>,
) -> Response {
    let run = match find(&ctx, &web, id).await {
        Ok(r) => r,
        Err(page) => return *page,
    };
    let (w, r) = (web.clone(), run.clone());
    let (log, spec) = blocking(move || {
        let spec = w
            .daemon
            .shared
            .store
            .spec(&r.spec_hash)
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_value::<SpecSnapshot>(v).ok());
        (log_tail(&w, &r), spec)
    })
    .await;
    let in_force = web.daemon.shared.in_force();
    // Prow's job URL is where a Kubernetes run's uploads are viewed; a local
    // run's artifacts are on this machine (listed below), never uploaded.
    let alias = run.cluster.as_deref().unwrap_or(&run.configured_cluster);
    let local = matches!(
        in_force.clusters.defs.get(alias),
        Some(bosun_cluster::registry::ClusterDef::Local { .. })
    );
    let (job_url, job_url_error) = if local && run.url.is_none() {
        (String::new(), String::new())
    } else {
        match joburl::job_url(&in_force.snapshot.config, &run, spec.as_ref()) {
            Ok(u) => (u.unwrap_or_default(), String::new()),
            Err(e) => (String::new(), e),
        }
    };
    let artifacts = artifacts(&web, &run, &q.artifacts).await;
    let (has_log, (log, log_cut)) = match log {
        Some(l) => (true, l),
        None => (false, (String::new(), false)),
    };
    let log_href = format!("/api/v1/runs/{}/log", run.id);
    let page = RunPage {
        chrome: ctx.chrome(
            format!("{} · run {}", run.job, &run.id[..run.id.len().min(8)]),
            "/",
        ),
        live: if run.state.is_final() {
            String::new()
        } else {
            format!("/live/runs/{}", run.id)
        },
        follow: if has_log && !run.state.is_final() {
            log_href.clone()
        } else {
            String::new()
        },
        run: RunView::of(&run, web.now()),
        log,
        log_cut,
        has_log,
        log_href,
        artifacts,
        job_url,
        job_url_error,
    };
    ctx.page(StatusCode::OK, &page)
}

/// `GET /live/runs/{id}`: the run's details as they change, until it ends.
pub async fn live_run(ctx: Ctx, State(web): State<Arc<Web>>, Path(id): Path<String>) -> Response {
    let w = web.clone();
    let chrome = Arc::new(ctx.chrome("", "/"));
    super::page::live(&web, move || {
        let run = match w.daemon.shared.store.get(&id) {
            Ok(Some(r)) => r,
            Ok(None) => return Fragment::gone(),
            Err(_) => return Fragment::retry(),
        };
        let ended = run.state.is_final();
        let page = RunDetails {
            chrome: (*chrome).clone(),
            run: RunView::of(&run, w.now()),
        };
        // A running run's duration grows every second.
        Fragment {
            html: super::page::render(&page),
            ended,
            ticking: !ended,
        }
    })
    .into_response()
}

/// An action's failure, as a page.
fn create_error(ctx: &Ctx, e: CreateError, back: &str) -> Response {
    let status = match &e {
        CreateError::NotFound(_) => StatusCode::NOT_FOUND,
        CreateError::Ambiguous { .. } | CreateError::Exists(_) => StatusCode::CONFLICT,
        CreateError::Unrunnable(_) => StatusCode::UNPROCESSABLE_ENTITY,
        CreateError::Forbidden(_) => StatusCode::FORBIDDEN,
        CreateError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    ctx.message(status, "Not done", &e.to_string(), back)
}

#[derive(Deserialize)]
pub struct TriggerForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    job: String,
}

/// `POST /runs/trigger`: a run of a job (by name, or a periodic's identity).
pub async fn trigger(
    ctx: Ctx,
    State(web): State<Arc<Web>>,
    Form(form): Form<TriggerForm>,
) -> Response {
    if let Err(r) = ctx.check_form(&form.csrf) {
        return *r;
    }
    let d = &web.daemon;
    let request = RunRequest::Trigger {
        job: form.job.trim().to_string(),
        repo: None,
        job_type: None,
        refs: None,
    };
    match d.runs.create(&d.shared, &d.controller, request).await {
        Ok(run) => see_other(&format!("/runs/{}", run.id)),
        Err(e) => create_error(&ctx, e, "/"),
    }
}

/// `POST /runs/{id}/abort`.
pub async fn abort(
    ctx: Ctx,
    State(web): State<Arc<Web>>,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Err(r) = ctx.check_form(&form.csrf) {
        return *r;
    }
    let run = match find(&ctx, &web, id).await {
        Ok(r) => r,
        Err(page) => return *page,
    };
    let back = format!("/runs/{}", run.id);
    if run.state.is_final() {
        return ctx.message(
            StatusCode::CONFLICT,
            "Already ended",
            &format!("Run {} already ended: {}.", run.id, run.state),
            &back,
        );
    }
    web.daemon.controller.request_abort([run.id.clone()]);
    see_other(&back)
}

/// `POST /runs/{id}/rerun`.
pub async fn rerun(
    ctx: Ctx,
    State(web): State<Arc<Web>>,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Err(r) = ctx.check_form(&form.csrf) {
        return *r;
    }
    let old = match find(&ctx, &web, id).await {
        Ok(r) => r,
        Err(page) => return *page,
    };
    let back = format!("/runs/{}", old.id);
    let d = &web.daemon;
    match d
        .runs
        .create(&d.shared, &d.controller, RunRequest::Rerun(Box::new(old)))
        .await
    {
        Ok(run) => see_other(&format!("/runs/{}", run.id)),
        Err(e) => create_error(&ctx, e, &back),
    }
}
