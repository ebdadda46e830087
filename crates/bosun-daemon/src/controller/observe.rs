//! Observe: one consistent view of the world for a pass — one configuration
//! snapshot with its clusters, each cluster's health, the executors' status
//! of every pending run, the runs waiting to start (each cluster's oldest
//! first, so a long queue on one cluster never holds back another), the
//! specs of the runs looked at, and the controller's own working state
//! (starts in flight, aborts requested, notes held). Observing changes
//! nothing but the caches it reads through.

use bosun_base::sync::Lock;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bosun_cluster::executor::RunStatus;
use bosun_cluster::kube::Health;
use bosun_cluster::registry::ClusterDef;
use bosun_config::Snapshot;
use bosun_store::template::SpecSnapshot;
use bosun_store::Run;
use jiff::Timestamp;

use super::handle::{Controller, Starting};
use crate::clusters::Clusters;
use crate::state::InForce;

/// How many of the oldest waiting runs one pass considers per cluster.
pub const MAX_WAITING_PER_PASS: usize = 256;

/// A pending run and where its job stands.
#[derive(Debug, Clone)]
pub struct PendingRun {
    /// The run.
    pub run: Arc<Run>,
    /// Its cluster's alias.
    pub cluster: String,
    /// Its executor's answer; `None` when its cluster was removed.
    pub status: Option<RunStatus>,
}

/// What a pass sees.
pub struct Observed {
    /// The time of the pass.
    pub now: Timestamp,
    /// The configuration in force.
    pub snapshot: Arc<Snapshot>,
    /// Its build clusters and their executors.
    pub clusters: Arc<Clusters>,
    /// Each cluster's health.
    pub health: HashMap<String, Health>,
    /// Pending runs (not being started, no transition held).
    pub pending: Vec<PendingRun>,
    /// Starts in flight whose jobs have not ended (they hold their slots).
    pub starting: Vec<Starting>,
    /// Runs waiting for a cluster (`scheduling`, no transition held).
    pub scheduling: Vec<Arc<Run>>,
    /// Runs waiting to start (`triggered`), oldest first.
    pub waiting: Vec<Arc<Run>>,
    /// Runs whose abort was requested.
    pub aborts: HashSet<String>,
    /// Of those, the ones not being started and with no transition held,
    /// with their active run (none: complete, or no such run).
    pub unstarted_aborts: Vec<(String, Option<Arc<Run>>)>,
    /// Spec snapshots of the runs looked at, by hash.
    pub specs: HashMap<String, Arc<SpecSnapshot>>,
    /// Why waiting runs wait, as held for the next commit.
    pub held_notes: HashMap<String, String>,
    /// Where each run in `scheduling` goes, as the placer answered from
    /// memory (a run without an answer keeps its configured cluster).
    pub placements: HashMap<String, crate::placement::Decision>,
    /// The clusters the dispatcher's health overlay serves jobs from, by
    /// job, for the jobs of waiting runs (empty without `dispatcher:`).
    pub overlay: HashMap<String, String>,
    /// When the dispatcher's effective plan changes by the clock alone (an
    /// override expires, a cluster enters or leaves the health overlay).
    pub placement_change_at: Option<Timestamp>,
    /// Whether some pending run may change with no event to say so (its
    /// executor does not report it): the controller then looks again
    /// within a second.
    pub unreported: bool,
    /// Replicas share the store: a run another replica started on a local
    /// cluster, which this one's executor does not know, ran on a replica
    /// that stopped leading (its description says so).
    pub replicated: bool,
}

impl Observed {
    /// The spec snapshot of `run`, if it was found.
    pub fn spec(&self, run: &Run) -> Option<&Arc<SpecSnapshot>> {
        self.specs.get(&run.spec_hash)
    }
}

/// Whether a run whose job stands so uses its cluster's slot. (Shared with
/// `decide`, which counts slots; here it bounds how many waiting runs to read.)
pub fn holds_slot(status: &RunStatus) -> bool {
    matches!(
        status,
        RunStatus::Starting
            | RunStatus::PodPending { .. }
            | RunStatus::Running { .. }
            | RunStatus::Ending
            | RunStatus::Revivable(_)
    )
}

/// The cluster a run is on, or waits for: the one decided when it was
/// scheduled, else its own.
pub fn cluster_of(run: &Run) -> &str {
    run.cluster.as_deref().unwrap_or(&run.configured_cluster)
}

impl Controller {
    /// Observes the world for a pass at `now`, in the configuration
    /// `in_force`. `ended` are runs in flight whose jobs are known to have
    /// ended (their slots are free).
    pub(super) fn observe(
        &self,
        in_force: &InForce,
        now: Timestamp,
        starting: &HashMap<String, Starting>,
        ended: &HashSet<String>,
    ) -> Observed {
        let shared = &self.shared;
        let (snapshot, clusters) = (in_force.snapshot.clone(), in_force.clusters.clone());
        let (held, held_notes) = {
            let h = self.held.locked();
            (h.runs.clone(), h.notes.clone())
        };
        let aborts = self.aborts.locked().clone();
        let health: HashMap<String, Health> = {
            let book = shared.health.locked();
            clusters
                .defs
                .iter()
                .map(|(alias, def)| {
                    let h = crate::clusters::health_of(&book, &snapshot, alias, def);
                    (alias.clone(), h)
                })
                .collect()
        };
        // The dispatcher's health overlay moves on with the clusters'
        // health; expired overrides go.
        shared.placer.tick(
            health
                .iter()
                .map(|(alias, h)| (alias.clone(), *h == Health::Reachable)),
            &snapshot.config,
            now,
        );
        let idle = |id: &str| !starting.contains_key(id) && !held.contains(id);

        let mut specs = HashMap::new();
        let mut used: HashMap<&str, usize> = HashMap::new();
        let all_pending = shared.active.pending();
        // A removed cluster's executor is kept while a run was pending on it
        // when this pass began.
        shared.prune_retired(|alias| all_pending.iter().any(|r| cluster_of(r) == alias));
        let mut pending = Vec::new();
        let mut unreported = false;
        for run in all_pending.iter().filter(|r| idle(&r.id)) {
            let alias = cluster_of(run).to_string();
            let executor = clusters.executors.get(&alias);
            let status = executor.map(|e| e.status(&run.id));
            // Asked until one run says no: the answer may take a lock.
            if let (false, Some(e), Some(s)) = (unreported, executor, &status) {
                unreported = !e.reports_change(s);
            }
            if status.as_ref().is_some_and(holds_slot) {
                *used.entry(cluster_of(run)).or_default() += 1;
                self.spec_into(run, &mut specs);
            }
            pending.push(PendingRun {
                run: run.clone(),
                cluster: alias,
                status,
            });
        }
        let starting: Vec<Starting> = starting
            .iter()
            .filter(|(id, _)| !ended.contains(*id))
            .map(|(_, s)| s.clone())
            .collect();
        for s in &starting {
            *used.entry(s.cluster.as_str()).or_default() += 1;
        }
        let unstarted_aborts = aborts
            .iter()
            .filter(|id| idle(id))
            .map(|id| (id.clone(), shared.active.get(id)))
            .collect();
        let scheduling: Vec<Arc<Run>> = shared
            .active
            .scheduling()
            .into_iter()
            .filter(|r| !held.contains(&r.id))
            .collect();
        // The placer is asked here, so that deciding reads plain answers.
        let placements = scheduling
            .iter()
            .map(|r| (r.id.clone(), shared.placer.place(r, &snapshot.config, now)))
            .collect();
        // Each cluster's oldest waiting runs: for a local cluster, a few
        // times as many as it has free slots (a pass starts at most that
        // many; the rest wait for the next pass, which comes as soon as a
        // run ends), none when it is full.
        let waiting_now = |r: &Run| idle(&r.id);
        let mut waiting = Vec::new();
        for (alias, def) in &clusters.defs {
            let limit = match def {
                ClusterDef::Local { slots } => {
                    let used = used.get(alias.as_str()).copied().unwrap_or(0);
                    match slots.saturating_sub(used) {
                        0 => continue,
                        free => (free * 4).clamp(32, MAX_WAITING_PER_PASS),
                    }
                }
                ClusterDef::Kubernetes { .. } => MAX_WAITING_PER_PASS,
            };
            waiting.extend(shared.active.waiting_where(alias, limit, waiting_now));
        }
        // Runs naming a cluster that does not exist (they end in error).
        waiting.extend(
            shared
                .active
                .waiting_elsewhere(|c| clusters.defs.contains_key(c), MAX_WAITING_PER_PASS)
                .into_iter()
                .filter(|r| waiting_now(r)),
        );
        // Admission is first-in first-out across clusters (build ids grow
        // with creation).
        waiting.sort_by_key(|r| (r.build_id.parse::<u64>().unwrap_or(u64::MAX), r.created_at));
        for run in &waiting {
            self.spec_into(run, &mut specs);
        }
        let mut overlay = HashMap::new();
        if snapshot.config.dispatcher.is_some() {
            for run in &waiting {
                if overlay.contains_key(&run.job) {
                    continue;
                }
                if let Some((a, _)) = shared.placer.engine.service.assignment(&run.job) {
                    if a.rule == "health overlay" {
                        overlay.insert(run.job.clone(), a.cluster);
                    }
                }
            }
        }
        let placement_change_at = shared.placer.next_change(&snapshot.config);
        Observed {
            now,
            snapshot,
            clusters,
            health,
            pending,
            starting,
            scheduling,
            waiting,
            aborts,
            unstarted_aborts,
            specs,
            held_notes,
            placements,
            overlay,
            placement_change_at,
            unreported,
            replicated: shared.leadership.is_replicated(),
        }
    }

    /// Adds `run`'s spec snapshot to `specs`, if it can be read.
    fn spec_into(&self, run: &Run, specs: &mut HashMap<String, Arc<SpecSnapshot>>) {
        if specs.contains_key(&run.spec_hash) {
            return;
        }
        if let Some(s) = self.spec_of(run) {
            specs.insert(run.spec_hash.clone(), s);
        }
    }

    /// A run's spec snapshot, parsed once per content hash.
    pub(super) fn spec_of(&self, run: &Run) -> Option<Arc<SpecSnapshot>> {
        if let Some(s) = self.specs.locked().get(&run.spec_hash) {
            return Some(s.clone());
        }
        let json = self.shared.store.spec(&run.spec_hash).ok()??;
        let spec: Arc<SpecSnapshot> = Arc::new(serde_json::from_value(json).ok()?);
        self.specs
            .locked()
            .insert(run.spec_hash.clone(), spec.clone());
        Some(spec)
    }
}
