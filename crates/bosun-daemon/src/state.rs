//! The daemon's shared state: what its tasks all read (the store and its
//! active runs, the clock, metrics, the periodic scheduler) and the
//! configuration in force. The snapshot and the build clusters it defines are
//! one value, [`InForce`], swapped whole under one lock: no reader ever sees
//! one configuration's jobs with another's clusters.
//!
//! This module knows nothing of HTTP, of the controller's working state or of
//! how runs are created; those build on it.

use bosun_base::sync::{Lock, ReadWrite};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bosun_cluster::executor::Executor;
use bosun_cluster::kube::{Health, PodSettings};
use bosun_cluster::registry::{clusters, ClusterDef};
use bosun_cluster::shim::RunAs;
use bosun_config::Snapshot;
use bosun_host::args::ConfigArgs;
use bosun_store::active::ActiveRuns;
use bosun_store::clock::Clock;
use bosun_store::Store;
use jiff::Timestamp;
use serde::Serialize;

use crate::clusters::{Clusters, ExecutorFactory, HealthBook};
use crate::metrics::Metrics;

/// The annotation on an in-repo periodic's runs naming the commit its
/// definition was loaded at (its refs' `base_sha` is the branch head).
pub const DEFINITION_COMMIT: &str = "bosun.dev/definition-commit";

/// Per followed repository (`org/name`): its branch head last seen and the
/// commit of its snapshot in force.
pub type RepoCommits = HashMap<String, (String, String)>;

/// The scheduler's entries for `snapshot`: an in-repo periodic of a
/// followed repository gets the branch head last seen as its refs'
/// `base_sha` and its definition's commit as an annotation.
pub fn scheduler_jobs(
    snapshot: &Snapshot,
    commits: &RepoCommits,
) -> Vec<bosun_scheduler::PeriodicJob> {
    scheduler_jobs_where(snapshot, commits, |_| true)
}

/// [`scheduler_jobs`] of the periodics `pick` picks.
fn scheduler_jobs_where(
    snapshot: &Snapshot,
    commits: &RepoCommits,
    pick: impl Fn(&bosun_config::Periodic) -> bool,
) -> Vec<bosun_scheduler::PeriodicJob> {
    let mut jobs = bosun_scheduler::config::jobs_where(snapshot, pick);
    if commits.is_empty() {
        return jobs;
    }
    for job in &mut jobs {
        stamp_commits(&mut job.template, commits);
    }
    jobs
}

/// Gives a run of a followed repository's periodic (`periodic` is
/// `org/repo:name`, its refs its repository's) the branch head last seen as
/// its refs' `base_sha` and the snapshot's commit as the
/// [`DEFINITION_COMMIT`] annotation. Others are left as they are.
pub fn stamp_commits(new: &mut bosun_store::NewRun, commits: &RepoCommits) {
    let Some((repo, _)) = new.periodic.as_deref().and_then(|p| p.split_once(':')) else {
        return;
    };
    let Some((head, definition)) = commits.get(repo) else {
        return;
    };
    if let Some(refs) = new.refs.as_mut() {
        refs.base_sha = Some(head.clone());
    }
    let mut annotations = (*new.annotations).clone();
    annotations.insert(DEFINITION_COMMIT.to_string(), definition.clone());
    new.annotations = Arc::new(annotations);
}

/// The configuration in force: a snapshot and its build clusters.
pub struct InForce {
    /// The configuration.
    pub snapshot: Arc<Snapshot>,
    /// Its build clusters and their executors.
    pub clusters: Arc<Clusters>,
}

/// The state of the configuration, as `GET /api/v1/config/status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigStatus {
    /// The last load succeeded (the configuration in force is the newest).
    pub ok: bool,
    /// Version of the snapshot in force.
    pub version: u64,
    /// When the snapshot in force was loaded.
    pub loaded_at: Timestamp,
    /// When the last load was attempted, and why.
    pub last_attempt_at: Timestamp,
    /// What started the last load (`start-up`, `file change`, `SIGHUP`, ...).
    pub last_attempt_reason: String,
    /// The last load's errors (empty when it succeeded).
    pub errors: Vec<String>,
    /// The last load's warnings: how many.
    pub warnings: usize,
    /// The last load's warnings, as `bosun check` prints them.
    pub warning_messages: Vec<String>,
    /// Jobs in force.
    pub periodics: usize,
    /// Presubmits in force.
    pub presubmits: usize,
    /// Postsubmits in force.
    pub postsubmits: usize,
    /// Things a reload could not apply.
    pub notes: Vec<String>,
}

impl ConfigStatus {
    /// The status of a configuration loaded at `now` for `reason`.
    pub fn loaded(
        snapshot: &Snapshot,
        warnings: Vec<String>,
        now: Timestamp,
        reason: &str,
    ) -> Self {
        let counts = snapshot.counts();
        ConfigStatus {
            ok: true,
            version: snapshot.version,
            loaded_at: now,
            last_attempt_at: now,
            last_attempt_reason: reason.into(),
            errors: Vec::new(),
            warnings: warnings.len(),
            warning_messages: warnings,
            periodics: counts.periodics,
            presubmits: counts.presubmits,
            postsubmits: counts.postsubmits,
            notes: Vec::new(),
        }
    }
}

/// What every task of the daemon shares.
pub struct Shared {
    /// The run store.
    pub store: Arc<dyn Store>,
    /// Which replica leads, and whether this one may act outside the store.
    pub leadership: Arc<crate::leader::Leadership>,
    /// The store's active runs, in memory (kept by its commits).
    pub active: Arc<ActiveRuns>,
    /// Where the time comes from (a manual clock in simulations).
    pub clock: Arc<dyn Clock>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// The periodic scheduler's entries.
    pub scheduler: Mutex<bosun_scheduler::Scheduler>,
    /// Wakes the scheduler task.
    pub scheduler_wake: tokio::sync::Notify,
    /// The build clusters' health (probe results of Kubernetes clusters).
    pub health: Mutex<HealthBook>,
    /// Told when the build clusters change (the health task probes at once).
    pub clusters_changed: tokio::sync::Notify,
    /// Told when a build cluster's health changes (the controller looks
    /// again: where runs may start, and the dispatcher's health overlay).
    pub health_changed: tokio::sync::Notify,
    /// Where the configuration comes from (reloads read it again).
    pub config_args: ConfigArgs,
    /// Where runs in `scheduling` go (bosun's dispatcher, an external one).
    pub placer: Arc<crate::placement::Placer>,
    /// Per followed repository: its branch head last seen and the commit
    /// of its snapshot in force (the repositories keep it; the scheduler's
    /// templates read it).
    repo_commits: RwLock<Arc<RepoCommits>>,
    in_force: RwLock<Arc<InForce>>,
    make_executor: ExecutorFactory,
    /// The executors of removed clusters, kept until the controller has
    /// stopped their runs' processes or pods.
    retired: Mutex<HashMap<String, Arc<dyn Executor>>>,
    config_status: Mutex<ConfigStatus>,
    /// The scheduler has evaluated every periodic of the configuration once.
    periodics_evaluated: AtomicBool,
    cpus: usize,
}

/// What [`Shared`] is made of.
pub struct SharedParts {
    /// The run store.
    pub store: Arc<dyn Store>,
    /// Which replica leads.
    pub leadership: Arc<crate::leader::Leadership>,
    /// Its active runs, loaded, and told of the store's commits.
    pub active: Arc<ActiveRuns>,
    /// The configuration in force.
    pub snapshot: Snapshot,
    /// Its load's warnings.
    pub warnings: Vec<String>,
    /// Its build clusters by alias.
    pub clusters: BTreeMap<String, ClusterDef>,
    /// The users its local clusters run jobs as.
    pub users: HashMap<String, RunAs>,
    /// Makes a cluster's executor.
    pub make_executor: ExecutorFactory,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Where the configuration comes from.
    pub config_args: ConfigArgs,
    /// CPUs (the default slots of a local cluster).
    pub cpus: usize,
    /// Where runs in `scheduling` go.
    pub placer: Arc<crate::placement::Placer>,
    /// Per followed repository: its branch head last seen and the commit of
    /// its snapshot in force.
    pub repo_commits: RepoCommits,
}

impl Shared {
    /// The shared state, its scheduler loaded from the snapshot.
    pub fn new(p: SharedParts) -> Shared {
        let now = p.clock.now();
        let status = ConfigStatus::loaded(&p.snapshot, p.warnings.clone(), now, "start-up");
        p.metrics.reload_ok.set(1);
        p.metrics
            .reload_success_time
            .set(crate::metrics::seconds(now));
        let mut scheduler = bosun_scheduler::Scheduler::new();
        scheduler.set_jobs(scheduler_jobs(&p.snapshot, &p.repo_commits), now);
        let pods = PodSettings::of(&p.snapshot.config);
        let clusters = Clusters::build(p.clusters, p.users, pods, &p.make_executor, None);
        Shared {
            store: p.store,
            leadership: p.leadership,
            active: p.active,
            clock: p.clock,
            metrics: p.metrics,
            scheduler: Mutex::new(scheduler),
            scheduler_wake: tokio::sync::Notify::new(),
            health: Mutex::default(),
            clusters_changed: tokio::sync::Notify::new(),
            health_changed: tokio::sync::Notify::new(),
            config_args: p.config_args,
            placer: p.placer,
            repo_commits: RwLock::new(Arc::new(p.repo_commits)),
            in_force: RwLock::new(Arc::new(InForce {
                snapshot: Arc::new(p.snapshot),
                clusters: Arc::new(clusters),
            })),
            make_executor: p.make_executor,
            retired: Mutex::default(),
            config_status: Mutex::new(status),
            periodics_evaluated: AtomicBool::new(false),
            cpus: p.cpus,
        }
    }

    /// The configuration in force.
    pub fn in_force(&self) -> Arc<InForce> {
        self.in_force.read_locked().clone()
    }

    /// The snapshot in force.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.in_force().snapshot.clone()
    }

    /// The build clusters in force.
    pub fn clusters(&self) -> Arc<Clusters> {
        self.in_force().clusters.clone()
    }

    /// The build clusters a configuration defines (with the kubeconfig
    /// contexts of the daemon's arguments).
    pub fn clusters_of(&self, snapshot: &Snapshot) -> BTreeMap<String, ClusterDef> {
        clusters(
            &snapshot.config,
            &self.config_args.kube_contexts(),
            self.cpus,
        )
    }

    /// Puts a configuration and its clusters in force, together (executors
    /// of unchanged clusters are kept; a removed cluster's is kept aside
    /// for the controller). Returns the aliases added and removed.
    pub fn set_in_force(
        &self,
        snapshot: Snapshot,
        defs: BTreeMap<String, ClusterDef>,
        users: HashMap<String, RunAs>,
    ) -> (Vec<String>, Vec<String>) {
        let pods = PodSettings::of(&snapshot.config);
        let mut slot = self.in_force.write_locked();
        let old = &slot.clusters;
        let added = defs
            .keys()
            .filter(|a| !old.defs.contains_key(*a))
            .cloned()
            .collect();
        let removed: Vec<String> = old
            .defs
            .keys()
            .filter(|a| !defs.contains_key(*a))
            .cloned()
            .collect();
        let changed = old.defs != defs;
        {
            let mut retired = self.retired.locked();
            for alias in &removed {
                if let Some(exec) = old.executors.get(alias) {
                    retired.insert(alias.clone(), exec.clone());
                }
            }
            retired.retain(|alias, _| !defs.contains_key(alias));
        }
        let clusters = Clusters::build(defs, users, pods, &self.make_executor, Some(old));
        *slot = Arc::new(InForce {
            snapshot: Arc::new(snapshot),
            clusters: Arc::new(clusters),
        });
        drop(slot);
        if changed {
            self.clusters_changed.notify_one();
        }
        (added, removed)
    }

    /// Puts `snapshot` in force with the build clusters in force (a
    /// repository's jobs changed; the central configuration did not), and
    /// gives the scheduler its periodics. The caller holds the repositories'
    /// compose lock.
    pub fn set_snapshot(&self, snapshot: Snapshot) {
        let now = self.clock.now();
        let snapshot = Arc::new(snapshot);
        self.put_snapshot(snapshot.clone());
        self.install_periodics(&snapshot, now);
    }

    /// `snapshot` in force with the clusters in force, and the status's
    /// counts.
    fn put_snapshot(&self, snapshot: Arc<Snapshot>) {
        {
            let mut slot = self.in_force.write_locked();
            let clusters = slot.clusters.clone();
            *slot = Arc::new(InForce {
                snapshot: snapshot.clone(),
                clusters,
            });
        }
        let mut status = self.config_status();
        let counts = snapshot.counts();
        status.version = snapshot.version;
        status.periodics = counts.periodics;
        status.presubmits = counts.presubmits;
        status.postsubmits = counts.postsubmits;
        self.set_config_status(status);
    }

    /// `base` (the snapshot in force) with each repository of `changes`
    /// given its jobs (`None`: none) and put in force, in one swap; without
    /// a change for a repository of `restamped`, only its periodics'
    /// templates are made again (its head moved). Only those repositories'
    /// periodics are given to the scheduler again: the others' entries are
    /// untouched. The caller holds the repositories' compose lock.
    pub fn put_repo_jobs(
        &self,
        base: &Snapshot,
        changes: Vec<(String, Option<bosun_config::RepoJobs>)>,
        restamped: &[String],
    ) {
        let now = self.clock.now();
        let mut repos: std::collections::HashSet<String> = restamped.iter().cloned().collect();
        repos.extend(changes.iter().map(|(r, _)| r.clone()));
        let snapshot = if changes.is_empty() {
            self.snapshot()
        } else {
            let snapshot = Arc::new(base.with_repos(changes));
            self.put_snapshot(snapshot.clone());
            snapshot
        };
        let owned = |identity: &str| {
            identity
                .split_once(':')
                .is_some_and(|(repo, _)| repos.contains(repo))
        };
        let commits = self.repo_commits.read_locked().clone();
        let jobs = scheduler_jobs_where(
            &snapshot,
            &commits,
            |p| matches!(&p.source, bosun_config::types::JobSource::InRepo { repo, .. } if repos.contains(repo)),
        );
        self.give_scheduler(jobs, now, owned);
    }

    /// Gives the scheduler the periodics of `snapshot` (added, changed,
    /// removed; the others untouched) and forgets the metrics of those
    /// removed.
    pub fn install_periodics(&self, snapshot: &Snapshot, now: Timestamp) {
        let commits = self.repo_commits.read_locked().clone();
        self.give_scheduler(scheduler_jobs(snapshot, &commits), now, |_| true);
    }

    /// `jobs` replace the scheduler's entries that `owned` says are theirs
    /// (`Scheduler::set_jobs_where`); the metrics of those removed are
    /// forgotten, and the scheduler woken.
    fn give_scheduler(
        &self,
        jobs: Vec<bosun_scheduler::PeriodicJob>,
        now: Timestamp,
        owned: impl Fn(&str) -> bool,
    ) {
        let keep: std::collections::HashSet<&str> = jobs.iter().map(|j| &*j.identity).collect();
        let mut scheduler = self.scheduler.locked();
        let gone: Vec<String> = scheduler
            .jobs()
            .map(|j| j.identity.to_string())
            .filter(|id| owned(id) && !keep.contains(id.as_str()))
            .collect();
        drop(keep);
        scheduler.set_jobs_where(jobs, now, owned);
        drop(scheduler);
        for id in gone {
            self.metrics.forget_periodic(&id);
        }
        self.scheduler_wake.notify_one();
    }

    /// [`stamp_commits`] with the commits in force.
    pub fn stamp_commits(&self, new: &mut bosun_store::NewRun) {
        stamp_commits(new, &self.repo_commits.read_locked());
    }

    /// Records the followed repositories' commits (read by the scheduler's
    /// templates from the next [`Shared::install_periodics`] on).
    pub fn set_repo_commits(&self, commits: RepoCommits) {
        *self.repo_commits.write_locked() = Arc::new(commits);
    }

    /// The executor of the removed cluster `alias`, if it is still kept.
    pub fn retired_executor(&self, alias: &str) -> Option<Arc<dyn Executor>> {
        self.retired.locked().get(alias).cloned()
    }

    /// Drops the executors of removed clusters that no run is pending on.
    pub fn prune_retired(&self, in_use: impl Fn(&str) -> bool) {
        self.retired.locked().retain(|alias, _| in_use(alias));
    }

    /// A cluster's health now, in the configuration `snapshot`.
    pub fn health_of(&self, snapshot: &Snapshot, alias: &str, def: &ClusterDef) -> Health {
        let book = self.health.locked();
        crate::clusters::health_of(&book, snapshot, alias, def)
    }

    /// The configuration's status.
    pub fn config_status(&self) -> ConfigStatus {
        self.config_status.locked().clone()
    }

    /// Records the configuration's status.
    pub fn set_config_status(&self, status: ConfigStatus) {
        *self.config_status.locked() = status;
    }

    /// A run of `periodic` ended: its scheduler entry looks again.
    pub fn periodic_run_ended(&self, periodic: &str) {
        let evaluate = self
            .scheduler
            .locked()
            .run_ended(periodic, self.clock.now());
        if evaluate {
            self.scheduler_wake.notify_one();
        }
    }

    /// The scheduler has evaluated every periodic once (readiness).
    pub fn set_periodics_evaluated(&self) {
        self.periodics_evaluated.store(true, Ordering::Release);
    }

    /// Whether the scheduler has evaluated every periodic once.
    pub fn periodics_evaluated(&self) -> bool {
        self.periodics_evaluated.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_config::source::MemFiles;
    use bosun_config::types::InRepoSource;

    /// The scheduler's template of a followed repository's periodic carries
    /// the branch head as its refs' `base_sha` and the definition's commit
    /// as an annotation; a central periodic's is left as it is.
    #[test]
    fn in_repo_periodics_fire_with_the_head_and_name_their_definitions_commit() {
        let mut files = MemFiles::new();
        files.file(
            "/c/jobs/jobs.yaml",
            "periodics:\n- name: central\n  interval: 1h\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
        );
        files.file(
            "/r/.lighthouse/jobs/triggers.yaml",
            "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  periodics:\n  - name: nightly\n    cron: \"0 3 * * *\"\n    spec: {containers: [{image: x, command: [\"true\"]}]}\n",
        );
        let opts = bosun_config::LoadOptions {
            job_config: vec!["/c/jobs".into()],
            in_repo: vec![InRepoSource {
                repo: "o/r".into(),
                path: "/r".into(),
                branch: Some("main".into()),
                ..InRepoSource::default()
            }],
            ..bosun_config::LoadOptions::default()
        };
        let loaded = bosun_config::load(&opts, &files);
        let snapshot = loaded.snapshot.expect("valid");
        let commits: RepoCommits =
            [("o/r".to_string(), ("h3ad".to_string(), "d3f".to_string()))].into();
        let jobs = scheduler_jobs(&snapshot, &commits);
        let job = |id: &str| jobs.iter().find(|j| &*j.identity == id).unwrap();
        let nightly = &job("o/r:nightly").template;
        let refs = nightly.refs.as_ref().unwrap();
        assert_eq!(
            (refs.base_ref.as_deref(), refs.base_sha.as_deref()),
            (Some("main"), Some("h3ad"))
        );
        assert_eq!(
            nightly
                .annotations
                .get(DEFINITION_COMMIT)
                .map(String::as_str),
            Some("d3f")
        );
        let central = &job("central").template;
        assert!(central.refs.is_none());
        assert!(!central.annotations.contains_key(DEFINITION_COMMIT));
        // Without the repository's commits, nothing is stamped.
        let bare = scheduler_jobs(&snapshot, &RepoCommits::new());
        let nightly = &bare
            .iter()
            .find(|j| &*j.identity == "o/r:nightly")
            .unwrap()
            .template;
        assert_eq!(nightly.refs.as_ref().unwrap().base_sha, None);
    }
}
