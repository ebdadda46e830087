//! `/clusters`: every build cluster in force with its health (and why),
//! kind, capacity, running runs against `max_concurrency`, waiting runs,
//! the dispatcher's load against target (bars), trusted flag and rules.

use std::collections::BTreeMap;
use std::sync::Arc;

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use bosun_cluster::kube::Health;
use bosun_cluster::registry::ClusterDef;

use super::page::{Chrome, Ctx, Web};
use super::svg;

/// A cluster as a row of the page.
pub struct Row {
    alias: String,
    kind: &'static str,
    context: String,
    health: &'static str,
    prow_health: &'static str,
    reason: String,
    running: usize,
    slots: String,
    waiting: usize,
    capacity: i64,
    blocked: bool,
    failover_to: String,
    provider: String,
    capabilities: String,
    trusted: bool,
    rules: Vec<String>,
    run_as: String,
}

#[derive(Template)]
#[template(path = "clusters.html")]
struct ClustersPage {
    chrome: Chrome,
    rows: Vec<Row>,
    usage: String,
    load: String,
    has_plan: bool,
}

/// `GET /clusters`.
pub async fn page(ctx: Ctx, State(web): State<Arc<Web>>) -> Response {
    let shared = &web.daemon.shared;
    let in_force = shared.in_force();
    let config = &in_force.snapshot.config;
    let mut running: BTreeMap<String, usize> = BTreeMap::new();
    for r in shared.active.pending() {
        let alias = r
            .cluster
            .clone()
            .unwrap_or_else(|| r.configured_cluster.clone());
        *running.entry(alias).or_default() += 1;
    }
    let mut rows = Vec::new();
    let mut usage = Vec::new();
    for (alias, def) in &in_force.clusters.defs {
        let health = shared.health_of(&in_force.snapshot, alias, def);
        let reason = match &health {
            Health::Unreachable(why) => why.clone(),
            Health::MissingPermissions(denied) => format!("denied: {}", denied.join(", ")),
            Health::Disabled => "listed in disabled_clusters".into(),
            Health::Reachable => String::new(),
        };
        let (kind, context, slots) = match def {
            ClusterDef::Local { slots } => ("local", String::new(), *slots),
            ClusterDef::Kubernetes { context, slots, .. } => {
                ("kubernetes", context.clone(), *slots)
            }
        };
        let bc = config.build_clusters.get(alias);
        let n = running.get(alias).copied().unwrap_or(0);
        let waiting = shared.active.waiting(alias, 100_000).len();
        usage.push(svg::HBar {
            name: alias.clone(),
            value: n as f64,
            target: (slots > 0).then_some(slots as f64),
            text: if slots > 0 {
                format!("{n} / {slots} running")
            } else {
                format!("{n} running (no limit)")
            },
            title: format!("{alias}: {n} running, {waiting} waiting"),
            class: if slots > 0 && n >= slots { "full" } else { "" },
        });
        rows.push(Row {
            alias: alias.clone(),
            kind,
            context,
            health: health.word(),
            prow_health: health.prow_word(),
            reason,
            running: n,
            slots: if slots > 0 {
                slots.to_string()
            } else {
                "no limit".into()
            },
            waiting,
            capacity: bc.and_then(|c| c.capacity).unwrap_or(100),
            blocked: bc.is_some_and(|c| c.blocked),
            failover_to: bc.and_then(|c| c.failover_to.clone()).unwrap_or_default(),
            provider: bc.and_then(|c| c.provider.clone()).unwrap_or_default(),
            capabilities: bc.map(|c| c.capabilities.join(", ")).unwrap_or_default(),
            trusted: bc.is_some_and(|c| c.trusted.is_some()),
            rules: bc
                .and_then(|c| c.trusted.as_ref())
                .map(|rules| rules.iter().map(describe_rule).collect())
                .unwrap_or_default(),
            run_as: match (
                bc.and_then(|c| c.run_as.as_deref()),
                in_force.clusters.users.get(alias),
            ) {
                (None, _) => String::new(),
                (Some(crate::clusters::UNPRIVILEGED), Some(u)) => format!(
                    "{} (uid {}; run_as: unprivileged)",
                    crate::clusters::NOBODY,
                    u.uid
                ),
                (Some(spec), Some(u)) => format!("{spec} (uid {})", u.uid),
                (Some(spec), None) => format!("bosun's own user (run_as: {spec})"),
            },
        });
    }
    let plan = shared.placer.engine.service.plan();
    let load = plan
        .as_ref()
        .map(|p| super::dispatcher::load_chart(p, "cluster-load"))
        .unwrap_or_default();
    let page = ClustersPage {
        chrome: ctx.chrome("Clusters", "/clusters"),
        rows,
        usage: svg::hbars(&usage, 1.0, "cluster-usage"),
        has_plan: plan.is_some(),
        load,
    };
    ctx.page(StatusCode::OK, &page)
}

/// A trusted cluster's allow rule in words.
fn describe_rule(r: &bosun_config::types::TrustRule) -> String {
    let mut parts = Vec::new();
    if !r.jobs.is_empty() {
        parts.push(format!("jobs {}", r.jobs.join(", ")));
    }
    if !r.repos.is_empty() {
        parts.push(format!("repos {}", r.repos.join(", ")));
    }
    if !r.types.is_empty() {
        let types: Vec<&str> = r.types.iter().map(|t| t.as_str()).collect();
        parts.push(format!("types {}", types.join(", ")));
    }
    if parts.is_empty() {
        "any job".into()
    } else {
        parts.join("; ")
    }
}
