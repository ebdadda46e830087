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
    let store = SqliteStore::open_with(
        dir.path().join("bosun.db"),
        SqliteOptions::default(),
        Some(active.clone()),
    )
    .unwrap();
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
