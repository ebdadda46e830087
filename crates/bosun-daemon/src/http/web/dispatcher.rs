//! `/dispatcher`: the dispatcher's plan in force (per-cluster load against
//! target, a chart), the last re-plan's moves and unplaced units, the
//! overrides (add, cancel), a re-plan on request, and "why is job X on
//! cluster Y" (the explanation `/api/v1/dispatch/explain` gives).

use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;
use bosun_dispatch::adjust::OverrideTarget;
use bosun_dispatch::model::Plan;
use bosun_dispatcher::engine::{OverrideError, OverrideRequest};
use serde::Deserialize;

use super::page::{see_other, Chrome, CsrfForm, Ctx, Web};
use super::{fmt, svg};
use crate::runs::blocking;

/// The plan's load against target per cluster, as bars with a target mark.
pub fn load_chart(plan: &Plan, id: &str) -> String {
    let rows: Vec<svg::HBar> = plan
        .clusters
        .iter()
        .map(|c| svg::HBar {
            name: c.name.clone(),
            value: c.load,
            target: Some(c.target),
            text: format!(
                "{:.1} / {:.1} ({:.0}%)",
                c.load,
                c.target,
                c.relative_load * 100.0
            ),
            title: format!(
                "{}: load {:.2}, target {:.2}, capacity {}",
                c.name, c.load, c.target, c.capacity
            ),
            class: if c.target <= 0.0 {
                "idle"
            } else if c.relative_load > 1.1 {
                "over"
            } else if c.relative_load < 0.9 {
                "under"
            } else {
                ""
            },
        })
        .collect();
    svg::hbars(&rows, 1.0, id)
}

/// A move of the last re-plan.
pub struct MoveRow {
    unit: String,
    from: String,
    to: String,
    demand: String,
    forced: bool,
    reason: String,
}

/// An override in force.
pub struct OverrideRow {
    id: String,
    target: String,
    cluster: String,
    expires: String,
    reason: String,
    actor: String,
}

/// The answer to "why is job X on cluster Y".
#[derive(Default)]
pub struct Explained {
    asked: bool,
    job: String,
    found: bool,
    cluster: String,
    unit: String,
    rule: String,
    previous: String,
    explanation: String,
    generation: u64,
}

#[derive(Template)]
#[template(path = "dispatcher.html")]
struct DispatcherPage {
    chrome: Chrome,
    configured: bool,
    has_plan: bool,
    generation: u64,
    jobs: usize,
    chart: String,
    moves: Vec<MoveRow>,
    unplaced: Vec<(String, String)>,
    overrides: Vec<OverrideRow>,
    explained: Explained,
    clusters: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct DispatcherQuery {
    #[serde(default)]
    job: String,
}

/// `GET /dispatcher`.
pub async fn page(
    ctx: Ctx,
    State(web): State<Arc<Web>>,
    Query(q): Query<DispatcherQuery>,
) -> Response {
    let shared = &web.daemon.shared;
    let engine = &shared.placer.engine;
    let configured = shared.snapshot().config.dispatcher.is_some();
    let plan = engine.service.plan();
    let base = engine.base_plan();
    let now = web.now();
    let job = q.job.trim().to_string();
    let explained = if job.is_empty() {
        Explained::default()
    } else {
        match engine.service.assignment(&job) {
            Some((a, generation)) => Explained {
                asked: true,
                job,
                found: true,
                cluster: a.cluster,
                unit: a.unit,
                rule: a.rule,
                previous: a.previous.unwrap_or_default(),
                explanation: a.reason,
                generation,
            },
            None => Explained {
                asked: true,
                job,
                ..Explained::default()
            },
        }
    };
    let page = DispatcherPage {
        chrome: ctx.chrome("Dispatcher", "/dispatcher"),
        configured,
        has_plan: plan.is_some(),
        generation: plan.as_ref().map_or(0, |p| p.generation),
        jobs: plan.as_ref().map_or(0, |p| p.assignments.len()),
        chart: plan
            .as_ref()
            .map(|p| load_chart(p, "plan-chart"))
            .unwrap_or_default(),
        clusters: plan
            .as_ref()
            .map(|p| p.clusters.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default(),
        moves: base
            .as_ref()
            .map(|b| {
                b.moves
                    .iter()
                    .map(|m| MoveRow {
                        unit: m.unit.clone(),
                        from: m.from.clone().unwrap_or_else(|| "(new)".into()),
                        to: m.to.clone(),
                        demand: format!("{:.2}", m.demand),
                        forced: m.forced,
                        reason: m.reason.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        unplaced: base
            .as_ref()
            .map(|b| b.unplaced.clone())
            .unwrap_or_default(),
        overrides: engine
            .overrides(now)
            .into_iter()
            .map(|o| OverrideRow {
                target: match &o.target {
                    OverrideTarget::Job(j) => format!("job {j}"),
                    OverrideTarget::File(f) => format!("file {f}"),
                    OverrideTarget::Drain(c) => format!("drain {c}"),
                },
                id: o.id,
                cluster: o.cluster.unwrap_or_default(),
                expires: format!(
                    "{} ({})",
                    fmt::time(o.expires_at),
                    fmt::relative(o.expires_at, now)
                ),
                reason: o.reason,
                actor: o.actor,
            })
            .collect(),
        explained,
    };
    ctx.page(StatusCode::OK, &page)
}

/// `POST /dispatcher/replan`: plans again now (as `POST
/// /api/v1/dispatch/replan`).
pub async fn replan(ctx: Ctx, State(web): State<Arc<Web>>, Form(form): Form<CsrfForm>) -> Response {
    if let Err(r) = ctx.check_form(&form.csrf) {
        return *r;
    }
    web.daemon.shared.placer.engine.service.replan.notify_one();
    see_other("/dispatcher")
}

#[derive(Deserialize)]
pub struct OverrideForm {
    #[serde(default)]
    csrf: String,
    /// `job`, `file` or `drain`.
    #[serde(default)]
    kind: String,
    #[serde(default)]
    target: String,
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    ttl: String,
    #[serde(default)]
    reason: String,
}

/// `POST /dispatcher/overrides`: a new override.
pub async fn add_override(
    ctx: Ctx,
    State(web): State<Arc<Web>>,
    Form(form): Form<OverrideForm>,
) -> Response {
    let role = match ctx.check_form(&form.csrf) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let target = Some(form.target.trim().to_string()).filter(|t| !t.is_empty());
    let cluster = Some(form.cluster.trim().to_string()).filter(|c| !c.is_empty());
    let (job, file, drain) = match form.kind.as_str() {
        "job" => (target, None, None),
        "file" => (None, target, None),
        "drain" => (None, None, target),
        other => {
            return ctx.message(
                StatusCode::BAD_REQUEST,
                "Not done",
                &format!("unknown override kind {other:?}: job, file or drain"),
                "/dispatcher",
            )
        }
    };
    let req = OverrideRequest {
        job,
        file,
        drain,
        cluster: if form.kind == "drain" { None } else { cluster },
        ttl: if form.ttl.trim().is_empty() {
            "1h".into()
        } else {
            form.ttl.trim().to_string()
        },
        reason: form.reason.trim().to_string(),
        actor: format!("dashboard ({})", role.word()),
    };
    let engine = web.daemon.shared.placer.engine.clone();
    let now = web.now();
    match blocking(move || engine.add_override(req, now)).await {
        Ok(_) => see_other("/dispatcher"),
        Err(e) => {
            let status = match e {
                OverrideError::NoPlan => StatusCode::SERVICE_UNAVAILABLE,
                OverrideError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
                OverrideError::Persist(_) => StatusCode::INTERNAL_SERVER_ERROR,
            };
            ctx.message(status, "Override refused", &e.to_string(), "/dispatcher")
        }
    }
}

#[derive(Deserialize)]
pub struct CancelForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    id: String,
}

/// `POST /dispatcher/overrides/cancel`.
pub async fn cancel_override(
    ctx: Ctx,
    State(web): State<Arc<Web>>,
    Form(form): Form<CancelForm>,
) -> Response {
    if let Err(r) = ctx.check_form(&form.csrf) {
        return *r;
    }
    let engine = web.daemon.shared.placer.engine.clone();
    let now = web.now();
    let id = form.id.clone();
    match blocking(move || engine.cancel_override(&id, now)).await {
        Ok(true) => see_other("/dispatcher"),
        Ok(false) => ctx.message(
            StatusCode::NOT_FOUND,
            "No such override",
            &format!("There is no override {:?}.", form.id),
            "/dispatcher",
        ),
        Err(e) => ctx.message(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Not done",
            &e.to_string(),
            "/dispatcher",
        ),
    }
}
