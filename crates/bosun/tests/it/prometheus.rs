//! The dispatcher's demand sources against the real things: a real
//! Prometheus (Debian's `prometheus`, started by the tests on loopback with
//! backfilled history), bosun's SQLite store, and loopback fakes for what a
//! real Prometheus cannot be made to do (hang, check a token).
//!
//! Why the expected Prometheus values are exact: every series has one sample
//! an hour, on the hour, and each counter grows at a constant rate. The
//! queries are evaluated on a sample's timestamp with windows of whole hours,
//! so a window's first and last samples lie on its edges: `increase()` has
//! nothing to extrapolate (its result is the last sample minus the first,
//! plus what was counted before a reset), and the answer is rate × hours,
//! exactly. (Were the range left-open, as in Prometheus 3, the first sample
//! would fall an hour inside, and extrapolating a constant rate over that
//! hour gives the same figure.) A window off the samples' grid is
//! extrapolated: that case is checked with a tolerance of 1e-9.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_dispatcher::demand::{CachedDemand, DemandSource, DemandUnit, Refresh};
use bosun_dispatcher::prometheus::{PromError, PrometheusClient, OPENSHIFT_QUERY, WINDOW};
use bosun_store::sqlite::SqliteStore;
use bosun_store::{NewRun, RunState, SharedStore, Store, Transition};
use jiff::{SignedDuration, Timestamp};

use crate::common;
use crate::prom::{self, openmetrics, Prometheus, Series};

const HOUR: i64 = 3600;
const WEEK: Duration = Duration::from_secs(168 * 3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

const NIGHTLY: &str = "periodic-ci-openshift-release-master-nightly-4.18-e2e-aws-ovn";
const UNIT: &str = "pull-ci-openshift-origin-main-unit";

/// The end of the backfilled history: an hour three hours back (older than
/// Prometheus' head block, which a backfill should not overlap).
fn history_end() -> i64 {
    (Timestamp::now().as_second() / HOUR) * HOUR - 3 * HOUR
}

/// Eight days of `prowjob_state_transitions`, one sample an hour up to `end`:
/// - NIGHTLY: 2 runs an hour reached pending (and 100 an hour were
///   triggered, which the query leaves out);
/// - UNIT: 5 an hour;
/// - `restarted`: 3 an hour, its counter reset when Prow restarted 72 h
///   before `end` (the first sample after it counts the 3 of that hour);
/// - `idle`: no change (its increase is 0);
/// - `gone`: only in the first 20 hours (no sample in the window);
/// - `new`: one sample, at `end` (`increase()` needs two);
/// - a series without `job_name` (skipped by the client).
fn history(end: i64) -> String {
    let hours = 192;
    let at = |h: i64| end - (hours - h) * HOUR;
    let series = |job: Option<&str>,
                  state: &str,
                  range: std::ops::RangeInclusive<i64>,
                  f: &dyn Fn(i64) -> f64| {
        let mut labels = vec![("state", state.to_string())];
        if let Some(job) = job {
            labels.insert(0, ("job_name", job.to_string()));
        }
        Series {
            labels,
            samples: range.map(|h| (at(h), f(h))).collect(),
        }
    };
    let reset = hours - 72;
    openmetrics(
        "prowjob_state_transitions",
        &[
            series(Some(NIGHTLY), "pending", 0..=hours, &|h| 2.0 * h as f64),
            series(Some(NIGHTLY), "triggered", 0..=hours, &|h| 100.0 * h as f64),
            series(Some(UNIT), "pending", 0..=hours, &|h| 5.0 * h as f64),
            series(Some("restarted"), "pending", 0..=hours, &|h| {
                3.0 * if h <= reset { h } else { h - reset } as f64
            }),
            series(Some("idle"), "pending", 0..=hours, &|_| 7.0),
            series(Some("gone"), "pending", 0..=20, &|h| h as f64),
            series(Some("new"), "pending", hours..=hours, &|_| 4.0),
            series(None, "pending", 0..=hours, &|h| 11.0 * h as f64),
        ],
    )
}

fn values(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

#[test]
fn demand_from_a_real_prometheus_with_backfilled_history() {
    let end = history_end();
    let prom = Prometheus::start(&history(end));
    let at = ts(end);

    // OpenShift's query over a week: exact (see the module's doc).
    let week = DemandSource::prometheus(&prom.url, None, None, WEEK).unwrap();
    let d = week.measure(at).unwrap();
    assert_eq!(
        d.jobs,
        values(&[
            (NIGHTLY, 2.0 * 168.0),
            (UNIT, 5.0 * 168.0),
            // 3 × 168 across the reset: increase() adds the value before it.
            ("restarted", 3.0 * 168.0),
            ("idle", 0.0),
        ]),
        "{}",
        prom.log()
    );
    assert_eq!(d.unit, DemandUnit::Runs);
    assert_eq!(d.measured_at, at);

    // A day: `gone` and `new` still absent, `restarted` counts 3 an hour.
    let day = DemandSource::prometheus(&prom.url, None, None, DAY).unwrap();
    assert_eq!(
        day.measure(at).unwrap().jobs,
        values(&[
            (NIGHTLY, 48.0),
            (UNIT, 120.0),
            ("restarted", 72.0),
            ("idle", 0.0)
        ])
    );

    // Off the grid by half an hour: increase() extrapolates the half hours at
    // either end from the 23 sampled hours; a constant rate makes that right
    // up to floating point.
    let off = day.measure(at - SignedDuration::from_mins(30)).unwrap();
    for (job, rate) in [(NIGHTLY, 2.0), (UNIT, 5.0), ("restarted", 3.0)] {
        let want = rate * 24.0;
        assert!(
            (off.jobs[job] - want).abs() <= 1e-9 * want,
            "{job}: {}",
            off.jobs[job]
        );
    }

    // The client against Prometheus' own answers.
    let client = PrometheusClient::new(&prom.url).unwrap();
    // Without `by (job_name)` the one series has no job: nothing to say.
    let total = client
        .job_values(r#"sum(increase(prowjob_state_transitions[1h]))"#, at)
        .unwrap();
    assert!(total.is_empty(), "{total:?}");
    // Not aggregated: one series per state, added up per job.
    let by_state = client
        .job_values(
            &format!("increase(prowjob_state_transitions{{job_name=\"{NIGHTLY}\"}}[168h])"),
            at,
        )
        .unwrap();
    assert_eq!(by_state, values(&[(NIGHTLY, 102.0 * 168.0)]));
    // Prometheus' refusals and non-vectors are typed errors.
    let e = client.job_values("sum(", at).unwrap_err();
    assert!(
        matches!(&e, PromError::Query { error_type, .. } if error_type == "bad_data"),
        "{e}"
    );
    let e = client.job_values("1", at).unwrap_err();
    assert!(
        matches!(&e, PromError::NotVector { result_type, .. } if result_type == "scalar"),
        "{e}"
    );
    let e = client
        .job_values(
            r#"sum(increase(prowjob_state_transitions[1h])) by (job_name) - 1000"#,
            at,
        )
        .unwrap_err();
    assert!(
        matches!(&e, PromError::BadValue { job, .. } if job == NIGHTLY || job == "idle"),
        "a negative value names its job: {e}"
    );
    assert_eq!(OPENSHIFT_QUERY.matches(WINDOW).count(), 1);
}

/// An https Prometheus (its own TLS, a certificate for 127.0.0.1 signed by a
/// test CA): trusted through `dispatcher.prometheus_ca_file`, refused with a
/// certificate error against the system's trust store or another CA.
#[test]
fn an_https_prometheus_is_verified_against_the_configured_ca() {
    let dir = tempfile::tempdir().unwrap();
    let pki = bosun_kubetest::pki::generate(&dir.path().join("pki")).unwrap();
    let tls = prom::Tls {
        cert_pem: pki.apiserver.cert_pem.clone(),
        key_pem: pki.apiserver.key_pem.clone(),
        ca_pem: pki.ca_pem.clone(),
    };
    let end = history_end();
    let prom = Prometheus::start_with(&history(end), Some(&tls), None);
    assert!(prom.url.starts_with("https://127.0.0.1:"), "{}", prom.url);
    let at = ts(end);
    let config = |ca: Option<&std::path::Path>| bosun_config::types::DispatcherConfig {
        prometheus_url: Some(prom.url.clone()),
        prometheus_ca_file: ca.map(|p| p.display().to_string()),
        ..Default::default()
    };

    let trusted = DemandSource::prometheus_of(&prom.url, &config(Some(&pki.ca_file()))).unwrap();
    assert_eq!(
        trusted.measure(at).unwrap().jobs,
        values(&[
            (NIGHTLY, 2.0 * 168.0),
            (UNIT, 5.0 * 168.0),
            ("restarted", 3.0 * 168.0),
            ("idle", 0.0),
        ]),
        "{}",
        prom.log()
    );

    // The system's trust store does not know the test CA.
    let system = DemandSource::prometheus_of(&prom.url, &config(None)).unwrap();
    let e = system.measure(at).unwrap_err().to_string();
    assert!(e.to_lowercase().contains("certificate"), "{e}");

    // Nor does another CA.
    let other = bosun_kubetest::pki::generate(&dir.path().join("other")).unwrap();
    let wrong = DemandSource::prometheus_of(&prom.url, &config(Some(&other.ca_file()))).unwrap();
    let e = wrong.measure(at).unwrap_err().to_string();
    assert!(e.to_lowercase().contains("certificate"), "{e}");

    // A CA file that is not there is named when the source is made.
    let missing = dir.path().join("missing.pem");
    let e = DemandSource::prometheus_of(&prom.url, &config(Some(&missing)))
        .err()
        .unwrap();
    assert!(e.to_string().contains("missing.pem"), "{e}");
}

/// Basic auth, as OpenShift's `--prometheus-username` and
/// `--prometheus-password-path`: a real Prometheus asking for a user
/// (`basic_auth_users`) answers with the password from the file, re-read
/// at each query, and refuses a wrong one.
#[test]
fn basic_auth_reaches_a_prometheus_that_asks_for_it() {
    // bcrypt (cost 4) of the password, as Prometheus' web config holds it.
    let user = prom::BasicUser {
        name: "dispatcher",
        password: "s3cret-pass",
        bcrypt: "$2b$04$vXYQu/wrUL.PGBSGYizeX.2KzAbafy4hNBEpSWJvrPmhClMrsMNWi",
    };
    let end = history_end();
    let prom = Prometheus::start_with(&history(end), None, Some(&user));
    let at = ts(end);
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, format!("{}\n", user.password)).unwrap();
    let config = bosun_config::types::DispatcherConfig {
        prometheus_url: Some(prom.url.clone()),
        prometheus_username: Some(user.name.into()),
        prometheus_password_file: Some(password.display().to_string()),
        ..Default::default()
    };
    let source = DemandSource::prometheus_of(&prom.url, &config).unwrap();
    assert_eq!(
        source.measure(at).unwrap().jobs[NIGHTLY],
        2.0 * 168.0,
        "{}",
        prom.log()
    );
    // Without credentials, and with a wrong password: Prometheus' 401.
    let bare = DemandSource::prometheus(&prom.url, None, None, WEEK).unwrap();
    let e = bare.measure(at).unwrap_err().to_string();
    assert!(e.contains("401"), "{e}");
    std::fs::write(&password, "wrong").unwrap();
    let e = source.measure(at).unwrap_err().to_string();
    assert!(e.contains("401"), "{e}");
    // The file is read at each query: the right password works again.
    std::fs::write(&password, user.password).unwrap();
    assert!(source.measure(at).is_ok());
    std::fs::remove_file(&password).unwrap();
    let e = source.measure(at).unwrap_err().to_string();
    assert!(e.contains("password file"), "{e}");
}

#[test]
fn killing_prometheus_keeps_the_last_good_demand() {
    let end = history_end();
    let mut prom = Prometheus::start(&history(end));
    let source = DemandSource::prometheus(&prom.url, None, None, WEEK).unwrap();
    let cache = Arc::new(CachedDemand::new(source).with_ttl(Duration::from_secs(300)));
    let t0 = ts(end);
    let after = |mins: i64| t0 + SignedDuration::from_mins(mins);

    let s = cache.refresh(t0, false);
    assert_eq!(
        s.last_refresh,
        Some(Refresh::Measured),
        "{s:?}\n{}",
        prom.log()
    );
    let good = cache.current().unwrap();
    assert_eq!(good.jobs[UNIT], 840.0);

    // Readers keep getting the demand through everything that follows.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (cache, stop, good) = (cache.clone(), stop.clone(), good.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                assert_eq!(cache.current().as_deref(), Some(&*good));
                reads += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            reads
        })
    };

    prom.kill();

    // Within the TTL nothing is asked: no error yet.
    let s = cache.refresh(after(1), false);
    assert_eq!(s.last_refresh, Some(Refresh::Cached));
    assert_eq!((s.failures, s.last_error.as_deref()), (0, None));

    // After it, the query fails at once (connection refused), and the last
    // good demand stays, said to be stale.
    let started = Instant::now();
    let s = cache.refresh(after(6), false);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(s.last_refresh, Some(Refresh::Failed), "{s:?}");
    assert_eq!((s.successes, s.failures, s.consecutive_failures), (1, 1, 1));
    assert!(s.is_stale());
    assert_eq!(s.measured_at, Some(t0));
    assert_eq!(s.jobs, 4);
    let err = s.last_error.unwrap();
    assert!(err.contains(&prom.url), "the error names Prometheus: {err}");
    assert_eq!(cache.current().as_deref(), Some(&*good));

    // Forced: fails again, counted, still answering.
    let s = cache.refresh(after(7), true);
    assert_eq!(
        (s.last_refresh, s.failures, s.consecutive_failures),
        (Some(Refresh::Failed), 2, 2)
    );
    assert_eq!(cache.current().as_deref(), Some(&*good));

    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
}

/// A Prometheus that accepts the connection and never answers: the query
/// gives up at its timeout (30 s by default; half a second here).
#[test]
fn a_prometheus_that_hangs_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (done, release) = std::sync::mpsc::channel::<()>();
    let held = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        // Held, unanswered, until the test is done (at most 10 s).
        let _ = release.recv_timeout(Duration::from_secs(10));
        drop(conn);
    });
    let client = PrometheusClient::new(&url)
        .unwrap()
        .with_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let e = client.job_values(OPENSHIFT_QUERY, ts(0)).unwrap_err();
    let took = started.elapsed();
    assert!(matches!(e, PromError::Timeout { .. }), "{e}");
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(4),
        "{took:?}"
    );
    done.send(()).unwrap();
    held.join().unwrap();
}

/// The token file's content goes in `Authorization: Bearer`, read at each
/// query; the query and time go in the URL.
#[test]
fn the_bearer_token_is_sent() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let mut requests = Vec::new();
        for _ in 0..2 {
            let (mut conn, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                conn.read_exact(&mut byte).unwrap();
                head.push(byte[0]);
            }
            requests.push(String::from_utf8(head).unwrap());
            let body = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job_name":"j"},"value":[1,"3"]}]}}"#;
            write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
        requests
    });
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let client = PrometheusClient::new(&url)
        .unwrap()
        .with_token_file(Some(token.clone()));
    let at = ts(1_768_003_200);
    assert_eq!(client.job_values("up", at).unwrap(), values(&[("j", 3.0)]));
    std::fs::write(&token, "rotated").unwrap();
    client.job_values("up", at).unwrap();
    let requests = server.join().unwrap();
    let lower: Vec<String> = requests.iter().map(|r| r.to_lowercase()).collect();
    assert!(
        lower[0].starts_with("get /api/v1/query?query=up&time=1768003200.000 http/1.1\r\n"),
        "{}",
        requests[0]
    );
    assert!(
        lower[0].contains("\r\nauthorization: bearer s3cret\r\n"),
        "{}",
        requests[0]
    );
    assert!(
        lower[1].contains("\r\nauthorization: bearer rotated\r\n"),
        "{}",
        requests[1]
    );

    std::fs::remove_file(&token).unwrap();
    let e = client.job_values("up", at).unwrap_err();
    assert!(matches!(e, PromError::TokenFile { .. }), "{e}");
}

fn new_run(job: &str) -> NewRun {
    NewRun {
        job: job.into(),
        job_type: bosun_config::types::JobType::Periodic,
        periodic: None,
        configured_cluster: "default".into(),
        state: RunState::Triggered,
        refs: None,
        extra_refs: vec![],
        labels: Default::default(),
        annotations: Default::default(),
        spec: serde_json::json!({"containers": [{"image": "x"}]}).into(),
        scheduled_at: None,
        attempt: 0,
        description: "Job triggered.".into(),
    }
}

fn start(store: &dyn Store, job: &str, pending: Timestamp, end: Option<(RunState, Timestamp)>) {
    let id = store
        .create_run(new_run(job), pending - SignedDuration::from_secs(5))
        .unwrap()
        .run()
        .id
        .clone();
    let mut steps = vec![(
        id.clone(),
        Transition::to(RunState::Pending, pending, "Job started."),
    )];
    if let Some((state, at)) = end {
        steps.push((id, Transition::to(state, at, "Job ended.")));
    }
    for r in store.transitions(steps) {
        r.unwrap();
    }
}

/// History demand through the SQLite store: run-hours of the runs that
/// reached `pending` in the window, the running ones up to now, at least a
/// minute a run.
#[test]
fn history_demand_through_the_sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    let store: SharedStore = Arc::new(SqliteStore::open(dir.path().join("bosun.db")).unwrap());
    let now: Timestamp = "2026-01-10T12:00:00Z".parse().unwrap();
    let ago = |h: i64| now - SignedDuration::from_hours(h);
    use RunState::*;
    // e2e: 2 h done, 1.5 h done, one running for 30 min: 4 h.
    start(&*store, "e2e", ago(100), Some((Success, ago(98))));
    start(
        &*store,
        "e2e",
        ago(10),
        Some((Failure, ago(10) + SignedDuration::from_mins(90))),
    );
    start(&*store, "e2e", now - SignedDuration::from_mins(30), None);
    // unit: 6 runs of 10 s: a minute each by the floor, 0.1 h.
    for i in 0..6 {
        start(
            &*store,
            "unit",
            ago(i + 1),
            Some((Success, ago(i + 1) + SignedDuration::from_secs(10))),
        );
    }
    // old: started 8 days ago, ended inside the week: not counted.
    start(&*store, "old", ago(192), Some((Success, ago(160))));
    // A run that never started is not counted either.
    store.create_run(new_run("waiting"), now).unwrap();

    let source = DemandSource::History {
        store: store.clone(),
        window: WEEK,
    };
    let d = source.measure(now).unwrap();
    assert_eq!(d.unit, DemandUnit::RunHours);
    assert_eq!(d.jobs, values(&[("e2e", 4.0), ("unit", 0.1)]));

    // Cached like any source; the window follows `now`.
    let cache = CachedDemand::new(source);
    assert_eq!(
        cache.refresh(now, false).last_refresh,
        Some(Refresh::Measured)
    );
    let s = cache.refresh(now + SignedDuration::from_hours(3), false);
    assert_eq!(s.last_refresh, Some(Refresh::Measured));
    // 2 + 1.5 + 3.5 h, the running one now 3.5 h in.
    assert_eq!(cache.current().unwrap().jobs["e2e"], 7.0);
}

/// `bosun dispatcher` with `dispatcher.prometheus_url`: its plan carries the
/// demand Prometheus measured; with Prometheus killed, a re-plan keeps the
/// last good demand and the service goes on answering.
#[test]
fn the_dispatcher_plans_from_prometheus_and_outlives_it() {
    let end = history_end();
    let mut prom = Prometheus::start(&history(end));
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "build_clusters:\n  build-a: {{kind: local}}\n  build-b: {{kind: local}}\ndispatcher:\n  prometheus_url: {}\n",
            prom.url
        ),
    )
    .unwrap();
    for (file, job) in [("nightly", NIGHTLY), ("unit", UNIT)] {
        std::fs::write(
            dir.join(format!("jobs/{file}.yaml")),
            format!("periodics:\n- name: {job}\n  interval: 1h\n  spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n"),
        )
        .unwrap();
    }
    std::fs::write(dir.join("token"), "sesame\n").unwrap();
    let log = dir.join("dispatcher.log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .arg("dispatcher")
        .arg("--config")
        .arg(dir.join("config.yaml"))
        .arg("--job-config")
        .arg(dir.join("jobs"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--api-token-file")
        .arg(dir.join("token"))
        .arg("--listen")
        .arg("127.0.0.1:0")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let port = common::logged_port(&mut child, &log, deadline);
    let _child = Kill(child);
    let plan = || -> serde_json::Value {
        let (status, body) = common::request(port, "GET", "/plan", None, None);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    };
    while common::request(port, "GET", "/readyz", None, None).0 != 200 {
        assert!(
            Instant::now() < deadline,
            "{}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let load = |p: &serde_json::Value| -> f64 {
        p["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["load"].as_f64().unwrap())
            .sum()
    };
    let first = plan();
    // About 2 and 5 runs an hour over most of a week (the history ends
    // three hours back, so `increase()` extrapolates): far from 1 per job.
    let measured = load(&first);
    assert!(
        measured > 1000.0,
        "{first}\n{}",
        std::fs::read_to_string(&log).unwrap()
    );
    let lookup = |job: &str| {
        common::request(
            port,
            "POST",
            "/",
            Some(&format!(r#"{{"job": "{job}"}}"#)),
            None,
        )
    };
    assert_eq!(lookup(UNIT).0, 200);

    prom.kill();
    let (status, _) = common::request(port, "POST", "/replan", None, Some("sesame"));
    assert_eq!(status, 202);
    let generation = first["generation"].as_u64().unwrap();
    let replanned = loop {
        let p = plan();
        if p["generation"].as_u64().unwrap() > generation {
            break p;
        }
        assert!(
            Instant::now() < deadline + Duration::from_secs(30),
            "no re-plan"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(load(&replanned), measured, "the last good demand is kept");
    assert_eq!(lookup(UNIT).0, 200);
    assert_eq!(lookup(NIGHTLY).0, 200);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("demand is not current"), "{text}");
}
