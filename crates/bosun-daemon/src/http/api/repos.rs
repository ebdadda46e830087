//! `/api/v1/repos`: the repositories bosun follows from their remotes (why
//! each is followed, its branch, the commit in force and when it was
//! loaded, its jobs, its last error with file:line and commit, its last
//! webhook, its retirement), and a load on request.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::daemon::Daemon;
use crate::http::error::{ApiError, ApiResult};
use crate::repos::{LoadFailure, Loaded};

/// How long a refresh request waits for its load.
const REFRESH_WAIT: Duration = Duration::from_secs(120);

/// `GET /api/v1/repos`.
pub async fn list(State(daemon): State<Arc<Daemon>>) -> Response {
    let shared = &daemon.shared;
    let repos = daemon.repos.views(shared);
    Json(serde_json::json!({ "repos": repos })).into_response()
}

/// `GET /api/v1/repos/{org}/{repo}`.
pub async fn get(
    State(daemon): State<Arc<Daemon>>,
    Path((org, name)): Path<(String, String)>,
) -> ApiResult {
    let repo = format!("{org}/{name}");
    let shared = &daemon.shared;
    let view = daemon
        .repos
        .view(&repo, shared)
        .ok_or_else(|| ApiError::NotFound(format!("bosun does not follow {repo}")))?;
    Ok(Json(view).into_response())
}

/// `POST /api/v1/repos/{org}/{repo}/refresh`: asks the remote for the
/// branch's head and loads it when it moved; answers once the load is done,
/// with what it did (`applied`, `unchanged`, `refused`, `retired`) and the
/// repository.
pub async fn refresh(
    State(daemon): State<Arc<Daemon>>,
    Path((org, name)): Path<(String, String)>,
) -> ApiResult {
    let repo = format!("{org}/{name}");
    let shared = daemon.shared.clone();
    let load = daemon.repos.refresh(&shared, &repo, None, "refresh");
    let result = tokio::time::timeout(REFRESH_WAIT, load)
        .await
        .map_err(|_| {
            ApiError::Unprocessable(format!(
                "the load of {repo} takes longer than {}s; it goes on",
                REFRESH_WAIT.as_secs()
            ))
        })?;
    let (outcome, commit) = match result {
        Ok(Loaded::Applied(c)) => ("applied", Some(c)),
        Ok(Loaded::Unchanged(c)) => ("unchanged", Some(c)),
        Ok(Loaded::Refused(c)) => ("refused", Some(c)),
        Ok(Loaded::Retired) => ("retired", None),
        Err(LoadFailure::NotFollowed(r)) => {
            return Err(ApiError::NotFound(format!("bosun does not follow {r}")))
        }
        Err(e) => return Err(ApiError::Unprocessable(e.to_string())),
    };
    let view = daemon.repos.view(&repo, &shared);
    Ok(Json(serde_json::json!({
        "outcome": outcome,
        "commit": commit,
        "repo": view,
    }))
    .into_response())
}
