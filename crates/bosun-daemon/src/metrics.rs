//! Prometheus metrics with Prow's names and labels: `prowjob_state_transitions`
//! (counted in the store's transition path: every transition, not a sample) and
//! `prowjobs` (retained runs by state, kept up to date from the store's commits:
//! [`prowjobs`]); and bosun's own: the periodic scheduler's (fire lateness,
//! skipped ticks, and per periodic the last scheduled tick, the last success and
//! the next fire, so a periodic that silently stopped can be alerted on) and
//! config reloads.

pub mod prowjobs;

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bosun_store::{Before, Run, RunCount, RunState, Store, StoreError, TransitionObserver};
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use prowjobs::ProwJobs;

type Labels = Vec<(String, String)>;

/// A counter exposed under its exact name. prometheus-client writes counters as
/// `NAME_total` (OpenMetrics); Prow's is `prowjob_state_transitions`, and the
/// queries people run against it (OpenShift's dispatcher among them) use that
/// name, so the value is written without the suffix.
#[derive(Debug, Default, Clone)]
pub struct PlainCounter(Counter);

impl PlainCounter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.inc();
    }
}

impl TypedMetric for PlainCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for PlainCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&(self.0.get() as i64))
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

/// A gauge holding a float (timestamps in seconds).
pub type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The daemon's metrics.
pub struct Metrics {
    /// `prowjob_state_transitions`, written before `prowjobs`.
    head: Registry,
    /// The rest, after `prowjobs`.
    registry: Registry,
    transitions: Family<ProwLabels, PlainCounter>,
    prowjobs: ProwJobs,
    /// The length of the last exposition (the next one is about as long).
    last_len: AtomicUsize,
    namespace: Arc<String>,
    /// Commit time minus scheduled time of each scheduled run.
    pub fire_lateness: Histogram,
    /// Skipped ticks by periodic and reason.
    pub skipped: Family<Labels, Counter>,
    /// Fires decided ahead, by what became of them (`committed`, `stale`).
    pub prepared: Family<Labels, Counter>,
    /// Per periodic: the latest tick that got a run.
    pub last_scheduled: Family<Labels, FloatGauge>,
    /// Per periodic: when its latest successful run completed.
    pub last_success: Family<Labels, FloatGauge>,
    /// Per periodic: when it next fires.
    pub next_fire: Family<Labels, FloatGauge>,
    /// Config reloads by result (`success`, `error`).
    pub reloads: Family<Labels, Counter>,
    /// 1 when the last reload succeeded.
    pub reload_ok: Gauge,
    /// When the configuration in force was loaded.
    pub reload_success_time: FloatGauge,
    /// Per build cluster and status: 1 for its status now, 0 for the others.
    pub cluster_status: Family<Labels, Gauge>,
    /// Prow's: failed creations of a Kubernetes client, per cluster.
    pub failed_client_creations: Family<Labels, PlainCounter>,
    /// Prow hook's: accepted webhook deliveries, by `event_type`.
    pub webhook_counter: Family<Labels, PlainCounter>,
    /// Prow hook's: webhook answers, by `response_code`.
    pub webhook_response_codes: Family<Labels, PlainCounter>,
    /// Repository loads by result (`success`, `error`, `git_error`).
    pub repo_loads: Family<Labels, Counter>,
    /// Pushes that asked for a load.
    pub repo_pushes: Counter,
    /// Per followed repository: seconds since its remote last answered.
    pub repo_resync_lag: Family<Labels, FloatGauge>,
    /// Per followed repository: 1 while its last load failed.
    pub repo_error: Family<Labels, Gauge>,
    /// Seconds from a webhook delivery's acceptance to its processing.
    pub delivery_latency: Histogram,
    /// Reports to the forge not delivered, by `kind` (`retry`: tried again;
    /// `refused`: refused for good).
    pub report_failures: Family<Labels, Counter>,
    /// Reports tried before a restart and sent again after it (at most the
    /// one in flight at a kill reached the forge twice).
    pub reports_resent: Counter,
    /// Reports waiting in the outbox.
    pub reports_pending: Gauge,
    /// Reports the forge refused for good (kept in the outbox).
    pub reports_refused: Gauge,
    /// 1 while this replica leads, else 0.
    pub leader: Gauge,
    /// This replica's leader term (0 while it follows).
    pub leader_term: Gauge,
    /// Lease renewals by result (`renewed`, `lost`: the lease was no longer
    /// this replica's, `error`: the database did not answer).
    pub leader_renewals: Family<Labels, Counter>,
    /// Times this replica became the leader.
    pub leader_acquired: Counter,
    /// Times this replica stopped leading, by `reason` (`lost`, `untrusted`:
    /// its trust window ended unrenewed, `fenced`: a write was refused for
    /// its term, `resigned`).
    pub leader_lost: Family<Labels, Counter>,
}

/// The labels of a periodic's series: its job name and its identity.
pub fn periodic_labels(identity: &str) -> Labels {
    let job = identity.rsplit_once(':').map_or(identity, |(_, n)| n);
    vec![
        ("job".into(), job.to_string()),
        ("periodic".into(), identity.to_string()),
    ]
}

/// Seconds since the epoch.
pub fn seconds(t: jiff::Timestamp) -> f64 {
    t.as_microsecond() as f64 / 1e6
}

/// Prow's nine labels for a run in `state`.
pub fn prow_labels(namespace: &Arc<String>, run: &Run, state: RunState) -> ProwLabels {
    count_labels(
        namespace,
        RunCount {
            state: state.as_str().to_string(),
            ..RunCount::of(run)
        },
    )
}

/// Prow's nine labels of `prowjob_state_transitions` and `prowjobs`. A struct
/// with fixed names rather than a vector of pairs: every transition builds one
/// and the family hashes it up to three times, and the pairs cost eighteen
/// allocations each time (a tenth of a burst of periodic fires).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProwLabels {
    job_namespace: Arc<String>,
    job_name: String,
    r#type: Cow<'static, str>,
    state: Cow<'static, str>,
    org: String,
    repo: String,
    base_ref: String,
    cluster: String,
    retest: bool,
}

/// Prow's nine labels of a count.
fn count_labels(namespace: &Arc<String>, c: RunCount) -> ProwLabels {
    ProwLabels {
        job_namespace: namespace.clone(),
        job_name: c.job,
        r#type: Cow::Owned(c.job_type),
        state: Cow::Owned(c.state),
        org: c.org,
        repo: c.repo,
        base_ref: c.base_ref,
        cluster: c.cluster,
        retest: c.retest,
    }
}

/// `prowjobs` of `counts` as prometheus-client writes it (a gauge family,
/// filled once, in a registry of its own): the reference the hand-written
/// family ([`prowjobs`]) is checked against by its tests and timed against
/// by `examples/metrics_bench.rs`.
#[doc(hidden)]
pub fn reference_prowjobs(namespace: &str, counts: &[RunCount]) -> Registry {
    let family = Family::<ProwLabels, Gauge>::default();
    let mut registry = Registry::default();
    registry.register(
        "prowjobs",
        "Number of retained runs by state",
        family.clone(),
    );
    let namespace = Arc::new(namespace.to_string());
    for c in counts {
        family
            .get_or_create(&count_labels(&namespace, c.clone()))
            .set(c.count as i64);
    }
    registry
}

impl Metrics {
    /// Metrics for runs in `namespace` (Prow's `prowjob_namespace`).
    pub fn new(namespace: &str) -> Arc<Self> {
        let mut head = Registry::default();
        let transitions = Family::<ProwLabels, PlainCounter>::default();
        head.register(
            "prowjob_state_transitions",
            "Number of run state transitions (every transition, as it is committed)",
            transitions.clone(),
        );
        // `prowjobs` comes next (written by hand, see `render`).
        let mut registry = Registry::default();
        let fire_lateness = Histogram::new(exponential_buckets(0.001, 2.0, 17));
        registry.register(
            "bosun_periodic_fire_lateness_seconds",
            "Commit time minus scheduled time of each scheduled periodic run",
            fire_lateness.clone(),
        );
        let skipped = Family::<Labels, Counter>::default();
        registry.register(
            "bosun_periodic_skipped",
            "Ticks of a periodic that got no run, by reason",
            skipped.clone(),
        );
        let prepared = Family::<Labels, Counter>::default();
        registry.register(
            "bosun_periodic_prepared_fires",
            "Fires decided ahead of their instant, by outcome: committed at the instant, or stale (the periodic changed; decided again)",
            prepared.clone(),
        );
        let last_scheduled = Family::<Labels, FloatGauge>::default();
        registry.register(
            "bosun_periodic_last_scheduled_timestamp_seconds",
            "The latest tick of a periodic that got a run",
            last_scheduled.clone(),
        );
        let last_success = Family::<Labels, FloatGauge>::default();
        registry.register(
            "bosun_periodic_last_success_timestamp_seconds",
            "When the latest successful run of a periodic completed",
            last_success.clone(),
        );
        let next_fire = Family::<Labels, FloatGauge>::default();
        registry.register(
            "bosun_periodic_next_fire_timestamp_seconds",
            "When a periodic fires next",
            next_fire.clone(),
        );
        let reloads = Family::<Labels, Counter>::default();
        registry.register(
            "bosun_config_reloads",
            "Configuration reloads by result",
            reloads.clone(),
        );
        let reload_ok = Gauge::default();
        registry.register(
            "bosun_config_last_reload_successful",
            "1 if the last configuration reload succeeded (the last good one stays in force otherwise)",
            reload_ok.clone(),
        );
        let reload_success_time = FloatGauge::default();
        registry.register(
            "bosun_config_last_reload_success_timestamp_seconds",
            "When the configuration in force was loaded",
            reload_success_time.clone(),
        );
        let cluster_status = Family::<Labels, Gauge>::default();
        registry.register(
            "bosun_build_cluster_status",
            "1 for each build cluster's health now (Reachable, Unreachable, MissingPermissions, Disabled), with Prow's word beside it",
            cluster_status.clone(),
        );
        let failed_client_creations = Family::<Labels, PlainCounter>::default();
        registry.register(
            "kubernetes_failed_client_creations",
            "Failed creations of a Kubernetes client, per build cluster (Prow's name)",
            failed_client_creations.clone(),
        );
        let webhook_counter = Family::<Labels, PlainCounter>::default();
        registry.register(
            bosun_forge::hook::WEBHOOK_COUNTER,
            "A counter of the webhooks made to bosun (Prow hook's name), by event type",
            webhook_counter.clone(),
        );
        let webhook_response_codes = Family::<Labels, PlainCounter>::default();
        registry.register(
            bosun_forge::hook::WEBHOOK_RESPONSE_CODES,
            "A counter of the different responses bosun has responded to webhooks with (Prow hook's name)",
            webhook_response_codes.clone(),
        );
        let repo_loads = Family::<Labels, Counter>::default();
        registry.register(
            "bosun_repo_loads",
            "Loads of a followed repository's configuration by result: success, error (its configuration has errors; the last good stays), git_error (its remote could not be read)",
            repo_loads.clone(),
        );
        let repo_pushes = Counter::default();
        registry.register(
            "bosun_repo_pushes",
            "Pushes to a followed repository's branch that asked for a load",
            repo_pushes.clone(),
        );
        let repo_resync_lag = Family::<Labels, FloatGauge>::default();
        registry.register(
            "bosun_repo_resync_lag_seconds",
            "Per followed repository: seconds since its remote last answered (a resync, a load)",
            repo_resync_lag.clone(),
        );
        let repo_error = Family::<Labels, Gauge>::default();
        registry.register(
            "bosun_repo_config_error",
            "Per followed repository: 1 while its last load failed (the last good snapshot stays in force)",
            repo_error.clone(),
        );
        let delivery_latency = Histogram::new(exponential_buckets(0.001, 2.0, 17));
        registry.register(
            "bosun_webhook_delivery_processed_seconds",
            "Seconds from a webhook delivery's acceptance (stored, answered 200) to its processing (its effect recorded)",
            delivery_latency.clone(),
        );
        let report_failures = Family::<Labels, Counter>::default();
        registry.register(
            "bosun_report_failures",
            "Reports to the forge not delivered, by kind: retry (401, 403, 429, 5xx, no answer: tried again; alert when it keeps growing) or refused (404, 422: refused for good)",
            report_failures.clone(),
        );
        let reports_resent = Counter::default();
        registry.register(
            "bosun_report_resent",
            "Reports tried before a restart and not recorded delivered, sent again after it (of these, only one in flight when bosun was killed can have reached the forge twice)",
            reports_resent.clone(),
        );
        let reports_pending = Gauge::default();
        registry.register(
            "bosun_reports_pending",
            "Reports waiting in the outbox for the forge",
            reports_pending.clone(),
        );
        let reports_refused = Gauge::default();
        registry.register(
            "bosun_reports_refused",
            "Reports the forge refused for good, kept in the outbox",
            reports_refused.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "bosun_leader",
            "1 while this replica is the leader (runs the scheduler, the controller, the sinker, webhook processing and reporting), else 0",
            leader.clone(),
        );
        let leader_term = Gauge::default();
        registry.register(
            "bosun_leader_term",
            "This replica's leader term while it leads, else 0",
            leader_term.clone(),
        );
        let leader_renewals = Family::<Labels, Counter>::default();
        registry.register(
            "bosun_leader_renewals",
            "Lease renewals by result: renewed, lost (no longer this replica's), error (the database did not answer)",
            leader_renewals.clone(),
        );
        let leader_acquired = Counter::default();
        registry.register(
            "bosun_leader_acquired",
            "Times this replica became the leader (a failover or handover when another led before)",
            leader_acquired.clone(),
        );
        let leader_lost = Family::<Labels, Counter>::default();
        registry.register(
            "bosun_leader_lost",
            "Times this replica stopped leading, by reason: lost, untrusted (trust window ended unrenewed), fenced, resigned",
            leader_lost.clone(),
        );
        Arc::new(Metrics {
            leader,
            leader_term,
            leader_renewals,
            leader_acquired,
            leader_lost,
            report_failures,
            reports_resent,
            reports_pending,
            reports_refused,
            delivery_latency,
            webhook_counter,
            webhook_response_codes,
            repo_loads,
            repo_pushes,
            repo_resync_lag,
            repo_error,
            cluster_status,
            failed_client_creations,
            head,
            registry,
            transitions,
            prowjobs: ProwJobs::new(namespace),
            last_len: AtomicUsize::new(0),
            namespace: Arc::new(namespace.to_string()),
            fire_lateness,
            skipped,
            prepared,
            last_scheduled,
            last_success,
            next_fire,
            reloads,
            reload_ok,
            reload_success_time,
        })
    }

    /// Seeds `prowjobs` with the runs `store` retains ([`Store::count_runs`]);
    /// returns how many series. From then on the store's commits keep it up
    /// to date, so this is called once the store reports its commits to
    /// these metrics and before it takes any (`bosun serve` calls it right
    /// after opening the store): a commit landing during the count could be
    /// counted twice or not at all. Calling it again resynchronizes the
    /// gauge, with the same caveat.
    pub fn seed(&self, store: &dyn Store) -> Result<usize, StoreError> {
        let counts = store.count_runs()?;
        self.prowjobs.seed(&counts);
        Ok(counts.len())
    }

    /// The `prowjobs` series and their counts: each series' labels after
    /// its namespace, as written, sorted (tests compare them with
    /// [`prowjobs::ProwJobs::series_of`] a fresh [`Store::count_runs`]).
    pub fn prowjobs_series(&self) -> Vec<(String, i64)> {
        self.prowjobs.series()
    }

    /// The text exposition. `prowjobs` is not counted here: it is kept up to
    /// date from the store's commits (see [`Metrics::seed`]).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.last_len.load(Ordering::Relaxed) + 4096);
        let _ = encode_registry(&mut out, &self.head);
        self.prowjobs.encode(&mut out);
        let _ = encode_registry(&mut out, &self.registry);
        let _ = encode_eof(&mut out);
        self.last_len.store(out.len(), Ordering::Relaxed);
        out
    }
}

/// How often replicas count the `prowjobs` gauge again from the store.
pub const RECOUNT_PERIOD: std::time::Duration = std::time::Duration::from_secs(10);

/// On replicas, counts the `prowjobs` gauge again from the store every
/// `period` until `stop`. Each replica sees only the changes it commits
/// (and, unordered, those another commits): kept from its own commits
/// alone, a follower's gauge would keep a run where it was created, and the
/// leader's would miss runs followers created. Between counts it follows
/// this replica's commits; the count is exact as of its query, give or take
/// a commit landing during it (set right by the next count).
pub async fn recount_loop(
    metrics: Arc<Metrics>,
    store: Arc<dyn Store>,
    period: std::time::Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = stop.changed() => return,
        }
        let (m, s) = (metrics.clone(), store.clone());
        match tokio::task::spawn_blocking(move || m.seed(&*s)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "cannot count the runs again"),
            Err(e) => tracing::warn!(error = %e, "the count of runs failed"),
        }
    }
}

impl TransitionObserver for Metrics {
    fn on_transition(&self, run: &Run, from: Option<RunState>) {
        // Told only the state the run left: its cluster did not change.
        let before = from.map(|state| Before {
            state,
            cluster: run.cluster.as_deref(),
        });
        self.on_change(run, None, before);
    }

    fn on_change(&self, run: &Run, _shared: Option<&Arc<Run>>, before: Option<Before<'_>>) {
        let from = before.map(|b| b.state);
        // As Prow: a run is counted once per state it reaches (a revival or a
        // new description of a waiting run is no new state).
        if from != Some(run.state) {
            self.transitions
                .get_or_create(&prow_labels(&self.namespace, run, run.state))
                .inc();
        }
        self.prowjobs.change(run, before);
        if let Some(p) = &run.periodic {
            self.periodic_run(p, run, from);
        }
    }

    fn on_deleted(&self, runs: &[RunCount]) {
        self.prowjobs.deleted(runs);
    }

    /// Counting a burst's runs (their series, Prow's labels) was most of the
    /// time from a burst's commit to the scheduler's answer; nothing waits
    /// on the counts.
    fn after_answer(&self) -> bool {
        true
    }
}

impl Metrics {
    /// A run of periodic `identity` was created (`from` none) or changed.
    pub fn periodic_run(&self, identity: &str, run: &Run, from: Option<RunState>) {
        // Only a creation or a success moves a gauge (the labels are built
        // for those alone: most transitions are neither).
        let gauge = match (from, run.scheduled_at, run.state, run.completed_at) {
            (None, Some(t), ..) => Some((&self.last_scheduled, t)),
            (_, _, RunState::Success, Some(t)) => Some((&self.last_success, t)),
            _ => None,
        };
        if let Some((family, t)) = gauge {
            let g = family.get_or_create(&periodic_labels(identity));
            if seconds(t) > g.get() {
                g.set(seconds(t));
            }
        }
    }

    /// A repository load ended with `result`.
    pub fn repo_load(&self, result: &str) {
        self.repo_loads
            .get_or_create(&vec![("result".into(), result.to_string())])
            .inc();
    }

    /// A report was not delivered (`retry` or `refused`).
    pub fn report_failed(&self, kind: &str) {
        self.report_failures
            .get_or_create(&vec![("kind".into(), kind.to_string())])
            .inc();
    }

    /// `n` reports are sent again after a restart.
    pub fn reports_resent(&self, n: u64) {
        self.reports_resent.inc_by(n);
    }

    /// The outbox's counts, read from `store`; the pending ones (0 when the
    /// store cannot say).
    pub fn set_report_counts(&self, store: &dyn Store) -> u64 {
        let Ok(c) = store.report_counts() else {
            return 0;
        };
        self.reports_pending
            .set(i64::try_from(c.pending).unwrap_or(i64::MAX));
        self.reports_refused
            .set(i64::try_from(c.refused).unwrap_or(i64::MAX));
        c.pending
    }

    /// A push asked for a load.
    pub fn repo_push(&self) {
        self.repo_pushes.inc();
    }

    /// `repo`'s resync lag.
    pub fn repo_resync_lag(&self, repo: &str, seconds: f64) {
        self.repo_resync_lag
            .get_or_create(&vec![("repo".into(), repo.to_string())])
            .set(seconds);
    }

    /// Whether `repo`'s last load failed.
    pub fn set_repo_error(&self, repo: &str, error: bool) {
        self.repo_error
            .get_or_create(&vec![("repo".into(), repo.to_string())])
            .set(i64::from(error));
    }

    /// A webhook was answered with `code`; accepted ones count their
    /// `event`.
    pub fn webhook(&self, code: u16, event: Option<&str>) {
        self.webhook_response_codes
            .get_or_create(&vec![("response_code".into(), code.to_string())])
            .inc();
        if let Some(event) = event {
            self.webhook_counter
                .get_or_create(&vec![("event_type".into(), event.to_string())])
                .inc();
        }
    }

    /// Drops the gauges of `identity` (a periodic no longer configured).
    pub fn forget_periodic(&self, identity: &str) {
        let labels = periodic_labels(identity);
        for family in [&self.last_scheduled, &self.last_success, &self.next_fire] {
            family.remove(&labels);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bosun_config::types::{JobType, Refs};
    use bosun_store::memory::MemoryStore;
    use bosun_store::sqlite::{SqliteOptions, SqliteStore};
    use bosun_store::{Created, Fire, NewRun, PeriodicState, RunFilter, Transition};
    use jiff::Timestamp;

    use super::*;

    /// A small deterministic generator (xorshift64*).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
        }

        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len())]
        }
    }

    /// Job `j` of a handful: every job type, refs or extra refs or none,
    /// retests, two configured clusters, values that need escaping.
    fn new_run(j: usize, state: RunState) -> NewRun {
        let (job_type, refs, extra_refs) = match j % 5 {
            0 => (
                JobType::Presubmit,
                Some(Refs {
                    org: "kubernetes".into(),
                    repo: "test-infra".into(),
                    base_ref: Some("main".into()),
                    ..Refs::default()
                }),
                vec![],
            ),
            1 => (
                JobType::Postsubmit,
                Some(Refs {
                    org: "o\"rg".into(),
                    repo: "re\\po".into(),
                    base_ref: Some("release-4.16".into()),
                    ..Refs::default()
                }),
                vec![],
            ),
            2 => (
                JobType::Periodic,
                None,
                vec![Refs {
                    org: "openshift".into(),
                    repo: "release".into(),
                    ..Refs::default()
                }],
            ),
            3 => (JobType::Periodic, None, vec![]),
            _ => (
                JobType::Batch,
                Some(Refs {
                    org: "kubernetes".into(),
                    repo: "kubernetes".into(),
                    base_ref: Some("master".into()),
                    ..Refs::default()
                }),
                vec![],
            ),
        };
        let mut labels = BTreeMap::new();
        if j.is_multiple_of(4) {
            labels.insert("prow.k8s.io/retest".to_string(), "true".to_string());
        }
        let periodic = matches!(job_type, JobType::Periodic).then(|| format!("job-{j}"));
        NewRun {
            job: format!("job-{j}"),
            job_type,
            periodic,
            configured_cluster: if j.is_multiple_of(3) {
                "build01"
            } else {
                "default"
            }
            .into(),
            state,
            refs,
            extra_refs,
            labels: labels.into(),
            annotations: BTreeMap::new().into(),
            spec: serde_json::json!({"containers": [{"image": "x"}]}).into(),
            scheduled_at: None,
            attempt: 0,
            description: "Job triggered.".into(),
        }
    }

    /// `metrics`' `prowjobs` equals a fresh count of `store`'s runs, and so
    /// does a render's.
    fn assert_counts(metrics: &Metrics, store: &dyn Store, step: usize) {
        let fresh = prowjobs::ProwJobs::series_of(&store.count_runs().unwrap());
        assert_eq!(metrics.prowjobs_series(), fresh, "after step {step}");
        let text = metrics.render();
        let rendered = text.lines().filter(|l| l.starts_with("prowjobs{")).count();
        assert_eq!(rendered, fresh.len(), "after step {step}");
    }

    /// A random mix of creations (one by one and by fires), transitions
    /// (legal or not, some deciding the cluster, one by one and in batches)
    /// and retention passes: `prowjobs`, kept from the store's commits alone,
    /// stays equal to a fresh `count_runs`; metrics seeded from the store
    /// afterwards agree.
    fn random_history(store: &dyn Store, metrics: &Metrics, seed: u64) {
        let mut rng = Rng(seed);
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut active: Vec<String> = Vec::new();
        let clusters = [None, Some("build01"), Some("build02"), Some("default")];
        let steps = 700;
        for step in 0..steps {
            let now = start + jiff::SignedDuration::from_secs(step as i64 * 10);
            match rng.below(100) {
                0..=29 => {
                    let state = *rng.pick(&[RunState::Scheduling, RunState::Triggered]);
                    let created = store.create_run(new_run(rng.below(12), state), now);
                    active.push(created.unwrap().run().id.clone());
                }
                30..=37 => {
                    // A fire of a periodic, its tick taken once (the second
                    // time the run exists: nothing is created).
                    let j = 5 * rng.below(3) + 2 + rng.below(2);
                    let tick = start + jiff::SignedDuration::from_hours(rng.below(40) as i64);
                    let run = NewRun {
                        scheduled_at: Some(tick),
                        ..new_run(j, RunState::Triggered)
                    };
                    let state = PeriodicState {
                        periodic: format!("job-{j}"),
                        schedule_hash: "h".into(),
                        first_seen: start,
                        last_tick: Some(tick),
                        paused: false,
                        queued: None,
                    };
                    let fire = Fire {
                        runs: vec![run],
                        outcomes: vec![],
                        state,
                    };
                    for c in store.commit_fire(fire, now).unwrap() {
                        if let Created::New(r) = c {
                            active.push(r.id.clone());
                        }
                    }
                }
                38..=89 if !active.is_empty() => {
                    let batch = 1 + rng.below(3);
                    let mut moves = Vec::new();
                    for _ in 0..batch {
                        let id = rng.pick(&active).clone();
                        let mut t = Transition::to(*rng.pick(&RunState::ALL), now, "moved");
                        t.cluster = rng.pick(&clusters).map(String::from);
                        moves.push((id, t));
                    }
                    if rng.below(4) == 0 {
                        moves.push((
                            "no-such-run".into(),
                            Transition::to(RunState::Pending, now, ""),
                        ));
                    }
                    let results = if moves.len() == 1 {
                        let (id, t) = moves.pop().unwrap();
                        vec![store.transition(&id, t)]
                    } else {
                        store.transitions(moves)
                    };
                    for run in results.into_iter().flatten() {
                        if run.state.is_final() {
                            active.retain(|id| *id != run.id);
                        }
                    }
                }
                _ => {
                    let back = jiff::SignedDuration::from_secs(rng.below(3000) as i64);
                    store.delete_completed_before(now - back).unwrap();
                }
            }
            if step % 50 == 0 || step == steps - 1 {
                assert_counts(metrics, store, step);
            }
        }
        let left = store.list(&RunFilter::default()).unwrap();
        assert!(!left.is_empty(), "runs are retained");
        let states: std::collections::HashSet<RunState> = left.iter().map(|r| r.state).collect();
        assert!(states.len() >= 4, "{states:?}");
        let fresh = Metrics::new("default");
        fresh.seed(store).unwrap();
        assert_eq!(fresh.prowjobs_series(), metrics.prowjobs_series());
        let prowjobs = |t: &str| {
            t.lines()
                .filter(|l| l.starts_with("prowjobs"))
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(prowjobs(&fresh.render()), prowjobs(&metrics.render()));
    }

    #[test]
    fn metrics_prowjobs_follow_a_sqlite_store_to_a_fresh_count() {
        for (seed, fire_log_min) in [(1, SqliteOptions::default().fire_log_min), (2, 1), (3, 0)] {
            let dir = tempfile::tempdir().unwrap();
            let metrics = Metrics::new("default");
            let store = SqliteStore::open_with(
                dir.path().join("bosun.db"),
                SqliteOptions {
                    fire_log_min,
                    ..SqliteOptions::default()
                },
                Some(metrics.clone()),
            )
            .unwrap();
            metrics.seed(&store).unwrap();
            random_history(&store, &metrics, seed);
        }
    }

    #[test]
    fn metrics_prowjobs_follow_a_memory_store_to_a_fresh_count() {
        let metrics = Metrics::new("default");
        let store = MemoryStore::with_observer(metrics.clone());
        random_history(&store, &metrics, 4);
    }

    /// Seeded from a store that already holds runs (a restart), then kept
    /// from its commits.
    #[test]
    fn metrics_prowjobs_are_seeded_at_start_then_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bosun.db");
        let first = Metrics::new("default");
        {
            let store =
                SqliteStore::open_with(&path, SqliteOptions::default(), Some(first.clone()))
                    .unwrap();
            random_history(&store, &first, 5);
        }
        let metrics = Metrics::new("default");
        let store =
            SqliteStore::open_with(&path, SqliteOptions::default(), Some(metrics.clone())).unwrap();
        assert!(metrics.prowjobs_series().is_empty(), "not seeded yet");
        assert!(metrics.seed(&store).unwrap() > 0);
        assert_eq!(metrics.prowjobs_series(), first.prowjobs_series());
        random_history(&store, &metrics, 6);
    }

    /// The families in the order they were registered, `prowjobs` second,
    /// and the exposition's end.
    #[test]
    fn metrics_render_keeps_the_family_order() {
        let metrics = Metrics::new("default");
        let store = MemoryStore::with_observer(metrics.clone());
        store
            .create_run(new_run(0, RunState::Triggered), Timestamp::UNIX_EPOCH)
            .unwrap();
        let text = metrics.render();
        let families: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        assert_eq!(
            &families[..3],
            [
                "prowjob_state_transitions",
                "prowjobs",
                "bosun_periodic_fire_lateness_seconds"
            ]
        );
        assert!(text.ends_with("\n# EOF\n"), "{text}");
        let want = "prowjobs{job_namespace=\"default\",job_name=\"job-0\",type=\"presubmit\",state=\"triggered\",org=\"kubernetes\",repo=\"test-infra\",base_ref=\"main\",cluster=\"build01\",retest=\"true\"} 1";
        assert!(text.lines().any(|l| l == want), "{text}");
        assert!(text.contains("prowjob_state_transitions{"), "{text}");
    }
}
