//! Several stores on one database, as replicas are, and the database going
//! away and coming back.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bosun_config::types::{JobType, Refs};
use bosun_kubetest::postgres::Postgres;
use bosun_postgres::{config, PgOptions, PgStore};
use bosun_store::repos::{Accepted, NewDelivery};
use bosun_store::{Created, NewRun, RunFilter, RunState, Store, StoreError};
use jiff::Timestamp;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn open(url: &str) -> PgStore {
    PgStore::open(config(url, None).unwrap(), PgOptions::default(), None).unwrap()
}

fn tick(periodic: &str, at: Timestamp) -> NewRun {
    NewRun {
        job: periodic.into(),
        job_type: JobType::Periodic,
        periodic: Some(periodic.into()),
        configured_cluster: "default".into(),
        state: RunState::Triggered,
        refs: None,
        extra_refs: vec![Refs::default()],
        labels: BTreeMap::new().into(),
        annotations: BTreeMap::new().into(),
        spec: serde_json::json!({"containers": [{"image": "x"}]}).into(),
        scheduled_at: Some(at),
        attempt: 0,
        description: "Job triggered.".into(),
    }
}

#[test]
fn replicas_firing_the_same_ticks_together_make_one_run_each() {
    let url = Postgres::shared().database();
    let stores: Vec<Arc<PgStore>> = (0..3).map(|_| Arc::new(open(&url))).collect();
    let ticks: Vec<Timestamp> = (0..40)
        .map(|i| t("2026-12-01T00:00:00Z") + jiff::SignedDuration::from_secs(i))
        .collect();
    let start = Arc::new(Barrier::new(6));
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let (store, ticks, start) = (stores[i % 3].clone(), ticks.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                ticks
                    .iter()
                    .map(|at| {
                        let c = store.create_run(tick("p", *at), *at).unwrap();
                        (*at, c.run().id.clone(), matches!(c, Created::New(_)))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let results: Vec<_> = threads
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let mut by_tick: BTreeMap<Timestamp, HashSet<String>> = BTreeMap::new();
    for (at, id, _) in &results {
        by_tick.entry(*at).or_default().insert(id.clone());
    }
    assert!(
        by_tick.values().all(|ids| ids.len() == 1),
        "every caller of a tick got the same run"
    );
    assert_eq!(results.iter().filter(|(_, _, new)| *new).count(), 40);
    let all = stores[0]
        .list(&RunFilter {
            limit: 1000,
            ..RunFilter::default()
        })
        .unwrap();
    assert_eq!(all.len(), 40, "one run per tick in the database");
    let builds: HashSet<&str> = all.iter().map(|r| r.build_id.as_str()).collect();
    assert_eq!(builds.len(), 40, "build ids are unique across replicas");
}

#[test]
fn webhook_seqs_of_several_replicas_become_visible_in_order() {
    let url = Postgres::shared().database();
    let stores: Vec<Arc<PgStore>> = (0..3).map(|_| Arc::new(open(&url))).collect();
    let per_thread = 60;
    let writers: Vec<_> = (0..6)
        .map(|i| {
            let store = stores[i % 3].clone();
            std::thread::spawn(move || {
                for n in 0..per_thread {
                    let d = NewDelivery {
                        forge: "github".into(),
                        event: "push".into(),
                        delivery_id: format!("{i}-{n}"),
                        repo: Some("o/r".into()),
                        body: b"{}".to_vec(),
                        received_at: Timestamp::now(),
                    };
                    assert!(matches!(
                        store.accept_delivery(d).unwrap(),
                        Accepted::New { .. }
                    ));
                }
            })
        })
        .collect();
    // A processor reading with a cursor, as the daemon's does: every seq it
    // passes must never be followed by a smaller one becoming visible.
    let reader = stores[0].clone();
    let mut seen: Vec<u64> = Vec::new();
    let mut cursor = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < 6 * per_thread && Instant::now() < deadline {
        for d in reader.pending_deliveries(cursor, 1000).unwrap() {
            seen.push(d.seq);
            cursor = d.seq;
        }
    }
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(
        seen.len(),
        6 * per_thread,
        "the cursor saw every delivery (none became visible behind it)"
    );
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
    // A redelivery to another replica is a duplicate.
    let again = stores[2]
        .accept_delivery(NewDelivery {
            forge: "github".into(),
            event: "push".into(),
            delivery_id: "0-0".into(),
            repo: Some("o/r".into()),
            body: b"{}".to_vec(),
            received_at: Timestamp::now(),
        })
        .unwrap();
    assert!(matches!(again, Accepted::Duplicate { .. }), "{again:?}");
}

#[test]
fn replicas_starting_together_apply_the_migrations_once() {
    let url = Postgres::shared().database();
    let start = Arc::new(Barrier::new(4));
    let opened: Vec<_> = (0..4)
        .map(|_| {
            let (url, start) = (url.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                PgStore::open(config(&url, None).unwrap(), PgOptions::default(), None).map(|_| ())
            })
        })
        .collect();
    for h in opened {
        h.join().unwrap().unwrap();
    }
    let db = url.rsplit('/').next().unwrap();
    let version = Postgres::shared()
        .admin(db, "SELECT version FROM bosun_schema")
        .unwrap();
    assert_eq!(version, bosun_postgres::SCHEMA_VERSION.to_string());
    let rows = Postgres::shared()
        .admin(db, "SELECT count(*) FROM bosun_schema")
        .unwrap();
    assert_eq!(rows, "1");
}

#[test]
fn the_password_comes_from_its_file_and_a_wrong_one_is_refused() {
    let pg = Postgres::shared();
    let with = pg.database();
    let db = with.rsplit('/').next().unwrap().to_string();
    let password = std::fs::read_to_string(pg.password_file()).unwrap();
    let store = PgStore::open(
        config(&pg.url(&db), Some(&format!("{password}\n"))).unwrap(),
        PgOptions::default(),
        None,
    );
    assert!(store.is_ok(), "the password file's (its newline dropped)");
    let wrong = PgStore::open(
        config(&pg.url(&db), Some("not-the-password")).unwrap(),
        PgOptions::default(),
        None,
    );
    match wrong {
        Err(StoreError::Unavailable(m)) => assert!(m.contains("password"), "{m}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a wrong password was taken"),
    }
}

#[test]
fn a_store_fails_while_postgres_is_down_and_recovers_when_it_is_back() {
    let pg = Postgres::dedicated();
    let url = pg.database();
    let store = PgStore::open(
        config(&url, None).unwrap(),
        PgOptions {
            connect_timeout: Duration::from_secs(2),
            ..PgOptions::default()
        },
        None,
    )
    .unwrap();
    let at = t("2026-12-01T00:00:00Z");
    let before = store.create_run(tick("p", at), at).unwrap();
    pg.stop_immediate();
    // The first call finds its connection broken, the next ones find no
    // server to connect to: each fails within the timeout, none hangs.
    for _ in 0..3 {
        let started = Instant::now();
        let err = store.get(&before.run().id).unwrap_err();
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "fails within its timeout, not forever"
        );
    }
    pg.start().unwrap();
    // The pool drops the broken connections as calls fail on them, and
    // connects anew.
    let deadline = Instant::now() + Duration::from_secs(30);
    let found = loop {
        match store.get(&before.run().id) {
            Ok(r) => break r,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("the store never recovered: {e}"),
        }
    };
    assert_eq!(found.as_ref().map(|r| &r.id), Some(&before.run().id));
    let next = t("2026-12-01T00:00:01Z");
    assert!(matches!(
        store.create_run(tick("p", next), next).unwrap(),
        Created::New(_)
    ));
}

#[derive(Default)]
struct Seen(std::sync::Mutex<Vec<(String, RunState, Option<RunState>)>>);

impl bosun_store::TransitionObserver for Seen {
    fn on_transition(&self, run: &bosun_store::Run, from: Option<RunState>) {
        self.0
            .lock()
            .unwrap()
            .push((run.job.clone(), run.state, from));
    }
}

#[test]
fn a_replica_hears_what_another_commits_and_not_its_own() {
    let url = Postgres::shared().database();
    let (a, b) = (open(&url), open(&url));
    let seen = Arc::new(Seen::default());
    let (free_tx, free_rx) = std::sync::mpsc::channel();
    let free_tx = std::sync::Mutex::new(free_tx);
    b.listen(bosun_postgres::Hooks {
        remote: seen.clone(),
        lease_free: Box::new(move || {
            let _ = free_tx.lock().unwrap().send(());
        }),
        aborts: Box::new(|| {}),
        resync: Box::new(|| {}),
    })
    .unwrap();
    // `listen` returned: b listens.
    let at = t("2026-12-01T00:00:00Z");
    let run = a.create_run(tick("from-a", at), at).unwrap().run().clone();
    a.transition(
        &run.id,
        bosun_store::Transition::to(RunState::Pending, at, "started"),
    )
    .unwrap();
    b.create_run(tick("from-b", at), at).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.0.lock().unwrap().len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    // The runs are read when a notification arrives: a creation's run may
    // have moved on already; what it left is told as sent.
    let told: Vec<(String, Option<RunState>)> = seen
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(job, _, from)| (job.clone(), *from))
        .collect();
    assert_eq!(
        told,
        vec![
            ("from-a".to_string(), None),
            ("from-a".to_string(), Some(RunState::Triggered)),
        ],
        "a's creation and its move, not b's own"
    );
    assert_eq!(seen.0.lock().unwrap()[1].1, RunState::Pending);
    let lease = a.lease("leader", "a", Duration::from_secs(15));
    let term = lease.try_acquire().unwrap().unwrap();
    lease.resign(term).unwrap();
    free_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a resignation is heard");
}

#[test]
fn a_replica_hears_every_run_of_a_batch_larger_than_a_notification() {
    let url = Postgres::shared().database();
    let (a, b) = (open(&url), open(&url));
    let seen = Arc::new(Seen::default());
    b.listen(bosun_postgres::Hooks {
        remote: seen.clone(),
        lease_free: Box::new(|| {}),
        aborts: Box::new(|| {}),
        resync: Box::new(|| {}),
    })
    .unwrap();
    // Queued at once: the creator commits them in a few batches, most of
    // them in one whose runs take several notifications (150 a page).
    let (done, all) = std::sync::mpsc::channel();
    let start = t("2026-12-01T00:00:00Z");
    let n = 1_000;
    for i in 0..n {
        let at = start + jiff::SignedDuration::from_secs(i);
        let done = done.clone();
        a.create_run_then(
            tick("big", at),
            at,
            Box::new(move |r| {
                let _ = done.send(r.map(|c| c.run().id.clone()));
            }),
        );
    }
    let made: HashSet<String> = (0..n).map(|_| all.recv().unwrap().unwrap()).collect();
    assert_eq!(made.len(), n as usize);
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.0.lock().unwrap().len() < made.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let heard = seen.0.lock().unwrap().len();
    assert_eq!(heard, made.len(), "every creation is heard once");
}

#[test]
fn connections_the_server_ended_are_replaced_without_failing_a_call() {
    let pg = Postgres::shared();
    let url = pg.database();
    let store = open(&url);
    let at = t("2026-12-01T00:00:00Z");
    let first = store.create_run(tick("p", at), at).unwrap();
    // Several pooled connections in use, then all ended by the server.
    crate::end_every_backend(pg, &url, &store);
    for i in 0..4 {
        assert_eq!(
            store.get(&first.run().id).unwrap().map(|r| r.id),
            Some(first.run().id.clone()),
            "read {i}"
        );
    }
    // The run creator's own connection was ended too: a creation on it
    // fails at once, before anything of it ran, and goes to another.
    let later = at + jiff::SignedDuration::from_secs(60);
    store
        .create_run(tick("p", later), later)
        .unwrap_or_else(|e| panic!("a creation after the ending: {e}"));
    for i in 1..5 {
        let at = at + jiff::SignedDuration::from_secs(i);
        store
            .put_periodic_state(&bosun_store::PeriodicState {
                periodic: "p".into(),
                schedule_hash: "h".into(),
                first_seen: at,
                last_tick: Some(at),
                paused: false,
                queued: None,
            })
            .unwrap_or_else(|e| panic!("write {i}: {e}"));
    }
}

/// Deliveries of one id sent at once to several replicas (a forge that
/// redelivers, a client that retries) are kept once: one is new, every
/// other a duplicate naming its seq, whether they meet in one batch of a
/// store's acceptor or in batches of different stores; the seqs handed out
/// are gapless.
#[test]
fn concurrent_redeliveries_are_kept_once_within_and_across_batches() {
    let url = Postgres::shared().database();
    let stores: Vec<Arc<PgStore>> = (0..2).map(|_| Arc::new(open(&url))).collect();
    let ids = 40;
    let senders: Vec<_> = (0..8)
        .map(|i| {
            let store = stores[i % 2].clone();
            std::thread::spawn(move || {
                (0..ids)
                    .map(|n| {
                        let d = NewDelivery {
                            forge: "github".into(),
                            event: "push".into(),
                            delivery_id: format!("id-{n}"),
                            repo: Some("o/r".into()),
                            body: b"{}".to_vec(),
                            received_at: Timestamp::now(),
                        };
                        (n, store.accept_delivery(d).unwrap())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut new: std::collections::BTreeMap<u32, u64> = Default::default();
    let mut duplicates: Vec<(u32, u64)> = Vec::new();
    for s in senders {
        for (n, answer) in s.join().unwrap() {
            match answer {
                Accepted::New { seq } => {
                    assert!(new.insert(n, seq).is_none(), "id-{n} kept twice");
                }
                Accepted::Duplicate { seq, .. } => duplicates.push((n, seq)),
            }
        }
    }
    assert_eq!(new.len(), ids as usize, "every id kept once");
    assert_eq!(duplicates.len(), 7 * ids as usize);
    for (n, seq) in duplicates {
        assert_eq!(seq, new[&n], "a duplicate of id-{n} names its seq");
    }
    let mut seqs: Vec<u64> = new.values().copied().collect();
    seqs.sort();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "gapless: {seqs:?}"
    );
    let stored = stores[0].pending_deliveries(0, 1000).unwrap();
    assert_eq!(stored.len(), ids as usize);
}

/// A delivery the database cannot keep (a NUL in its event's name) is
/// refused alone: the deliveries accepted beside it are kept.
#[test]
fn a_delivery_the_database_refuses_fails_alone() {
    let url = Postgres::shared().database();
    let store = Arc::new(open(&url));
    let start = Arc::new(Barrier::new(12));
    let senders: Vec<_> = (0..12)
        .map(|i| {
            let (store, start) = (store.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                store.accept_delivery(NewDelivery {
                    forge: "github".into(),
                    event: if i == 5 {
                        "pu\0sh".into()
                    } else {
                        "push".into()
                    },
                    delivery_id: format!("d-{i}"),
                    repo: None,
                    body: b"{}".to_vec(),
                    received_at: Timestamp::now(),
                })
            })
        })
        .collect();
    let answers: Vec<_> = senders.into_iter().map(|s| s.join().unwrap()).collect();
    for (i, a) in answers.iter().enumerate() {
        if i == 5 {
            assert!(
                matches!(a, Err(StoreError::Invalid(_))),
                "the NUL delivery is bad input: {a:?}"
            );
        } else {
            assert!(matches!(a, Ok(Accepted::New { .. })), "delivery {i}: {a:?}");
        }
    }
    assert_eq!(store.pending_deliveries(0, 100).unwrap().len(), 11);
}

/// Every connection of a full pool ended by the server (a restart, an
/// administrator's `pg_terminate_backend`): the next write steps over all
/// of them and commits on a new one, rather than failing after a few.
#[test]
fn a_write_after_a_full_pool_was_ended_steps_over_every_closed_connection() {
    let pg = Postgres::shared();
    let url = pg.database();
    let store = PgStore::open(
        config(&url, None).unwrap(),
        PgOptions {
            max_connections: 8,
            ..PgOptions::default()
        },
        None,
    )
    .unwrap();
    // Eight readers held at once by a lock (so the pool opens eight
    // connections), then let go: the lock's holder is ended.
    let db = url.rsplit('/').next().unwrap();
    let others =
        "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()";
    let until = |sql: &str, want: u32| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let n: u32 = pg.admin(db, sql).unwrap().parse().unwrap();
            if n >= want {
                break;
            }
            assert!(Instant::now() < deadline, "{sql}: {n}, want {want}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let held = "FROM pg_locks WHERE relation = 'runs'::regclass AND mode = 'AccessExclusiveLock' AND granted";
    std::thread::scope(|s| {
        s.spawn(|| {
            // Ended below, so its psql fails.
            let _ = pg.admin(
                db,
                "BEGIN; LOCK TABLE runs IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(60); COMMIT;",
            );
        });
        until(&format!("SELECT count(*) {held}"), 1);
        for _ in 0..8 {
            s.spawn(|| store.list(&RunFilter::default()).unwrap());
        }
        until(
            &format!("SELECT count(*) {others} AND wait_event_type = 'Lock'"),
            8,
        );
        pg.admin(
            db,
            &format!("SELECT count(pg_terminate_backend(pid)) {held}"),
        )
        .unwrap();
    });
    let open = pg.admin(db, &format!("SELECT count(*) {others}")).unwrap();
    let open: u32 = open.parse().unwrap();
    assert!(open >= 8, "{open} connections open");
    let ended = pg
        .admin(
            db,
            &format!("SELECT count(pg_terminate_backend(pid)) {others}"),
        )
        .unwrap();
    assert_eq!(ended, open.to_string());
    std::thread::sleep(Duration::from_millis(200));
    // A write in a transaction of its own (as a fire's commit is).
    let written = store.delete_completed_before(t("2026-03-01T00:00:00Z"));
    assert!(
        written.is_ok(),
        "the write after every connection ended: {written:?}"
    );
}
