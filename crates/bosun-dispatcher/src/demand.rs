//! The dispatcher's demand: how much each job asks of the build clusters,
//! measured from bosun's own run history or from Prometheus, or read from
//! OpenShift's `job_volume.json`, and kept by [`CachedDemand`] so that a
//! failed measurement leaves the last good one in force.
//!
//! Measuring blocks (a SQLite read, an HTTP query of up to 30 s, a file): an
//! async caller runs [`CachedDemand::refresh`] on a blocking thread. Time is
//! always an argument: nothing here reads a clock.
//!
//! The sources and their units:
//! - history: run-hours, per job, of the runs that reached `pending` in the
//!   window: cost, not just counts (a two-hour e2e job weighs what 120
//!   one-minute unit jobs weigh). Each job counts at least
//!   [`MIN_RUN_SECONDS`] per run: a job whose runs end at once (an image that
//!   cannot be pulled, a command that fails at start) still costs a pod's
//!   scheduling and start, and must not weigh nothing. The rule is applied
//!   to the job's totals, `max(run_seconds, runs × 60 s)`, not run by run;
//! - Prometheus: runs per job, by OpenShift's query by default (runs that
//!   reached `pending` over the window, `increase()` of Prow's counter),
//!   evaluated at `now` (OpenShift's newer default; its older one evaluated
//!   at a midnight two weeks back);
//! - a file: runs per job, as OpenShift's `job_volume.json` has them
//!   (`{"job name": runs}`).
//!
//! The planner balances shares of the total, so only the ratios between jobs
//! of one source matter; the unit is said for people.

use bosun_base::sync::Lock;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bosun_store::{SharedStore, StoreError};
use jiff::Timestamp;
use serde::Serialize;

use crate::prometheus::{window_query, PromError, PrometheusClient, OPENSHIFT_QUERY};

/// The least a run counts in history demand, in seconds.
pub const MIN_RUN_SECONDS: f64 = 60.0;

/// The default measurement window (`dispatcher.window`): a week.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long a measurement stands before [`CachedDemand::refresh`] measures
/// again (unless forced).
pub const DEFAULT_TTL: Duration = Duration::from_secs(5 * 60);

/// What a demand figure counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DemandUnit {
    /// Hours of running (history).
    RunHours,
    /// Runs (Prometheus, a file).
    Runs,
}

/// One measurement: a figure per job name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Demand {
    /// Per job name; every value finite and at least 0. A job absent had
    /// no runs in the window.
    pub jobs: BTreeMap<String, f64>,
    /// What the figures count.
    pub unit: DemandUnit,
    /// When it was measured (the `now` of the measurement).
    pub measured_at: Timestamp,
    /// Where it came from ([`DemandSource::describe`]).
    pub source: String,
}

/// Why a measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum DemandError {
    /// The store could not be read.
    #[error("run history: {0}")]
    Store(#[from] StoreError),
    /// Prometheus could not be queried, or answered something unusable.
    #[error(transparent)]
    Prometheus(#[from] PromError),
    /// The file could not be read or is not `{"job": runs}`.
    #[error("{}: {why}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// Where demand comes from.
#[derive(Clone)]
pub enum DemandSource {
    /// bosun's own runs: run-hours of the runs that reached `pending` in the
    /// window.
    History {
        /// The store.
        store: SharedStore,
        /// The window (`dispatcher.window`).
        window: Duration,
    },
    /// A Prometheus query's vector by `job_name`.
    Prometheus {
        /// The Prometheus (its URL, token file and timeout).
        client: PrometheusClient,
        /// The query, with `$window` where the window goes.
        query: String,
        /// The window.
        window: Duration,
    },
    /// OpenShift's `job_volume.json`: `{"job name": runs}`.
    File(PathBuf),
    /// No measurement: every job counts 1 (the median of no data).
    Ones,
}

impl std::fmt::Debug for DemandSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl DemandSource {
    /// The Prometheus at `url` (`dispatcher.prometheus_url`), with a bearer
    /// token file if given, OpenShift's query unless `query` is given, and
    /// the default 30 s timeout.
    pub fn prometheus(
        url: &str,
        token_file: Option<PathBuf>,
        query: Option<&str>,
        window: Duration,
    ) -> Result<Self, PromError> {
        Ok(DemandSource::Prometheus {
            client: PrometheusClient::new(url)?.with_token_file(token_file),
            query: query.unwrap_or(OPENSHIFT_QUERY).to_string(),
            window,
        })
    }

    /// The Prometheus at `url` as the `dispatcher:` config `d` says:
    /// `bearer_token_file` (or `prometheus_username` and
    /// `prometheus_password_file`), `prometheus_ca_file`, `prometheus_query` (else
    /// OpenShift's) and `window`.
    pub fn prometheus_of(
        url: &str,
        d: &bosun_config::types::DispatcherConfig,
    ) -> Result<Self, PromError> {
        let client = PrometheusClient::new(url)?
            .with_token_file(d.bearer_token_file.clone().map(PathBuf::from))
            .with_basic_auth(
                d.prometheus_username.clone(),
                d.prometheus_password_file.clone().map(PathBuf::from),
            )
            .with_ca_file(d.prometheus_ca_file.clone().map(PathBuf::from))?;
        Ok(DemandSource::Prometheus {
            client,
            query: d
                .prometheus_query
                .as_deref()
                .unwrap_or(OPENSHIFT_QUERY)
                .to_string(),
            window: d.window().to_std(),
        })
    }

    /// Where it comes from, for logs and status.
    pub fn describe(&self) -> String {
        match self {
            DemandSource::History { window, .. } => {
                format!("history over {}", crate::prometheus::prom_duration(*window))
            }
            DemandSource::Prometheus { client, window, .. } => format!(
                "prometheus {} over {}",
                client.endpoint(),
                crate::prometheus::prom_duration(*window)
            ),
            DemandSource::File(path) => format!("file {}", path.display()),
            DemandSource::Ones => "1 per job".to_string(),
        }
    }

    /// Measures once, at `now` (blocking).
    pub fn measure(&self, now: Timestamp) -> Result<Demand, DemandError> {
        let (jobs, unit) = match self {
            DemandSource::History { store, window } => {
                (history(store.as_ref(), *window, now)?, DemandUnit::RunHours)
            }
            DemandSource::Prometheus {
                client,
                query,
                window,
            } => (
                client.job_values(&window_query(query, *window), now)?,
                DemandUnit::Runs,
            ),
            DemandSource::File(path) => (read_job_volume(path)?, DemandUnit::Runs),
            DemandSource::Ones => (BTreeMap::new(), DemandUnit::Runs),
        };
        Ok(Demand {
            jobs,
            unit,
            measured_at: now,
            source: self.describe(),
        })
    }
}

/// Run-hours per job from the store: the runs that reached `pending` in
/// `(now - window)..` and their run time, each job at least
/// [`MIN_RUN_SECONDS`] per run.
pub fn history(
    store: &dyn bosun_store::Store,
    window: Duration,
    now: Timestamp,
) -> Result<BTreeMap<String, f64>, StoreError> {
    let since = now.checked_sub(window).unwrap_or(Timestamp::MIN);
    Ok(store
        .job_demand(since, now)?
        .into_iter()
        .map(|d| {
            let seconds = d.run_seconds.max(d.runs as f64 * MIN_RUN_SECONDS);
            (d.job, seconds / 3600.0)
        })
        .collect())
}

/// Reads OpenShift's `job_volume.json`: `{"job name": runs}`, each a finite
/// number at least 0.
pub fn read_job_volume(path: &std::path::Path) -> Result<BTreeMap<String, f64>, DemandError> {
    let bad = |why: String| DemandError::File {
        path: path.to_path_buf(),
        why,
    };
    let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    // The format (plain or gzipped, its checks) is the dispatcher core's.
    bosun_dispatch::demand::Demand::from_json(&bytes)
        .map(|d| d.0)
        .map_err(|e| bad(e.to_string()))
}

/// What the last [`CachedDemand::refresh`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Refresh {
    /// Measured anew: the demand is current.
    Measured,
    /// Within the TTL of the last attempt: nothing asked.
    Cached,
    /// The measurement failed: the last good demand (if any) stays.
    Failed,
}

/// What a [`CachedDemand`] holds and how its measurements went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DemandStatus {
    /// The source ([`DemandSource::describe`]).
    pub source: String,
    /// What the last refresh did (None: never refreshed).
    pub last_refresh: Option<Refresh>,
    /// When the demand in force was measured (None: there is none).
    pub measured_at: Option<Timestamp>,
    /// How many jobs it has.
    pub jobs: usize,
    /// When a measurement was last attempted.
    pub last_attempt: Option<Timestamp>,
    /// The last attempt's error; None once one succeeds.
    pub last_error: Option<String>,
    /// Successful measurements.
    pub successes: u64,
    /// Failed measurements.
    pub failures: u64,
    /// Failed measurements since the last success.
    pub consecutive_failures: u64,
}

impl DemandStatus {
    /// The demand in force is not the latest attempt's (it failed).
    pub fn is_stale(&self) -> bool {
        self.consecutive_failures > 0
    }
}

#[derive(Default)]
struct CacheState {
    demand: Option<Arc<Demand>>,
    last_refresh: Option<Refresh>,
    last_attempt: Option<Timestamp>,
    last_error: Option<String>,
    successes: u64,
    failures: u64,
    consecutive_failures: u64,
}

/// A demand source with its last good measurement: refreshed at most once
/// per TTL (unless forced); a failure keeps the last good demand, logs, and
/// is counted in the status. It never panics on a failed source and never
/// exits. Shared by reference: readers ([`CachedDemand::current`]) never
/// wait for a measurement, and concurrent refreshes measure once.
pub struct CachedDemand {
    source: DemandSource,
    ttl: Duration,
    /// Held while measuring, so two refreshes never measure together.
    measuring: Mutex<()>,
    state: Mutex<CacheState>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.locked()
}

impl CachedDemand {
    /// Nothing measured yet; a TTL of [`DEFAULT_TTL`].
    pub fn new(source: DemandSource) -> Self {
        CachedDemand {
            source,
            ttl: DEFAULT_TTL,
            measuring: Mutex::new(()),
            state: Mutex::default(),
        }
    }

    /// Measures at most once per `ttl` (counted from the last attempt,
    /// failed or not, so a source that is down is not asked on every call).
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The source.
    pub fn source(&self) -> &DemandSource {
        &self.source
    }

    /// The last good demand, if any.
    pub fn current(&self) -> Option<Arc<Demand>> {
        lock(&self.state).demand.clone()
    }

    /// How things stand.
    pub fn status(&self) -> DemandStatus {
        let s = lock(&self.state);
        DemandStatus {
            source: self.source.describe(),
            last_refresh: s.last_refresh,
            measured_at: s.demand.as_ref().map(|d| d.measured_at),
            jobs: s.demand.as_ref().map_or(0, |d| d.jobs.len()),
            last_attempt: s.last_attempt,
            last_error: s.last_error.clone(),
            successes: s.successes,
            failures: s.failures,
            consecutive_failures: s.consecutive_failures,
        }
    }

    /// Measures at `now` unless the last attempt is less than the TTL old
    /// (`force` measures anyway; a `now` before the last attempt, a clock
    /// set back, measures too). Blocking. On failure the last good demand
    /// stays and the error is logged and recorded.
    pub fn refresh(&self, now: Timestamp, force: bool) -> DemandStatus {
        let _measuring = lock(&self.measuring);
        {
            let mut s = lock(&self.state);
            if !force && self.fresh(s.last_attempt, now) {
                s.last_refresh = Some(Refresh::Cached);
                drop(s);
                return self.status();
            }
        }
        // The state is not locked while measuring: readers go on.
        let result = self.source.measure(now);
        let mut s = lock(&self.state);
        s.last_attempt = Some(now);
        match result {
            Ok(demand) => {
                tracing::info!(
                    source = %demand.source,
                    jobs = demand.jobs.len(),
                    "demand measured"
                );
                s.demand = Some(Arc::new(demand));
                s.last_refresh = Some(Refresh::Measured);
                s.last_error = None;
                s.successes += 1;
                s.consecutive_failures = 0;
            }
            Err(e) => {
                s.last_refresh = Some(Refresh::Failed);
                s.last_error = Some(e.to_string());
                s.failures += 1;
                s.consecutive_failures += 1;
                let kept = s.demand.as_ref().map(|d| d.measured_at);
                tracing::warn!(
                    source = %self.source.describe(),
                    error = %e,
                    kept_from = ?kept,
                    consecutive_failures = s.consecutive_failures,
                    "demand measurement failed; the last good demand stays in force"
                );
            }
        }
        drop(s);
        self.status()
    }

    fn fresh(&self, last: Option<Timestamp>, now: Timestamp) -> bool {
        let Some(last) = last else { return false };
        let Ok(elapsed) = Duration::try_from(now.duration_since(last)) else {
            return false; // the clock went back
        };
        elapsed < self.ttl
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_store::memory::MemoryStore;
    use bosun_store::{NewRun, RunState, Store, Transition};

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn run(store: &dyn Store, job: &str, steps: &[(RunState, &str)]) {
        let new = NewRun {
            job: job.into(),
            job_type: bosun_config::types::JobType::Periodic,
            periodic: None,
            configured_cluster: "default".into(),
            state: RunState::Triggered,
            refs: None,
            extra_refs: vec![],
            labels: Default::default(),
            annotations: Default::default(),
            spec: serde_json::json!({}).into(),
            scheduled_at: None,
            attempt: 0,
            description: String::new(),
        };
        let id = store
            .create_run(new, t("2026-01-01T00:00:00Z"))
            .unwrap()
            .run()
            .id
            .clone();
        for (to, at) in steps {
            store
                .transition(&id, Transition::to(*to, t(at), ""))
                .unwrap();
        }
    }

    #[test]
    fn history_is_run_hours_with_a_floor_per_run() {
        let store: SharedStore = Arc::new(MemoryStore::new());
        use RunState::*;
        // long: 2 h + 1 h; quick: three runs of 1 s (3 minutes by the floor);
        // old: started before the week.
        run(
            &*store,
            "long",
            &[
                (Pending, "2026-01-09T00:00:00Z"),
                (Success, "2026-01-09T02:00:00Z"),
            ],
        );
        run(
            &*store,
            "long",
            &[
                (Pending, "2026-01-09T10:00:00Z"),
                (Failure, "2026-01-09T11:00:00Z"),
            ],
        );
        for _ in 0..3 {
            run(
                &*store,
                "quick",
                &[
                    (Pending, "2026-01-09T00:00:00Z"),
                    (Error, "2026-01-09T00:00:01Z"),
                ],
            );
        }
        run(
            &*store,
            "old",
            &[
                (Pending, "2026-01-01T00:00:00Z"),
                (Success, "2026-01-09T00:00:00Z"),
            ],
        );
        let source = DemandSource::History {
            store,
            window: DEFAULT_WINDOW,
        };
        let d = source.measure(t("2026-01-10T00:00:00Z")).unwrap();
        assert_eq!(
            d.jobs,
            BTreeMap::from([("long".into(), 3.0), ("quick".into(), 0.05)])
        );
        assert_eq!(d.unit, DemandUnit::RunHours);
        assert_eq!(d.source, "history over 168h");
    }

    #[test]
    fn a_job_volume_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job_volume.json");
        std::fs::write(&path, r#"{"a": 12, "b": 0.5}"#).unwrap();
        let d = DemandSource::File(path.clone())
            .measure(t("2026-01-10T00:00:00Z"))
            .unwrap();
        assert_eq!(
            d.jobs,
            BTreeMap::from([("a".into(), 12.0), ("b".into(), 0.5)])
        );
        assert_eq!(d.unit, DemandUnit::Runs);
        for bad in [r#"{"a": -1}"#, r#"{"a": "x"}"#, "[1]", ""] {
            std::fs::write(&path, bad).unwrap();
            let e = read_job_volume(&path).unwrap_err();
            assert!(e.to_string().contains("job_volume.json"), "{e}");
        }
    }

    /// The cache measures once per TTL, keeps the last good demand through
    /// failures, and says so.
    #[test]
    fn a_failed_refresh_keeps_the_last_good_demand() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job_volume.json");
        std::fs::write(&path, r#"{"a": 1}"#).unwrap();
        let cache = CachedDemand::new(DemandSource::File(path.clone()));
        assert!(cache.current().is_none());
        let t0 = t("2026-01-10T00:00:00Z");
        let at = |mins: i64| t0 + jiff::SignedDuration::from_mins(mins);
        let s = cache.refresh(at(0), false);
        assert_eq!(s.last_refresh, Some(Refresh::Measured));
        assert_eq!((s.successes, s.failures, s.jobs), (1, 0, 1));
        assert!(!s.is_stale());

        std::fs::write(&path, "broken").unwrap();
        let s = cache.refresh(at(4), false);
        assert_eq!(s.last_refresh, Some(Refresh::Cached), "within the TTL");
        assert_eq!(s.measured_at, Some(at(0)));

        let s = cache.refresh(at(5), false);
        assert_eq!(s.last_refresh, Some(Refresh::Failed));
        assert_eq!((s.successes, s.failures, s.consecutive_failures), (1, 1, 1));
        assert!(s.is_stale());
        assert!(s.last_error.as_deref().unwrap().contains("job_volume.json"));
        assert_eq!(cache.current().unwrap().jobs["a"], 1.0, "the last good one");
        assert_eq!(s.measured_at, Some(at(0)));

        // A failure too counts as an attempt for the TTL; force asks anyway.
        assert_eq!(
            cache.refresh(at(6), false).last_refresh,
            Some(Refresh::Cached)
        );
        let s = cache.refresh(at(6), true);
        assert_eq!(
            (s.last_refresh, s.consecutive_failures),
            (Some(Refresh::Failed), 2)
        );

        std::fs::write(&path, r#"{"a": 2, "b": 3}"#).unwrap();
        let s = cache.refresh(at(20), false);
        assert_eq!(s.last_refresh, Some(Refresh::Measured));
        assert_eq!((s.successes, s.failures, s.consecutive_failures), (2, 2, 0));
        assert_eq!(s.last_error, None);
        assert_eq!(cache.current().unwrap().jobs["b"], 3.0);

        // A clock set back measures.
        assert_eq!(
            cache.refresh(at(10), false).last_refresh,
            Some(Refresh::Measured)
        );
    }

    #[test]
    fn nothing_good_yet_is_said_plainly() {
        let cache = CachedDemand::new(DemandSource::File("/nonexistent/job_volume.json".into()));
        let s = cache.refresh(t("2026-01-10T00:00:00Z"), false);
        assert_eq!(s.last_refresh, Some(Refresh::Failed));
        assert_eq!((s.measured_at, s.jobs), (None, 0));
        assert!(cache.current().is_none());
    }
}
