//! Prometheus metrics with Prow's names and labels: `prowjob_state_transitions`
//! (counted in the store's transition path: every transition, not a sample) and
//! `prowjobs` (retained runs by state, computed from the store at scrape time).

use std::sync::Arc;

use bosun_store::{Run, RunFilter, RunState, Store, TransitionObserver};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

/// A counter exposed under its exact name. prometheus-client writes counters as
/// `NAME_total` (OpenMetrics); Prow's is `prowjob_state_transitions`, and the
/// queries people run against it (OpenShift's dispatcher among them) use that
/// name, so the value is written without the suffix.
#[derive(Debug, Default, Clone)]
pub struct PlainCounter(Counter);

impl PlainCounter {
    fn inc(&self) {
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

/// The daemon's metrics.
pub struct Metrics {
    registry: Registry,
    transitions: Family<Labels, PlainCounter>,
    prowjobs: Family<Labels, Gauge>,
    namespace: String,
}

/// Prow's nine labels for a run in `state`.
pub fn prow_labels(namespace: &str, run: &Run, state: RunState) -> Labels {
    let refs = run.refs.as_ref().or(run.extra_refs.first());
    let (org, repo, base_ref) = refs
        .map(|r| {
            (
                r.org.clone(),
                r.repo.clone(),
                r.base_ref.clone().unwrap_or_default(),
            )
        })
        .unwrap_or_default();
    vec![
        ("job_namespace".into(), namespace.to_string()),
        ("job_name".into(), run.job.clone()),
        ("type".into(), run.job_type.as_str().into()),
        ("state".into(), state.as_str().into()),
        ("org".into(), org),
        ("repo".into(), repo),
        ("base_ref".into(), base_ref),
        (
            "cluster".into(),
            run.cluster
                .clone()
                .unwrap_or_else(|| run.configured_cluster.clone()),
        ),
        (
            "retest".into(),
            (run.labels.get("prow.k8s.io/retest").map(String::as_str) == Some("true")).to_string(),
        ),
    ]
}

impl Metrics {
    /// Metrics for runs in `namespace` (Prow's `prowjob_namespace`).
    pub fn new(namespace: &str) -> Arc<Self> {
        let mut registry = Registry::default();
        let transitions = Family::<Labels, PlainCounter>::default();
        let prowjobs = Family::<Labels, Gauge>::default();
        registry.register(
            "prowjob_state_transitions",
            "Number of run state transitions (every transition, as it is committed)",
            transitions.clone(),
        );
        registry.register(
            "prowjobs",
            "Number of retained runs by state",
            prowjobs.clone(),
        );
        Arc::new(Metrics {
            registry,
            transitions,
            prowjobs,
            namespace: namespace.to_string(),
        })
    }

    /// The text exposition, with `prowjobs` recomputed from the store.
    pub fn render(&self, store: &dyn Store) -> String {
        self.prowjobs.clear();
        let mut offset = 0;
        loop {
            let page = store
                .list(&RunFilter {
                    limit: 1000,
                    offset,
                    ..RunFilter::default()
                })
                .unwrap_or_default();
            for r in &page {
                self.prowjobs
                    .get_or_create(&prow_labels(&self.namespace, r, r.state))
                    .inc();
            }
            if page.len() < 1000 {
                break;
            }
            offset += page.len();
        }
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        out
    }
}

impl TransitionObserver for Metrics {
    fn on_transition(&self, run: &Run, _from: Option<RunState>) {
        self.transitions
            .get_or_create(&prow_labels(&self.namespace, run, run.state))
            .inc();
    }
}
