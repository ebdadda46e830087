//! `/api/v1/runs`: create (trigger), list, get, follow the log, abort, rerun.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use bosun_config::types::Refs;
use bosun_store::{Run, RunFilter, RunState};
use serde::Deserialize;

use crate::daemon::Daemon;
use crate::http::error::{ApiError, ApiResult};
use crate::runs::{blocking, RunRequest};

/// `POST /api/v1/runs` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerRequest {
    job: String,
    repo: Option<String>,
    #[serde(rename = "type")]
    job_type: Option<String>,
    refs: Option<Refs>,
}

/// `POST /api/v1/runs`: 201 with the run once it is stored.
pub async fn create(State(daemon): State<Arc<Daemon>>, body: Bytes) -> ApiResult {
    let req: TriggerRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("bad request body: {e}")))?;
    let request = RunRequest::Trigger {
        job: req.job,
        repo: req.repo,
        job_type: req.job_type,
        refs: req.refs.map(Box::new),
    };
    let run = daemon
        .runs
        .create(&daemon.shared, &daemon.controller, request)
        .await?;
    Ok((StatusCode::CREATED, Json(run)).into_response())
}

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    job: Option<String>,
    state: Option<String>,
    cluster: Option<String>,
    #[serde(rename = "type")]
    job_type: Option<String>,
    limit: Option<usize>,
    offset: Option<usize>,
    /// Keyset pagination: the runs after (older than) this run id.
    after: Option<String>,
    /// Keyset pagination: the runs just before (newer than) this run id.
    before: Option<String>,
    active: Option<bool>,
    /// Runs of this repository (`org/repo`; their refs, not extra refs).
    repo: Option<String>,
    /// Runs of this pull request of `repo` (a positive number; read here,
    /// not by serde, so that a bad one gets a message saying what is wanted).
    pull: Option<String>,
    /// Runs of `pull` at this head commit.
    sha: Option<String>,
}

/// `GET /api/v1/runs`: newest first, filtered, paginated (by `offset`, or
/// by the `after`/`before` run id cursors, which cost the same at any depth;
/// a cursor run that is gone is a 404). `repo`, `pull` and `sha` find a
/// repository's runs, a pull request's, and a pull request's at one head
/// commit (each a 400 when malformed or given without what it narrows).
pub async fn list(State(daemon): State<Arc<Daemon>>, Query(q): Query<ListQuery>) -> ApiResult {
    let state = q
        .state
        .as_deref()
        .map(str::parse::<RunState>)
        .transpose()
        .map_err(ApiError::BadRequest)?;
    let pulls = crate::http::pulls::PullFilter::parse(
        q.repo.as_deref(),
        q.pull.as_deref(),
        q.sha.as_deref(),
    )
    .map_err(ApiError::BadRequest)?;
    let filter = RunFilter {
        job: q.job,
        state,
        cluster: q.cluster,
        job_type: q.job_type,
        repo: pulls.repo,
        pull: pulls.pull,
        head_sha: pulls.sha,
        limit: q.limit.unwrap_or(100).min(1000),
        offset: q.offset.unwrap_or(0),
        // An empty cursor is none (as the dashboard's forms send it).
        after: q.after.filter(|c| !c.trim().is_empty()),
        before: q.before.filter(|c| !c.trim().is_empty()),
        active: q.active.unwrap_or(false),
        ..RunFilter::default()
    };
    let store = daemon.shared.store.clone();
    let runs = blocking(move || store.list(&filter)).await?;
    Ok(Json(serde_json::json!({ "runs": runs })).into_response())
}

/// The run `id`, or a 404 naming it.
pub(super) async fn find(daemon: &Daemon, id: String) -> ApiResult<Run> {
    let store = daemon.shared.store.clone();
    let missing = id.clone();
    blocking(move || store.get(&id))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("run {missing} not found")))
}

/// `GET /api/v1/runs/{id}`.
pub async fn get(State(daemon): State<Arc<Daemon>>, Path(id): Path<String>) -> ApiResult {
    Ok(Json(find(&daemon, id).await?).into_response())
}

/// `GET /api/v1/runs/{id}/reports`: what was reported to the forge about
/// the run (its commit statuses and the failure comment's updates), oldest
/// first, each with where it stands: `pending` (with its attempts and last
/// error), `delivered`, `refused` (with the forge's answer) or
/// `superseded` (a newer state of the same context was sent instead).
pub async fn reports(State(daemon): State<Arc<Daemon>>, Path(id): Path<String>) -> ApiResult {
    let run = find(&daemon, id).await?;
    let store = daemon.shared.store.clone();
    let id = run.id.clone();
    let reports = blocking(move || store.reports_of_run(&id)).await?;
    let reports: Vec<serde_json::Value> = reports
        .into_iter()
        .map(|r| {
            serde_json::json!({
                "key": r.key,
                "kind": r.kind.as_str(),
                "version": r.version,
                "outcome": r.outcome.as_str(),
                "finished_at": r.outcome.finished_at(),
                "attempts": r.attempts,
                "created_at": r.created_at,
                "next_attempt_at": r.next_attempt_at,
                "error": r.last_error,
                "payload": r.payload,
            })
        })
        .collect();
    Ok(Json(serde_json::json!({"run": run.id, "reports": reports})).into_response())
}

/// `GET /api/v1/runs/{id}/log` query.
#[derive(Debug, Deserialize)]
pub struct LogQuery {
    /// `false`: the log as it is now, without waiting for the run to end
    /// (default `true`).
    follow: Option<bool>,
}

/// How long after an ended run a replica follows its log in the store
/// while the store does not hold it whole (the leader that shipped it died
/// before its end): then the log is what the store holds.
const STORED_LOG_GRACE: jiff::SignedDuration = jiff::SignedDuration::from_secs(60);

/// The most bytes of a log read from the store at once.
const STORED_CHUNK: usize = 1024 * 1024;

/// `GET /api/v1/runs/{id}/log`: the log, followed until the run ends and
/// its executor has written all of it; with `?follow=false`, what the log
/// holds now (nothing yet for a run that has not started), at once.
///
/// The log is read from this machine's file (the replica that runs the
/// job, or a store of this process's own); on a shared store, from the
/// store once it holds the log whole, and from the store on a replica
/// without the file ([`crate::shipper`]: the same bytes).
pub async fn log(
    State(daemon): State<Arc<Daemon>>,
    Path(id): Path<String>,
    Query(q): Query<LogQuery>,
) -> ApiResult {
    let run = find(&daemon, id).await?;
    let alias = run
        .cluster
        .clone()
        .unwrap_or_else(|| run.configured_cluster.clone());
    let path = daemon
        .shared
        .clusters()
        .executors
        .get(&alias)
        .and_then(|exec| exec.log_path(&run.id))
        .ok_or_else(|| ApiError::NotFound("this run has no local log".into()))?;
    let source = Arc::new(LogSource {
        store: daemon.shared_store(),
        id: run.id.clone(),
        path,
    });
    if q.follow == Some(false) {
        let mut out = Vec::new();
        loop {
            let read = source.read(out.len() as u64).await;
            let more = read.stored_whole.is_some() && !read.data.is_empty();
            out.extend_from_slice(&read.data);
            if !more {
                break;
            }
        }
        return Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], out).into_response());
    }
    let state = (daemon.clone(), source, 0u64, false);
    let stream = futures_util::stream::unfold(state, |(daemon, source, offset, done)| async move {
        if done {
            return None;
        }
        loop {
            let read = source.read(offset).await;
            if !read.data.is_empty() {
                let next = offset + read.data.len() as u64;
                return Some((
                    Ok::<_, std::io::Error>(read.data),
                    (daemon, source, next, false),
                ));
            }
            let store = daemon.shared.store.clone();
            let key = source.id.clone();
            let run = blocking(move || store.get(&key)).await.ok().flatten();
            let now = daemon.shared.clock.now();
            // Ended, and its log whole (a copy may still be writing it,
            // or the leader still shipping it).
            let finished = run.as_ref().is_none_or(|r| {
                r.state.is_final()
                    && match read.stored_whole {
                        None => daemon
                            .shared
                            .clusters()
                            .executors
                            .get(r.cluster.as_ref().unwrap_or(&r.configured_cluster))
                            .is_none_or(|e| e.log_complete(&r.id)),
                        Some(whole) => {
                            whole
                                || r.completed_at
                                    .is_some_and(|c| now.duration_since(c) > STORED_LOG_GRACE)
                        }
                    }
            });
            if finished {
                // One last read after the end, then stop.
                let read = source.read(offset).await;
                let next = offset + read.data.len() as u64;
                return Some((Ok(read.data), (daemon, source, next, true)));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Where a run's log is read from: this machine's file while it has one,
/// else the store replicas share (when there is one).
struct LogSource {
    store: Option<Arc<dyn bosun_store::Store>>,
    id: String,
    path: std::path::PathBuf,
}

/// What one read of a log found.
struct LogRead {
    /// The bytes from the offset asked for.
    data: Vec<u8>,
    /// `None`: read from the file, to its end. From the store: whether the
    /// store holds the log whole and this read reached its end.
    stored_whole: Option<bool>,
}

impl LogSource {
    /// The store's log when it holds it whole (this machine's file may be
    /// a copy that stopped short: a replica that died while copying a
    /// pod's log and started again after the pod was gone); else this
    /// machine's file while there is one (fresher than the store's, which
    /// trails it); else what the store holds so far.
    async fn read(&self, offset: u64) -> LogRead {
        let stored = match &self.store {
            Some(store) => {
                let (store, id) = (store.clone(), self.id.clone());
                match blocking(move || store.run_log(&id, offset, STORED_CHUNK)).await {
                    Ok(slice) => slice,
                    Err(e) => {
                        tracing::debug!(run = %self.id, error = %e, "cannot read the run's log from the store");
                        None
                    }
                }
            }
            None => None,
        };
        let from_store = |s: Option<bosun_store::LogSlice>| match s {
            Some(s) => LogRead {
                stored_whole: Some(s.complete && offset + s.data.len() as u64 >= s.len),
                data: s.data,
            },
            None => LogRead {
                data: Vec::new(),
                stored_whole: Some(false),
            },
        };
        match stored {
            Some(s) if s.complete => from_store(Some(s)),
            stored => {
                if self.store.is_none() || tokio::fs::try_exists(&self.path).await.unwrap_or(false)
                {
                    LogRead {
                        data: read_from(&self.path, offset).await,
                        stored_whole: None,
                    }
                } else {
                    from_store(stored)
                }
            }
        }
    }
}

/// The bytes of `path` from `offset` on (none if it does not exist yet).
async fn read_from(path: &std::path::Path, offset: u64) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut out = Vec::new();
    if let Ok(mut f) = tokio::fs::File::open(path).await {
        if f.seek(std::io::SeekFrom::Start(offset)).await.is_ok() {
            let _ = f.read_to_end(&mut out).await;
        }
    }
    out
}

/// `POST /api/v1/runs/{id}/abort`: 202; the controller aborts it.
pub async fn abort(State(daemon): State<Arc<Daemon>>, Path(id): Path<String>) -> ApiResult {
    let run = find(&daemon, id).await?;
    if run.state.is_final() {
        return Err(ApiError::Conflict(format!(
            "run {} already ended: {}",
            run.id, run.state
        )));
    }
    daemon.controller.request_abort([run.id.clone()]);
    Ok((StatusCode::ACCEPTED, Json(run)).into_response())
}

/// `POST /api/v1/runs/{id}/rerun`: 201 with the new run.
pub async fn rerun(State(daemon): State<Arc<Daemon>>, Path(id): Path<String>) -> ApiResult {
    let old = find(&daemon, id).await?;
    let run = daemon
        .runs
        .create(
            &daemon.shared,
            &daemon.controller,
            RunRequest::Rerun(Box::new(old)),
        )
        .await?;
    Ok((StatusCode::CREATED, Json(run)).into_response())
}
