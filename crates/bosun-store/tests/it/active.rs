//! The in-memory active runs agree with the store: kept by its commits while
//! it runs, and read back from it after a restart.

use std::collections::BTreeMap;
use std::sync::Arc;

use bosun_config::types::JobType;
use bosun_store::active::ActiveRuns;
use bosun_store::sqlite::{SqliteOptions, SqliteStore};
use bosun_store::{NewRun, RunState, Store, Transition};
use jiff::Timestamp;

fn new_run(job: &str, cluster: &str) -> NewRun {
    NewRun {
        job: job.into(),
        job_type: JobType::Periodic,
        periodic: None,
        configured_cluster: cluster.into(),
        state: RunState::Triggered,
        refs: None,
        extra_refs: vec![],
        labels: BTreeMap::new().into(),
        annotations: BTreeMap::new().into(),
        spec: serde_json::json!({}).into(),
        scheduled_at: None,
        attempt: 0,
        description: String::new(),
    }
}

/// A store in `dir` telling `active` of its commits.
fn open_in(dir: &tempfile::TempDir, active: &Arc<ActiveRuns>) -> SqliteStore {
    SqliteStore::open_with(
        dir.path().join("bosun.db"),
        SqliteOptions::default(),
        Some(active.clone()),
    )
    .unwrap()
}

fn ids(runs: &[Arc<bosun_store::Run>]) -> Vec<&str> {
    runs.iter().map(|r| r.job.as_str()).collect()
}

#[test]
fn active_runs_follow_commits_and_reload_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bosun.db");
    let at = Timestamp::from_second(1_800_000_000).unwrap();
    let active = Arc::new(ActiveRuns::default());
    let store =
        SqliteStore::open_with(&path, SqliteOptions::default(), Some(active.clone())).unwrap();
    assert_eq!(active.load(&store).unwrap(), 0);
    let mut made = Vec::new();
    for (job, cluster) in [
        ("a1", "a"),
        ("b1", "b"),
        ("a2", "a"),
        ("a3", "a"),
        ("x1", "gone"),
    ] {
        made.push(
            store
                .create_run(new_run(job, cluster), at)
                .unwrap()
                .run()
                .clone(),
        );
    }
    assert_eq!(
        ids(&active.waiting("a", 10)),
        ["a1", "a2", "a3"],
        "oldest first"
    );
    assert_eq!(ids(&active.waiting("a", 2)), ["a1", "a2"]);
    assert_eq!(ids(&active.waiting("b", 10)), ["b1"]);
    assert_eq!(
        ids(&active.waiting_elsewhere(|c| c == "a" || c == "b", 10)),
        ["x1"]
    );
    // a1 starts, b1 starts and ends, x1 ends.
    store
        .transition(&made[0].id, Transition::to(RunState::Pending, at, ""))
        .unwrap();
    store
        .transition(&made[1].id, Transition::to(RunState::Pending, at, ""))
        .unwrap();
    store
        .transition(&made[1].id, Transition::to(RunState::Success, at, ""))
        .unwrap();
    store
        .transition(&made[4].id, Transition::to(RunState::Error, at, ""))
        .unwrap();
    let view = |a: &ActiveRuns| {
        (
            ids(&a.pending())
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>(),
            ids(&a.waiting("a", 10))
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>(),
            a.waiting("b", 10).len(),
            a.waiting_elsewhere(|c| c == "a" || c == "b", 10).len(),
            a.len(),
        )
    };
    let expected = (
        vec!["a1".to_string()],
        vec!["a2".to_string(), "a3".to_string()],
        0,
        0,
        3,
    );
    assert_eq!(view(&active), expected);
    assert_eq!(active.get(&made[0].id).unwrap().state, RunState::Pending);
    assert!(active.get(&made[1].id).is_none(), "complete runs leave");
    drop(store);

    // A restart reads the same view back from the store.
    let again = Arc::new(ActiveRuns::default());
    let store =
        SqliteStore::open_with(&path, SqliteOptions::default(), Some(again.clone())).unwrap();
    assert_eq!(again.load(&store).unwrap(), 3);
    assert_eq!(view(&again), expected);
}

/// The count of commits moves with every committed creation, transition and
/// retention pass that deleted runs, and not with a refused change or a
/// pass that deleted nothing.
#[test]
fn the_count_of_changes_moves_with_each_commit() {
    let dir = tempfile::tempdir().unwrap();
    let at = Timestamp::from_second(1_800_000_000).unwrap();
    let active = Arc::new(ActiveRuns::default());
    let store = open_in(&dir, &active);
    assert_eq!(active.changes(), 0);
    let run = store
        .create_run(new_run("a", "c"), at)
        .unwrap()
        .run()
        .clone();
    assert_eq!(active.changes(), 1);
    let to = |state| Transition::to(state, at, "");
    store.transition(&run.id, to(RunState::Pending)).unwrap();
    assert_eq!(active.changes(), 2);
    // Refused: pending cannot go back to triggered.
    assert!(store.transition(&run.id, to(RunState::Triggered)).is_err());
    assert_eq!(active.changes(), 2);
    store.transition(&run.id, to(RunState::Success)).unwrap();
    assert_eq!(active.changes(), 3);
    // Nothing old enough: nothing deleted, nothing changed.
    assert!(store.delete_completed_before(at).unwrap().is_empty());
    assert_eq!(active.changes(), 3);
    let later = Timestamp::from_second(1_800_000_100).unwrap();
    assert_eq!(store.delete_completed_before(later).unwrap(), vec![run.id]);
    assert_eq!(active.changes(), 4);
}

/// With a waker (the daemon's controller), the runs a burst of fires
/// prepared ahead created come in after the caller has its answer, all of
/// them before the waker is called, once per commit; without one, they are
/// in before the answer.
#[test]
fn a_prepared_burst_reaches_the_view_then_wakes_its_reader() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let at = Timestamp::from_second(1_800_000_000).unwrap();
    let tick = Timestamp::from_second(1_800_000_060).unwrap();
    let fire = |p: &str| bosun_store::Fire {
        runs: vec![NewRun {
            periodic: Some(p.into()),
            scheduled_at: Some(tick),
            ..new_run(p, "c")
        }],
        outcomes: vec![bosun_store::TickOutcome {
            periodic: p.into(),
            first_tick: tick,
            last_tick: tick,
            count: 1,
            outcome: "run".into(),
            run_id: None,
            recorded_at: at,
        }],
        state: bosun_store::PeriodicState {
            periodic: p.into(),
            schedule_hash: "h".into(),
            first_seen: at,
            last_tick: Some(tick),
            paused: false,
            queued: None,
        },
    };
    let burst = |store: &SqliteStore, names: &[&str]| {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let versions = store.periodic_versions(&names).unwrap();
        let prepared = store
            .prepare_fires(names.iter().map(|n| fire(n)).zip(versions).collect())
            .unwrap();
        for r in store.commit_prepared(prepared, at) {
            r.unwrap();
        }
    };

    // No waker: in before the answer.
    let dir = tempfile::tempdir().unwrap();
    let active = Arc::new(ActiveRuns::default());
    let store = open_in(&dir, &active);
    burst(&store, &["p1", "p2", "p3"]);
    assert_eq!(active.len(), 3);
    drop(store);

    // A waker: called once per commit, with every run of it in.
    let dir = tempfile::tempdir().unwrap();
    let active = Arc::new(ActiveRuns::default());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    {
        let (weak, seen, calls) = (Arc::downgrade(&active), seen.clone(), calls.clone());
        active.wake_after_prepared(move || {
            seen.lock().unwrap().push(weak.upgrade().unwrap().len());
            calls.fetch_add(1, Ordering::SeqCst);
        });
    }
    let store = open_in(&dir, &active);
    burst(&store, &["p1", "p2", "p3"]);
    // Whatever the writer commits next comes after the view has them.
    store.create_run(new_run("after", "c"), at).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(*seen.lock().unwrap(), vec![3]);
    assert_eq!(ids(&active.waiting("c", 10)), ["p1", "p2", "p3", "after"]);
    // The next burst: once more.
    burst(&store, &["q1", "q2"]);
    store.create_run(new_run("after2", "c"), at).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(*seen.lock().unwrap(), vec![3, 6]);
}
