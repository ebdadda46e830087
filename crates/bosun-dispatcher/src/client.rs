//! A client of an external scheduler speaking Prow's contract
//! (`scheduler.external`): `POST URL` with `{"job": NAME}`, answered 200
//! `{"cluster": ALIAS}`. Any dispatcher that speaks it will do: `bosun
//! dispatcher`, OpenShift's prowjob-dispatcher.
//!
//! What Prow does (kubernetes-sigs/prow `pkg/scheduler/strategy/external.go`
//! at commit 7f87728648ffac0e2dc5e139dcecbf6fd1119565, and `default.go` /
//! `pkg/scheduler/reconciler.go` at f6e61b74e767b9fc774791024de3fe5f871ee9d7):
//!
//! - `http.Post(url, "application/json", {"job": pj.Spec.Job})` with Go's
//!   default client: **no timeout**, so a dispatcher that accepts and never
//!   answers holds a reconcile worker for good;
//! - any status but 200 is an error (`unexpected status code: %d`); a 200 is
//!   decoded as `{"cluster"}` (unknown keys ignored, a missing `cluster` is
//!   `""`); the alias is not checked (plank fails the job later);
//! - any error: a warning, and the job keeps its configured `spec.cluster`;
//!   errors are not cached;
//! - answers are cached per job name for `entry_timeout_interval`, and
//!   expired ones swept every `cleanup_interval` (both `*metav1.Duration`
//!   without defaults: a config without them dereferences nil);
//! - **the cache never hits**: the reconciler calls
//!   `r.strategy(r.cfg(), log).Schedule(ctx, pj)` on every reconcile, and
//!   `strategy.Get` returns `NewExternal(...)`, a new strategy with an empty
//!   map each time; the cache lives for one request. (The map has no lock
//!   either, which would race under `MaxConcurrentReconciles` > 1 if it
//!   were shared.) Also, `Get` prefers `failover` when both are configured,
//!   so with a failover mapping the external scheduler is never asked.
//!
//! How this client differs:
//!
//! - one [`ExternalClient`] lives as long as the daemon (it is meant to be
//!   made once and kept: [`ExternalClient::reconfigure`] takes a new
//!   `scheduler.external` without losing the cache unless the URL changed),
//!   so its cache really hits; it is behind a lock, and concurrent callers
//!   asking for one job share one request;
//! - every request is bounded: [`TIMEOUT`] (2 s), connection included;
//! - the answer must be a cluster the caller knows (`known`), else it is a
//!   fallback, like any error; a cached answer is checked again when used,
//!   so a cluster removed by a reload is not handed out from the cache;
//! - missing cache intervals default to 10m and 1h (OpenShift's production
//!   values); expired entries are dropped lazily, on the first access after
//!   each `cleanup_interval` (and an expired entry met on access is dropped
//!   then), so the cache holds at most the jobs answered within the last
//!   `cleanup_interval + entry_timeout_interval`;
//! - a fallback says why, in words fit for a run's description
//!   ([`Fallback`]), and is counted by class in the metrics;
//! - `{}` or `{"cluster": ""}` is no answer (Prow would place the job on
//!   cluster `""`).
//!
//! An `https://` URL is verified against the system's trust store, as Go's
//! default client that Prow uses does.
//!
//! [`ExternalClient::cluster_for`] blocks (up to [`TIMEOUT`], or as long as
//! another caller's request for the same job): an async caller runs it on a
//! blocking thread. [`ExternalClient::cached`] never touches the network.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use bosun_config::types::ExternalScheduler;
use jiff::{SignedDuration, Timestamp};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};

/// How long one request may take, connection and body included.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// `entry_timeout_interval` when the configuration has none.
pub const DEFAULT_ENTRY_TIMEOUT: SignedDuration = SignedDuration::from_mins(10);

/// `cleanup_interval` when the configuration has none.
pub const DEFAULT_CLEANUP_INTERVAL: SignedDuration = SignedDuration::from_mins(60);

/// The largest answer read (an answer is a few dozen bytes).
const MAX_BODY: u64 = 64 << 10;

/// How much of a non-200 answer's body a fallback quotes.
const MAX_QUOTE: usize = 200;

/// Where a job should run, and how that was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The cluster's alias; `None`: the job's configured cluster.
    pub cluster: Option<String>,
    /// Where the answer came from.
    pub source: Source,
}

/// Where a [`Placement`] came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An answer of the dispatcher's, cached (or one another caller was
    /// fetching for the same job at the same time).
    Cache,
    /// The dispatcher, asked for this placement.
    Dispatcher,
    /// No usable answer: the job keeps its configured cluster.
    Fallback(Fallback),
}

/// Why a placement fell back to the job's configured cluster. Its text
/// (`Display`) is written for a run's description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// No answer within the timeout.
    Timeout(Duration),
    /// The dispatcher could not be asked: its URL is unusable, no
    /// connection, or the connection broke.
    Error(String),
    /// An HTTP status other than 200, with the start of the answer's body.
    Status {
        /// The status.
        status: u16,
        /// The body's first line, shortened.
        body: String,
    },
    /// An alias that is not a known build cluster (`""`: none).
    UnknownCluster(String),
    /// A 200 whose body is not `{"cluster": ALIAS}`.
    Decode(String),
}

impl Fallback {
    /// The class counted in the metrics: `timeout`, `error`, `status`,
    /// `unknown_cluster`, `decode`.
    pub fn class(&self) -> &'static str {
        match self {
            Fallback::Timeout(_) => "timeout",
            Fallback::Error(_) => "error",
            Fallback::Status { .. } => "status",
            Fallback::UnknownCluster(_) => "unknown_cluster",
            Fallback::Decode(_) => "decode",
        }
    }
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fallback::Timeout(d) => {
                write!(
                    f,
                    "the dispatcher did not answer within {}s",
                    d.as_secs_f64()
                )
            }
            Fallback::Error(e) => write!(f, "the dispatcher could not be reached: {e}"),
            Fallback::Status { status, body } if body.is_empty() => {
                write!(f, "the dispatcher answered {status}")
            }
            Fallback::Status { status, body } => {
                write!(f, "the dispatcher answered {status}: {body}")
            }
            Fallback::UnknownCluster(c) if c.is_empty() => {
                write!(f, "the dispatcher named no cluster")
            }
            Fallback::UnknownCluster(c) => write!(f, "the dispatcher named unknown cluster {c}"),
            Fallback::Decode(e) => {
                write!(
                    f,
                    "the dispatcher's answer is not {{\"cluster\": ALIAS}}: {e}"
                )
            }
        }
    }
}

/// The fallback classes, in the order of [`ExternalMetrics`]' counters.
const CLASSES: [&str; 5] = ["timeout", "error", "status", "unknown_cluster", "decode"];

/// The client's counters (`bosun_scheduler_external_*`). Cheap to clone
/// (the counters are shared); make one and hand it to every client if
/// clients are ever replaced, so the series carry on.
#[derive(Debug, Clone)]
pub struct ExternalMetrics {
    hits: Counter,
    misses: Counter,
    fallbacks: Family<Vec<(String, String)>, Counter>,
    /// The fallback counters, made once, in [`CLASSES`]' order.
    by_class: Vec<Counter>,
}

impl Default for ExternalMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ExternalMetrics {
    /// Counts a placement answered from the cache by a caller that peeked
    /// ([`ExternalClient::cached`] counts nothing itself).
    pub fn hit(&self) {
        self.hits.inc();
    }

    /// Counters at zero, every fallback class present.
    pub fn new() -> ExternalMetrics {
        let fallbacks = Family::<Vec<(String, String)>, Counter>::default();
        let by_class = CLASSES
            .iter()
            .map(|c| {
                fallbacks
                    .get_or_create(&vec![("reason".to_string(), c.to_string())])
                    .clone()
            })
            .collect();
        ExternalMetrics {
            hits: Counter::default(),
            misses: Counter::default(),
            fallbacks,
            by_class,
        }
    }

    /// Registers the counters in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "bosun_scheduler_external_cache_hits",
            "Placements answered without a request of their own: from the cache, or by another caller's request for the same job",
            self.hits.clone(),
        );
        registry.register(
            "bosun_scheduler_external_cache_misses",
            "Placements not in the cache: requests made to the external scheduler",
            self.misses.clone(),
        );
        registry.register(
            "bosun_scheduler_external_fallbacks",
            "Placements that kept the job's configured cluster, by reason (timeout, error, status, unknown_cluster, decode)",
            self.fallbacks.clone(),
        );
    }

    fn fallback(&self, f: &Fallback) {
        let i = CLASSES.iter().position(|c| *c == f.class()).unwrap_or(1);
        self.by_class[i].inc();
    }
}

/// `scheduler.external` as the client uses it.
struct Settings {
    url: String,
    /// Why the URL cannot be used, if it cannot.
    url_error: Option<String>,
    entry_timeout: SignedDuration,
    cleanup_interval: SignedDuration,
}

impl Settings {
    fn of(config: &ExternalScheduler) -> Settings {
        let interval = |d: Option<bosun_config::GoDuration>, default| {
            d.map_or(default, |d| SignedDuration::from_nanos(d.as_nanos()))
        };
        Settings {
            url: config.url.clone(),
            url_error: url_error(&config.url),
            entry_timeout: interval(config.cache.entry_timeout_interval, DEFAULT_ENTRY_TIMEOUT),
            cleanup_interval: interval(config.cache.cleanup_interval, DEFAULT_CLEANUP_INTERVAL),
        }
    }
}

/// Why `url` cannot be asked, if it cannot.
fn url_error(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    match rest {
        None => Some(format!("its URL {url:?} is not an http:// or https:// URL")),
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            Some(format!("its URL {url:?} has no host"))
        }
        Some(_) => None,
    }
}

/// A cached answer.
struct Entry {
    cluster: String,
    /// When it was asked for.
    at: Timestamp,
}

/// What a request came to: an alias the caller knows, or why not.
type Outcome = Result<String, Fallback>;

/// A request in flight: its outcome, once known.
type Flight = Arc<OnceLock<Outcome>>;

struct State {
    settings: Settings,
    /// Changes with the URL: an answer asked of an old URL is not cached.
    generation: u64,
    entries: HashMap<String, Entry>,
    last_cleanup: Option<Timestamp>,
    in_flight: HashMap<String, Flight>,
}

impl State {
    /// Drops expired entries if `cleanup_interval` has passed since the
    /// last sweep (or the clock went back).
    fn cleanup(&mut self, now: Timestamp) {
        if let Some(last) = self.last_cleanup {
            let since = now.duration_since(last);
            if since >= SignedDuration::ZERO && since < self.settings.cleanup_interval {
                return;
            }
        }
        self.last_cleanup = Some(now);
        let timeout = self.settings.entry_timeout;
        self.entries
            .retain(|_, e| now.duration_since(e.at) < timeout);
    }

    /// `job`'s answer if it is still fresh at `now` (an expired one is
    /// dropped). An entry stamped after `now` (another caller's clock read
    /// a moment later) is fresh.
    fn fresh(&mut self, job: &str, now: Timestamp) -> Option<String> {
        let entry = self.entries.get(job)?;
        if now.duration_since(entry.at) < self.settings.entry_timeout {
            return Some(entry.cluster.clone());
        }
        self.entries.remove(job);
        None
    }

    /// Drops `job`'s entry if it still names `cluster`.
    fn forget(&mut self, job: &str, cluster: &str) {
        if self.entries.get(job).is_some_and(|e| e.cluster == cluster) {
            self.entries.remove(job);
        }
    }
}

/// A client of one external scheduler, with its cache. Shared by reference
/// (`Arc`) between the threads that place runs.
pub struct ExternalClient {
    agent: ureq::Agent,
    known: Box<dyn Fn(&str) -> bool + Send + Sync>,
    metrics: ExternalMetrics,
    state: Mutex<State>,
    /// Told when a request in flight ends.
    landed: Condvar,
}

impl fmt::Debug for ExternalClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct("ExternalClient")
            .field("url", &st.settings.url)
            .field("entries", &st.entries.len())
            .field("in_flight", &st.in_flight.len())
            .finish()
    }
}

/// The request's body.
#[derive(Serialize)]
struct Request<'a> {
    job: &'a str,
}

/// A 200's body (other keys, such as OpenShift's newer `source`, ignored).
#[derive(Deserialize)]
struct Answer {
    cluster: String,
}

impl ExternalClient {
    /// A client of `config.url`, caching per `config.cache`. `known` says
    /// whether an alias is a build cluster in force; it is called without
    /// the client's lock held, on every answer and every cache hit (so it
    /// should be cheap, and may read state that reloads replace).
    pub fn new(
        config: &ExternalScheduler,
        known: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> ExternalClient {
        Self::with_metrics(config, known, ExternalMetrics::new())
    }

    /// [`ExternalClient::new`], counting into `metrics`.
    pub fn with_metrics(
        config: &ExternalScheduler,
        known: impl Fn(&str) -> bool + Send + Sync + 'static,
        metrics: ExternalMetrics,
    ) -> ExternalClient {
        let tls = ureq::tls::TlsConfig::builder()
            .root_certs(ureq::tls::RootCerts::PlatformVerifier)
            .build();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(TIMEOUT))
            .tls_config(tls)
            .build()
            .into();
        ExternalClient {
            agent,
            known: Box::new(known),
            metrics,
            state: Mutex::new(State {
                settings: Settings::of(config),
                generation: 0,
                entries: HashMap::new(),
                last_cleanup: None,
                in_flight: HashMap::new(),
            }),
            landed: Condvar::new(),
        }
    }

    /// The client's counters.
    pub fn metrics(&self) -> &ExternalMetrics {
        &self.metrics
    }

    /// Registers the client's counters in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        self.metrics.register(registry);
    }

    /// The counters in Prometheus' text format, on their own registry (for
    /// a caller that appends them to another exposition; ends `# EOF`).
    pub fn metrics_text(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }

    /// The configured URL.
    pub fn url(&self) -> String {
        self.lock().settings.url.clone()
    }

    /// Why the configured URL cannot be asked (every placement then falls
    /// back), if it cannot: worth a warning at start-up and on reloads.
    pub fn url_error(&self) -> Option<String> {
        self.lock().settings.url_error.clone()
    }

    /// Takes a new `scheduler.external` (a reload). The cache is kept,
    /// unless the URL changed: another dispatcher's answers are not this
    /// one's. New intervals apply to the entries already cached.
    pub fn reconfigure(&self, config: &ExternalScheduler) {
        let mut st = self.lock();
        let settings = Settings::of(config);
        if settings.url != st.settings.url {
            st.entries.clear();
            st.generation += 1;
        }
        st.settings = settings;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `job`'s cached answer at `now`, if fresh and still a known cluster;
    /// never touches the network, and counts nothing (a peek: a caller that
    /// goes on to [`ExternalClient::cluster_for`] is counted there).
    pub fn cached(&self, job: &str, now: Timestamp) -> Option<String> {
        let cluster = {
            let mut st = self.lock();
            st.cleanup(now);
            st.fresh(job, now)?
        };
        if (self.known)(&cluster) {
            return Some(cluster);
        }
        self.lock().forget(job, &cluster);
        None
    }

    /// Where `job` should run: the cached answer if fresh, else the
    /// dispatcher's (asked, at most [`TIMEOUT`]), else `None` with the
    /// reason. Several callers asking for one job at once share one
    /// request. Answers are cached from `now`; fallbacks are not cached.
    pub fn cluster_for(&self, job: &str, now: Timestamp) -> Placement {
        if let Some(cluster) = self.cached(job, now) {
            return self.hit(cluster);
        }
        let mut st = self.lock();
        // Another caller may have cached it since (its answer was checked
        // against `known` a moment ago), or be asking for it now.
        if let Some(cluster) = st.fresh(job, now) {
            drop(st);
            return self.hit(cluster);
        }
        if let Some(flight) = st.in_flight.get(job).cloned() {
            let outcome = loop {
                if let Some(outcome) = flight.get() {
                    break outcome.clone();
                }
                st = self.landed.wait(st).unwrap_or_else(PoisonError::into_inner);
            };
            drop(st);
            return match outcome {
                Ok(cluster) => self.hit(cluster),
                Err(f) => self.fell_back(job, f),
            };
        }
        let flight = Flight::default();
        st.in_flight.insert(job.to_string(), flight.clone());
        let url = st.settings.url.clone();
        let url_error = st.settings.url_error.clone();
        let generation = st.generation;
        drop(st);

        let mut landing = Landing {
            client: self,
            job,
            now,
            generation,
            flight,
            outcome: None,
        };
        let outcome = match url_error {
            Some(e) => Err(Fallback::Error(e)),
            None => {
                self.metrics.misses.inc();
                self.ask(&url, job)
            }
        };
        let outcome = outcome.and_then(|c| {
            if !c.is_empty() && (self.known)(&c) {
                Ok(c)
            } else {
                Err(Fallback::UnknownCluster(c))
            }
        });
        landing.outcome = Some(outcome.clone());
        drop(landing);
        match outcome {
            Ok(cluster) => Placement {
                cluster: Some(cluster),
                source: Source::Dispatcher,
            },
            Err(f) => self.fell_back(job, f),
        }
    }

    fn hit(&self, cluster: String) -> Placement {
        self.metrics.hits.inc();
        Placement {
            cluster: Some(cluster),
            source: Source::Cache,
        }
    }

    fn fell_back(&self, job: &str, f: Fallback) -> Placement {
        self.metrics.fallback(&f);
        tracing::warn!(job, reason = %f, "external scheduler: using the job's configured cluster");
        Placement {
            cluster: None,
            source: Source::Fallback(f),
        }
    }

    /// One request: the alias the dispatcher named, or why none.
    fn ask(&self, url: &str, job: &str) -> Outcome {
        let failed = |e: ureq::Error| match e {
            ureq::Error::Timeout(_) => Fallback::Timeout(TIMEOUT),
            ureq::Error::Io(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
                ) =>
            {
                Fallback::Timeout(TIMEOUT)
            }
            ureq::Error::Io(e) => Fallback::Error(e.to_string()),
            e => Fallback::Error(e.to_string()),
        };
        let mut resp = self
            .agent
            .post(url)
            .send_json(Request { job })
            .map_err(failed)?;
        let status = resp.status().as_u16();
        let body = resp.body_mut().with_config().limit(MAX_BODY).read_to_vec();
        if status != 200 {
            return Err(match body {
                Err(ureq::Error::Timeout(_)) => Fallback::Timeout(TIMEOUT),
                Err(_) => Fallback::Status {
                    status,
                    body: String::new(),
                },
                Ok(body) => Fallback::Status {
                    status,
                    body: quote(&String::from_utf8_lossy(&body)),
                },
            });
        }
        let body = body.map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => {
                Fallback::Decode(format!("longer than {MAX_BODY} bytes"))
            }
            e => failed(e),
        })?;
        serde_json::from_slice::<Answer>(&body)
            .map(|a| a.cluster)
            .map_err(|e| Fallback::Decode(e.to_string()))
    }

    /// How many answers are cached (tests: the cache stays bounded).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

/// A request's end, on every path (a panic included): caches its answer,
/// lets waiting callers have its outcome, and takes it out of flight.
struct Landing<'a> {
    client: &'a ExternalClient,
    job: &'a str,
    now: Timestamp,
    generation: u64,
    flight: Flight,
    outcome: Option<Outcome>,
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        let outcome = self
            .outcome
            .take()
            .unwrap_or_else(|| Err(Fallback::Error("the request was abandoned".into())));
        let mut st = self.client.lock();
        if let Ok(cluster) = &outcome {
            if st.generation == self.generation && st.settings.entry_timeout > SignedDuration::ZERO
            {
                st.entries.insert(
                    self.job.to_string(),
                    Entry {
                        cluster: cluster.clone(),
                        at: self.now,
                    },
                );
            }
        }
        st.in_flight.remove(self.job);
        let _ = self.flight.set(outcome);
        drop(st);
        self.client.landed.notify_all();
    }
}

/// The first line of `body`, trimmed, at most [`MAX_QUOTE`] bytes.
fn quote(body: &str) -> String {
    let line = body.lines().next().unwrap_or("").trim();
    if line.len() <= MAX_QUOTE {
        return line.to_string();
    }
    let mut end = MAX_QUOTE;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &line[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    use bosun_config::types::ExternalCache;
    use bosun_config::GoDuration;

    /// What the stub answers a job.
    #[derive(Clone)]
    enum Reply {
        /// 200 with this body.
        Ok(&'static str),
        /// This status with this text body.
        Status(u16, &'static str),
        /// Nothing, for this long, then the connection closes.
        Hang(Duration),
        /// 200 with this body after this delay.
        Slow(Duration, &'static str),
        /// 200 announcing a body, then nothing for this long.
        Stall(Duration),
    }

    /// A dispatcher on loopback, a thread per connection. `requests` are
    /// the jobs it was asked for, with each request's head.
    struct Stub {
        url: String,
        requests: Arc<Mutex<Vec<(String, String)>>>,
    }

    impl Stub {
        fn start(reply: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Stub {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let url = format!("http://{}/", listener.local_addr().unwrap());
            let requests = Arc::new(Mutex::new(Vec::new()));
            let reply = Arc::new(reply);
            let seen = requests.clone();
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    let Ok(conn) = conn else { continue };
                    let (reply, seen) = (reply.clone(), seen.clone());
                    std::thread::spawn(move || serve(conn, &*reply, &seen));
                }
            });
            Stub { url, requests }
        }

        fn count(&self) -> usize {
            self.requests.lock().unwrap().len()
        }
    }

    fn serve(
        conn: TcpStream,
        reply: &(dyn Fn(&str) -> Reply + Send + Sync),
        seen: &Mutex<Vec<(String, String)>>,
    ) {
        let mut reader = BufReader::new(conn.try_clone().unwrap());
        let mut head = String::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let job = serde_json::from_slice::<serde_json::Value>(&body).unwrap()["job"]
            .as_str()
            .unwrap()
            .to_string();
        seen.lock().unwrap().push((job.clone(), head));
        let (status, text) = match reply(&job) {
            Reply::Ok(body) => (200, body),
            Reply::Status(status, body) => (status, body),
            Reply::Hang(d) => {
                std::thread::sleep(d);
                return;
            }
            Reply::Slow(d, body) => {
                std::thread::sleep(d);
                (200, body)
            }
            Reply::Stall(d) => {
                let mut conn = conn;
                let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{{");
                let _ = conn.flush();
                std::thread::sleep(d);
                return;
            }
        };
        let mut conn = conn;
        let _ = write!(
            conn,
            "HTTP/1.1 {status} X\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        );
    }

    fn config(url: &str) -> ExternalScheduler {
        ExternalScheduler {
            url: url.to_string(),
            cache: ExternalCache::default(),
        }
    }

    fn known(c: &str) -> bool {
        ["build01", "build02"].contains(&c)
    }

    fn t0() -> Timestamp {
        "2026-09-01T10:00:00Z".parse().unwrap()
    }

    fn mins(m: i64) -> SignedDuration {
        SignedDuration::from_mins(m)
    }

    fn assert_metric(client: &ExternalClient, line: &str) {
        let text = client.metrics_text();
        assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
    }

    fn fallback(p: &Placement) -> &Fallback {
        assert_eq!(p.cluster, None, "{p:?}");
        match &p.source {
            Source::Fallback(f) => f,
            other => panic!("not a fallback: {other:?}"),
        }
    }

    #[test]
    fn answer_is_used_and_cached() {
        let stub = Stub::start(|_| Reply::Ok(r#"{"cluster": "build01", "source": "baseline"}"#));
        let client = ExternalClient::new(&config(&stub.url), known);
        let first = client.cluster_for("job-a", t0());
        assert_eq!(
            first,
            Placement {
                cluster: Some("build01".into()),
                source: Source::Dispatcher
            }
        );
        let second = client.cluster_for("job-a", t0() + mins(5));
        assert_eq!(
            second,
            Placement {
                cluster: Some("build01".into()),
                source: Source::Cache
            }
        );
        assert_eq!(
            client.cached("job-a", t0() + mins(6)),
            Some("build01".into())
        );
        assert_eq!(client.cached("job-b", t0()), None);
        assert_eq!(stub.count(), 1);
        // Prow's wire format: POST to the URL as written, JSON body.
        let (job, head) = stub.requests.lock().unwrap()[0].clone();
        assert_eq!(job, "job-a");
        assert!(head.starts_with("POST / HTTP/1.1\r\n"), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{head}"
        );
        // The peek counts nothing.
        assert_metric(&client, "bosun_scheduler_external_cache_hits_total 1");
        assert_metric(&client, "bosun_scheduler_external_cache_misses_total 1");
    }

    #[test]
    fn entries_expire_and_are_swept() {
        let stub = Stub::start(|_| Reply::Ok(r#"{"cluster":"build02"}"#));
        let mut cfg = config(&stub.url);
        cfg.cache = ExternalCache {
            entry_timeout_interval: Some(GoDuration::from_secs(60)),
            cleanup_interval: Some(GoDuration::from_secs(300)),
        };
        let client = ExternalClient::new(&cfg, known);
        assert_eq!(client.cluster_for("a", t0()).source, Source::Dispatcher);
        let just_before = t0() + SignedDuration::from_secs(59);
        assert_eq!(client.cluster_for("a", just_before).source, Source::Cache);
        assert_eq!(client.cached("a", t0() + mins(1)), None);
        assert_eq!(
            client.cluster_for("a", t0() + mins(1)).source,
            Source::Dispatcher
        );
        assert_eq!(stub.count(), 2);

        // Answers for other jobs, never asked again: swept once the
        // cleanup interval has passed, so the cache stays bounded.
        for job in ["b", "c", "d"] {
            client.cluster_for(job, t0() + mins(1));
        }
        assert_eq!(client.len(), 4);
        client.cached("z", t0() + mins(4));
        assert_eq!(client.len(), 4, "no sweep before the cleanup interval");
        client.cached("z", t0() + mins(6));
        assert_eq!(client.len(), 0);
    }

    #[test]
    fn defaults_are_ten_minutes_and_an_hour() {
        let stub = Stub::start(|_| Reply::Ok(r#"{"cluster":"build01"}"#));
        let client = ExternalClient::new(&config(&stub.url), known);
        client.cluster_for("a", t0());
        assert_eq!(client.cached("a", t0() + mins(9)), Some("build01".into()));
        assert_eq!(client.cached("a", t0() + mins(10)), None);
        client.cluster_for("b", t0() + mins(10));
        client.cluster_for("c", t0() + mins(30));
        // "b" expired at 20m, but the hour has not passed since the last
        // sweep (at the first call): kept until then.
        client.cached("z", t0() + mins(59));
        assert_eq!(client.len(), 2);
        client.cached("z", t0() + mins(60));
        assert_eq!(client.len(), 0);
    }

    #[test]
    fn dispatcher_down_falls_back() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = ExternalClient::new(&config(&format!("http://127.0.0.1:{port}/")), known);
        let p = client.cluster_for("a", t0());
        let f = fallback(&p);
        assert_eq!(f.class(), "error");
        assert!(
            f.to_string()
                .starts_with("the dispatcher could not be reached: "),
            "{f}"
        );
        assert!(f.to_string().to_lowercase().contains("refused"), "{f}");
        assert_metric(
            &client,
            r#"bosun_scheduler_external_fallbacks_total{reason="error"} 1"#,
        );
    }

    #[test]
    fn not_found_falls_back_with_the_dispatchers_text() {
        let stub = Stub::start(|_| Reply::Status(404, "Cluster not found\n"));
        let client = ExternalClient::new(&config(&stub.url), known);
        let p = client.cluster_for("a", t0());
        assert_eq!(
            fallback(&p).to_string(),
            "the dispatcher answered 404: Cluster not found"
        );
        assert_eq!(fallback(&p).class(), "status");
    }

    #[test]
    fn unknown_alias_falls_back() {
        let stub = Stub::start(|_| Reply::Ok(r#"{"cluster":"build99"}"#));
        let client = ExternalClient::new(&config(&stub.url), known);
        let p = client.cluster_for("a", t0());
        assert_eq!(
            fallback(&p).to_string(),
            "the dispatcher named unknown cluster build99"
        );
        assert_eq!(client.cached("a", t0()), None);
    }

    #[test]
    fn no_answer_within_two_seconds_falls_back() {
        let stub = Stub::start(|_| Reply::Hang(Duration::from_secs(10)));
        let client = ExternalClient::new(&config(&stub.url), known);
        let start = Instant::now();
        let p = client.cluster_for("a", t0());
        let took = start.elapsed();
        assert_eq!(
            fallback(&p).to_string(),
            "the dispatcher did not answer within 2s"
        );
        assert!(
            took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
            "{took:?}"
        );
        assert_eq!(stub.count(), 1);
        assert_metric(
            &client,
            r#"bosun_scheduler_external_fallbacks_total{reason="timeout"} 1"#,
        );
    }

    #[test]
    fn a_stalled_body_times_out_too() {
        let stub = Stub::start(|_| Reply::Stall(Duration::from_secs(10)));
        let client = ExternalClient::new(&config(&stub.url), known);
        let start = Instant::now();
        let p = client.cluster_for("a", t0());
        let took = start.elapsed();
        assert_eq!(fallback(&p).class(), "timeout", "{p:?}");
        assert!(took < Duration::from_secs(4), "{took:?}");
    }

    #[test]
    fn non_json_answer_falls_back() {
        let stub = Stub::start(|_| Reply::Ok("<html>build01</html>"));
        let client = ExternalClient::new(&config(&stub.url), known);
        let p = client.cluster_for("a", t0());
        let f = fallback(&p);
        assert_eq!(f.class(), "decode");
        assert!(
            f.to_string()
                .starts_with(r#"the dispatcher's answer is not {"cluster": ALIAS}: "#),
            "{f}"
        );
    }

    #[test]
    fn fallbacks_are_counted_by_reason_and_not_cached() {
        let stub = Stub::start(|job| match job {
            "missing" => Reply::Status(404, "Cluster not found"),
            "broken" => Reply::Status(500, ""),
            "elsewhere" => Reply::Ok(r#"{"cluster":"build99"}"#),
            "empty" => Reply::Ok("{}"),
            "blank" => Reply::Ok(r#"{"cluster":""}"#),
            "garbage" => Reply::Ok("not json"),
            _ => Reply::Ok(r#"{"cluster":"build01"}"#),
        });
        let client = ExternalClient::new(&config(&stub.url), known);
        let jobs = [
            "missing",
            "broken",
            "elsewhere",
            "empty",
            "blank",
            "garbage",
        ];
        for round in 0..2 {
            for job in jobs {
                let p = client.cluster_for(job, t0() + mins(round));
                fallback(&p);
            }
        }
        assert_eq!(stub.count(), 12, "fallbacks are not cached");
        let p = client.cluster_for("broken", t0());
        assert_eq!(fallback(&p).to_string(), "the dispatcher answered 500");
        let p = client.cluster_for("blank", t0());
        assert_eq!(fallback(&p).to_string(), "the dispatcher named no cluster");
        for line in [
            r#"bosun_scheduler_external_fallbacks_total{reason="status"} 5"#,
            r#"bosun_scheduler_external_fallbacks_total{reason="unknown_cluster"} 5"#,
            r#"bosun_scheduler_external_fallbacks_total{reason="decode"} 4"#,
            r#"bosun_scheduler_external_fallbacks_total{reason="timeout"} 0"#,
            r#"bosun_scheduler_external_fallbacks_total{reason="error"} 0"#,
            "bosun_scheduler_external_cache_misses_total 14",
            "bosun_scheduler_external_cache_hits_total 0",
        ] {
            assert_metric(&client, line);
        }
    }

    /// An https URL is asked over TLS: the server sees a TLS handshake.
    #[test]
    fn an_https_url_is_asked_over_tls() {
        use std::io::Read;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}/", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut head = [0u8; 3];
            conn.read_exact(&mut head).unwrap();
            head
        });
        let client = ExternalClient::new(&config(&url), known);
        assert_eq!(client.url_error(), None);
        let f = fallback(&client.cluster_for("a", t0())).to_string();
        // A TLS record of type handshake (22), version 3.x: a ClientHello.
        let head = server.join().unwrap();
        assert_eq!(&head[..2], &[22, 3], "{head:?}; {f}");
    }

    #[test]
    fn unusable_urls_fall_back_without_a_request() {
        for (url, why) in [
            (
                "ftp://dispatcher:8080/",
                "is not an http:// or https:// URL",
            ),
            ("", "is not an http:// or https:// URL"),
            ("http:///", "has no host"),
            ("https://", "has no host"),
        ] {
            let client = ExternalClient::new(&config(url), known);
            assert!(client.url_error().unwrap().contains(why), "{url}");
            let p = client.cluster_for("a", t0());
            let f = fallback(&p);
            assert_eq!(f.class(), "error");
            assert!(f.to_string().contains(why), "{f}");
            assert_metric(&client, "bosun_scheduler_external_cache_misses_total 0");
        }
    }

    #[test]
    fn concurrent_callers_share_one_request() {
        let stub =
            Stub::start(|_| Reply::Slow(Duration::from_millis(300), r#"{"cluster":"build01"}"#));
        let client = Arc::new(ExternalClient::new(&config(&stub.url), known));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let client = client.clone();
                std::thread::spawn(move || client.cluster_for("a", t0()))
            })
            .collect();
        let placements: Vec<Placement> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(placements
            .iter()
            .all(|p| p.cluster.as_deref() == Some("build01")));
        assert_eq!(
            placements
                .iter()
                .filter(|p| p.source == Source::Dispatcher)
                .count(),
            1
        );
        assert_eq!(stub.count(), 1);
        assert_metric(&client, "bosun_scheduler_external_cache_hits_total 7");
        assert_metric(&client, "bosun_scheduler_external_cache_misses_total 1");
    }

    #[test]
    fn concurrent_callers_share_a_fallback() {
        let stub = Stub::start(|_| Reply::Slow(Duration::from_secs(1), "nope"));
        let client = Arc::new(ExternalClient::new(&config(&stub.url), known));
        let start = Arc::new(std::sync::Barrier::new(4));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (client, start) = (client.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    client.cluster_for("a", t0())
                })
            })
            .collect();
        for t in threads {
            assert_eq!(fallback(&t.join().unwrap()).class(), "decode");
        }
        assert_eq!(stub.count(), 1);
        assert_metric(
            &client,
            r#"bosun_scheduler_external_fallbacks_total{reason="decode"} 4"#,
        );
        // Not cached: the next caller asks again.
        client.cluster_for("a", t0());
        assert_eq!(stub.count(), 2);
    }

    #[test]
    fn a_cached_cluster_no_longer_known_is_asked_again() {
        let stub = Stub::start(|_| Reply::Ok(r#"{"cluster":"build01"}"#));
        let gone = Arc::new(AtomicBool::new(false));
        let g = gone.clone();
        let client = ExternalClient::new(&config(&stub.url), move |c| {
            c == "build01" && !g.load(Ordering::SeqCst)
        });
        assert_eq!(client.cluster_for("a", t0()).source, Source::Dispatcher);
        gone.store(true, Ordering::SeqCst);
        assert_eq!(client.cached("a", t0()), None);
        assert_eq!(client.len(), 0);
        let p = client.cluster_for("a", t0());
        assert_eq!(fallback(&p).class(), "unknown_cluster");
        assert_eq!(stub.count(), 2);
    }

    #[test]
    fn reconfigure_keeps_the_cache_unless_the_url_changes() {
        let stub = Stub::start(|_| Reply::Ok(r#"{"cluster":"build01"}"#));
        let other = Stub::start(|_| Reply::Ok(r#"{"cluster":"build02"}"#));
        let client = ExternalClient::new(&config(&stub.url), known);
        client.cluster_for("a", t0());
        let mut cfg = config(&stub.url);
        cfg.cache.entry_timeout_interval = Some(GoDuration::from_secs(30 * 60));
        client.reconfigure(&cfg);
        assert_eq!(client.cached("a", t0() + mins(20)), Some("build01".into()));
        client.reconfigure(&config(&other.url));
        assert_eq!(client.cached("a", t0()), None);
        assert_eq!(
            client.cluster_for("a", t0()),
            Placement {
                cluster: Some("build02".into()),
                source: Source::Dispatcher
            }
        );
        assert_eq!((stub.count(), other.count()), (1, 1));
    }
}
