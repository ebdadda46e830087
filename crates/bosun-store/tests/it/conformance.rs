//! The store conformance suite: every `Store` implementation must pass it, so a
//! PostgreSQL store can be added later without leaking differences.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bosun_config::types::{JobType, Refs};
use bosun_kubetest::postgres::Postgres;
use bosun_postgres::{PgOptions, PgStore};
use bosun_store::memory::MemoryStore;
use bosun_store::repos::RETIRED_JOBS_KEPT;
use bosun_store::sqlite::{SqliteOptions, SqliteStore};
use bosun_store::{
    Accepted, Created, Enqueued, Fire, JobDemand, NewDelivery, NewReport, NewRun, PeriodicState,
    PreparedFires, RepoError, RepoJob, RepoRecord, RepoSnapshot, ReportCounts, ReportFailure,
    ReportKind, ReportOutcome, ReportPolicy, RetiredJob, Retirement, Run, RunFilter, RunState,
    SeenHead, Store, StoreError, StoredDelivery, StoredReport, TickOutcome, Transition,
    TransitionObserver,
};
use jiff::Timestamp;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn new_periodic(job: &str, tick: Option<&str>, attempt: u32) -> NewRun {
    NewRun {
        job: job.into(),
        job_type: JobType::Periodic,
        periodic: Some(job.into()),
        configured_cluster: "default".into(),
        state: RunState::Triggered,
        refs: None,
        extra_refs: vec![Refs {
            org: "o".into(),
            repo: "r".into(),
            ..Refs::default()
        }],
        labels: BTreeMap::from([("prow.k8s.io/type".to_string(), "periodic".to_string())]).into(),
        annotations: BTreeMap::new().into(),
        spec: serde_json::json!({"containers": [{"image": "x", "command": ["true"]}]}).into(),
        scheduled_at: tick.map(t),
        attempt,
        description: "Job triggered.".into(),
    }
}

#[derive(Default)]
struct Recorder(Mutex<Vec<(String, Option<RunState>, RunState)>>);

impl TransitionObserver for Recorder {
    fn on_transition(&self, run: &Run, from: Option<RunState>) {
        self.0
            .lock()
            .unwrap()
            .push((run.id.clone(), from, run.state));
    }
}

/// A store, its observer, and the directory its database lives in.
type Observed<O> = (Arc<O>, Box<dyn Store>, Option<tempfile::TempDir>);

/// Every store (memory; SQLite with and without the fire log; PostgreSQL), each with an
/// observer of its own (and the directory its database lives in).
fn observed_stores<O: TransitionObserver + Default + 'static>() -> Vec<Observed<O>> {
    let mut v: Vec<Observed<O>> = Vec::new();
    let o = Arc::new(O::default());
    v.push((o.clone(), Box::new(MemoryStore::with_observer(o)), None));
    for fire_log_min in [SqliteOptions::default().fire_log_min, 1] {
        let dir = tempfile::tempdir().unwrap();
        let o = Arc::new(O::default());
        let s = SqliteStore::open_with(
            dir.path().join("bosun.db"),
            SqliteOptions {
                fire_log_min,
                ..SqliteOptions::default()
            },
            Some(o.clone()),
        )
        .unwrap();
        v.push((o, Box::new(s), Some(dir)));
    }
    let o = Arc::new(O::default());
    v.push((o.clone(), Box::new(postgres_store(Some(o))), None));
    v
}

/// A PostgreSQL store on a new database of the test binary's server.
fn postgres_store(observer: Option<Arc<dyn TransitionObserver>>) -> PgStore {
    let url = Postgres::shared().database();
    PgStore::open(
        bosun_postgres::config(&url, None).unwrap(),
        PgOptions::default(),
        observer,
    )
    .unwrap()
}

fn each_store(f: impl Fn(&dyn Store, &Recorder)) {
    for (rec, s, _dir) in observed_stores::<Recorder>() {
        f(s.as_ref(), &rec);
    }
}

#[test]
fn create_get_and_list() {
    each_store(|s, _| {
        let a = s
            .create_run(
                new_periodic("a", Some("2026-01-01T00:00:00Z"), 0),
                t("2026-01-01T00:00:00.25Z"),
            )
            .unwrap();
        let Created::New(a) = a else { panic!("new") };
        let a = Run::clone(&a);
        assert_eq!(a.id.len(), 36);
        assert_eq!(uuid_version(&a.id), '4');
        assert_eq!(a.state, RunState::Triggered);
        assert_eq!(s.get(&a.id).unwrap().as_ref(), Some(&a));
        let b = s
            .create_run(new_periodic("b", None, 0), t("2026-01-01T00:00:01Z"))
            .unwrap()
            .run()
            .clone();
        assert!(b.build_id.parse::<i64>().unwrap() > a.build_id.parse::<i64>().unwrap());
        let all = s.list(&RunFilter::default()).unwrap();
        assert_eq!(
            all.iter().map(|r| r.job.as_str()).collect::<Vec<_>>(),
            ["b", "a"],
            "newest first"
        );
        let only_a = s
            .list(&RunFilter {
                job: Some("a".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(only_a, vec![a.clone()]);
        let oldest = s
            .list(&RunFilter {
                oldest_first: true,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(
            oldest.iter().map(|r| r.job.as_str()).collect::<Vec<_>>(),
            ["a", "b"],
            "oldest first"
        );
        let page = s
            .list(&RunFilter {
                limit: 1,
                offset: 1,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(page, vec![a.clone()]);
        assert!(s.get("nope").unwrap().is_none());
        // The spec is stored once per content and found by hash.
        assert_eq!(a.spec_hash, b.spec_hash);
        assert_eq!(
            s.spec(&a.spec_hash).unwrap().unwrap()["containers"][0]["image"],
            "x"
        );
    });
}

/// Keyset pages (`after`, `before`) are the offset pages, in both orders and
/// with a filter; a cursor run that is gone is `NotFound`.
#[test]
fn keyset_pages_equal_offset_pages() {
    each_store(|s, _| {
        let mut ids = Vec::new();
        for i in 0..23u32 {
            let job = if i % 3 == 0 { "x" } else { "y" };
            let at = Timestamp::from_second(1_800_000_000 + i64::from(i)).unwrap();
            ids.push(
                s.create_run(new_periodic(job, None, 0), at)
                    .unwrap()
                    .run()
                    .id
                    .clone(),
            );
        }
        let names = |runs: Vec<Run>| runs.into_iter().map(|r| r.id).collect::<Vec<_>>();
        for oldest_first in [false, true] {
            for job in [None, Some("y".to_string())] {
                let base = RunFilter {
                    job: job.clone(),
                    oldest_first,
                    ..Default::default()
                };
                let all = names(
                    s.list(&RunFilter {
                        limit: 1000,
                        ..base.clone()
                    })
                    .unwrap(),
                );
                let by_offset: Vec<Vec<String>> = all.chunks(5).map(<[String]>::to_vec).collect();
                // Forwards from the first page, each page after the last row.
                let mut pages = vec![names(
                    s.list(&RunFilter {
                        limit: 5,
                        ..base.clone()
                    })
                    .unwrap(),
                )];
                while let Some(last) = pages.last().unwrap().last().cloned() {
                    let next = names(
                        s.list(&RunFilter {
                            limit: 5,
                            after: Some(last),
                            ..base.clone()
                        })
                        .unwrap(),
                    );
                    pages.push(next);
                }
                assert!(pages.pop().unwrap().is_empty());
                assert_eq!(
                    pages, by_offset,
                    "after, oldest_first {oldest_first}, job {job:?}"
                );
                // Backwards from the last page, each page before the first row.
                let mut back = vec![by_offset.last().unwrap().clone()];
                loop {
                    let first = back.last().unwrap()[0].clone();
                    let prev = names(
                        s.list(&RunFilter {
                            limit: 5,
                            before: Some(first),
                            ..base.clone()
                        })
                        .unwrap(),
                    );
                    if prev.is_empty() {
                        break;
                    }
                    back.push(prev);
                }
                back.reverse();
                // Walked back, every page before the last is full.
                let flat: Vec<String> = back.concat();
                assert_eq!(
                    flat, all,
                    "before, oldest_first {oldest_first}, job {job:?}"
                );
                assert!(
                    back[..back.len() - 1].iter().all(|p| p.len() == 5),
                    "{back:?}"
                );
                // Both cursors: the runs strictly between them.
                let between = names(
                    s.list(&RunFilter {
                        limit: 100,
                        after: Some(all[2].clone()),
                        before: Some(all[6].clone()),
                        ..base.clone()
                    })
                    .unwrap(),
                );
                assert_eq!(between, all[3..6].to_vec());
            }
        }
        let gone = s.list(&RunFilter {
            after: Some("no-such-run".into()),
            ..Default::default()
        });
        assert!(
            matches!(gone, Err(StoreError::NotFound(ref id)) if id == "no-such-run"),
            "{gone:?}"
        );
        let gone = s.list(&RunFilter {
            before: Some("no-such-run".into()),
            ..Default::default()
        });
        assert!(
            matches!(gone, Err(StoreError::NotFound(ref id)) if id == "no-such-run"),
            "{gone:?}"
        );
        // With both cursors, the one that is gone is named.
        let gone = s.list(&RunFilter {
            after: Some(ids[5].clone()),
            before: Some("no-such-run".into()),
            ..Default::default()
        });
        assert!(
            matches!(gone, Err(StoreError::NotFound(ref id)) if id == "no-such-run"),
            "{gone:?}"
        );
        // A cursor that exists but past which nothing is left: an empty page.
        let oldest = ids[0].clone();
        let empty = s.list(&RunFilter {
            after: Some(oldest),
            ..Default::default()
        });
        assert_eq!(empty.unwrap(), Vec::<Run>::new());
    });
}

fn uuid_version(id: &str) -> char {
    id.chars().nth(14).unwrap()
}

#[test]
fn a_tick_has_one_run() {
    each_store(|s, rec| {
        let first = s
            .create_run(
                new_periodic("p", Some("2026-01-01T10:00:00Z"), 0),
                t("2026-01-01T10:00:00Z"),
            )
            .unwrap();
        let again = s
            .create_run(
                new_periodic("p", Some("2026-01-01T10:00:00Z"), 0),
                t("2026-01-01T10:00:05Z"),
            )
            .unwrap();
        assert!(matches!(first, Created::New(_)));
        assert!(matches!(again, Created::Existing(_)));
        assert_eq!(first.run(), again.run());
        // Another attempt or another tick is another run.
        assert!(matches!(
            s.create_run(
                new_periodic("p", Some("2026-01-01T10:00:00Z"), 1),
                t("2026-01-01T10:05:00Z")
            )
            .unwrap(),
            Created::New(_)
        ));
        assert!(matches!(
            s.create_run(
                new_periodic("p", Some("2026-01-01T11:00:00Z"), 0),
                t("2026-01-01T11:00:00Z")
            )
            .unwrap(),
            Created::New(_)
        ));
        // Manual runs have no key.
        assert!(matches!(
            s.create_run(new_periodic("p", None, 0), t("2026-01-01T11:00:01Z"))
                .unwrap(),
            Created::New(_)
        ));
        assert!(matches!(
            s.create_run(new_periodic("p", None, 0), t("2026-01-01T11:00:02Z"))
                .unwrap(),
            Created::New(_)
        ));
        assert_eq!(
            s.list(&RunFilter {
                periodic: Some("p".into()),
                ..Default::default()
            })
            .unwrap()
            .len(),
            5
        );
        assert_eq!(
            rec.0.lock().unwrap().len(),
            5,
            "creations are observed, the duplicate is not"
        );
    });
}

#[test]
fn concurrent_creates_of_one_tick_make_one_run() {
    each_store(|s, _| {
        let ids: Vec<String> = std::thread::scope(|sc| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    sc.spawn(move || {
                        s.create_run(
                            new_periodic("c", Some("2026-01-01T00:00:00Z"), 0),
                            t("2026-01-01T00:00:00Z") + jiff::SignedDuration::from_millis(i),
                        )
                        .unwrap()
                        .run()
                        .id
                        .clone()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
        assert_eq!(s.list(&RunFilter::default()).unwrap().len(), 1);
    });
}

#[test]
fn the_state_machine_is_enforced_and_observed() {
    each_store(|s, rec| {
        let r = s
            .create_run(new_periodic("m", None, 0), t("2026-01-01T00:00:00Z"))
            .unwrap()
            .run()
            .clone();
        let err = s
            .transition(
                &r.id,
                Transition::to(RunState::Success, t("2026-01-01T00:00:01Z"), "x"),
            )
            .unwrap_err();
        assert_eq!(
            err,
            StoreError::InvalidTransition {
                id: r.id.clone(),
                from: RunState::Triggered,
                to: RunState::Success
            }
        );
        let mut start = Transition::to(
            RunState::Pending,
            t("2026-01-01T00:00:02Z"),
            "Job triggered.",
        );
        start.cluster = Some("build01".into());
        let p = s.transition(&r.id, start).unwrap();
        assert_eq!(
            (p.state, p.pending_at, p.cluster.as_deref()),
            (
                RunState::Pending,
                Some(t("2026-01-01T00:00:02Z")),
                Some("build01")
            )
        );
        // A revival keeps it pending and counts.
        let p = s
            .transition(
                &r.id,
                Transition::to(RunState::Pending, t("2026-01-01T00:01:00Z"), "revived"),
            )
            .unwrap();
        assert_eq!(
            (p.pod_revival_count, p.pending_at),
            (1, Some(t("2026-01-01T00:00:02Z")))
        );
        let done = s
            .transition(
                &r.id,
                Transition::to(RunState::Failure, t("2026-01-01T00:02:00Z"), "Job failed."),
            )
            .unwrap();
        assert_eq!(
            (done.state, done.completed_at),
            (RunState::Failure, Some(t("2026-01-01T00:02:00Z")))
        );
        // Nothing moves a completed run.
        for to in RunState::ALL {
            assert!(s
                .transition(&r.id, Transition::to(to, t("2026-01-01T00:03:00Z"), "x"))
                .is_err());
        }
        assert_eq!(s.get(&r.id).unwrap().unwrap(), done);
        assert_eq!(
            s.transition(
                "missing",
                Transition::to(RunState::Pending, t("2026-01-01T00:00:00Z"), "x")
            )
            .unwrap_err(),
            StoreError::NotFound("missing".into())
        );
        let seen: Vec<(Option<RunState>, RunState)> = rec
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, f, to)| (*f, *to))
            .collect();
        assert_eq!(
            seen,
            vec![
                (None, RunState::Triggered),
                (Some(RunState::Triggered), RunState::Pending),
                (Some(RunState::Pending), RunState::Pending),
                (Some(RunState::Pending), RunState::Failure)
            ]
        );
        let active = s
            .list(&RunFilter {
                active: true,
                ..Default::default()
            })
            .unwrap();
        assert!(active.is_empty());
    });
}

#[test]
fn schedule_state_and_outcomes() {
    each_store(|s, _| {
        assert!(s.periodic_state("p").unwrap().is_none());
        let st = PeriodicState {
            periodic: "o/r:p".into(),
            schedule_hash: "h1".into(),
            first_seen: t("2026-01-01T00:00:00Z"),
            last_tick: Some(t("2026-01-02T00:00:00Z")),
            paused: true,
            queued: None,
        };
        s.put_periodic_state(&st).unwrap();
        assert_eq!(s.periodic_state("o/r:p").unwrap(), Some(st.clone()));
        let st2 = PeriodicState {
            paused: false,
            queued: Some(t("2026-01-03T00:00:00Z")),
            ..st
        };
        s.put_periodic_state(&st2).unwrap();
        assert_eq!(s.periodic_state("o/r:p").unwrap(), Some(st2));
        let o = |first: &str, last: &str, count, outcome: &str| TickOutcome {
            periodic: "o/r:p".into(),
            first_tick: t(first),
            last_tick: t(last),
            count,
            outcome: outcome.into(),
            run_id: None,
            recorded_at: t("2026-01-03T00:00:00Z"),
        };
        let list = vec![
            o("2026-01-01T01:00:00Z", "2026-01-01T05:00:00Z", 5, "missed"),
            o("2026-01-01T06:00:00Z", "2026-01-01T06:00:00Z", 1, "run"),
        ];
        s.record_outcomes(&list).unwrap();
        assert_eq!(s.outcomes("o/r:p").unwrap(), list);
        assert!(s.outcomes("other").unwrap().is_empty());
        // The latest skips, newest first, and the ticks all skips hold;
        // runs' outcomes and other periodics' skips left out.
        let more = vec![
            o("2026-01-01T07:00:00Z", "2026-01-01T07:00:00Z", 1, "overlap"),
            o("2026-01-01T08:00:00Z", "2026-01-01T08:00:00Z", 1, "run"),
            o("2026-01-01T09:00:00Z", "2026-01-01T11:00:00Z", 3, "paused"),
            TickOutcome {
                periodic: "other".into(),
                ..o("2026-01-01T09:00:00Z", "2026-01-01T09:00:00Z", 1, "missed")
            },
        ];
        s.record_outcomes(&more).unwrap();
        let skipped = s.skipped_ticks("o/r:p", 2).unwrap();
        assert_eq!(skipped.recent, vec![more[2].clone(), more[0].clone()]);
        assert_eq!(skipped.total, 9);
        let all = s.skipped_ticks("o/r:p", 100).unwrap();
        assert_eq!(
            all.recent,
            vec![more[2].clone(), more[0].clone(), list[0].clone()]
        );
        assert_eq!(all.total, 9);
        let none = s.skipped_ticks("nobody", 5).unwrap();
        assert_eq!(none, bosun_store::SkippedTicks::default());
    });
}

#[test]
fn retention_keeps_the_latest_run_of_each_periodic_and_all_schedule_state() {
    each_store(|s, _| {
        let mut ids = Vec::new();
        for (i, tick) in [
            "2026-01-01T00:00:00Z",
            "2026-01-02T00:00:00Z",
            "2026-01-03T00:00:00Z",
        ]
        .iter()
        .enumerate()
        {
            let r = s
                .create_run(new_periodic("p", Some(tick), 0), t(tick))
                .unwrap()
                .run()
                .clone();
            s.transition(&r.id, Transition::to(RunState::Pending, t(tick), ""))
                .unwrap();
            s.transition(
                &r.id,
                Transition::to(
                    RunState::Success,
                    t(tick) + jiff::SignedDuration::from_secs(60 + i as i64),
                    "",
                ),
            )
            .unwrap();
            ids.push(r.id);
        }
        let manual = s
            .create_run(
                NewRun {
                    job_type: JobType::Postsubmit,
                    periodic: None,
                    ..new_periodic("q", None, 0)
                },
                t("2026-01-01T00:00:00Z"),
            )
            .unwrap()
            .run()
            .clone();
        s.transition(
            &manual.id,
            Transition::to(RunState::Error, t("2026-01-01T00:00:01Z"), "x"),
        )
        .unwrap();
        let active = s
            .create_run(new_periodic("r", None, 0), t("2025-01-01T00:00:00Z"))
            .unwrap()
            .run()
            .clone();
        s.put_periodic_state(&PeriodicState {
            periodic: "p".into(),
            schedule_hash: "h".into(),
            first_seen: t("2025-12-01T00:00:00Z"),
            last_tick: Some(t("2026-01-03T00:00:00Z")),
            paused: false,
            queued: None,
        })
        .unwrap();
        let mut deleted = s
            .delete_completed_before(t("2026-02-01T00:00:00Z"))
            .unwrap();
        deleted.sort();
        let mut want = vec![ids[0].clone(), ids[1].clone(), manual.id.clone()];
        want.sort();
        assert_eq!(deleted, want);
        assert!(
            s.get(&ids[2]).unwrap().is_some(),
            "the latest run of p stays"
        );
        assert!(s.get(&active.id).unwrap().is_some(), "active runs stay");
        assert!(
            s.periodic_state("p").unwrap().is_some(),
            "schedule state is never deleted"
        );
    });
}

/// Retention may delete the newest run, whose build id is the last one handed
/// out: a restarted store still hands out larger ones, even with an earlier
/// clock.
#[test]
fn sqlite_build_ids_still_increase_after_retention_deleted_the_newest_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bosun.db");
    let build = {
        let s = SqliteStore::open(&path).unwrap();
        let r = s
            .create_run(
                NewRun {
                    job_type: JobType::Postsubmit,
                    periodic: None,
                    ..new_periodic("q", None, 0)
                },
                t("2030-01-01T00:00:00Z"),
            )
            .unwrap()
            .run()
            .clone();
        s.transition(
            &r.id,
            Transition::to(RunState::Error, t("2030-01-01T00:00:01Z"), "x"),
        )
        .unwrap();
        assert_eq!(
            s.delete_completed_before(t("2031-01-01T00:00:00Z"))
                .unwrap(),
            vec![r.id.clone()]
        );
        assert!(s.list(&RunFilter::default()).unwrap().is_empty());
        r.build_id.parse::<i64>().unwrap()
    };
    let s = SqliteStore::open(&path).unwrap();
    let next = s
        .create_run(new_periodic("p", None, 0), t("2020-01-01T00:00:00Z"))
        .unwrap()
        .run()
        .build_id
        .parse::<i64>()
        .unwrap();
    assert!(next > build, "{next} after {build}");
}

#[test]
fn sqlite_survives_reopen_with_build_ids_still_increasing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bosun.db");
    let (id, build) = {
        let s = SqliteStore::open(&path).unwrap();
        let r = s
            .create_run(
                new_periodic("p", Some("2030-01-01T00:00:00Z"), 0),
                t("2030-01-01T00:00:00Z"),
            )
            .unwrap()
            .run()
            .clone();
        (r.id, r.build_id)
    };
    let s = SqliteStore::open(&path).unwrap();
    assert_eq!(s.get(&id).unwrap().unwrap().build_id, build);
    // An earlier clock after the restart still gives a larger build id.
    let r = s
        .create_run(new_periodic("p", None, 0), t("2020-01-01T00:00:00Z"))
        .unwrap()
        .run()
        .clone();
    assert!(r.build_id.parse::<i64>().unwrap() > build.parse::<i64>().unwrap());
    assert!(matches!(
        s.create_run(
            new_periodic("p", Some("2030-01-01T00:00:00Z"), 0),
            t("2030-01-01T00:00:09Z")
        )
        .unwrap(),
        Created::Existing(_)
    ));
}

/// A burst of fires committed through the fire log by a daemon that dies
/// before folding it: the next open folds it, and nothing is lost, doubled or
/// half there (runs, outcomes, schedule states, build ids, tick keys).
#[test]
fn sqlite_folds_a_fire_log_left_by_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bosun.db");
    let at = t("2026-01-01T03:00:01Z");
    let fire = |i: usize| bosun_store::Fire {
        runs: vec![new_periodic(
            &format!("p{i}"),
            Some("2026-01-01T03:00:00Z"),
            0,
        )],
        outcomes: vec![TickOutcome {
            periodic: format!("p{i}"),
            first_tick: t("2026-01-01T03:00:00Z"),
            last_tick: t("2026-01-01T03:00:00Z"),
            count: 1,
            outcome: "run".into(),
            run_id: None,
            recorded_at: at,
        }],
        state: PeriodicState {
            periodic: format!("p{i}"),
            schedule_hash: "h".into(),
            first_seen: t("2026-01-01T00:00:00Z"),
            last_tick: Some(t("2026-01-01T03:00:00Z")),
            paused: false,
            queued: None,
        },
    };
    let created: Vec<Run> = {
        let s = SqliteStore::open_with(
            &path,
            SqliteOptions {
                fire_log_min: 1,
                hold_fire_log: true,
                ..SqliteOptions::default()
            },
            None,
        )
        .unwrap();
        one_new_run_each(s.commit_fires((0..100).map(fire).collect(), at))
    };
    let s = SqliteStore::open(&path).unwrap();
    for (i, run) in created.iter().enumerate() {
        assert_eq!(s.get(&run.id).unwrap().as_ref(), Some(run));
        let outcomes = s.outcomes(&format!("p{i}")).unwrap();
        assert_eq!(outcomes.len(), 1);
        assert_eq!(outcomes[0].run_id.as_deref(), Some(run.id.as_str()));
        assert_eq!(
            s.periodic_state(&format!("p{i}"))
                .unwrap()
                .unwrap()
                .last_tick,
            Some(t("2026-01-01T03:00:00Z"))
        );
    }
    assert_eq!(
        s.list(&RunFilter {
            limit: 1000,
            ..RunFilter::default()
        })
        .unwrap()
        .len(),
        100
    );
    // The ticks are taken, and build ids go on after the folded ones.
    let again = s.commit_fires((0..100).map(fire).collect(), at);
    assert!(again
        .iter()
        .all(|r| matches!(r.as_ref().unwrap().as_slice(), [Created::Existing(_)])));
    let last = created
        .iter()
        .map(|r| r.build_id.parse::<i64>().unwrap())
        .max();
    let next = s
        .create_run(new_periodic("q", None, 0), at)
        .unwrap()
        .run()
        .build_id
        .parse::<i64>()
        .unwrap();
    assert!(Some(next) > last);
}

#[test]
fn a_fire_commits_runs_outcomes_and_state_together() {
    each_store(|s, rec| {
        let state = PeriodicState {
            periodic: "p".into(),
            schedule_hash: "h".into(),
            first_seen: t("2026-01-01T00:00:00Z"),
            last_tick: Some(t("2026-01-01T03:00:00Z")),
            paused: false,
            queued: None,
        };
        let outcome = |first: &str, last: &str, count: u64, what: &str| TickOutcome {
            periodic: "p".into(),
            first_tick: t(first),
            last_tick: t(last),
            count,
            outcome: what.into(),
            run_id: None,
            recorded_at: t("2026-01-01T03:00:01Z"),
        };
        let fire = bosun_store::Fire {
            runs: vec![new_periodic("p", Some("2026-01-01T03:00:00Z"), 0)],
            outcomes: vec![
                outcome("2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z", 2, "missed"),
                outcome("2026-01-01T03:00:00Z", "2026-01-01T03:00:00Z", 1, "run"),
            ],
            state: state.clone(),
        };
        let created = s
            .commit_fire(fire.clone(), t("2026-01-01T03:00:01Z"))
            .unwrap();
        let [Created::New(run)] = created.as_slice() else {
            panic!("{created:?}")
        };
        let outcomes = s.outcomes("p").unwrap();
        assert_eq!(outcomes.len(), 2);
        assert_eq!(outcomes[0].outcome, "missed");
        assert_eq!(outcomes[0].run_id, None);
        assert_eq!(
            outcomes[1].run_id.as_deref(),
            Some(run.id.as_str()),
            "the run outcome names its run"
        );
        assert_eq!(s.periodic_state("p").unwrap(), Some(state));
        assert!(
            rec.0
                .lock()
                .unwrap()
                .iter()
                .any(|(id, from, _)| id == &run.id && from.is_none()),
            "the creation is observed"
        );
        // The same tick again (a retried fire): the run is found, not duplicated.
        let again = s
            .commit_fire(
                bosun_store::Fire {
                    outcomes: vec![],
                    ..fire
                },
                t("2026-01-01T03:00:02Z"),
            )
            .unwrap();
        assert!(matches!(again.as_slice(), [Created::Existing(r)] if r.id == run.id));
    });
}

#[test]
fn batched_reads_and_fires_agree_with_single_ones() {
    each_store(|s, _| {
        let state = |p: &str| PeriodicState {
            periodic: p.into(),
            schedule_hash: "h".into(),
            first_seen: t("2026-01-01T00:00:00Z"),
            last_tick: Some(t("2026-01-01T01:00:00Z")),
            paused: p == "b",
            queued: None,
        };
        let fires: Vec<bosun_store::Fire> = ["a", "b"]
            .iter()
            .map(|p| bosun_store::Fire {
                runs: vec![new_periodic(p, Some("2026-01-01T01:00:00Z"), 0)],
                outcomes: vec![],
                state: state(p),
            })
            .collect();
        let results = s.commit_fires(fires, t("2026-01-01T01:00:01Z"));
        assert_eq!(results.len(), 2);
        assert!(results
            .iter()
            .all(|r| matches!(r.as_ref().unwrap().as_slice(), [Created::New(_)])));
        let a = match &results[0].as_ref().unwrap()[0] {
            Created::New(r) => r.clone(),
            other => panic!("{other:?}"),
        };
        s.transition(
            &a.id,
            Transition::to(RunState::Pending, t("2026-01-01T01:00:02Z"), ""),
        )
        .unwrap();
        s.transition(
            &a.id,
            Transition::to(RunState::Success, t("2026-01-01T01:00:03Z"), ""),
        )
        .unwrap();
        let ids: Vec<String> = ["a", "b", "never"].iter().map(|p| p.to_string()).collect();
        let states = s.periodic_states(&ids).unwrap();
        assert_eq!(states.len(), 2);
        assert_eq!(states["a"], state("a"));
        assert!(states["b"].paused);
        let runs = s.periodic_runs(&ids).unwrap();
        assert_eq!(runs.len(), 3);
        let ra = &runs["a"];
        assert!(!ra.active);
        let last = ra.last.as_ref().unwrap();
        assert_eq!(last.state, RunState::Success);
        assert_eq!(last.completed_at, Some(t("2026-01-01T01:00:03Z")));
        assert_eq!(last.scheduled_at, Some(t("2026-01-01T01:00:00Z")));
        assert!(runs["b"].active, "b's run has not ended");
        assert_eq!(runs["never"], bosun_store::PeriodicRuns::default());
    });
}

/// A central periodic, in-repo periodics of two repositories and a presubmit
/// share one job name: each periodic's runs are its own.
#[test]
fn periodics_sharing_a_name_keep_their_own_runs() {
    each_store(|s, _| {
        let at = |sec: i64| Timestamp::from_second(1_800_000_000 + sec).unwrap();
        let mut ids = std::collections::HashMap::new();
        for (k, identity) in ["nightly", "o/a:nightly", "o/b:nightly"].iter().enumerate() {
            for attempt in 0..2 {
                let run = s
                    .create_run(
                        NewRun {
                            periodic: Some(identity.to_string()),
                            ..new_periodic("nightly", None, attempt)
                        },
                        at(10 * k as i64 + attempt as i64),
                    )
                    .unwrap()
                    .run()
                    .clone();
                ids.insert((identity.to_string(), attempt), run.id);
            }
        }
        // The newest run of all is a presubmit's of the same name.
        s.create_run(
            NewRun {
                job_type: JobType::Presubmit,
                periodic: None,
                ..new_periodic("nightly", None, 0)
            },
            at(100),
        )
        .unwrap();
        // o/a's newest run ends; o/b's runs stay active.
        let a1 = &ids[&("o/a:nightly".to_string(), 1)];
        s.transition(a1, Transition::to(RunState::Error, at(101), "x"))
            .unwrap();
        let a0 = &ids[&("o/a:nightly".to_string(), 0)];
        s.transition(a0, Transition::to(RunState::Error, at(102), "x"))
            .unwrap();
        let names: Vec<String> = ["nightly", "o/a:nightly", "o/b:nightly", "o/c:nightly"]
            .iter()
            .map(|p| p.to_string())
            .collect();
        let runs = s.periodic_runs(&names).unwrap();
        assert_eq!(runs["nightly"].last.as_ref().unwrap().created_at, at(1));
        assert!(runs["nightly"].active);
        assert_eq!(
            runs["o/a:nightly"].last.as_ref().unwrap().created_at,
            at(11)
        );
        assert!(!runs["o/a:nightly"].active);
        assert_eq!(
            runs["o/b:nightly"].last.as_ref().unwrap().created_at,
            at(21)
        );
        assert!(runs["o/b:nightly"].active);
        assert_eq!(runs["o/c:nightly"], bosun_store::PeriodicRuns::default());
        for identity in ["nightly", "o/a:nightly", "o/b:nightly"] {
            let listed: Vec<String> = s
                .list(&RunFilter {
                    periodic: Some(identity.into()),
                    oldest_first: true,
                    ..RunFilter::default()
                })
                .unwrap()
                .into_iter()
                .map(|r| r.id)
                .collect();
            let want: Vec<String> = (0..2)
                .map(|a| ids[&(identity.to_string(), a)].clone())
                .collect();
            assert_eq!(listed, want, "{identity}");
        }
        let active_b = s
            .list(&RunFilter {
                periodic: Some("o/b:nightly".into()),
                active: true,
                ..RunFilter::default()
            })
            .unwrap();
        assert_eq!(active_b.len(), 2);
        assert_eq!(
            s.list(&RunFilter {
                job: Some("nightly".into()),
                limit: 100,
                ..RunFilter::default()
            })
            .unwrap()
            .len(),
            7
        );
    });
}

#[test]
fn runs_are_counted_by_prow_labels() {
    each_store(|s, _| {
        // A periodic with extra refs, two runs; a presubmit whose refs win over
        // its extra refs, one run a retest; a run with no refs at all.
        for _ in 0..2 {
            s.create_run(new_periodic("p", None, 0), t("2026-01-01T00:00:00Z"))
                .unwrap();
        }
        let mut pre = new_periodic("pre", None, 0);
        pre.job_type = JobType::Presubmit;
        pre.periodic = None;
        pre.refs = Some(Refs {
            org: "k".into(),
            repo: "test-infra".into(),
            base_ref: Some("main".into()),
            ..Refs::default()
        });
        s.create_run(pre.clone(), t("2026-01-01T00:00:00Z"))
            .unwrap();
        std::sync::Arc::make_mut(&mut pre.labels)
            .insert("prow.k8s.io/retest".into(), "true".into());
        let retest = match s.create_run(pre, t("2026-01-01T00:00:01Z")).unwrap() {
            Created::New(r) => r,
            other => panic!("{other:?}"),
        };
        s.transition(
            &retest.id,
            Transition::to(RunState::Aborted, t("2026-01-01T00:00:02Z"), ""),
        )
        .unwrap();
        let mut bare = new_periodic("bare", None, 0);
        bare.extra_refs.clear();
        s.create_run(bare, t("2026-01-01T00:00:00Z")).unwrap();

        let counts = s.count_runs().unwrap();
        let want = |job: &str,
                    ty: &str,
                    state: &str,
                    org: &str,
                    repo: &str,
                    base: &str,
                    retest: bool,
                    count: u64| {
            bosun_store::RunCount {
                job: job.into(),
                job_type: ty.into(),
                state: state.into(),
                org: org.into(),
                repo: repo.into(),
                base_ref: base.into(),
                cluster: "default".into(),
                retest,
                count,
            }
        };
        let mut expected = vec![
            want("p", "periodic", "triggered", "o", "r", "", false, 2),
            want(
                "pre",
                "presubmit",
                "triggered",
                "k",
                "test-infra",
                "main",
                false,
                1,
            ),
            want(
                "pre",
                "presubmit",
                "aborted",
                "k",
                "test-infra",
                "main",
                true,
                1,
            ),
            want("bare", "periodic", "triggered", "", "", "", false, 1),
        ];
        expected.sort();
        let mut got = counts.clone();
        got.sort();
        assert_eq!(got, expected);
        // The grouped count agrees with counting the runs one by one.
        let all = s
            .list(&RunFilter {
                limit: 1000,
                ..RunFilter::default()
            })
            .unwrap();
        let mut by_run: Vec<bosun_store::RunCount> = Vec::new();
        for r in &all {
            let c = bosun_store::RunCount::of(r);
            match by_run.iter_mut().find(|x| {
                bosun_store::RunCount {
                    count: 1,
                    ..(*x).clone()
                } == c
            }) {
                Some(x) => x.count += 1,
                None => by_run.push(c),
            }
        }
        by_run.sort();
        assert_eq!(by_run, expected);
    });
}

#[test]
fn a_refused_request_does_not_fail_the_others_of_its_batch() {
    each_store(|s, _| {
        let at = t("2026-01-01T00:00:00Z");
        let a = s
            .create_run(new_periodic("a", None, 0), at)
            .unwrap()
            .run()
            .clone();
        let b = s
            .create_run(new_periodic("b", None, 0), at)
            .unwrap()
            .run()
            .clone();
        // Queued together: a forbidden transition, an unknown run and a good
        // one. Only the good one is written, and it is.
        let results = s.transitions(vec![
            (a.id.clone(), Transition::to(RunState::Success, at, "x")),
            (
                "no-such-run".into(),
                Transition::to(RunState::Pending, at, "x"),
            ),
            (
                b.id.clone(),
                Transition::to(RunState::Pending, at, "started"),
            ),
        ]);
        assert!(matches!(
            results[0],
            Err(StoreError::InvalidTransition { .. })
        ));
        assert!(matches!(results[1], Err(StoreError::NotFound(_))));
        assert_eq!(results[2].as_ref().unwrap().state, RunState::Pending);
        assert_eq!(s.get(&a.id).unwrap().unwrap().state, RunState::Triggered);
        assert_eq!(s.get(&b.id).unwrap().unwrap().state, RunState::Pending);
    });
}

fn tick_fire(periodic: &str, tick: &str, at: Timestamp) -> bosun_store::Fire {
    bosun_store::Fire {
        runs: vec![new_periodic(periodic, Some(tick), 0)],
        outcomes: vec![TickOutcome {
            periodic: periodic.into(),
            first_tick: t(tick),
            last_tick: t(tick),
            count: 1,
            outcome: "run".into(),
            run_id: None,
            recorded_at: at,
        }],
        state: PeriodicState {
            periodic: periodic.into(),
            schedule_hash: "h".into(),
            first_seen: t("2026-01-01T00:00:00Z"),
            last_tick: Some(t(tick)),
            paused: false,
            queued: None,
        },
    }
}

/// Every periodic of `names` fires `tick`, prepared on its current version.
fn prepare_ticks(s: &dyn Store, names: &[String], tick: &str, at: Timestamp) -> PreparedFires {
    let versions = s.periodic_versions(names).expect("versions are tracked");
    s.prepare_fires(
        names
            .iter()
            .zip(versions)
            .map(|(p, v)| (tick_fire(p, tick, at), v))
            .collect(),
    )
    .unwrap()
}

/// The one new run of each fire.
fn one_new_run_each(results: Vec<Result<Vec<Created>, StoreError>>) -> Vec<Run> {
    results
        .into_iter()
        .map(|r| match r.unwrap().as_slice() {
            [Created::New(run)] => Run::clone(run),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// Fires prepared ahead of their instant commit as plain fires do (runs,
/// outcomes naming them, states, observers told), unless their periodic
/// changed after its version was taken: then that fire alone is refused as
/// stale and writes nothing.
#[test]
fn prepared_fires_commit_unless_their_periodic_changed() {
    each_store(|s, rec| {
        let at = t("2026-01-01T03:00:00.004Z");
        let tick = "2026-01-01T03:00:00Z";
        // q and r have runs that are active, and a schedule state.
        let mut active = std::collections::HashMap::new();
        for p in ["q", "r", "u"] {
            let run = s
                .create_run(new_periodic(p, None, 0), t("2026-01-01T02:00:00Z"))
                .unwrap()
                .run()
                .clone();
            active.insert(p, run.id);
        }
        let names: Vec<String> = ["p", "q", "r", "u", "v", "w"]
            .iter()
            .map(|p| p.to_string())
            .collect();
        let mut prepared = prepare_ticks(s, &names, tick, at);
        assert_eq!(prepared.len(), 6);
        // After the fires were decided: q's run ends, r's schedule state is
        // written (a pause), u gets another run; w is dropped by the caller.
        s.transition(
            &active["q"],
            Transition::to(RunState::Pending, t("2026-01-01T02:59:00Z"), ""),
        )
        .unwrap();
        s.put_periodic_state(&PeriodicState {
            paused: true,
            ..tick_fire("r", tick, at).state
        })
        .unwrap();
        s.create_run(new_periodic("u", None, 0), t("2026-01-01T02:59:30Z"))
            .unwrap();
        prepared.retain(|_, p| p != "w");
        let seen_before = rec.0.lock().unwrap().len();
        let results = s.commit_prepared(prepared, at);
        assert_eq!(results.len(), 5);
        let mut committed = Vec::new();
        for (p, r) in ["p", "q", "r", "u", "v"].iter().zip(results) {
            match (*p, r) {
                ("q" | "r" | "u", Err(StoreError::Stale(name))) => assert_eq!(name, *p),
                ("p" | "v", Ok(created)) => {
                    let [Created::New(run)] = created.as_slice() else {
                        panic!("{p}: {created:?}")
                    };
                    assert_eq!(run.scheduled_at, Some(t(tick)));
                    assert_eq!(run.created_at, at);
                    assert_eq!(run.periodic.as_deref(), Some(*p));
                    assert_eq!(s.get(&run.id).unwrap().as_ref(), Some(&**run));
                    let outcomes = s.outcomes(p).unwrap();
                    assert_eq!(outcomes.len(), 1, "{p}");
                    assert_eq!(outcomes[0].run_id.as_deref(), Some(run.id.as_str()));
                    assert_eq!(
                        s.periodic_state(p).unwrap().unwrap().last_tick,
                        Some(t(tick))
                    );
                    committed.push(run.id.clone());
                }
                (p, r) => panic!("{p}: {r:?}"),
            }
        }
        // Nothing of the stale fires was written.
        for p in ["q", "u", "w"] {
            assert!(s.outcomes(p).unwrap().is_empty(), "{p}");
            assert!(s.periodic_state(p).unwrap().is_none(), "{p}");
        }
        assert!(s.periodic_state("r").unwrap().unwrap().paused);
        assert_eq!(
            s.list(&RunFilter {
                periodic: Some("q".into()),
                ..RunFilter::default()
            })
            .unwrap()
            .len(),
            1
        );
        let seen: Vec<String> = rec.0.lock().unwrap()[seen_before..]
            .iter()
            .filter(|(_, from, _)| from.is_none())
            .map(|(id, ..)| id.clone())
            .collect();
        assert_eq!(seen, committed, "the observer saw the committed runs");
        // Decided again on fresh versions, the stale ones commit.
        let again: Vec<String> = vec!["q".into(), "u".into()];
        let prepared = prepare_ticks(s, &again, tick, at);
        assert_eq!(one_new_run_each(s.commit_prepared(prepared, at)).len(), 2);
    });
}

/// A prepared fire of a tick that has a run, and a periodic prepared twice in
/// one call: never a second run. Fires of one call do not make each other
/// stale, however many there are.
#[test]
fn prepared_fires_never_make_a_second_run_of_a_tick() {
    each_store(|s, _| {
        let at = t("2026-01-01T03:00:00Z");
        let tick = "2026-01-01T03:00:00Z";
        s.commit_fire(tick_fire("a", tick, at), at).unwrap();
        let names: Vec<String> = (0..2000).map(|i| format!("n{i}")).collect();
        let mut ids = vec!["a".to_string(), "b".to_string(), "b".to_string()];
        ids.extend(names.iter().cloned());
        let prepared = prepare_ticks(s, &ids, tick, at);
        let results = s.commit_prepared(prepared, at);
        assert!(matches!(&results[0], Err(StoreError::Stale(p)) if p == "a"));
        assert!(results[1].is_ok());
        assert!(matches!(&results[2], Err(StoreError::Stale(p)) if p == "b"));
        assert!(results[3..].iter().all(|r| r.is_ok()), "one call's fires");
        for p in ["a", "b"] {
            assert_eq!(
                s.list(&RunFilter {
                    periodic: Some(p.into()),
                    ..RunFilter::default()
                })
                .unwrap()
                .len(),
                1,
                "{p}"
            );
        }
        assert_eq!(s.outcomes("b").unwrap().len(), 1);
    });
}

/// Prepared fires committed by a daemon that dies before the fold are folded
/// by the next open, and their ticks stay taken.
#[test]
fn sqlite_folds_prepared_fires_left_by_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bosun.db");
    let at = t("2026-01-01T03:00:00.002Z");
    let tick = "2026-01-01T03:00:00Z";
    let names: Vec<String> = (0..50).map(|i| format!("p{i}")).collect();
    let created: Vec<Run> = {
        let s = SqliteStore::open_with(
            &path,
            SqliteOptions {
                hold_fire_log: true,
                ..SqliteOptions::default()
            },
            None,
        )
        .unwrap();
        let prepared = prepare_ticks(&s, &names, tick, at);
        one_new_run_each(s.commit_prepared(prepared, at))
    };
    let s = SqliteStore::open(&path).unwrap();
    for (p, run) in names.iter().zip(&created) {
        assert_eq!(s.get(&run.id).unwrap().as_ref(), Some(run));
        assert_eq!(
            s.outcomes(p).unwrap()[0].run_id.as_deref(),
            Some(run.id.as_str())
        );
        assert_eq!(
            s.periodic_state(p).unwrap().unwrap().last_tick,
            Some(t(tick))
        );
        let again = s.commit_fire(tick_fire(p, tick, at), at).unwrap();
        assert!(matches!(again.as_slice(), [Created::Existing(r)] if **r == *run));
    }
    let ids: Vec<i64> = created
        .iter()
        .map(|r| r.build_id.parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "build ids increase");
}

/// Moves run `id` through `steps` (state, time), each of which must succeed.
fn walk(s: &dyn Store, id: &str, steps: &[(RunState, &str)]) {
    let batch = steps
        .iter()
        .map(|(to, at)| (id.to_string(), Transition::to(*to, t(at), "x")))
        .collect();
    for r in s.transitions(batch) {
        r.unwrap();
    }
}

/// Runs of several jobs, started (or not) around the window's start and
/// ended (or not): what `job_demand` counts from `since` on, at `now`.
fn demand_fixture(s: &dyn Store) {
    let run = |job: &str, created: &str, steps: &[(RunState, &str)]| {
        let r = s
            .create_run(new_periodic(job, None, 0), t(created))
            .unwrap()
            .run()
            .clone();
        walk(s, &r.id, steps);
    };
    use RunState::*;
    // a: one run of 30 minutes, one still running since 02:00 (1 h at now).
    run(
        "a",
        "2026-01-10T00:59:00Z",
        &[
            (Pending, "2026-01-10T01:00:00Z"),
            (Success, "2026-01-10T01:30:00Z"),
        ],
    );
    run(
        "a",
        "2026-01-10T01:59:00Z",
        &[(Pending, "2026-01-10T02:00:00Z")],
    );
    // b: started before the window (not counted, though it ended inside);
    // started exactly at its start and failed at once (counted, 0 s); a
    // revival keeps the first start (90.25 s).
    run(
        "b",
        "2026-01-09T23:00:00Z",
        &[
            (Pending, "2026-01-09T23:59:59.999999Z"),
            (Failure, "2026-01-10T00:30:00Z"),
        ],
    );
    run(
        "b",
        "2026-01-09T23:59:00Z",
        &[
            (Pending, "2026-01-10T00:00:00Z"),
            (Error, "2026-01-10T00:00:00Z"),
        ],
    );
    run(
        "b",
        "2026-01-10T00:10:00Z",
        &[
            (Pending, "2026-01-10T00:10:00Z"),
            (Pending, "2026-01-10T00:11:00Z"),
            (Aborted, "2026-01-10T00:11:30.25Z"),
        ],
    );
    // c: never started (waiting, or aborted while waiting): absent.
    run("c", "2026-01-10T01:00:00Z", &[]);
    run(
        "c",
        "2026-01-10T01:00:00Z",
        &[(Aborted, "2026-01-10T01:05:00Z")],
    );
    // d: started after `now` (a caller's `now` behind the store): 0 s.
    run(
        "d",
        "2026-01-10T03:00:00Z",
        &[(Pending, "2026-01-10T03:30:00Z")],
    );
}

fn demand(job: &str, runs: u64, run_seconds: f64) -> JobDemand {
    JobDemand {
        job: job.into(),
        runs,
        run_seconds,
    }
}

#[test]
fn job_demand_counts_runs_started_in_the_window_and_their_run_time() {
    each_store(|s, _| {
        assert_eq!(
            s.job_demand(t("2026-01-01T00:00:00Z"), t("2026-01-10T00:00:00Z"))
                .unwrap(),
            vec![],
            "no runs"
        );
        demand_fixture(s);
        let since = t("2026-01-10T00:00:00Z");
        let now = t("2026-01-10T03:00:00Z");
        assert_eq!(
            s.job_demand(since, now).unwrap(),
            vec![
                demand("a", 2, 1800.0 + 3600.0),
                demand("b", 2, 90.25),
                demand("d", 1, 0.0),
            ]
        );
        // Later: the active run has run longer; a later window drops b.
        assert_eq!(
            s.job_demand(t("2026-01-10T00:59:00Z"), t("2026-01-10T04:00:00Z"))
                .unwrap(),
            vec![demand("a", 2, 1800.0 + 7200.0), demand("d", 1, 1800.0)]
        );
        // An earlier window takes b's first run, started a microsecond before.
        let all = s.job_demand(t("2026-01-09T23:59:59.999999Z"), now).unwrap();
        assert_eq!(all[1], demand("b", 3, 1890.250001));
        // Retention removes runs, and their demand with them (b's latest
        // run stays, as the latest run of its periodic).
        s.delete_completed_before(t("2026-01-10T01:00:00Z"))
            .unwrap();
        assert_eq!(
            s.job_demand(t("2026-01-09T23:00:00Z"), now).unwrap(),
            vec![
                demand("a", 2, 1800.0 + 3600.0),
                demand("b", 1, 90.25),
                demand("d", 1, 0.0),
            ]
        );
    });
}

/// A store that keeps only the required methods (the default `job_demand`
/// pages through `list`).
struct Required(MemoryStore);

impl Store for Required {
    fn create_run(&self, new: NewRun, at: Timestamp) -> Result<Created, StoreError> {
        self.0.create_run(new, at)
    }
    fn transition(&self, id: &str, tr: Transition) -> Result<Run, StoreError> {
        self.0.transition(id, tr)
    }
    fn get(&self, id: &str) -> Result<Option<Run>, StoreError> {
        self.0.get(id)
    }
    fn list(&self, filter: &RunFilter) -> Result<Vec<Run>, StoreError> {
        self.0.list(filter)
    }
    fn spec(&self, hash: &str) -> Result<Option<serde_json::Value>, StoreError> {
        self.0.spec(hash)
    }
    fn periodic_state(&self, periodic: &str) -> Result<Option<PeriodicState>, StoreError> {
        self.0.periodic_state(periodic)
    }
    fn put_periodic_state(&self, state: &PeriodicState) -> Result<(), StoreError> {
        self.0.put_periodic_state(state)
    }
    fn record_outcomes(&self, outcomes: &[TickOutcome]) -> Result<(), StoreError> {
        self.0.record_outcomes(outcomes)
    }
    fn outcomes(&self, periodic: &str) -> Result<Vec<TickOutcome>, StoreError> {
        self.0.outcomes(periodic)
    }
    fn commit_fire(&self, fire: Fire, at: Timestamp) -> Result<Vec<Created>, StoreError> {
        self.0.commit_fire(fire, at)
    }
    fn delete_completed_before(&self, cutoff: Timestamp) -> Result<Vec<String>, StoreError> {
        self.0.delete_completed_before(cutoff)
    }
}

#[test]
fn the_default_job_demand_agrees_with_the_stores() {
    let s = Required(MemoryStore::new());
    demand_fixture(&s);
    // More than one page of runs.
    for i in 0..1500 {
        let r = s
            .create_run(new_periodic("e", None, 0), t("2026-01-10T00:00:00Z"))
            .unwrap()
            .run()
            .clone();
        let start = 1_768_003_200 + i; // 2026-01-10T00:00:00Z + i s
        let at = |secs: i64| Timestamp::from_second(secs).unwrap().to_string();
        walk(
            &s,
            &r.id,
            &[
                (RunState::Pending, at(start).as_str()),
                (RunState::Success, at(start + 2).as_str()),
            ],
        );
    }
    let (since, now) = (t("2026-01-10T00:00:00Z"), t("2026-01-10T03:00:00Z"));
    let default = s.job_demand(since, now).unwrap();
    assert_eq!(default, s.0.job_demand(since, now).unwrap());
    assert_eq!(default[3], demand("e", 1500, 3000.0));
    each_store(|store, _| {
        demand_fixture(store);
        assert_eq!(
            store.job_demand(since, now).unwrap(),
            default
                .iter()
                .filter(|d| d.job != "e")
                .cloned()
                .collect::<Vec<_>>()
        );
    });
}

/// What a store tells its observer through `on_change` and `on_deleted`.
#[derive(Default)]
struct Changes {
    /// Per change: the run, its state and cluster before (none: created),
    /// its state and cluster after.
    #[allow(clippy::type_complexity)]
    seen: Mutex<
        Vec<(
            String,
            Option<(RunState, Option<String>)>,
            RunState,
            Option<String>,
        )>,
    >,
    deleted: Mutex<Vec<bosun_store::RunCount>>,
}

impl TransitionObserver for Changes {
    fn on_transition(&self, run: &Run, _: Option<RunState>) {
        panic!("stores call on_change ({})", run.id);
    }

    fn on_change(&self, run: &Run, _: Option<&Arc<Run>>, before: Option<bosun_store::Before<'_>>) {
        self.seen.lock().unwrap().push((
            run.id.clone(),
            before.map(|b| (b.state, b.cluster.map(String::from))),
            run.state,
            run.cluster.clone(),
        ));
    }

    fn on_deleted(&self, runs: &[bosun_store::RunCount]) {
        assert!(!runs.is_empty(), "told of no deletion");
        self.deleted.lock().unwrap().extend_from_slice(runs);
    }
}

/// A store, what it told its observer, and its directory.
type ObservedStore = Observed<Changes>;

/// `count_runs`' counts by labels.
fn by_labels(counts: Vec<bosun_store::RunCount>) -> BTreeMap<bosun_store::RunCount, u64> {
    let mut out = BTreeMap::new();
    for c in counts {
        *out.entry(bosun_store::RunCount {
            count: 0,
            ..c.clone()
        })
        .or_default() += c.count;
    }
    out
}

/// Every store tells its observer, with each committed transition, the state
/// and cluster the run had before it; with each creation (one by one or by a
/// fire) none; and with a retention pass the labels of the runs it deleted,
/// as `count_runs` counts them.
#[test]
fn the_observer_is_told_what_each_change_left_and_what_retention_deleted() {
    let stores: Vec<ObservedStore> = observed_stores();
    for (changes, s, _dir) in &stores {
        let s = s.as_ref();
        let at = t("2026-01-01T00:00:00Z");
        let a = s
            .create_run(new_periodic("a", None, 0), at)
            .unwrap()
            .run()
            .clone();
        let mut sched = NewRun {
            job_type: JobType::Presubmit,
            periodic: None,
            refs: Some(Refs {
                org: "k".into(),
                repo: "r".into(),
                base_ref: Some("main".into()),
                ..Refs::default()
            }),
            state: RunState::Scheduling,
            ..new_periodic("b", None, 0)
        };
        std::sync::Arc::make_mut(&mut sched.labels)
            .insert("prow.k8s.io/retest".into(), "true".into());
        let b = s.create_run(sched, at).unwrap().run().clone();
        let fired = s
            .commit_fire(
                Fire {
                    runs: vec![new_periodic("c", Some("2026-01-01T00:00:00Z"), 0)],
                    outcomes: vec![],
                    state: PeriodicState {
                        periodic: "c".into(),
                        schedule_hash: "h".into(),
                        first_seen: at,
                        last_tick: Some(at),
                        paused: false,
                        queued: None,
                    },
                },
                at,
            )
            .unwrap();
        let c = fired[0].run().clone();
        let to = |to: RunState, at: &str, cluster: Option<&str>| Transition {
            cluster: cluster.map(String::from),
            ..Transition::to(to, t(at), "x")
        };
        use RunState::*;
        s.transition(
            &b.id,
            to(Triggered, "2026-01-01T00:00:01Z", Some("build01")),
        )
        .unwrap();
        s.transition(&b.id, to(Pending, "2026-01-01T00:00:02Z", Some("build02")))
            .unwrap();
        s.transition(&b.id, to(Pending, "2026-01-01T00:00:03Z", None))
            .unwrap();
        s.transition(&a.id, to(Pending, "2026-01-01T00:00:03Z", None))
            .unwrap();
        // A refused transition tells nothing.
        assert!(s
            .transition(&a.id, to(Triggered, "2026-01-01T00:00:04Z", Some("x")))
            .is_err());
        for r in s.transitions(vec![
            (a.id.clone(), to(Success, "2026-01-01T00:00:05Z", None)),
            (b.id.clone(), to(Failure, "2026-01-01T00:00:05Z", None)),
            (
                c.id.clone(),
                to(Aborted, "2026-01-03T00:00:00Z", Some("build03")),
            ),
        ]) {
            r.unwrap();
        }
        let b_cluster = |c: &str| Some(c.to_string());
        let want = vec![
            (a.id.clone(), None, Triggered, None),
            (b.id.clone(), None, Scheduling, None),
            (c.id.clone(), None, Triggered, None),
            (
                b.id.clone(),
                Some((Scheduling, None)),
                Triggered,
                b_cluster("build01"),
            ),
            (
                b.id.clone(),
                Some((Triggered, b_cluster("build01"))),
                Pending,
                b_cluster("build02"),
            ),
            (
                b.id.clone(),
                Some((Pending, b_cluster("build02"))),
                Pending,
                b_cluster("build02"),
            ),
            (a.id.clone(), Some((Triggered, None)), Pending, None),
            (a.id.clone(), Some((Pending, None)), Success, None),
            (
                b.id.clone(),
                Some((Pending, b_cluster("build02"))),
                Failure,
                b_cluster("build02"),
            ),
            (
                c.id.clone(),
                Some((Triggered, None)),
                Aborted,
                b_cluster("build03"),
            ),
        ];
        assert_eq!(*changes.seen.lock().unwrap(), want);

        // Retention deletes a and b: a's periodic has a later run (a2), and
        // c (the latest of its periodic) completed after the cutoff anyway.
        let a2 = s
            .create_run(new_periodic("a", None, 0), t("2026-01-01T00:00:06Z"))
            .unwrap()
            .run()
            .clone();
        let before = by_labels(s.count_runs().unwrap());
        let mut ids = s
            .delete_completed_before(t("2026-01-02T00:00:00Z"))
            .unwrap();
        ids.sort();
        let mut want_ids = vec![a.id.clone(), b.id.clone()];
        want_ids.sort();
        assert_eq!(ids, want_ids);
        let after = by_labels(s.count_runs().unwrap());
        let mut gone = before.clone();
        for (k, n) in &after {
            *gone.get_mut(k).unwrap() -= n;
        }
        gone.retain(|_, n| *n > 0);
        let deleted = by_labels(changes.deleted.lock().unwrap().clone());
        assert_eq!(deleted, gone);
        assert_eq!(deleted.values().sum::<u64>(), 2);
        // b's labels: where it ran, a retest of a presubmit.
        assert!(deleted.keys().any(|k| k.job == "b"
            && k.cluster == "build02"
            && k.retest
            && k.state == "failure"
            && k.org == "k"));
        // Nothing to delete: nothing told.
        assert!(s
            .delete_completed_before(t("2026-01-02T00:00:00Z"))
            .unwrap()
            .is_empty());
        assert_eq!(changes.deleted.lock().unwrap().len(), deleted.len());
        assert!(s.get(&a2.id).unwrap().is_some());
    }
}

// Followed repositories and webhook deliveries.

/// A record with every field set.
fn full_repo(repo: &str) -> RepoRecord {
    RepoRecord {
        repo: repo.into(),
        clone_uri: format!("https://git.example/{repo}.git"),
        branch: Some("main".into()),
        followed_because: "in_repo_config.enabled[acme/widgets]".into(),
        followed_since: t("2026-01-01T00:00:00Z"),
        snapshot: Some(RepoSnapshot {
            commit: "c0ffee".into(),
            loaded_at: t("2026-01-01T00:00:01.123456789Z"),
            files: BTreeMap::from([
                (".prow.yaml".into(), "presubmits: []\n".into()),
                (".prow/a.yaml".into(), "periodics:\n- name: a\n".into()),
            ]),
            dirs: vec!["".into(), ".prow".into()],
            jobs: vec![RepoJob {
                kind: "periodic".into(),
                name: "a".into(),
            }],
        }),
        head: Some(SeenHead {
            commit: "c0ffee".into(),
            at: t("2026-01-01T00:00:02Z"),
            by: "push".into(),
        }),
        error: Some(RepoError {
            commit: Some("bad".into()),
            at: t("2026-01-01T00:00:03Z"),
            message: "cannot load .prow.yaml".into(),
            diagnostics: vec!["line 1: unknown field".into()],
        }),
        last_webhook_at: Some(t("2026-01-01T00:00:04Z")),
        missing_since: Some(t("2026-01-01T00:00:05Z")),
        retired: Some(Retirement {
            at: t("2026-01-01T00:00:06Z"),
            reason: "archived".into(),
            commit: None,
        }),
        retired_jobs: vec![RetiredJob {
            kind: "presubmit".into(),
            name: "old".into(),
            at: t("2026-01-01T00:00:07Z"),
            commit: "c0ffee".into(),
            reason: "dropped by c0ffee".into(),
        }],
    }
}

/// A record with only what is required.
fn bare_repo(repo: &str) -> RepoRecord {
    RepoRecord {
        repo: repo.into(),
        clone_uri: format!("https://git.example/{repo}.git"),
        branch: None,
        followed_because: "in_repo[0] in config.yaml".into(),
        followed_since: t("2026-01-01T00:00:00Z"),
        snapshot: None,
        head: None,
        error: None,
        last_webhook_at: None,
        missing_since: None,
        retired: None,
        retired_jobs: vec![],
    }
}

#[test]
fn repos_are_put_replaced_listed_and_deleted() {
    each_store(|s, _| {
        assert_eq!(s.repos().unwrap(), vec![]);
        let (a, b) = (full_repo("acme/widgets"), bare_repo("acme/gadgets"));
        s.put_repo(&a).unwrap();
        s.put_repo(&b).unwrap();
        assert_eq!(s.repos().unwrap(), vec![b.clone(), a.clone()], "by repo");
        // Replaced whole: what the new record leaves out is gone.
        let a2 = RepoRecord {
            snapshot: None,
            ..bare_repo("acme/widgets")
        };
        s.put_repo(&a2).unwrap();
        assert_eq!(s.repos().unwrap(), vec![b.clone(), a2.clone()]);
        s.put_repo(&a).unwrap();
        assert_eq!(s.repos().unwrap(), vec![b.clone(), a.clone()]);
        assert!(s.delete_repo("acme/gadgets").unwrap());
        assert!(!s.delete_repo("acme/gadgets").unwrap());
        assert!(!s.delete_repo("acme/none").unwrap());
        assert_eq!(s.repos().unwrap(), vec![a.clone()]);
    });
}

#[test]
fn a_repos_retired_jobs_keep_the_newest_thousand() {
    each_store(|s, _| {
        let mut r = bare_repo("acme/widgets");
        let job = |i: usize| RetiredJob {
            kind: "periodic".into(),
            name: format!("j{i}"),
            at: t("2026-01-01T00:00:00Z"),
            commit: "c".into(),
            reason: "dropped".into(),
        };
        r.retired_jobs = (0..RETIRED_JOBS_KEPT + 5).map(job).collect();
        s.put_repo(&r).unwrap();
        let kept = &s.repos().unwrap()[0].retired_jobs;
        assert_eq!(kept.len(), RETIRED_JOBS_KEPT);
        assert_eq!(kept[0].name, "j5", "the oldest go");
        assert_eq!(kept[RETIRED_JOBS_KEPT - 1], job(RETIRED_JOBS_KEPT + 4));
        // The record's own helper keeps the same bound.
        let mut capped = bare_repo("acme/widgets");
        for i in 0..RETIRED_JOBS_KEPT + 5 {
            capped.retire_job(job(i));
        }
        assert_eq!(&capped.retired_jobs, kept);
    });
}

fn delivery(forge: &str, id: &str, at: &str) -> NewDelivery {
    NewDelivery {
        forge: forge.into(),
        event: "push".into(),
        delivery_id: id.into(),
        repo: Some("acme/widgets".into()),
        body: format!("{{\"id\":\"{id}\"}}").into_bytes(),
        received_at: t(at),
    }
}

/// The kept form of `d` under `seq`.
fn stored(d: &NewDelivery, seq: u64) -> StoredDelivery {
    StoredDelivery {
        seq,
        forge: d.forge.clone(),
        event: d.event.clone(),
        delivery_id: d.delivery_id.clone(),
        repo: d.repo.clone(),
        body: d.body.clone(),
        received_at: d.received_at,
    }
}

fn new_seq(a: Accepted) -> u64 {
    match a {
        Accepted::New { seq } => seq,
        other => panic!("not new: {other:?}"),
    }
}

#[test]
fn a_delivery_id_is_accepted_once_per_forge() {
    each_store(|s, _| {
        let at = "2026-01-01T00:00:00Z";
        let first = new_seq(s.accept_delivery(delivery("github", "d1", at)).unwrap());
        let second = new_seq(s.accept_delivery(delivery("github", "d2", at)).unwrap());
        assert!(second > first);
        // Another forge's id of the same text is another delivery.
        let gitea = new_seq(s.accept_delivery(delivery("gitea", "d1", at)).unwrap());
        assert!(gitea > second);
        let again = s.accept_delivery(delivery("github", "d1", at)).unwrap();
        assert_eq!(
            again,
            Accepted::Duplicate {
                seq: first,
                processed: false
            }
        );
        s.mark_processed(&[first], t("2026-01-01T00:00:01Z"))
            .unwrap();
        assert_eq!(
            s.accept_delivery(delivery("github", "d1", at)).unwrap(),
            Accepted::Duplicate {
                seq: first,
                processed: true
            }
        );
        // A duplicate stores nothing.
        let pending: Vec<u64> = s
            .pending_deliveries(0, 100)
            .unwrap()
            .iter()
            .map(|d| d.seq)
            .collect();
        assert_eq!(pending, [second, gitea]);
        // Without an id, never a duplicate.
        let e1 = new_seq(s.accept_delivery(delivery("gitlab", "", at)).unwrap());
        let e2 = new_seq(s.accept_delivery(delivery("gitlab", "", at)).unwrap());
        assert!(e2 > e1 && e1 > gitea);
        s.mark_processed(&[e1], t("2026-01-01T00:00:01Z")).unwrap();
        let e3 = new_seq(s.accept_delivery(delivery("gitlab", "", at)).unwrap());
        assert!(e3 > e2);
    });
}

#[test]
fn pending_deliveries_come_in_seq_order_after_a_seq_up_to_a_limit() {
    each_store(|s, _| {
        let news: Vec<NewDelivery> = (0..6)
            .map(|i| delivery("github", &format!("d{i}"), "2026-01-01T00:00:00.5Z"))
            .collect();
        let seqs: Vec<u64> = news
            .iter()
            .map(|d| new_seq(s.accept_delivery(d.clone()).unwrap()))
            .collect();
        s.mark_processed(&[seqs[1], seqs[4]], t("2026-01-01T00:01:00Z"))
            .unwrap();
        let all = s.pending_deliveries(0, 100).unwrap();
        let want: Vec<StoredDelivery> = [0, 2, 3, 5]
            .iter()
            .map(|&i| stored(&news[i], seqs[i]))
            .collect();
        assert_eq!(all, want, "every field, processed ones left out");
        let page = s.pending_deliveries(seqs[0], 2).unwrap();
        assert_eq!(page, want[1..3]);
        let rest = s.pending_deliveries(seqs[3], 2).unwrap();
        assert_eq!(rest, want[3..]);
        assert_eq!(s.pending_deliveries(seqs[5], 10).unwrap(), vec![]);
        assert_eq!(s.pending_deliveries(0, 0).unwrap(), vec![]);
    });
}

#[test]
fn processing_drops_a_deliverys_body_and_keeps_its_id() {
    each_store(|s, _| {
        let (a, b) = (
            delivery("github", "a", "2026-01-01T00:00:00Z"),
            delivery("github", "b", "2026-01-01T00:00:00Z"),
        );
        let sa = new_seq(s.accept_delivery(a.clone()).unwrap());
        let sb = new_seq(s.accept_delivery(b.clone()).unwrap());
        assert_eq!(s.delivery(sa).unwrap(), Some(stored(&a, sa)));
        s.mark_processed(&[sa, sa, 999_999], t("2026-01-01T00:00:01Z"))
            .unwrap();
        assert_eq!(
            s.delivery(sa).unwrap(),
            Some(StoredDelivery {
                body: vec![],
                ..stored(&a, sa)
            })
        );
        assert_eq!(
            s.delivery(sb).unwrap(),
            Some(stored(&b, sb)),
            "the other keeps its body"
        );
        assert_eq!(s.delivery(999_999).unwrap(), None);
    });
}

#[test]
fn pruning_removes_only_processed_deliveries_received_before_the_cutoff() {
    each_store(|s, _| {
        let old = "2026-01-01T00:00:00Z";
        let new = "2026-01-04T00:00:00Z";
        let a = new_seq(s.accept_delivery(delivery("github", "a", old)).unwrap());
        let b = new_seq(s.accept_delivery(delivery("github", "b", old)).unwrap());
        let c = new_seq(s.accept_delivery(delivery("github", "c", new)).unwrap());
        s.mark_processed(&[a, c], t(new)).unwrap();
        assert_eq!(s.prune_deliveries(t("2026-01-02T00:00:00Z")).unwrap(), 1);
        assert_eq!(s.delivery(a).unwrap(), None, "processed and old: pruned");
        assert!(s.delivery(b).unwrap().is_some(), "pending, however old");
        assert!(s.delivery(c).unwrap().is_some(), "processed, but recent");
        assert_eq!(
            s.pending_deliveries(0, 10)
                .unwrap()
                .iter()
                .map(|d| d.seq)
                .collect::<Vec<_>>(),
            [b]
        );
        assert_eq!(
            s.accept_delivery(delivery("github", "c", new)).unwrap(),
            Accepted::Duplicate {
                seq: c,
                processed: true
            }
        );
        // A pruned id is a new delivery again, under a new seq.
        let a2 = new_seq(s.accept_delivery(delivery("github", "a", new)).unwrap());
        assert!(a2 > c);
        // Seqs are never handed out again, even the newest once pruned.
        s.mark_processed(&[b, a2], t(new)).unwrap();
        assert_eq!(s.prune_deliveries(t("2026-01-05T00:00:00Z")).unwrap(), 3);
        assert_eq!(s.pending_deliveries(0, 10).unwrap(), vec![]);
        let d = new_seq(s.accept_delivery(delivery("github", "d", new)).unwrap());
        assert!(d > a2, "{d} after {a2}");
        assert_eq!(s.prune_deliveries(t("2026-01-05T00:00:00Z")).unwrap(), 0);
    });
}

#[test]
fn concurrent_accepts_get_distinct_seqs_and_one_id_one_delivery() {
    // 16 threads of 200 accepts; threads 2k and 2k+1 send the same ids at
    // once, as a forge redelivering while the first delivery is in flight.
    const THREADS: usize = 16;
    const EACH: usize = 200;
    each_store(|s, _| {
        let results: Vec<Vec<(String, Accepted)>> = std::thread::scope(|sc| {
            let handles: Vec<_> = (0..THREADS)
                .map(|i| {
                    sc.spawn(move || {
                        (0..EACH)
                            .map(|k| {
                                let id = format!("d{}-{k}", i / 2);
                                let mut d = delivery("github", &id, "2026-01-01T00:00:00Z");
                                d.body = vec![b'x'; 7 * 1024];
                                (id, s.accept_delivery(d).unwrap())
                            })
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut by_id: BTreeMap<String, Vec<Accepted>> = BTreeMap::new();
        for (id, a) in results.into_iter().flatten() {
            by_id.entry(id).or_default().push(a);
        }
        assert_eq!(by_id.len(), THREADS / 2 * EACH);
        let mut seqs = std::collections::BTreeSet::new();
        for (id, accepts) in &by_id {
            let news: Vec<u64> = accepts
                .iter()
                .filter_map(|a| match a {
                    Accepted::New { seq } => Some(*seq),
                    _ => None,
                })
                .collect();
            assert_eq!(news.len(), 1, "{id}: {accepts:?}");
            assert!(
                accepts.contains(&Accepted::Duplicate {
                    seq: news[0],
                    processed: false
                }),
                "{id}: {accepts:?}"
            );
            assert!(seqs.insert(news[0]), "{id}: seq {} twice", news[0]);
        }
        let pending = s.pending_deliveries(0, 10_000).unwrap();
        assert_eq!(
            pending.iter().map(|d| d.seq).collect::<Vec<_>>(),
            seqs.into_iter().collect::<Vec<_>>()
        );
    });
}

#[test]
fn sqlite_keeps_repos_and_deliveries_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bosun.db");
    let at = "2026-01-01T00:00:00Z";
    let (a, b, c) = {
        let s = SqliteStore::open(&path).unwrap();
        s.put_repo(&full_repo("acme/widgets")).unwrap();
        s.put_repo(&bare_repo("acme/gadgets")).unwrap();
        let a = new_seq(s.accept_delivery(delivery("github", "a", at)).unwrap());
        let b = new_seq(s.accept_delivery(delivery("github", "b", at)).unwrap());
        let c = new_seq(s.accept_delivery(delivery("gitlab", "", at)).unwrap());
        s.mark_processed(&[a], t(at)).unwrap();
        (a, b, c)
    };
    let s = SqliteStore::open(&path).unwrap();
    assert_eq!(
        s.repos().unwrap(),
        vec![bare_repo("acme/gadgets"), full_repo("acme/widgets")]
    );
    assert_eq!(
        s.pending_deliveries(0, 10).unwrap(),
        vec![
            stored(&delivery("github", "b", at), b),
            stored(&delivery("gitlab", "", at), c)
        ],
        "the deliveries not processed are replayed"
    );
    assert_eq!(
        s.accept_delivery(delivery("github", "a", at)).unwrap(),
        Accepted::Duplicate {
            seq: a,
            processed: true
        }
    );
    assert_eq!(
        s.accept_delivery(delivery("github", "b", at)).unwrap(),
        Accepted::Duplicate {
            seq: b,
            processed: false
        }
    );
    // Seqs go on after the restart, even past pruned ones.
    s.mark_processed(&[b, c], t(at)).unwrap();
    assert_eq!(s.prune_deliveries(t("2026-01-02T00:00:00Z")).unwrap(), 3);
    drop(s);
    let s = SqliteStore::open(&path).unwrap();
    let d = new_seq(s.accept_delivery(delivery("github", "d", at)).unwrap());
    assert!(d > c, "{d} after {c}");
}

#[test]
fn a_store_without_repositories_refuses_them() {
    let s = Required(MemoryStore::new());
    let refused = |r: Result<(), StoreError>| {
        assert!(matches!(r, Err(StoreError::Unavailable(_))), "{r:?}");
    };
    refused(s.put_repo(&bare_repo("acme/widgets")));
    refused(s.repos().map(drop));
    refused(
        s.accept_delivery(delivery("github", "a", "2026-01-01T00:00:00Z"))
            .map(drop),
    );
    refused(s.pending_deliveries(0, 10).map(drop));
    refused(s.mark_processed(&[1], t("2026-01-01T00:00:00Z")));
}

/// Refs of `repo` (`org/name`) at the pulls `(number, head sha)`.
fn refs_of(repo: &str, pulls: &[(i64, &str)]) -> Refs {
    let (org, name) = repo.rsplit_once('/').unwrap();
    Refs {
        org: org.into(),
        repo: name.into(),
        base_ref: Some("main".into()),
        base_sha: Some("base".into()),
        pulls: pulls
            .iter()
            .map(|&(number, sha)| bosun_config::types::Pull {
                number,
                sha: sha.into(),
                author: "alice".into(),
                ..Default::default()
            })
            .collect(),
        ..Refs::default()
    }
}

/// A new run of `job` (of `job_type`) on `refs`.
fn new_on(job: &str, job_type: JobType, refs: Option<Refs>) -> NewRun {
    NewRun {
        job_type,
        periodic: None,
        refs,
        extra_refs: vec![],
        ..new_periodic(job, None, 0)
    }
}

fn create_on(s: &dyn Store, job: &str, job_type: JobType, refs: Option<Refs>, at: &str) -> Run {
    s.create_run(new_on(job, job_type, refs), t(at))
        .unwrap()
        .run()
        .clone()
}

fn jobs(runs: &[Run]) -> Vec<&str> {
    runs.iter().map(|r| r.job.as_str()).collect()
}

#[test]
fn runs_are_listed_by_repository_pull_and_head() {
    each_store(|s, _| {
        use JobType::*;
        let at = "2026-01-01T00:00:00Z";
        let w = "acme/widgets";
        // Created in this order (listings are newest first).
        create_on(s, "pre-1a", Presubmit, Some(refs_of(w, &[(1, "a")])), at);
        create_on(s, "pre-1b", Presubmit, Some(refs_of(w, &[(1, "b")])), at);
        create_on(s, "pre-2", Presubmit, Some(refs_of(w, &[(2, "a")])), at);
        create_on(
            s,
            "batch",
            Batch,
            Some(refs_of(w, &[(2, "c"), (1, "b")])),
            at,
        );
        create_on(s, "post", Postsubmit, Some(refs_of(w, &[])), at);
        create_on(
            s,
            "other-1",
            Presubmit,
            Some(refs_of("acme/gadgets", &[(1, "a")])),
            at,
        );
        // A nested GitLab group: its org holds a `/`.
        create_on(
            s,
            "nested-1",
            Presubmit,
            Some(refs_of("g/sub/widgets", &[(1, "a")])),
            at,
        );
        // Extra refs of the repository are not its runs.
        create_on(s, "extra", Periodic, None, at);
        let mut extra = new_on("extra2", Periodic, None);
        extra.extra_refs = vec![refs_of(w, &[(1, "a")])];
        s.create_run(extra, t(at)).unwrap();
        // An in-repo periodic's runs have refs: a fire (through the fire log
        // for one of the SQLite stores) is listed too, by its pull if its
        // refs name one.
        let mut fire = tick_fire("acme/widgets:nightly", "2026-01-01T00:00:00Z", t(at));
        fire.runs[0].refs = Some(refs_of(w, &[(9, "n")]));
        fire.runs[0].job = "nightly".into();
        s.commit_fire(fire, t(at)).unwrap();

        let list = |f: RunFilter| s.list(&f).unwrap();
        let of = |repo: Option<&str>, pull: Option<i64>, sha: Option<&str>| RunFilter {
            repo: repo.map(String::from),
            pull,
            head_sha: sha.map(String::from),
            ..RunFilter::default()
        };
        assert_eq!(
            jobs(&list(of(Some(w), None, None))),
            ["nightly", "post", "batch", "pre-2", "pre-1b", "pre-1a"]
        );
        assert_eq!(
            jobs(&list(of(Some("g/sub/widgets"), None, None))),
            ["nested-1"]
        );
        assert_eq!(
            jobs(&list(of(Some("acme"), None, None))),
            Vec::<&str>::new()
        );
        assert_eq!(
            jobs(&list(of(Some(w), Some(1), None))),
            ["batch", "pre-1b", "pre-1a"],
            "a batch holding the pull is one of its runs"
        );
        assert_eq!(jobs(&list(of(Some(w), Some(2), None))), ["batch", "pre-2"]);
        assert_eq!(jobs(&list(of(Some(w), Some(3), None))), Vec::<&str>::new());
        assert_eq!(jobs(&list(of(Some(w), Some(9), Some("n")))), ["nightly"]);
        assert_eq!(
            jobs(&list(of(None, Some(1), None))),
            ["nested-1", "other-1", "batch", "pre-1b", "pre-1a"],
            "a pull number of any repository"
        );
        assert_eq!(
            jobs(&list(of(Some(w), Some(1), Some("b")))),
            ["batch", "pre-1b"]
        );
        assert_eq!(
            jobs(&list(of(Some(w), Some(2), Some("b")))),
            Vec::<&str>::new(),
            "the sha is that pull's, not another pull's of the batch"
        );
        assert_eq!(
            jobs(&list(of(Some(w), None, Some("a")))),
            ["pre-2", "pre-1a"]
        );
        // With the other filters.
        assert_eq!(
            jobs(&list(RunFilter {
                job_type: Some("presubmit".into()),
                ..of(Some(w), Some(1), None)
            })),
            ["pre-1b", "pre-1a"]
        );
        assert_eq!(
            jobs(&list(RunFilter {
                job: Some("pre-1a".into()),
                ..of(Some(w), Some(1), None)
            })),
            ["pre-1a"]
        );
        assert_eq!(
            jobs(&list(RunFilter {
                oldest_first: true,
                ..of(Some(w), Some(1), None)
            })),
            ["pre-1a", "pre-1b", "batch"]
        );
        let pre_1b = list(of(Some(w), Some(1), Some("b")))[1].clone();
        s.transition(
            &pre_1b.id,
            Transition::to(RunState::Aborted, t(at), "new head"),
        )
        .unwrap();
        assert_eq!(
            jobs(&list(RunFilter {
                active: true,
                ..of(Some(w), Some(1), None)
            })),
            ["batch", "pre-1a"]
        );
        assert_eq!(
            jobs(&list(RunFilter {
                state: Some(RunState::Aborted),
                ..of(Some(w), None, None)
            })),
            ["pre-1b"]
        );
        // Pages, by offset and by cursor, agree.
        let page = |offset, after: Option<&Run>, before: Option<&Run>| {
            list(RunFilter {
                limit: 2,
                offset,
                after: after.map(|r| r.id.clone()),
                before: before.map(|r| r.id.clone()),
                ..of(Some(w), Some(1), None)
            })
        };
        let first = page(0, None, None);
        assert_eq!(jobs(&first), ["batch", "pre-1b"]);
        let second = page(0, first.last(), None);
        assert_eq!(jobs(&second), ["pre-1a"]);
        assert_eq!(page(2, None, None), second);
        assert_eq!(page(0, None, second.first()), first);
        let by_repo = list(RunFilter {
            limit: 2,
            after: Some(first[0].id.clone()),
            ..of(Some(w), None, None)
        });
        assert_eq!(jobs(&by_repo), ["pre-2", "pre-1b"]);
    });
}

#[test]
fn a_pulls_active_runs_are_its_unfinished_presubmits() {
    each_store(|s, _| {
        use JobType::*;
        let at = "2026-01-01T00:00:00Z";
        let w = "acme/widgets";
        let a = create_on(s, "a", Presubmit, Some(refs_of(w, &[(1, "x")])), at);
        let b = create_on(s, "b", Presubmit, Some(refs_of(w, &[(1, "y")])), at);
        let done = create_on(s, "c", Presubmit, Some(refs_of(w, &[(1, "x")])), at);
        s.transition(&done.id, Transition::to(RunState::Error, t(at), ""))
            .unwrap();
        s.transition(&b.id, Transition::to(RunState::Pending, t(at), ""))
            .unwrap();
        create_on(
            s,
            "batch",
            Batch,
            Some(refs_of(w, &[(1, "y"), (2, "z")])),
            at,
        );
        create_on(s, "d", Presubmit, Some(refs_of(w, &[(2, "x")])), at);
        create_on(
            s,
            "e",
            Presubmit,
            Some(refs_of("acme/gadgets", &[(1, "x")])),
            at,
        );
        let active = s.active_runs_of_pull(w, 1).unwrap();
        assert_eq!(
            active.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            [a.id.as_str(), b.id.as_str()],
            "oldest first, whatever their head"
        );
        // More than a page of them.
        let many: Vec<Run> = (0..1203)
            .map(|i| {
                create_on(
                    s,
                    &format!("m{i}"),
                    Presubmit,
                    Some(refs_of(w, &[(9, "x")])),
                    at,
                )
            })
            .collect();
        let active = s.active_runs_of_pull(w, 9).unwrap();
        assert_eq!(active, many);
        assert_eq!(s.active_runs_of_pull(w, 3).unwrap(), vec![]);
    });
}

#[test]
fn a_heads_latest_runs_are_the_newest_of_each_job() {
    each_store(|s, _| {
        use JobType::*;
        let w = "acme/widgets";
        let pr = |sha| Some(refs_of(w, &[(4, sha)]));
        let old_a = create_on(s, "a", Presubmit, pr("h1"), "2026-01-01T00:00:00Z");
        let b = create_on(s, "b", Presubmit, pr("h1"), "2026-01-01T00:00:01Z");
        let new_a = create_on(s, "a", Presubmit, pr("h1"), "2026-01-01T00:00:02Z");
        create_on(s, "a", Presubmit, pr("h2"), "2026-01-01T00:00:03Z");
        create_on(s, "c", Presubmit, pr("h2"), "2026-01-01T00:00:04Z");
        create_on(
            s,
            "a",
            Batch,
            Some(refs_of(w, &[(4, "h1")])),
            "2026-01-01T00:00:05Z",
        );
        create_on(
            s,
            "a",
            Presubmit,
            Some(refs_of("acme/gadgets", &[(4, "h1")])),
            "2026-01-01T00:00:06Z",
        );
        s.transition(
            &new_a.id,
            Transition::to(RunState::Aborted, t("2026-01-01T00:00:07Z"), ""),
        )
        .unwrap();
        let latest = s.latest_runs_of_head(w, 4, "h1").unwrap();
        assert_eq!(
            latest
                .iter()
                .map(|r| (r.job.as_str(), r.id.as_str()))
                .collect::<Vec<_>>(),
            [("a", new_a.id.as_str()), ("b", b.id.as_str())],
            "by job name; {} is older",
            old_a.id
        );
        assert_eq!(latest[0].state, RunState::Aborted);
        assert_eq!(
            jobs(&s.latest_runs_of_head(w, 4, "h2").unwrap()),
            ["a", "c"]
        );
        assert_eq!(s.latest_runs_of_head(w, 4, "h3").unwrap(), vec![]);
        assert_eq!(s.latest_runs_of_head(w, 5, "h1").unwrap(), vec![]);
    });
}

/// Retention deletes a run of a pull, the newest run: after a restart the
/// SQLite store hands its seq out again, and the run created then is not
/// one of the pull's.
#[test]
fn sqlite_a_deleted_runs_pulls_go_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bosun.db");
    let at = "2026-01-01T00:00:00Z";
    let w = "acme/widgets";
    {
        let s = SqliteStore::open(&path).unwrap();
        let r = create_on(
            &s,
            "a",
            JobType::Presubmit,
            Some(refs_of(w, &[(7, "x")])),
            at,
        );
        s.transition(&r.id, Transition::to(RunState::Error, t(at), ""))
            .unwrap();
        assert_eq!(
            s.delete_completed_before(t("2026-02-01T00:00:00Z"))
                .unwrap(),
            vec![r.id.clone()]
        );
    }
    let s = SqliteStore::open(&path).unwrap();
    let next = create_on(&s, "b", JobType::Postsubmit, Some(refs_of(w, &[])), at);
    let of_pull = RunFilter {
        pull: Some(7),
        ..RunFilter::default()
    };
    assert_eq!(s.list(&of_pull).unwrap(), vec![]);
    assert_eq!(
        s.list(&RunFilter {
            repo: Some(w.into()),
            ..of_pull
        })
        .unwrap(),
        vec![]
    );
    assert_eq!(
        s.list(&RunFilter {
            repo: Some(w.into()),
            ..RunFilter::default()
        })
        .unwrap(),
        vec![next]
    );
}

/// A status report of `key` at `version`, made at `at`.
fn report(key: &str, version: u64, run: Option<&str>, at: &str) -> NewReport {
    NewReport {
        key: key.into(),
        kind: ReportKind::Status,
        run_id: run.map(String::from),
        version,
        payload: serde_json::json!({"state": "pending", "version": version}),
        created_at: t(at),
    }
}

/// The kept form of `r` under `id`, pending and never tried.
fn pending_report(r: &NewReport, id: u64) -> StoredReport {
    StoredReport {
        id,
        key: r.key.clone(),
        kind: r.kind,
        run_id: r.run_id.clone(),
        version: r.version,
        payload: r.payload.clone(),
        attempts: 0,
        created_at: r.created_at,
        next_attempt_at: r.created_at,
        last_error: None,
        outcome: ReportOutcome::Pending,
    }
}

fn queued(e: Enqueued) -> u64 {
    match e {
        Enqueued::Queued { id, .. } => id,
        other => panic!("not queued: {other:?}"),
    }
}

fn enqueue_one(s: &dyn Store, r: NewReport) -> Enqueued {
    let mut out = s.enqueue_reports(vec![r]).unwrap();
    assert_eq!(out.len(), 1);
    out.remove(0)
}

#[test]
fn a_newer_report_takes_the_place_of_the_pending_one_and_an_older_is_stale() {
    each_store(|s, _| {
        let k = "status:github:acme/widgets:abc:ci/test";
        let v3 = report(k, 3, Some("run1"), "2026-01-01T00:00:00Z");
        let id3 = queued(enqueue_one(s, v3.clone()));
        assert_eq!(
            s.due_reports(t("2026-01-01T00:00:00Z"), 10).unwrap(),
            vec![pending_report(&v3, id3)]
        );
        // Older, or the same version again: not queued.
        for v in [1, 3] {
            assert_eq!(
                enqueue_one(s, report(k, v, Some("run1"), "2026-01-01T00:00:01Z")),
                Enqueued::Stale { newest: 3 },
                "version {v}"
            );
        }
        let v5 = report(k, 5, Some("run1"), "2026-01-01T00:00:02Z");
        let got = enqueue_one(s, v5.clone());
        let id5 = queued(got);
        assert_eq!(
            got,
            Enqueued::Queued {
                id: id5,
                superseded: Some(id3)
            }
        );
        assert!(id5 > id3);
        let due = s.due_reports(t("2026-01-02T00:00:00Z"), 10).unwrap();
        assert_eq!(due, vec![pending_report(&v5, id5)], "one pending per key");
        assert_eq!(
            enqueue_one(s, report(k, 4, None, "2026-01-01T00:00:03Z")),
            Enqueued::Stale { newest: 5 },
            "older than the pending one"
        );
        // The superseded entry is kept, never sent.
        assert_eq!(
            s.reports_of_run("run1").unwrap(),
            vec![
                StoredReport {
                    outcome: ReportOutcome::Superseded {
                        at: t("2026-01-01T00:00:02Z"),
                        by_version: 5
                    },
                    ..pending_report(&v3, id3)
                },
                pending_report(&v5, id5)
            ]
        );
        assert!(!s
            .report_delivered(id3, 3, t("2026-01-01T00:00:04Z"))
            .unwrap());
        // Delivered: a version older than the delivered one is stale too.
        assert!(s
            .report_delivered(id5, 5, t("2026-01-01T00:00:05Z"))
            .unwrap());
        assert_eq!(
            enqueue_one(s, report(k, 4, None, "2026-01-01T00:00:06Z")),
            Enqueued::Stale { newest: 5 }
        );
        // Other keys, and several entries of one key in one call, in order.
        let k2 = "comment:github:acme/widgets:7";
        let out = s
            .enqueue_reports(vec![
                report(k2, 1, None, "2026-01-01T00:00:07Z"),
                report(k2, 2, None, "2026-01-01T00:00:07Z"),
                report(k2, 2, None, "2026-01-01T00:00:07Z"),
                report(k, 6, None, "2026-01-01T00:00:07Z"),
            ])
            .unwrap();
        let (a, b, c) = (queued(out[0]), queued(out[1]), queued(out[3]));
        assert_eq!(
            out,
            vec![
                Enqueued::Queued {
                    id: a,
                    superseded: None
                },
                Enqueued::Queued {
                    id: b,
                    superseded: Some(a)
                },
                Enqueued::Stale { newest: 2 },
                Enqueued::Queued {
                    id: c,
                    superseded: None
                },
            ],
            "the delivered entry of {k} is not superseded"
        );
        assert!(a > id5 && b > a && c > b);
        let due: Vec<(u64, u64)> = s
            .due_reports(t("2026-01-02T00:00:00Z"), 10)
            .unwrap()
            .iter()
            .map(|r| (r.id, r.version))
            .collect();
        assert_eq!(due, [(b, 2), (c, 6)]);
        assert_eq!(s.enqueue_reports(vec![]).unwrap(), vec![]);
    });
}

#[test]
fn due_reports_come_in_queueing_order_once_due_up_to_a_limit() {
    each_store(|s, _| {
        let ids: Vec<u64> = (0..5)
            .map(|i| {
                let at = format!("2026-01-01T00:00:0{}Z", 5 - i);
                queued(enqueue_one(s, report(&format!("k{i}"), 1, None, &at)))
            })
            .collect();
        let due = |now: &str, limit| -> Vec<u64> {
            s.due_reports(t(now), limit)
                .unwrap()
                .iter()
                .map(|r| r.id)
                .collect()
        };
        assert_eq!(due("2026-01-01T00:00:00Z", 10), Vec::<u64>::new());
        assert_eq!(due("2026-01-01T00:00:02Z", 10), ids[3..]);
        assert_eq!(due("2026-01-01T00:00:09Z", 10), ids);
        assert_eq!(due("2026-01-01T00:00:09Z", 2), ids[..2]);
        assert_eq!(due("2026-01-01T00:00:09Z", 0), Vec::<u64>::new());
        // A retry later leaves it out until then; a delivered one goes.
        assert!(s
            .report_failed(
                ids[0],
                1,
                ReportFailure::Retry {
                    at: t("2026-01-01T00:01:00Z"),
                    error: "502".into()
                },
                t("2026-01-01T00:00:10Z")
            )
            .unwrap());
        assert!(s
            .report_delivered(ids[1], 1, t("2026-01-01T00:00:10Z"))
            .unwrap());
        assert_eq!(due("2026-01-01T00:00:59Z", 10), ids[2..]);
        assert_eq!(
            due("2026-01-01T00:01:00Z", 10),
            [ids[0], ids[2], ids[3], ids[4]]
        );
    });
}

#[test]
fn a_report_retried_or_refused_keeps_the_forges_answer() {
    each_store(|s, _| {
        let k = "status:github:acme/widgets:abc:ci/test";
        let v1 = report(k, 1, Some("r"), "2026-01-01T00:00:00Z");
        let id = queued(enqueue_one(s, v1.clone()));
        let retry = |n: u32| ReportFailure::Retry {
            at: t("2026-01-01T00:10:00Z") + jiff::SignedDuration::from_secs(n.into()),
            error: format!("HTTP 502 #{n}"),
        };
        assert!(s
            .report_failed(id, 1, retry(1), t("2026-01-01T00:00:01Z"))
            .unwrap());
        assert!(s
            .report_failed(id, 1, retry(2), t("2026-01-01T00:00:02Z"))
            .unwrap());
        assert!(
            !s.report_failed(id, 2, retry(3), t("2026-01-01T00:00:03Z"))
                .unwrap(),
            "another version"
        );
        assert!(!s
            .report_failed(id + 100, 1, retry(3), t("2026-01-01T00:00:03Z"))
            .unwrap());
        let retried = StoredReport {
            attempts: 2,
            next_attempt_at: t("2026-01-01T00:10:02Z"),
            last_error: Some("HTTP 502 #2".into()),
            ..pending_report(&v1, id)
        };
        assert_eq!(s.reports_of_run("r").unwrap(), vec![retried.clone()]);
        assert_eq!(
            s.report_counts().unwrap(),
            ReportCounts {
                pending: 1,
                refused: 0
            }
        );
        let answer = "HTTP 422: description is too long";
        assert!(s
            .report_failed(
                id,
                1,
                ReportFailure::Permanent {
                    error: answer.into()
                },
                t("2026-01-01T00:10:05Z")
            )
            .unwrap());
        let refused = StoredReport {
            attempts: 3,
            last_error: Some(answer.into()),
            outcome: ReportOutcome::Refused {
                at: t("2026-01-01T00:10:05Z"),
            },
            ..retried
        };
        assert_eq!(s.reports_of_run("r").unwrap(), vec![refused.clone()]);
        assert_eq!(
            s.due_reports(t("2027-01-01T00:00:00Z"), 10).unwrap(),
            vec![]
        );
        assert_eq!(
            s.report_counts().unwrap(),
            ReportCounts {
                pending: 0,
                refused: 1
            }
        );
        // Ended: nothing changes it any more.
        assert!(!s
            .report_delivered(id, 1, t("2026-01-01T00:10:06Z"))
            .unwrap());
        assert!(!s
            .report_failed(id, 1, retry(4), t("2026-01-01T00:10:06Z"))
            .unwrap());
        assert_eq!(s.reports_of_run("r").unwrap(), vec![refused.clone()]);
        // A refused version does not hold back a newer one; the same is stale.
        assert_eq!(
            enqueue_one(s, report(k, 1, Some("r"), "2026-01-01T00:11:00Z")),
            Enqueued::Stale { newest: 1 }
        );
        let v2 = report(k, 2, Some("r"), "2026-01-01T00:11:00Z");
        let got = enqueue_one(s, v2.clone());
        let id2 = queued(got);
        assert_eq!(
            got,
            Enqueued::Queued {
                id: id2,
                superseded: None
            }
        );
        assert!(s
            .report_delivered(id2, 2, t("2026-01-01T00:11:01Z"))
            .unwrap());
        assert_eq!(
            s.reports_of_run("r").unwrap(),
            vec![
                refused,
                StoredReport {
                    attempts: 1,
                    outcome: ReportOutcome::Delivered {
                        at: t("2026-01-01T00:11:01Z")
                    },
                    ..pending_report(&v2, id2)
                }
            ]
        );
        assert_eq!(s.reports_of_run("nope").unwrap(), vec![]);
        assert_eq!(
            s.report_counts().unwrap(),
            ReportCounts {
                pending: 0,
                refused: 1
            }
        );
    });
}

#[test]
fn pruning_reports_keeps_pending_ones_and_forgets_a_key_with_its_last_entry() {
    each_store(|s, _| {
        let day = |d: u32| format!("2026-01-0{d}T00:00:00Z");
        // a: superseded on day 1, its newer entry delivered on day 2.
        let a1 = queued(enqueue_one(s, report("a", 1, None, &day(1))));
        let a2 = queued(enqueue_one(s, report("a", 2, None, &day(1))));
        assert!(s.report_delivered(a2, 2, t(&day(2))).unwrap());
        // b: refused on day 1, then one pending from day 1.
        let b1 = queued(enqueue_one(s, report("b", 1, None, &day(1))));
        let refuse = ReportFailure::Permanent { error: "no".into() };
        assert!(s.report_failed(b1, 1, refuse, t(&day(1))).unwrap());
        let b2 = queued(enqueue_one(s, report("b", 2, None, &day(1))));
        // c: delivered on day 5.
        let c1 = queued(enqueue_one(s, report("c", 1, None, &day(1))));
        assert!(s.report_delivered(c1, 1, t(&day(5))).unwrap());
        // d: pending since day 1, however old.
        let d1 = queued(enqueue_one(s, report("d", 1, None, &day(1))));

        assert_eq!(s.prune_reports(t(&day(3))).unwrap(), 3, "a1, a2, b1");
        let left: Vec<u64> = s
            .due_reports(t(&day(9)), 10)
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(left, [b2, d1]);
        assert_eq!(
            s.report_counts().unwrap(),
            ReportCounts {
                pending: 2,
                refused: 0
            }
        );
        // `a` has no entry left: its versions are new again. `b` (pending)
        // and `c` (delivered, kept) still know theirs.
        assert!(matches!(
            enqueue_one(s, report("a", 1, None, &day(6))),
            Enqueued::Queued { .. }
        ));
        assert_eq!(
            enqueue_one(s, report("b", 1, None, &day(6))),
            Enqueued::Stale { newest: 2 }
        );
        assert_eq!(
            enqueue_one(s, report("c", 1, None, &day(6))),
            Enqueued::Stale { newest: 1 }
        );
        assert_eq!(s.prune_reports(t(&day(5))).unwrap(), 0, "c ended on day 5");
        assert_eq!(s.prune_reports(t(&day(6))).unwrap(), 1);
        assert!(matches!(
            enqueue_one(s, report("c", 1, None, &day(6))),
            Enqueued::Queued { .. }
        ));
        // Ids are never handed out again.
        let e = queued(enqueue_one(s, report("e", 1, None, &day(6))));
        assert!(e > d1, "{e} after {d1}");
        let _ = (a1, c1);
    });
}

#[test]
fn concurrent_enqueues_of_one_key_leave_its_newest_version_pending() {
    const THREADS: u64 = 8;
    const EACH: u64 = 50;
    each_store(|s, _| {
        std::thread::scope(|sc| {
            for i in 0..THREADS {
                sc.spawn(move || {
                    for k in 0..EACH {
                        // Versions interleave across threads.
                        let v = 1 + k * THREADS + i;
                        s.enqueue_reports(vec![
                            report("shared", v, Some("r"), "2026-01-01T00:00:00Z"),
                            report(&format!("own{i}"), v, None, "2026-01-01T00:00:00Z"),
                        ])
                        .unwrap();
                    }
                });
            }
        });
        let due = s.due_reports(t("2026-01-01T00:00:00Z"), 1000).unwrap();
        let shared: Vec<u64> = due
            .iter()
            .filter(|r| r.key == "shared")
            .map(|r| r.version)
            .collect();
        assert_eq!(shared, [THREADS * EACH]);
        assert_eq!(due.len() as u64, 1 + THREADS);
        let all = s.reports_of_run("r").unwrap();
        assert!(all
            .iter()
            .filter(|r| r.outcome != ReportOutcome::Pending)
            .all(|r| matches!(r.outcome, ReportOutcome::Superseded { by_version, .. } if by_version > r.version)));
        // Versions were queued in increasing order: each one newer than all
        // before it.
        assert!(all.windows(2).all(|w| w[0].version < w[1].version));
    });
}

#[test]
fn sqlite_keeps_reports_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bosun.db");
    let at = "2026-01-01T00:00:00Z";
    let k = "status:github:acme/widgets:abc:ci/test";
    let (in_flight, delivered) = {
        let s = SqliteStore::open(&path).unwrap();
        let delivered = queued(enqueue_one(&s, report("done", 4, None, at)));
        assert!(s.report_delivered(delivered, 4, t(at)).unwrap());
        let v2 = report(k, 2, Some("r"), at);
        let id = queued(enqueue_one(&s, v2.clone()));
        // The worker took it, and bosun is killed before it could say how
        // sending it went.
        assert_eq!(
            s.due_reports(t(at), 10).unwrap(),
            vec![pending_report(&v2, id)]
        );
        (pending_report(&v2, id), delivered)
    };
    let s = SqliteStore::open(&path).unwrap();
    assert_eq!(
        s.due_reports(t(at), 10).unwrap(),
        vec![in_flight.clone()],
        "still pending: sent again"
    );
    assert_eq!(
        enqueue_one(&s, report("done", 3, None, at)),
        Enqueued::Stale { newest: 4 },
        "a delivered version is remembered"
    );
    assert_eq!(
        enqueue_one(&s, report(k, 2, None, at)),
        Enqueued::Stale { newest: 2 }
    );
    let next = queued(enqueue_one(&s, report("other", 1, None, at)));
    assert!(next > in_flight.id && next > delivered);
    assert!(s.report_delivered(in_flight.id, 2, t(at)).unwrap());
    assert_eq!(
        s.report_counts().unwrap(),
        ReportCounts {
            pending: 1,
            refused: 0
        }
    );
}

#[test]
fn a_store_without_an_outbox_refuses_it() {
    let s = Required(MemoryStore::new());
    let refused = |r: Result<(), StoreError>| {
        assert!(matches!(r, Err(StoreError::Unavailable(_))), "{r:?}");
    };
    let at = t("2026-01-01T00:00:00Z");
    refused(
        s.enqueue_reports(vec![report("k", 1, None, "2026-01-01T00:00:00Z")])
            .map(drop),
    );
    refused(s.due_reports(at, 10).map(drop));
    refused(s.report_delivered(1, 1, at).map(drop));
    refused(
        s.report_failed(1, 1, ReportFailure::Permanent { error: "x".into() }, at)
            .map(drop),
    );
    refused(s.reports_of_run("r").map(drop));
    refused(s.report_counts().map(drop));
    refused(s.prune_reports(at).map(drop));
    refused(s.set_report_policy(Arc::new(Statuses::default())));
}

#[test]
fn a_report_version_beyond_i64_refuses_the_whole_call() {
    each_store(|s, _| {
        let r = s.enqueue_reports(vec![
            report("k", 1, None, "2026-01-01T00:00:00Z"),
            report("k", u64::MAX, None, "2026-01-01T00:00:00Z"),
        ]);
        assert!(matches!(r, Err(StoreError::Invalid(_))), "{r:?}");
        assert_eq!(
            s.due_reports(t("2027-01-01T00:00:00Z"), 10).unwrap(),
            vec![]
        );
        let top = i64::MAX as u64;
        assert!(matches!(
            enqueue_one(s, report("k", top, None, "2026-01-01T00:00:00Z")),
            Enqueued::Queued { .. }
        ));
        assert_eq!(
            s.due_reports(t("2027-01-01T00:00:00Z"), 10).unwrap()[0].version,
            top
        );
    });
}

// The report policy: a change's reports are queued in its commit.

/// A report policy as the daemon's would be: per change, the status of the
/// run's job (one key per job, as one context of one commit), at the next
/// version of a counter (the writer asks in commit order), with the state
/// and the state left; for a job named `bad*` also an entry whose version
/// no store keeps.
#[derive(Default)]
struct Statuses {
    calls: std::sync::atomic::AtomicU64,
}

impl ReportPolicy for Statuses {
    fn reports(&self, run: &Run, before: Option<RunState>) -> Vec<NewReport> {
        let version = 1 + self
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let status = NewReport {
            key: format!("status:{}", run.job),
            kind: ReportKind::Status,
            run_id: Some(run.id.clone()),
            version,
            payload: serde_json::json!({
                "state": run.state.as_str(),
                "before": before.map(|b| b.as_str()),
            }),
            created_at: run.created_at,
        };
        let mut out = vec![status];
        if run.job.starts_with("bad") {
            out.push(NewReport {
                key: format!("bad:{}", run.id),
                version: u64::MAX,
                ..out[0].clone()
            });
        }
        out
    }
}

/// A policy that reports nothing.
struct Silent;

impl ReportPolicy for Silent {
    fn reports(&self, _: &Run, _: Option<RunState>) -> Vec<NewReport> {
        Vec::new()
    }
}

/// Far enough ahead that every entry is due.
fn later() -> Timestamp {
    t("2030-01-01T00:00:00Z")
}

/// The due entries as (run, state reported, state left, version).
fn due_statuses(s: &dyn Store) -> Vec<(String, String, Option<String>, u64)> {
    s.due_reports(later(), 10_000)
        .unwrap()
        .into_iter()
        .map(|r| {
            let state = r.payload["state"].as_str().unwrap().to_string();
            let before = r.payload["before"].as_str().map(String::from);
            (r.run_id.unwrap(), state, before, r.version)
        })
        .collect()
}

fn status(
    run: &Run,
    state: &str,
    before: Option<&str>,
    version: u64,
) -> (String, String, Option<String>, u64) {
    (
        run.id.clone(),
        state.into(),
        before.map(String::from),
        version,
    )
}

/// A creation and each transition are in the outbox as soon as the store
/// returns them (the same commit); a newer state's entry takes the place of
/// the pending older one of its key; a request that changes nothing (an
/// existing tick, a forbidden move) reports nothing; a store without a
/// policy queues nothing; the policy is installed once.
#[test]
fn a_change_is_in_the_outbox_when_the_store_returns_it() {
    each_store(|s, _| {
        let at = t("2026-01-01T00:00:00Z");
        let unreported = s.create_run(new_periodic("early", None, 0), at).unwrap();
        s.transition(
            &unreported.run().id,
            Transition::to(RunState::Pending, at, "started"),
        )
        .unwrap();
        assert_eq!(due_statuses(s), vec![], "no policy, no reports");
        s.set_report_policy(Arc::new(Statuses::default())).unwrap();
        assert!(matches!(
            s.set_report_policy(Arc::new(Silent)),
            Err(StoreError::Invalid(_))
        ));

        let tick = Some("2026-01-01T00:00:00Z");
        let a = s.create_run(new_periodic("a", tick, 0), at).unwrap();
        let Created::New(a) = a else { panic!("new") };
        let a = Run::clone(&a);
        assert_eq!(due_statuses(s), vec![status(&a, "triggered", None, 1)]);
        // The same tick again: nothing created, nothing reported.
        assert!(matches!(
            s.create_run(new_periodic("a", tick, 0), at).unwrap(),
            Created::Existing(_)
        ));
        let pending = s
            .transition(&a.id, Transition::to(RunState::Pending, at, "started"))
            .unwrap();
        assert_eq!(
            due_statuses(s),
            vec![status(&a, "pending", Some("triggered"), 2)]
        );
        // A forbidden move writes and reports nothing.
        assert!(s
            .transition(&a.id, Transition::to(RunState::Triggered, at, "x"))
            .is_err());
        let done = s
            .transition(&a.id, Transition::to(RunState::Aborted, at, "aborted"))
            .unwrap();
        assert_eq!(
            due_statuses(s),
            vec![status(&a, "aborted", Some("pending"), 3)]
        );
        let kept = s.reports_of_run(&a.id).unwrap();
        assert_eq!(
            kept.iter()
                .map(|r| (r.version, r.outcome.as_str()))
                .collect::<Vec<_>>(),
            [(1, "superseded"), (2, "superseded"), (3, "pending")]
        );
        assert_eq!(kept[0].payload["state"], "triggered");
        assert_eq!(kept[1].payload["state"], pending.state.as_str());
        assert_eq!(kept[2].payload["state"], done.state.as_str());
        assert!(kept.iter().all(|r| r.kind == ReportKind::Status
            && r.key == "status:a"
            && r.created_at == a.created_at));
        assert_eq!(s.reports_of_run(&unreported.run().id).unwrap(), vec![]);
    });
}

/// A policy reporting nothing queues nothing.
#[test]
fn a_silent_policy_queues_nothing() {
    each_store(|s, _| {
        s.set_report_policy(Arc::new(Silent)).unwrap();
        let at = t("2026-01-01T00:00:00Z");
        let a = s.create_run(new_periodic("a", None, 0), at).unwrap();
        s.transition(&a.run().id, Transition::to(RunState::Pending, at, "x"))
            .unwrap();
        assert_eq!(s.report_counts().unwrap(), ReportCounts::default());
    });
}

/// The controller's batched transitions: each one that commits has its
/// entry (reporting the state it left), a refused one none; the runs'
/// creations and the fires' (to the tables, through the fire log, prepared
/// ahead) too.
#[test]
fn batched_transitions_and_fires_report_each_change() {
    each_store(|s, _| {
        s.set_report_policy(Arc::new(Statuses::default())).unwrap();
        let at = t("2026-01-01T00:00:00Z");
        let runs: Vec<Run> = (0..20)
            .map(|i| {
                s.create_run(new_periodic(&format!("j{i}"), None, 0), at)
                    .unwrap()
                    .run()
                    .clone()
            })
            .collect();
        let mut batch: Vec<(String, Transition)> = runs
            .iter()
            .map(|r| {
                (
                    r.id.clone(),
                    Transition::to(RunState::Pending, at, "started"),
                )
            })
            .collect();
        // A forbidden move in the middle of the batch.
        batch[7].1 = Transition::to(RunState::Success, at, "x");
        let results = s.transitions(batch);
        assert!(results[7].is_err());
        let due = due_statuses(s);
        assert_eq!(due.len(), 20);
        for (i, run) in runs.iter().enumerate() {
            let mine: Vec<_> = due.iter().filter(|d| d.0 == run.id).collect();
            if i == 7 {
                assert_eq!(mine[0].1, "triggered", "refused: its creation stays");
                assert_eq!(mine[0].2, None);
            } else {
                assert_eq!(mine[0].1, "pending");
                assert_eq!(mine[0].2.as_deref(), Some("triggered"));
            }
        }

        // Fires: one alone, several at once (a burst goes to the fire log
        // where the store has one), and prepared ahead.
        let tick = "2026-01-01T01:00:00Z";
        let one = one_new_run_each(vec![s.commit_fire(tick_fire("f0", tick, at), at)]);
        let names: Vec<String> = (1..80).map(|i| format!("f{i}")).collect();
        let many = one_new_run_each(
            s.commit_fires(names.iter().map(|p| tick_fire(p, tick, at)).collect(), at),
        );
        let ahead_names: Vec<String> = (0..30).map(|i| format!("g{i}")).collect();
        let prepared = prepare_ticks(s, &ahead_names, tick, at);
        let ahead = one_new_run_each(s.commit_prepared(prepared, at));
        // The same ticks again create and report nothing.
        let again = s.commit_fires(names.iter().map(|p| tick_fire(p, tick, at)).collect(), at);
        assert!(again
            .iter()
            .all(|r| matches!(r.as_ref().unwrap().as_slice(), [Created::Existing(_)])));
        let due = due_statuses(s);
        assert_eq!(due.len(), 20 + 1 + 79 + 30);
        for run in one.iter().chain(&many).chain(&ahead) {
            let mine: Vec<_> = due.iter().filter(|d| d.0 == run.id).collect();
            assert_eq!(mine.len(), 1, "{}", run.job);
            assert_eq!(
                (mine[0].1.as_str(), mine[0].2.as_deref()),
                ("triggered", None)
            );
        }
    });
}

/// An entry the store cannot keep (a version beyond `i64::MAX`) is left
/// out; the change commits with its other entries: a bad report never holds
/// a run back.
#[test]
fn a_report_the_store_cannot_keep_is_left_out_and_the_change_commits() {
    each_store(|s, _| {
        s.set_report_policy(Arc::new(Statuses::default())).unwrap();
        let at = t("2026-01-01T00:00:00Z");
        let bad = s.create_run(new_periodic("bad", None, 0), at).unwrap();
        let bad = bad.run().clone();
        let moved = s
            .transition(&bad.id, Transition::to(RunState::Pending, at, "started"))
            .unwrap();
        assert_eq!(s.get(&bad.id).unwrap(), Some(moved));
        assert_eq!(
            due_statuses(s),
            vec![status(&bad, "pending", Some("triggered"), 2)]
        );
        assert_eq!(s.reports_of_run(&bad.id).unwrap().len(), 2);
    });
}

/// The SQLite store writes a change and its entries in one transaction: an
/// entry that cannot be written fails the change with it (and the batch it
/// was in), nothing of either kept; once it can, both are kept, and found
/// again after a restart, the fire log's included.
#[test]
fn sqlite_a_change_and_its_reports_commit_together() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bosun.db");
    let at = t("2026-01-01T00:00:00Z");
    let tick = "2026-01-01T01:00:00Z";
    let (a, b, fired) = {
        let s = SqliteStore::open_with(
            &path,
            SqliteOptions {
                fire_log_min: 1,
                hold_fire_log: true,
                ..SqliteOptions::default()
            },
            None,
        )
        .unwrap();
        s.set_report_policy(Arc::new(Statuses::default())).unwrap();
        let a = s
            .create_run(new_periodic("a", None, 0), at)
            .unwrap()
            .run()
            .clone();
        let b = s
            .create_run(new_periodic("b", None, 0), at)
            .unwrap()
            .run()
            .clone();
        // The outbox refuses every entry, as a full disk would.
        s.execute_raw(
            "CREATE TRIGGER refuse BEFORE INSERT ON reports \
             BEGIN SELECT RAISE(ABORT, 'outbox refused'); END",
        )
        .unwrap();
        let results = s.transitions(vec![
            (
                a.id.clone(),
                Transition::to(RunState::Pending, at, "started"),
            ),
            (
                b.id.clone(),
                Transition::to(RunState::Pending, at, "started"),
            ),
        ]);
        for r in &results {
            assert!(
                matches!(r, Err(StoreError::Unavailable(m)) if m.contains("outbox refused")),
                "{r:?}"
            );
        }
        let c = s.create_run(new_periodic("c", None, 0), at);
        assert!(matches!(c, Err(StoreError::Unavailable(_))), "{c:?}");
        let fire = s.commit_fire(tick_fire("f", tick, at), at);
        assert!(matches!(fire, Err(StoreError::Unavailable(_))), "{fire:?}");
        assert_eq!(s.get(&a.id).unwrap().unwrap().state, RunState::Triggered);
        assert_eq!(s.get(&b.id).unwrap().unwrap().state, RunState::Triggered);
        assert_eq!(
            s.list(&RunFilter::default()).unwrap().len(),
            2,
            "neither c nor f's run"
        );
        assert!(s.outcomes("f").unwrap().is_empty());
        assert_eq!(
            due_statuses(&s),
            vec![
                status(&a, "triggered", None, 1),
                status(&b, "triggered", None, 2)
            ]
        );
        // Once the outbox takes entries, the same requests commit.
        s.execute_raw("DROP TRIGGER refuse").unwrap();
        let results = s.transitions(vec![
            (
                a.id.clone(),
                Transition::to(RunState::Pending, at, "started"),
            ),
            (
                b.id.clone(),
                Transition::to(RunState::Pending, at, "started"),
            ),
        ]);
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        // Committed through the fire log, which is left unfolded (a crash).
        let fired = one_new_run_each(vec![s.commit_fire(tick_fire("f", tick, at), at)]);
        (a, b, fired[0].clone())
    };
    let s = SqliteStore::open(&path).unwrap();
    assert_eq!(s.get(&a.id).unwrap().unwrap().state, RunState::Pending);
    assert_eq!(s.get(&fired.id).unwrap().as_ref(), Some(&fired));
    // (The policy was asked for the changes that failed too: versions went on.)
    let due: Vec<_> = due_statuses(&s)
        .into_iter()
        .map(|(run, state, before, _)| (run, state, before))
        .collect();
    let pending = |r: &Run| (r.id.clone(), "pending".into(), Some("triggered".into()));
    assert_eq!(
        due,
        vec![
            pending(&a),
            pending(&b),
            (fired.id.clone(), "triggered".into(), None)
        ]
    );
    for run in [&a, &b] {
        let kept = s.reports_of_run(&run.id).unwrap();
        assert_eq!(
            kept.iter().map(|r| r.outcome.as_str()).collect::<Vec<_>>(),
            ["superseded", "pending"]
        );
    }
    assert_eq!(
        s.reports_of_run(&fired.id).unwrap()[0].payload["state"],
        "triggered"
    );
}

// What the replicas of `bosun serve` share: sessions, secrets, documents.

fn session(id: &str, role: &str, expires_at: &str) -> bosun_store::Session {
    bosun_store::Session {
        id_hash: bosun_store::session_id_hash(id),
        role: role.into(),
        expires_at: t(expires_at),
    }
}

#[test]
fn sessions_are_kept_by_hash_and_found_until_they_expire() {
    each_store(|s, _| {
        let hash = bosun_store::session_id_hash("cookie-a");
        assert_eq!(hash.len(), 64, "hex SHA-256");
        assert!(!hash.contains("cookie"));
        assert_eq!(s.session(&hash, t("2026-01-01T00:00:00Z")).unwrap(), None);
        // Kept to the microsecond.
        s.put_session(&session(
            "cookie-a",
            "operator",
            "2026-01-01T12:00:00.123456789Z",
        ))
        .unwrap();
        let kept = session("cookie-a", "operator", "2026-01-01T12:00:00.123456Z");
        assert_eq!(
            s.session(&hash, t("2026-01-01T00:00:00Z")).unwrap(),
            Some(kept.clone())
        );
        assert_eq!(
            s.session(&hash, t("2026-01-01T12:00:00.123455Z")).unwrap(),
            Some(kept)
        );
        // Expired at its expiry, and not found by its id either.
        assert_eq!(
            s.session(&hash, t("2026-01-01T12:00:00.123456Z")).unwrap(),
            None
        );
        assert_eq!(
            s.session("cookie-a", t("2026-01-01T00:00:00Z")).unwrap(),
            None
        );
        // Replaced whole under its hash.
        s.put_session(&session("cookie-a", "reader", "2026-01-02T00:00:00Z"))
            .unwrap();
        assert_eq!(
            s.session(&hash, t("2026-01-01T13:00:00Z")).unwrap(),
            Some(session("cookie-a", "reader", "2026-01-02T00:00:00Z"))
        );
        // Deleted, once; an expired one not pruned yet is still there to delete.
        assert!(s.delete_session(&hash).unwrap());
        assert!(!s.delete_session(&hash).unwrap());
        assert_eq!(s.session(&hash, t("2026-01-01T00:00:00Z")).unwrap(), None);
        s.put_session(&session("cookie-b", "reader", "2026-01-01T00:00:00Z"))
            .unwrap();
        assert!(s
            .delete_session(&bosun_store::session_id_hash("cookie-b"))
            .unwrap());
    });
}

#[test]
fn pruning_sessions_drops_the_expired_then_the_earliest_to_expire() {
    each_store(|s, _| {
        let now = t("2026-01-01T12:00:00Z");
        for (id, expires) in [
            ("gone-1", "2026-01-01T11:00:00Z"),
            ("gone-2", "2026-01-01T12:00:00Z"), // expires at now: expired
            ("early", "2026-01-01T13:00:00Z"),
            ("tie-x", "2026-01-01T14:00:00Z"),
            ("tie-y", "2026-01-01T14:00:00Z"),
            ("late", "2026-01-01T15:00:00Z"),
        ] {
            s.put_session(&session(id, "reader", expires)).unwrap();
        }
        let live = |id: &str| {
            s.session(&bosun_store::session_id_hash(id), now)
                .unwrap()
                .is_some()
        };
        // Only the expired go while the live ones fit.
        assert_eq!(s.prune_sessions(now, 10).unwrap(), 2);
        assert!(!s
            .delete_session(&bosun_store::session_id_hash("gone-1"))
            .unwrap());
        assert!(!s
            .delete_session(&bosun_store::session_id_hash("gone-2"))
            .unwrap());
        assert_eq!(s.prune_sessions(now, 4).unwrap(), 0);
        // Beyond the bound, the earliest to expire go first; of two that
        // expire together, the one whose hash sorts first.
        let (first, second) = {
            let (x, y) = (
                bosun_store::session_id_hash("tie-x"),
                bosun_store::session_id_hash("tie-y"),
            );
            if x < y {
                ("tie-x", "tie-y")
            } else {
                ("tie-y", "tie-x")
            }
        };
        assert_eq!(s.prune_sessions(now, 2).unwrap(), 2);
        assert!(!live("early"));
        assert!(!live(first));
        assert!(live(second));
        assert!(live("late"));
        // Keeping none deletes them all.
        assert_eq!(s.prune_sessions(now, 0).unwrap(), 2);
        assert!(!live(second) && !live("late"));
    });
}

#[test]
fn a_shared_secret_is_made_once_even_by_racing_callers() {
    const THREADS: u8 = 8;
    each_store(|s, _| {
        assert_eq!(s.shared_secret("csrf", [1; 32]).unwrap(), [1; 32]);
        assert_eq!(s.shared_secret("csrf", [2; 32]).unwrap(), [1; 32]);
        assert_eq!(s.shared_secret("other", [3; 32]).unwrap(), [3; 32]);
        // Racing makers of one secret, each with a candidate of its own, all
        // end with the same one of them.
        let got: Vec<[u8; 32]> = std::thread::scope(|sc| {
            let handles: Vec<_> = (0..THREADS)
                .map(|i| sc.spawn(move || s.shared_secret("raced", [10 + i; 32]).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(got.iter().all(|k| *k == got[0]), "{got:?}");
        assert!((10..10 + THREADS).any(|i| got[0] == [i; 32]));
        assert_eq!(s.shared_secret("raced", [99; 32]).unwrap(), got[0]);
    });
}

#[test]
fn documents_are_written_by_compare_and_set() {
    each_store(|s, _| {
        assert_eq!(s.document("plan").unwrap(), None);
        let conflict = |r: Result<u64, StoreError>| {
            assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
        };
        // Only an absent document is written expecting 0.
        conflict(s.put_document("plan", 1, b"one"));
        assert_eq!(s.document("plan").unwrap(), None);
        assert_eq!(s.put_document("plan", 0, b"one").unwrap(), 1);
        conflict(s.put_document("plan", 0, b"again"));
        assert_eq!(s.put_document("plan", 1, b"two").unwrap(), 2);
        conflict(s.put_document("plan", 1, b"stale"));
        conflict(s.put_document("plan", 3, b"ahead"));
        assert_eq!(
            s.document("plan").unwrap(),
            Some(bosun_store::StoredDocument {
                version: 2,
                body: b"two".to_vec()
            })
        );
        // Documents are apart; an empty body is a body.
        assert_eq!(s.put_document("other", 0, b"").unwrap(), 1);
        assert_eq!(s.document("other").unwrap().unwrap().body, b"");
        assert_eq!(s.document("plan").unwrap().unwrap().version, 2);
        // A version that would not fit is refused before anything.
        let r = s.put_document("plan", i64::MAX as u64, b"x");
        assert!(matches!(r, Err(StoreError::Invalid(_))), "{r:?}");
        assert_eq!(s.document("plan").unwrap().unwrap().body, b"two");
    });
}

#[test]
fn of_racing_writes_of_one_version_exactly_one_wins_and_others_are_unharmed() {
    const THREADS: usize = 8;
    each_store(|s, _| {
        assert_eq!(s.put_document("plan", 0, b"base").unwrap(), 1);
        // Every thread writes the version it read, beside a session of its
        // own: the conflicts of the losers fail nothing else (a store that
        // commits several requests together keeps the others).
        let results: Vec<Result<u64, StoreError>> = std::thread::scope(|sc| {
            let handles: Vec<_> = (0..THREADS)
                .map(|i| {
                    sc.spawn(move || {
                        let body = format!("writer {i}");
                        let r = s.put_document("plan", 1, body.as_bytes());
                        s.put_session(&session(&format!("c{i}"), "reader", "2026-01-02T00:00:00Z"))
                            .unwrap();
                        r
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<usize> = (0..THREADS).filter(|i| results[*i].is_ok()).collect();
        assert_eq!(won.len(), 1, "{results:?}");
        assert_eq!(results[won[0]], Ok(2));
        for r in &results {
            assert!(matches!(r, Ok(2) | Err(StoreError::Conflict(_))), "{r:?}");
        }
        let doc = s.document("plan").unwrap().unwrap();
        assert_eq!(
            (doc.version, doc.body),
            (2, format!("writer {}", won[0]).into_bytes())
        );
        for i in 0..THREADS {
            let hash = bosun_store::session_id_hash(&format!("c{i}"));
            assert!(s
                .session(&hash, t("2026-01-01T00:00:00Z"))
                .unwrap()
                .is_some());
        }
    });
}

#[test]
fn sqlite_keeps_sessions_secrets_and_documents_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bosun.db");
    {
        let s = SqliteStore::open(&path).unwrap();
        s.put_session(&session("c", "operator", "2026-01-02T00:00:00Z"))
            .unwrap();
        s.shared_secret("csrf", [7; 32]).unwrap();
        s.put_document("plan", 0, b"{}").unwrap();
    }
    let s = SqliteStore::open(&path).unwrap();
    assert_eq!(
        s.session(
            &bosun_store::session_id_hash("c"),
            t("2026-01-01T00:00:00Z")
        )
        .unwrap(),
        Some(session("c", "operator", "2026-01-02T00:00:00Z"))
    );
    assert_eq!(s.shared_secret("csrf", [8; 32]).unwrap(), [7; 32]);
    assert_eq!(s.put_document("plan", 1, b"[]").unwrap(), 2);
}

#[test]
fn a_store_without_shared_state_refuses_it() {
    let s = Required(MemoryStore::new());
    let refused = |r: Result<(), StoreError>| {
        assert!(matches!(r, Err(StoreError::Unavailable(_))), "{r:?}");
    };
    let at = t("2026-01-01T00:00:00Z");
    refused(s.put_session(&session("c", "reader", "2026-01-02T00:00:00Z")));
    refused(s.session("h", at).map(drop));
    refused(s.delete_session("h").map(drop));
    refused(s.prune_sessions(at, 1).map(drop));
    refused(s.shared_secret("csrf", [0; 32]).map(drop));
    refused(s.document("plan").map(drop));
    refused(s.put_document("plan", 0, b"").map(drop));
}

/// A run's log and artifacts, as a store other processes share keeps them
/// (memory stands in for the rules, PostgreSQL keeps them for replicas);
/// SQLite keeps none and says so.
#[test]
fn run_logs_and_files_are_kept_whole_bounded_and_with_their_run() {
    use bosun_store::files::{LOG_CUT, LOG_LIMIT};
    use bosun_store::RunFile;
    let keeping: Vec<Box<dyn Store>> =
        vec![Box::new(MemoryStore::new()), Box::new(postgres_store(None))];
    for s in &keeping {
        let s = s.as_ref();
        let tick = "2026-01-01T00:00:00Z";
        let run = s
            .create_run(new_periodic("p", Some(tick), 0), t(tick))
            .unwrap()
            .run()
            .clone();
        let other = s
            .create_run(
                new_periodic("p", Some("2026-01-02T00:00:00Z"), 0),
                t("2026-01-02T00:00:00Z"),
            )
            .unwrap()
            .run()
            .clone();
        assert_eq!(s.run_log(&run.id, 0, 100).unwrap(), None);
        assert!(matches!(
            s.append_run_log("nope", 0, b"x", false),
            Err(StoreError::NotFound(_))
        ));
        assert_eq!(s.append_run_log(&run.id, 0, b"hello ", false).unwrap(), 6);
        // A repeat and an overlap add only what is new.
        assert_eq!(s.append_run_log(&run.id, 0, b"hello ", false).unwrap(), 6);
        assert_eq!(
            s.append_run_log(&run.id, 3, b"lo world", false).unwrap(),
            11
        );
        // A gap is refused and writes nothing.
        assert!(matches!(
            s.append_run_log(&run.id, 12, b"!", false),
            Err(StoreError::Conflict(_))
        ));
        let whole = s.run_log(&run.id, 0, 100).unwrap().unwrap();
        assert_eq!(whole.data, b"hello world");
        assert_eq!((whole.len, whole.complete), (11, false));
        // Slices from an offset, at most `max`, across appends.
        let part = s.run_log(&run.id, 4, 4).unwrap().unwrap();
        assert_eq!(part.data, b"o wo");
        assert!(s.run_log(&run.id, 40, 4).unwrap().unwrap().data.is_empty());
        assert_eq!(s.append_run_log(&run.id, 11, b"\n", true).unwrap(), 12);
        assert!(s.run_log(&run.id, 0, 100).unwrap().unwrap().complete);
        // A whole log takes nothing more.
        assert_eq!(s.append_run_log(&run.id, 12, b"late", false).unwrap(), 12);
        assert_eq!(
            s.run_log(&run.id, 0, 100).unwrap().unwrap().data,
            b"hello world\n"
        );

        // A log past the limit is cut there, and is then whole.
        let big = vec![b'x'; LOG_LIMIT as usize - 1];
        s.append_run_log(&other.id, 0, &big, false).unwrap();
        let len = s
            .append_run_log(&other.id, big.len() as u64, b"yz", false)
            .unwrap();
        assert_eq!(len, LOG_LIMIT + LOG_CUT.len() as u64);
        let tail = s.run_log(&other.id, LOG_LIMIT - 1, 1000).unwrap().unwrap();
        assert_eq!(tail.data, [b"y".as_slice(), LOG_CUT.as_bytes()].concat());
        assert!(tail.complete);

        // Files: replaced by a put, listed by path, bad paths refused.
        let file = |p: &str, d: &[u8]| RunFile {
            path: p.into(),
            data: d.to_vec(),
            modified: Some(t("2026-01-01T00:00:01.123456789Z")),
        };
        assert_eq!(s.run_files(&run.id).unwrap(), None);
        assert!(matches!(
            s.put_run_files(&run.id, vec![file("a/../b", b"")], false),
            Err(StoreError::Invalid(_))
        ));
        assert!(matches!(
            s.put_run_files("nope", vec![file("a", b"")], false),
            Err(StoreError::NotFound(_))
        ));
        s.put_run_files(&run.id, vec![file("old", b"1")], true)
            .unwrap();
        assert!(s.run_files(&run.id).unwrap().unwrap().truncated);
        s.put_run_files(
            &run.id,
            vec![
                file("finished.json", b"{}"),
                file("artifacts/junit.xml", b"<x/>"),
                file("build-log.txt", b"log"),
            ],
            false,
        )
        .unwrap();
        let listed = s.run_files(&run.id).unwrap().unwrap();
        assert!(!listed.truncated);
        assert_eq!(
            listed
                .files
                .iter()
                .map(|f| (f.path.as_str(), f.size))
                .collect::<Vec<_>>(),
            [
                ("artifacts/junit.xml", 4),
                ("build-log.txt", 3),
                ("finished.json", 2)
            ]
        );
        assert_eq!(
            listed.files[0].modified,
            Some(t("2026-01-01T00:00:01.123456Z"))
        );
        let got = s.run_file(&run.id, "artifacts/junit.xml").unwrap().unwrap();
        assert_eq!(got.data, b"<x/>");
        assert_eq!(s.run_file(&run.id, "old").unwrap(), None);
        assert_eq!(s.run_file(&other.id, "finished.json").unwrap(), None);

        // An ended run's log not whole is left open, for a new leader to
        // finish; a whole one is not.
        let third = s
            .create_run(
                new_periodic("q", Some("2026-01-03T00:00:00Z"), 0),
                t("2026-01-03T00:00:00Z"),
            )
            .unwrap()
            .run()
            .clone();
        s.append_run_log(&third.id, 0, b"partial", false).unwrap();
        assert_eq!(
            s.logs_left_open(10).unwrap(),
            Vec::<String>::new(),
            "none ended yet"
        );
        s.transition(&third.id, Transition::to(RunState::Error, t(tick), "x"))
            .unwrap();
        assert_eq!(s.logs_left_open(10).unwrap(), vec![third.id.clone()]);
        assert_eq!(s.logs_left_open(0).unwrap(), Vec::<String>::new());
        s.append_run_log(&third.id, 7, b"", true).unwrap();
        assert_eq!(s.logs_left_open(10).unwrap(), Vec::<String>::new());

        // They go with their run.
        s.transition(&run.id, Transition::to(RunState::Error, t(tick), "x"))
            .unwrap();
        s.transition(&other.id, Transition::to(RunState::Error, t(tick), "x"))
            .unwrap();
        let gone = s
            .delete_completed_before(t("2026-02-01T00:00:00Z"))
            .unwrap();
        assert_eq!(gone, vec![run.id.clone()], "the latest run of p stays");
        assert_eq!(s.run_log(&run.id, 0, 10).unwrap(), None);
        assert_eq!(s.run_files(&run.id).unwrap(), None);
        assert!(s.run_log(&other.id, 0, 10).unwrap().is_some());
    }
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(dir.path().join("bosun.db")).unwrap();
    assert!(matches!(
        sqlite.append_run_log("x", 0, b"", false),
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        sqlite.run_files("x"),
        Err(StoreError::Unavailable(_))
    ));
}
