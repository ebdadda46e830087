//! `/config`: the configuration in force (snapshot version, when it was
//! loaded, what it holds) and the last load's errors, each with its file
//! and line; a reload on request.

use std::sync::Arc;

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;

use super::fmt;
use super::page::{see_other, Chrome, CsrfForm, Ctx, Web};
use crate::runs::blocking;

/// A diagnostic split into where and what.
pub struct Problem {
    file: String,
    line: String,
    column: String,
    message: String,
}

/// `FILE:LINE:COL: error: MESSAGE` (line and column optional) as its parts.
pub fn split_diagnostic(d: &str) -> Problem {
    let (place, message) = if let Some(m) = d.strip_prefix("error: ") {
        ("", m)
    } else if let Some(pm) = d.split_once(": error: ") {
        pm
    } else if let Some(pm) = d.split_once(": warning: ") {
        pm
    } else {
        ("", d)
    };
    let mut parts = place.rsplitn(3, ':');
    let last = parts.next().unwrap_or_default();
    let mid = parts.next();
    let first = parts.next();
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (file, line, column) = match (first, mid) {
        (Some(f), Some(l)) if numeric(l) && numeric(last) => (f, l, last),
        _ => match place.rsplit_once(':') {
            Some((f, l)) if numeric(l) => (f, l, ""),
            _ => (place, "", ""),
        },
    };
    Problem {
        file: file.to_string(),
        line: line.to_string(),
        column: column.to_string(),
        message: message.to_string(),
    }
}

#[derive(Template)]
#[template(path = "config.html")]
struct ConfigPage {
    chrome: Chrome,
    ok: bool,
    version: u64,
    loaded_at: String,
    last_attempt_at: String,
    last_attempt_reason: String,
    errors: Vec<Problem>,
    warnings: usize,
    periodics: usize,
    presubmits: usize,
    postsubmits: usize,
    notes: Vec<String>,
    clusters: usize,
    sources: Vec<String>,
    repos: Vec<RepoRow>,
}

/// A followed repository's row.
struct RepoRow {
    repo: String,
    branch: String,
    commit: String,
    loaded_at: String,
    jobs: String,
    state: &'static str,
    last_webhook: String,
    message: String,
    problems: Vec<Problem>,
    retired: String,
}

fn repo_rows(views: Vec<crate::repos::RepoView>) -> Vec<RepoRow> {
    views
        .into_iter()
        .map(|v| {
            let r = v.record;
            let j = &v.jobs_in_force;
            RepoRow {
                repo: r.repo,
                branch: r.branch.unwrap_or_else(|| "-".into()),
                commit: r
                    .commit
                    .map_or_else(|| "-".into(), |c| c[..c.len().min(12)].to_string()),
                loaded_at: r.loaded_at.map_or_else(|| "-".into(), fmt::time),
                jobs: format!(
                    "{} periodics, {} presubmits, {} postsubmits",
                    j.periodics.len(),
                    j.presubmits.len(),
                    j.postsubmits.len()
                ),
                state: v.state,
                last_webhook: r.last_webhook_at.map_or_else(|| "-".into(), fmt::time),
                message: r
                    .error
                    .as_ref()
                    .map(|e| e.message.clone())
                    .unwrap_or_default(),
                problems: r
                    .error
                    .map(|e| e.diagnostics.iter().map(|d| split_diagnostic(d)).collect())
                    .unwrap_or_default(),
                retired: r.retired.map(|t| t.reason).unwrap_or_default(),
            }
        })
        .collect()
}

/// `GET /config`.
pub async fn page(ctx: Ctx, State(web): State<Arc<Web>>) -> Response {
    let shared = &web.daemon.shared;
    let s = shared.config_status();
    let args = &shared.config_args;
    let mut sources = Vec::new();
    if let Some(c) = &args.config {
        sources.push(format!("config: {}", c.display()));
    }
    for j in &args.job_config {
        sources.push(format!("job config: {}", j.display()));
    }
    let page = ConfigPage {
        chrome: ctx.chrome("Config", "/config"),
        ok: s.ok,
        version: s.version,
        loaded_at: fmt::time(s.loaded_at),
        last_attempt_at: fmt::time(s.last_attempt_at),
        last_attempt_reason: s.last_attempt_reason.clone(),
        errors: s.errors.iter().map(|e| split_diagnostic(e)).collect(),
        warnings: s.warnings,
        periodics: s.periodics,
        presubmits: s.presubmits,
        postsubmits: s.postsubmits,
        notes: s.notes.clone(),
        clusters: shared.clusters().defs.len(),
        sources,
        repos: repo_rows(web.daemon.repos.views(shared)),
    };
    ctx.page(StatusCode::OK, &page)
}

/// `POST /config/reload`: reloads now (as `POST /api/v1/config/reload`).
pub async fn reload(ctx: Ctx, State(web): State<Arc<Web>>, Form(form): Form<CsrfForm>) -> Response {
    if let Err(r) = ctx.check_form(&form.csrf) {
        return *r;
    }
    let d = web.daemon.clone();
    blocking(move || crate::reload::reload(&d, "dashboard")).await;
    see_other("/config")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostics_split_into_file_line_and_message() {
        let p = split_diagnostic("jobs/a.yaml:12:3: error: job x: bad cron");
        assert_eq!(
            (p.file.as_str(), p.line.as_str(), p.column.as_str()),
            ("jobs/a.yaml", "12", "3")
        );
        assert_eq!(p.message, "job x: bad cron");
        let p = split_diagnostic("config.yaml: error: no such thing");
        assert_eq!((p.file.as_str(), p.line.as_str()), ("config.yaml", ""));
        let p = split_diagnostic("error: no configuration");
        assert_eq!(
            (p.file.as_str(), p.message.as_str()),
            ("", "no configuration")
        );
        let p = split_diagnostic("something odd");
        assert_eq!((p.file.as_str(), p.message.as_str()), ("", "something odd"));
    }
}
