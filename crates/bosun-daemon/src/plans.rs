//! The daemon's dispatcher task, while the configuration has a
//! `dispatcher:` section: plans on start-up, on its `replan` schedule, at
//! once when the inventory of build clusters changes (added, removed,
//! blocked, capacity), and places new jobs (moving nothing else) when only
//! the jobs changed. Demand is bosun's own history by default, Prometheus
//! with `demand: prometheus`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bosun_cluster::registry::ClusterDef;
use bosun_dispatcher::demand::{CachedDemand, DemandSource};
use bosun_dispatcher::engine::Engine;
use bosun_dispatcher::inputs::{inputs, Inputs, OpenShift};
use bosun_dispatcher::service::Service;
use jiff::Timestamp;

use crate::controller::Controller;
use crate::state::{InForce, Shared};

/// The engine of a daemon whose data directory is `data_dir`: its plan in
/// `dispatcher.assignments_file` (default `DATA_DIR/dispatcher-plan.json`),
/// its demand from `source`; `token` guards re-plans and overrides.
pub fn engine(
    config: &bosun_config::types::ProwConfig,
    data_dir: &std::path::Path,
    source: DemandSource,
    token: Option<String>,
) -> Arc<Engine> {
    let plan_file = config
        .dispatcher
        .as_ref()
        .and_then(|d| d.assignments_file.clone())
        .map(PathBuf::from)
        .unwrap_or_else(|| data_dir.join("dispatcher-plan.json"));
    Arc::new(Engine::new(
        Service::new(token),
        CachedDemand::new(source),
        plan_file,
    ))
}

/// The demand source `config` names: Prometheus with `demand: prometheus`,
/// else the store's history over the window.
pub fn demand_source(
    config: &bosun_config::types::ProwConfig,
    store: Arc<dyn bosun_store::Store>,
) -> DemandSource {
    let d = config.dispatcher.clone().unwrap_or_default();
    if d.demand == bosun_config::types::DemandSource::Prometheus {
        if let Some(url) = &d.prometheus_url {
            match DemandSource::prometheus_of(url, &d) {
                Ok(s) => return s,
                Err(e) => {
                    tracing::error!(error = %e, "dispatcher.prometheus_url; history is used")
                }
            }
        }
    }
    DemandSource::History {
        store,
        window: d.window().to_std(),
    }
}

/// The planner's input from the configuration in force.
pub fn daemon_inputs(shared: &Shared, in_force: &InForce) -> Inputs {
    let engine = &shared.placer.engine;
    let demand = engine.demand_now(shared.clock.now(), false);
    let (previous, _) = engine.previous();
    let kube: Vec<String> = in_force
        .clusters
        .defs
        .iter()
        .filter(|(_, d)| matches!(d, ClusterDef::Kubernetes { .. }))
        .map(|(a, _)| a.clone())
        .collect();
    inputs(
        &in_force.snapshot,
        &shared.config_args.job_config,
        &kube,
        &OpenShift::default(),
        &demand,
        &previous,
    )
}

/// Plans once from the configuration in force (blocking); `full` re-plans,
/// else only new jobs are placed when the inventory is the same.
pub fn plan_now(shared: &Shared, full: bool, reason: &str) {
    let in_force = shared.in_force();
    if in_force.snapshot.config.dispatcher.is_none() {
        return;
    }
    let inputs = daemon_inputs(shared, &in_force);
    shared
        .placer
        .engine
        .replan(Ok(inputs), full, reason, shared.clock.now());
}

/// The task: plans while the configuration has a `dispatcher:` section.
pub async fn plan_loop(
    shared: Arc<Shared>,
    controller: Arc<Controller>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut last: Option<Arc<InForce>> = None;
    let mut next_full: Option<Timestamp> = None;
    loop {
        let in_force = shared.in_force();
        let dispatcher = in_force.snapshot.config.dispatcher.clone();
        if let Some(d) = &dispatcher {
            let now = shared.clock.now();
            let changed = !last.as_ref().is_some_and(|l| Arc::ptr_eq(l, &in_force));
            let due = next_full.is_some_and(|t| t <= now);
            if changed || due || shared.placer.engine.base_plan().is_none() {
                let first = last.is_none() || shared.placer.engine.base_plan().is_none();
                let (full, reason) = match () {
                    _ if first => (true, "start-up"),
                    _ if due => (true, "schedule"),
                    _ => (false, "configuration change"),
                };
                let s = shared.clone();
                let _ = tokio::task::spawn_blocking(move || plan_now(&s, full, reason)).await;
                controller.wake();
                last = Some(in_force.clone());
                if first || due || next_full.is_none() {
                    next_full = bosun_schedule::Schedule::parse(
                        d.replan(),
                        bosun_schedule::ParseOptions {
                            timezone: None,
                            identity: Some("dispatcher"),
                        },
                    )
                    .ok()
                    .and_then(|s| s.next_after(now));
                }
            }
        } else {
            last = None;
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = shared.placer.engine.service.replan.notified() => {
                let s = shared.clone();
                let _ = tokio::task::spawn_blocking(move || plan_now(&s, true, "request")).await;
                controller.wake();
            }
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
