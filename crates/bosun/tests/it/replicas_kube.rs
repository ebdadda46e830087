//! Failovers of three `bosun serve` replicas on one PostgreSQL database whose
//! runs are pods on a real kube-apiserver with its audit log on
//! (`ControlPlane::audited`): an every-second periodic on that cluster and
//! runs posted through the API every 700 ms, each pod run for 3 s by the
//! hand-played kubelet, so that some are in flight at each fault; finished
//! pods are deleted 2 s after they end (`sinker.terminated_pod_ttl`). The faults: the leader paused (SIGSTOP) past its
//! lease and woken once another leads, then the new leader killed (kill -9).
//!
//! Checked from the real sources, the API server's audit log and bosun's
//! API: every run with a pod in flight at a fault ends `success` under a
//! later term without a pod of its own made again (adopted); no run's pod
//! is created twice; every pod create and delete comes from the replica
//! leading at that moment (each replica names itself in its requests'
//! `User-Agent`), so none from an old leader after the new term began; and
//! the periodic's ticks are all accounted for, none doubled (the checker of
//! `replicas`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_kubetest::audit::Event;
use bosun_kubetest::postgres::Postgres;
use bosun_kubetest::{ControlPlane, Options, Outcome};
use jiff::Timestamp;

use crate::common::{json, request};
use crate::replicas::{check_ticks, pause, steps_down, Replicas, LEASE};

const NS: &str = "rk-failover";
const CONTEXT: &str = "build-a";
/// How long each pod runs.
const POD_SECS: u64 = 3;
/// The every-second periodic (one run at a time: a tick while its last run
/// runs is skipped), and `load`, never due, for runs posted through the
/// API.
const JOBS: &str = "periodics:
- name: sec
  cron: \"* * * * * *\"
  cluster: build-a
  spec: {containers: [{image: alpine, command: [\"true\"]}]}
- name: load
  cron: \"0 0 31 2 *\"
  cluster: build-a
  spec: {containers: [{image: alpine, command: [\"true\"]}]}
";

/// The hand-played kubelet of a test: every new pod of `NS` runs at once and
/// succeeds [`POD_SECS`] later, each on a thread of its own. A pod the API
/// no longer has (a call panics in the kubelet) is left alone. Stops when
/// dropped.
struct Kubelet {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Kubelet {
    fn start(plane: &Arc<ControlPlane>) -> Kubelet {
        let pods = plane.kubelet().new_pods(NS);
        let plane = Arc::downgrade(plane);
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::spawn(move || {
            while !halt.load(Ordering::SeqCst) {
                let Ok(pod) = pods.recv_timeout(Duration::from_millis(100)) else {
                    continue;
                };
                let plane = plane.clone();
                std::thread::spawn(move || {
                    let step = |f: &dyn Fn(&bosun_kubetest::Kubelet)| {
                        let Some(p) = plane.upgrade() else {
                            return false;
                        };
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(p.kubelet())))
                            .is_ok()
                    };
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    if step(&|k| k.run_pod(&pod)) {
                        step(&|k| k.append_log(NS, &name, &format!("{name} starts\n")));
                        std::thread::sleep(Duration::from_secs(POD_SECS));
                        step(&|k| k.append_log(NS, &name, &format!("{name} ends\n")));
                        step(&|k| k.finish_pod(&pod, Outcome::success()));
                    }
                });
            }
        });
        Kubelet {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A term: the replica that led it (its id) and when it began (the lease's
/// `since`, the database's clock).
#[derive(Debug, Clone)]
struct Term {
    term: i64,
    holder: String,
    since: Timestamp,
}

/// The current term, as replica `i` tells it, once a replica holds the
/// lease.
fn term_seen(r: &Replicas, i: usize) -> Term {
    let v = r.leader_view(i);
    Term {
        term: v["term"].as_i64().unwrap_or_else(|| panic!("{v}")),
        holder: v["holder"].as_str().unwrap().to_string(),
        since: v["since"].as_str().unwrap().parse().unwrap(),
    }
}

/// Every run of both jobs, by id.
fn runs(port: u16) -> BTreeMap<String, serde_json::Value> {
    let mut all = BTreeMap::new();
    for job in ["sec", "load"] {
        let (_, body) = request(
            port,
            "GET",
            &format!("/api/v1/runs?job={job}&limit=10000"),
            None,
            None,
        );
        for r in json(&body)["runs"].as_array().unwrap() {
            all.insert(r["id"].as_str().unwrap().to_string(), r.clone());
        }
    }
    all
}

/// Runs of `load` posted every 700 ms to the replica whose port is in
/// `to` (the test points it away from a replica it is about to fault): the
/// ids made. Stops when `stop` turns true.
fn load(
    to: Arc<std::sync::atomic::AtomicU16>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut made = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let port = to.load(Ordering::SeqCst);
            let (status, body) = request(
                port,
                "POST",
                "/api/v1/runs",
                Some(r#"{"job": "load"}"#),
                None,
            );
            assert_eq!(status, 201, "{body}");
            made.push(json(&body)["id"].as_str().unwrap().to_string());
            std::thread::sleep(Duration::from_millis(700));
        }
        made
    })
}

/// The runs whose pod runs now: `pending` in the store, and their pod
/// there on the API server.
fn in_flight(r: &Replicas, plane: &ControlPlane) -> Vec<String> {
    runs(r.any())
        .into_iter()
        .filter(|(id, run)| run["state"] == "pending" && plane.kubelet().pod(NS, id).is_some())
        .map(|(id, _)| id)
        .collect()
}

/// Waits until at least `n` runs have a pod in flight; returns them.
fn wait_in_flight(r: &Replicas, plane: &ControlPlane, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ids = in_flight(r, plane);
        if ids.len() >= n {
            return ids;
        }
        assert!(
            Instant::now() < deadline,
            "never {n} pods in flight: {ids:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Of `ids`, the runs still pending right after the leader's fault: a pod
/// may end, and its leader record it, between the look at the pods in
/// flight and the fault. A paused or killed leader commits nothing more
/// (a commit it sent just before lands within the half second waited), and
/// the next one takes over only after the lease's TTL, so what is pending
/// then is what the fault caught in flight (at least one).
fn still_pending(r: &Replicas, ids: Vec<String>) -> Vec<String> {
    // A commit the leader sent just before the fault lands meanwhile.
    std::thread::sleep(Duration::from_millis(500));
    let all = runs(r.any());
    let caught: Vec<String> = ids
        .into_iter()
        .filter(|id| all.get(id).is_some_and(|run| run["state"] == "pending"))
        .collect();
    assert!(!caught.is_empty(), "no run was in flight at the fault");
    caught
}

/// Waits until replica `not` no longer leads and another does: its term.
fn takeover(r: &Replicas, not: usize, within: Duration) -> (usize, Term) {
    let deadline = Instant::now() + within;
    loop {
        let leading: Vec<usize> = (0..r.up.len())
            .filter(|i| *i != not && r.up[*i].is_some() && !r.hidden[*i])
            .filter(|i| r.leader_view(*i)["leader"] == true)
            .collect();
        if let [i] = leading[..] {
            return (i, term_seen(r, i));
        }
        assert!(Instant::now() < deadline, "no takeover from replica {not}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The term in force at `at` (the last one begun at or before it).
fn term_at(terms: &[Term], at: Timestamp) -> Option<&Term> {
    terms.iter().rev().find(|t| t.since <= at)
}

#[test]
fn failovers_with_pods_in_flight_adopt_them_and_no_old_leader_touches_a_pod() {
    let t0 = Instant::now();
    let plane = Arc::new(ControlPlane::audited(Options::default()));
    let tenant = plane.tenant(NS, CONTEXT);
    let _kubelet = Kubelet::start(&plane);
    let kubeconfig = tenant.kubeconfig.to_str().unwrap().to_string();
    let config = format!("pod_namespace: {NS}\nsinker: {{terminated_pod_ttl: 2s}}\n");
    let mut r = Replicas::with(
        &Postgres::shared().database(),
        3,
        &LEASE,
        &config,
        JOBS,
        &["--kubeconfig", &kubeconfig, "--health-interval", "200ms"],
    );
    for i in 0..3 {
        r.up(i);
    }
    let ids: Vec<String> = (0..3)
        .map(|i| r.leader_view(i)["replica"].as_str().unwrap().to_string())
        .collect();
    let first = r.leader(Duration::from_secs(20));
    let mut terms = vec![term_seen(&r, first)];
    eprintln!("ready after {:?}", t0.elapsed());
    let to = Arc::new(std::sync::atomic::AtomicU16::new(r.port((first + 1) % 3)));
    let stop = Arc::new(AtomicBool::new(false));
    let loader = load(to.clone(), stop.clone());

    // 1. The leader paused past its lease with pods in flight, woken once
    // another leads.
    let paused = wait_in_flight(&r, &plane, 2);
    let pid = r.pid(first);
    pause(pid, true);
    r.hidden[first] = true;
    let paused = still_pending(&r, paused);
    let (second, term) = takeover(&r, first, Duration::from_secs(20));
    terms.push(term);
    std::thread::sleep(Duration::from_secs(1));
    pause(pid, false);
    r.hidden[first] = false;
    steps_down(&r, first, Duration::from_secs(20));
    assert_eq!(r.leader(Duration::from_secs(5)), second);
    std::thread::sleep(Duration::from_secs(3));

    // 2. The new leader killed with pods in flight.
    let spare = (0..3).find(|i| *i != second && *i != first).unwrap();
    to.store(r.port(spare), Ordering::SeqCst);
    let killed = wait_in_flight(&r, &plane, 2);
    r.kill(second);
    let killed = still_pending(&r, killed);
    let (third, term) = takeover(&r, second, Duration::from_secs(20));
    terms.push(term);
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(r.leader(Duration::from_secs(5)), third);
    let end = term_seen(&r, third);
    assert_eq!(
        end.term, terms[2].term,
        "no other term began unseen: {terms:?}, now {end:?}"
    );
    for w in terms.windows(2) {
        assert_eq!(w[1].term, w[0].term + 1, "a term began unseen: {terms:?}");
    }

    stop.store(true, Ordering::SeqCst);
    let posted = loader.join().unwrap();

    // (a) Every run ends `success` (every run posted is one), those in
    // flight at a fault under a later term.
    let port = r.port(third);
    let deadline = Instant::now() + Duration::from_secs(20);
    let all = loop {
        let all = runs(port);
        for id in &posted {
            assert!(all.contains_key(id), "posted run {id} is not there");
        }
        let open: Vec<&String> = all
            .keys()
            .filter(|id| all[*id]["state"] != "success")
            .collect();
        if open.is_empty() {
            break all;
        }
        assert!(
            Instant::now() < deadline,
            "runs never succeeded: {:?}",
            open.iter()
                .map(|id| (id, &all[*id]["state"], &all[*id]["description"]))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    for (ids, after) in [(&paused, &terms[1]), (&killed, &terms[2])] {
        for id in ids {
            let done: Timestamp = all[id]["completed_at"].as_str().unwrap().parse().unwrap();
            assert!(
                done > after.since,
                "run {id} in flight at the fault ended under the new term {after:?}: {}",
                all[id]
            );
        }
    }

    // (b), (c): the audit log's pod creates and deletes, each by the replica
    // leading when the API server received it.
    let agent_of = |i: usize| bosun_cluster::kube::client::user_agent_of(Some(&ids[i]));
    let events: Vec<Event> = plane
        .audit()
        .unwrap()
        .events()
        .into_iter()
        .filter(|e| e.key.resource == "pods" && e.key.subresource.is_empty())
        .filter(|e| e.namespace == NS && matches!(e.key.verb.as_str(), "create" | "delete"))
        .filter(|e| e.user_agent.starts_with("bosun/"))
        .collect();
    let created: Vec<&Event> = events
        .iter()
        .filter(|e| e.key.verb == "create" && (200..300).contains(&e.key.code))
        .collect();
    assert!(created.len() >= 10, "{created:?}");
    // Request `e` came from the replica leading when the API server
    // received it.
    let by_the_leader = |e: &Event| {
        let by = (0..3)
            .find(|i| e.user_agent == agent_of(*i))
            .unwrap_or_else(|| panic!("a request by no replica: {e:?}"));
        let term = term_at(&terms, e.received)
            .unwrap_or_else(|| panic!("a request before the first term: {e:?} {terms:?}"));
        assert_eq!(
            term.holder, ids[by],
            "replica {by} made {} of pod {} ({}, code {}) at {} in term {term:?}, which it did not lead",
            e.key.verb, e.name, e.key.subresource, e.key.code, e.received
        );
    };
    events.iter().for_each(by_the_leader);
    // Pods' logs are read by the leader alone (it ships them to the store
    // the others serve them from): every log request is the leading
    // replica's, each replica reads a pod's log once (no stream is cut
    // here), and a pod's log is read by two replicas only across a fault.
    let log_reads: Vec<Event> = plane
        .audit()
        .unwrap()
        .events()
        .into_iter()
        .filter(|e| e.key.resource == "pods" && e.key.subresource == "log")
        .filter(|e| e.namespace == NS && e.user_agent.starts_with("bosun/"))
        .collect();
    assert!(!log_reads.is_empty(), "no log was read");
    log_reads.iter().for_each(by_the_leader);
    let mut reads: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for e in &log_reads {
        *reads
            .entry((e.name.as_str(), e.user_agent.as_str()))
            .or_default() += 1;
    }
    for ((id, by), n) in &reads {
        assert_eq!(*n, 1, "{by} read run {id}'s log {n} times");
    }
    let mut per_run: BTreeMap<&str, usize> = BTreeMap::new();
    for e in &created {
        *per_run.entry(e.name.as_str()).or_default() += 1;
    }
    for (id, n) in &per_run {
        assert_eq!(*n, 1, "run {id}'s pod was created {n} times");
        assert!(all.contains_key(*id), "a pod {id} of no run");
    }
    // The request that made each run's pod: its create answered 2xx; failing
    // that, a create answered 5xx. kube-apiserver answers 504 to a request
    // whose client went away (a replica killed with a create in flight) or
    // gave up (its 10 s timeout), and etcd may still commit the write it
    // was given: the pod is there though no create succeeded, and the next
    // leader adopts it (its own create is answered 409, or it sees the pod
    // first).
    let made = |id: &str| -> Option<&Event> {
        let of_run = || {
            events
                .iter()
                .filter(move |e| e.key.verb == "create" && e.name == id)
        };
        of_run()
            .find(|e| (200..300).contains(&e.key.code))
            .or_else(|| of_run().find(|e| e.key.code >= 500))
    };
    // Adopted: each run in flight at a fault had its one pod from the
    // leader before it.
    for (ids_in_flight, before) in [(&paused, first), (&killed, second)] {
        for id in ids_in_flight {
            let e = made(id).unwrap_or_else(|| panic!("run {id}: no pod create"));
            assert_eq!(e.user_agent, agent_of(before), "run {id}'s pod: {e:?}");
        }
    }
    // Every run that ran on the cluster has its pod's create.
    for (id, run) in &all {
        if run["state"] == "success" {
            assert!(
                made(id).is_some(),
                "run {id}: no pod create; the run: {run}; the API's requests naming it: {:#?}",
                plane
                    .audit()
                    .unwrap()
                    .events()
                    .into_iter()
                    .filter(|e| e.name == *id)
                    .collect::<Vec<_>>()
            );
        }
    }
    let lost = all
        .keys()
        .filter(|id| !per_run.contains_key(id.as_str()) && made(id).is_some())
        .count();

    // Each pod's log, whole and once, on every replica, those in flight at
    // a fault included: copied again from the API by the next leader,
    // shipped on from where the store's copy ended. The killed replica,
    // started again once their pods are gone, has only the parts it copied
    // before it died: it serves the store's whole log.
    r.up(second);
    let up: Vec<u16> = (0..3).map(|i| r.port(i)).collect();
    for id in paused.iter().chain(&killed).chain(posted.iter().take(3)) {
        let want = format!("{id} starts\n{id} ends\n");
        for port in &up {
            let (status, log) =
                request(*port, "GET", &format!("/api/v1/runs/{id}/log"), None, None);
            assert_eq!((status, &log), (200, &want), "run {id} on port {port}");
        }
    }

    // (d) Every tick one run or one recorded skip.
    check_ticks(port);
    let deletes = events.iter().filter(|e| e.key.verb == "delete").count();
    eprintln!(
        "{} runs, {} pods created ({lost} more by a create whose answer was an error), {deletes} pod deletes, {} log reads; in flight at the pause {paused:?}, at the kill {killed:?}; terms {terms:?}; took {:?}",
        all.len(),
        created.len(),
        log_reads.len(),
        t0.elapsed()
    );
}
