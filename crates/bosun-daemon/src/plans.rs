//! The daemon's dispatcher task, while the configuration has a
//! `dispatcher:` section: plans on start-up, on its `replan` schedule, at
//! once when the inventory of build clusters changes (added, removed,
//! blocked, capacity), and places new jobs (moving nothing else) when only
//! the jobs changed. Demand is bosun's own history by default, Prometheus
//! with `demand: prometheus`. The plan and its overrides are kept in files
//! by default, or in the store's documents for replicas on one shared
//! store ([`PlanHome`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bosun_cluster::registry::ClusterDef;
use bosun_dispatcher::demand::{CachedDemand, DemandSource};
use bosun_dispatcher::engine::Engine;
use bosun_dispatcher::inputs::{inputs, Inputs, OpenShift};
use bosun_dispatcher::persist::{Files, InStore, Persistence};
use bosun_dispatcher::service::Service;
use jiff::Timestamp;

use crate::controller::Controller;
use crate::state::{InForce, Shared};

/// Where a daemon's dispatcher keeps its plan and its overrides.
#[derive(Clone)]
pub enum PlanHome {
    /// In files: the plan in `dispatcher.assignments_file` (default
    /// `DATA_DIR/dispatcher-plan.json`), the overrides beside it. A daemon
    /// with a store of its own (SQLite) keeps them there.
    Files,
    /// In the store's documents `dispatcher-plan` and
    /// `dispatcher-overrides`: for replicas of `bosun serve` on one shared
    /// store (`dispatcher.assignments_file` is not read then).
    Store(bosun_store::SharedStore),
}

/// The engine of a daemon whose data directory is `data_dir`, keeping its
/// plan in files ([`PlanHome::Files`]); its demand from `source`; `token`
/// guards re-plans and overrides.
pub fn engine(
    config: &bosun_config::types::ProwConfig,
    data_dir: &std::path::Path,
    source: DemandSource,
    token: Option<String>,
) -> Arc<Engine> {
    engine_in(config, data_dir, source, token, PlanHome::Files)
}

/// [`engine`], keeping its plan and overrides in `home`.
pub fn engine_in(
    config: &bosun_config::types::ProwConfig,
    data_dir: &std::path::Path,
    source: DemandSource,
    token: Option<String>,
    home: PlanHome,
) -> Arc<Engine> {
    let persist: Arc<dyn Persistence> = match home {
        PlanHome::Files => {
            let plan_file = config
                .dispatcher
                .as_ref()
                .and_then(|d| d.assignments_file.clone())
                .map(PathBuf::from)
                .unwrap_or_else(|| data_dir.join("dispatcher-plan.json"));
            Arc::new(Files::new(plan_file))
        }
        PlanHome::Store(store) => Arc::new(InStore::new(store)),
    };
    Arc::new(Engine::with_persistence(
        Service::new(token),
        CachedDemand::new(source),
        persist,
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

/// A replica that does not lead on a shared store: every `every`, the
/// plan the leader kept and the overrides any replica made are put in force
/// here, so its dispatcher lookups and placements answer as the leader's
/// do. Runs while this replica follows (it stops when `stop` turns true).
pub async fn follow_plan_loop(
    shared: Arc<Shared>,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let in_force = shared.in_force();
        if in_force.snapshot.config.dispatcher.is_some() && !shared.leadership.is_leader() {
            let s = shared.clone();
            let _ = tokio::task::spawn_blocking(move || {
                let now = s.clock.now();
                let inputs = daemon_inputs(&s, &in_force);
                s.placer.engine.adopt(inputs, now);
                s.placer.engine.refresh_overrides(now);
            })
            .await;
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
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
        // Overrides made through another replica (a shared store).
        if shared.leadership.is_replicated() && dispatcher.is_some() {
            let s = shared.clone();
            let _ = tokio::task::spawn_blocking(move || {
                s.placer.engine.refresh_overrides(s.clock.now())
            })
            .await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_dispatcher::persist::PLAN_DOCUMENT;

    /// The plan of a daemon's engine goes to the home it was given: its
    /// data directory's file by default, the store's document on a shared
    /// store (no file then).
    #[test]
    fn the_plan_goes_to_the_file_or_to_the_stores_document() {
        let config = bosun_config::types::ProwConfig::default();
        let inputs = || {
            Ok(Inputs {
                input: bosun_dispatch::model::PlanInput {
                    clusters: vec![bosun_dispatch::model::ClusterSpec {
                        name: "a".into(),
                        ..Default::default()
                    }],
                    units: Vec::new(),
                    options: Default::default(),
                },
                repos: Vec::new(),
                warnings: Vec::new(),
                files: Default::default(),
            })
        };
        let now = Timestamp::now();
        for shared in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let store: bosun_store::SharedStore = Arc::new(bosun_store::memory::MemoryStore::new());
            let home = if shared {
                PlanHome::Store(store.clone())
            } else {
                PlanHome::Files
            };
            let e = engine_in(&config, dir.path(), DemandSource::Ones, None, home);
            assert!(e.replan(inputs(), true, "test", now));
            let file = dir.path().join("dispatcher-plan.json");
            assert_eq!(file.exists(), !shared);
            assert_eq!(store.document(PLAN_DOCUMENT).unwrap().is_some(), shared);
        }
    }
}
