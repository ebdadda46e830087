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
        Arc::new(Metrics {
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

    /// Drops the gauges of `identity` (a periodic no longer configured).
    pub fn forget_periodic(&self, identity: &str) {
        let labels = periodic_labels(identity);
        for family in [&self.last_scheduled, &self.last_success, &self.next_fire] {
            family.remove(&labels);
        }
    }
}
