//! The leader lease and the fence on the leader's writes, against a real
//! server: one holder at a time, terms that only grow, expiry by the
//! database's clock, and no write committed under a term that is over.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bosun_config::types::{JobType, Refs};
use bosun_kubetest::postgres::Postgres;
use bosun_postgres::{config, PgOptions, PgStore};
use bosun_store::{NewRun, RunFilter, RunState, Store, StoreError};
use jiff::Timestamp;

fn open(url: &str) -> PgStore {
    PgStore::open(config(url, None).unwrap(), PgOptions::default(), None).unwrap()
}

fn adhoc(job: &str) -> NewRun {
    NewRun {
        job: job.into(),
        job_type: JobType::Periodic,
        periodic: None,
        configured_cluster: "default".into(),
        state: RunState::Triggered,
        refs: None,
        extra_refs: vec![Refs::default()],
        labels: BTreeMap::new().into(),
        annotations: BTreeMap::new().into(),
        spec: serde_json::json!({"containers": [{"image": "x"}]}).into(),
        scheduled_at: None,
        attempt: 0,
        description: "Job triggered.".into(),
    }
}

#[test]
fn one_holder_at_a_time_and_terms_only_grow() {
    let url = Postgres::shared().database();
    let (a, b) = (open(&url), open(&url));
    let ttl = Duration::from_secs(15);
    let (la, lb) = (a.lease("leader", "a", ttl), b.lease("leader", "b", ttl));
    assert_eq!(la.try_acquire().unwrap(), Some(1));
    assert_eq!(lb.try_acquire().unwrap(), None, "a holds it");
    assert!(la.renew(1).unwrap());
    let info = lb.current().unwrap().unwrap();
    assert_eq!((info.holder.as_str(), info.term, info.live), ("a", 1, true));
    assert!(la.resign(1).unwrap());
    assert!(!lb.current().unwrap().unwrap().live, "resigned");
    assert_eq!(
        lb.try_acquire().unwrap(),
        Some(2),
        "free at once, a new term"
    );
    assert!(!la.renew(1).unwrap(), "an old term is never renewed");
    assert_eq!(la.try_acquire().unwrap(), None, "b holds it");
    assert!(lb.renew(2).unwrap());
}

#[test]
fn a_renewal_after_every_connection_was_ended_renews() {
    let pg = Postgres::shared();
    let url = pg.database();
    // A pool of two, both in use once, then both ended by the server.
    let a = PgStore::open(
        config(&url, None).unwrap(),
        PgOptions {
            max_connections: 2,
            ..PgOptions::default()
        },
        None,
    )
    .unwrap();
    let la = a.lease("leader", "a", Duration::from_secs(15));
    let term = la.try_acquire().unwrap().unwrap();
    crate::end_every_backend(pg, &url, &a);
    assert!(la.renew(term).unwrap(), "the first renewal renews");
}

#[test]
fn an_expired_lease_goes_to_the_next_with_a_new_term() {
    let url = Postgres::shared().database();
    let (a, b) = (open(&url), open(&url));
    let ttl = Duration::from_millis(800);
    let (la, lb) = (a.lease("leader", "a", ttl), b.lease("leader", "b", ttl));
    assert_eq!(la.try_acquire().unwrap(), Some(1));
    assert_eq!(lb.try_acquire().unwrap(), None);
    std::thread::sleep(Duration::from_millis(1000));
    assert!(!la.renew(1).unwrap(), "expired: not renewed");
    assert_eq!(lb.try_acquire().unwrap(), Some(2));
}

#[test]
fn a_write_under_a_term_that_is_over_commits_nothing() {
    let url = Postgres::shared().database();
    let (a, b) = (open(&url), open(&url));
    let ttl = Duration::from_millis(800);
    let (la, lb) = (a.lease("leader", "a", ttl), b.lease("leader", "b", ttl));
    let term = la.try_acquire().unwrap().unwrap();
    a.set_fence(Some(la.fence(term)));
    let now = Timestamp::now();
    a.create_run(adhoc("while-leader"), now).unwrap();
    // a is paused past its lease; b takes over.
    std::thread::sleep(Duration::from_millis(1000));
    let term_b = lb.try_acquire().unwrap().unwrap();
    assert_eq!(term_b, term + 1);
    b.set_fence(Some(lb.fence(term_b)));
    match a.create_run(adhoc("after-takeover"), now) {
        Err(StoreError::Fenced(m)) => assert!(m.contains("term 1"), "{m}"),
        other => panic!("the old leader's write was not fenced: {other:?}"),
    }
    let first = a.list(&RunFilter::default()).unwrap()[0].id.clone();
    let t = bosun_store::Transition::to(RunState::Aborted, now, "stale");
    assert!(matches!(
        a.transition(&first, t.clone()),
        Err(StoreError::Fenced(_))
    ));
    b.create_run(adhoc("new-leader"), now).unwrap();
    // A follower's writes carry no fence.
    a.set_fence(None);
    a.create_run(adhoc("as-follower"), now).unwrap();
    let jobs: Vec<String> = b
        .list(&RunFilter {
            oldest_first: true,
            ..RunFilter::default()
        })
        .unwrap()
        .into_iter()
        .map(|r| format!("{}:{}", r.job, r.state))
        .collect();
    assert_eq!(
        jobs,
        [
            "while-leader:triggered",
            "new-leader:triggered",
            "as-follower:triggered"
        ]
    );
}

/// A report policy that holds the transaction asking it until released:
/// a leader's write in flight.
struct Hold(
    std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    std::sync::mpsc::Sender<()>,
);

impl bosun_store::ReportPolicy for Hold {
    fn reports(&self, _: &bosun_store::Run, _: Option<RunState>) -> Vec<bosun_store::NewReport> {
        let _ = self.1.send(());
        if let Some(rx) = self.0.lock().unwrap().take() {
            let _ = rx.recv();
        }
        Vec::new()
    }
}

#[test]
fn a_takeover_waits_for_the_old_leaders_write_in_flight() {
    let url = Postgres::shared().database();
    let (a, b) = (std::sync::Arc::new(open(&url)), open(&url));
    let ttl = Duration::from_millis(500);
    let (la, lb) = (a.lease("leader", "a", ttl), b.lease("leader", "b", ttl));
    let term = la.try_acquire().unwrap().unwrap();
    a.set_fence(Some(la.fence(term)));
    let (release, held) = std::sync::mpsc::channel();
    let (entered, in_tx) = std::sync::mpsc::channel();
    a.set_report_policy(std::sync::Arc::new(Hold(
        std::sync::Mutex::new(Some(held)),
        entered,
    )))
    .unwrap();
    // a's write: fenced, then held inside its transaction.
    let writer = {
        let a = a.clone();
        std::thread::spawn(move || a.create_run(adhoc("in-flight"), Timestamp::now()))
    };
    in_tx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let taker = std::thread::spawn(move || {
        let started = Instant::now();
        let term = lb.try_acquire().unwrap();
        (term, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(!taker.is_finished(), "the takeover waits for the write");
    release.send(()).unwrap();
    writer.join().unwrap().expect("the write in flight commits");
    let (term_b, waited) = taker.join().unwrap();
    assert_eq!(term_b, Some(term + 1));
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    assert_eq!(b.list(&RunFilter::default()).unwrap().len(), 1);
}

#[test]
fn a_replica_started_again_takes_its_lease_back_at_once_with_a_new_term() {
    let url = Postgres::shared().database();
    let s = open(&url);
    let ttl = Duration::from_secs(15);
    let before = s.lease("leader", "r1#100.1", ttl);
    assert_eq!(before.try_acquire().unwrap(), Some(1));
    // Another replica waits for the lease to expire...
    assert_eq!(
        s.lease("leader", "r2#200.1", ttl).try_acquire().unwrap(),
        None
    );
    // ...but r1 started again takes it back at once, in a new term.
    let again = s.lease("leader", "r1#101.2", ttl);
    assert_eq!(again.try_acquire().unwrap(), Some(2));
    assert!(
        !before.renew(1).unwrap(),
        "the earlier start's term is over"
    );
    assert_eq!(
        s.lease("leader", "r2#200.1", ttl).try_acquire().unwrap(),
        None
    );
    // A holder without a name part is never taken over that way.
    let t = s.lease("other", "plain", ttl).try_acquire().unwrap();
    assert_eq!(t, Some(1));
    assert_eq!(
        s.lease("other", "plain#2", ttl).try_acquire().unwrap(),
        None
    );
}
