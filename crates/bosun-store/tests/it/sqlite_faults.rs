//! SQLite faults: a full disk and a database locked by another process. The write
//! fails with `Unavailable` (the API answers 503 with Retry-After) and nothing is
//! half-written; once the fault clears, writes work again. And one that would
//! come slowly: a WAL that grows for as long as a steady load lasts.

use std::collections::BTreeMap;
use std::time::Duration;

use bosun_config::types::JobType;
use bosun_store::sqlite::{SqliteOptions, SqliteStore};
use bosun_store::{NewRun, RunFilter, RunState, Store, StoreError, Transition};
use jiff::Timestamp;

fn new_run(job: &str, spec_size: usize) -> NewRun {
    NewRun {
        job: job.into(),
        job_type: JobType::Periodic,
        periodic: Some(job.into()),
        configured_cluster: "default".into(),
        state: RunState::Triggered,
        refs: None,
        extra_refs: vec![],
        labels: BTreeMap::new().into(),
        annotations: BTreeMap::new().into(),
        spec: serde_json::json!({"blob": "x".repeat(spec_size)}).into(),
        scheduled_at: Some(Timestamp::from_second(1_800_000_000).unwrap()),
        attempt: 0,
        description: String::new(),
    }
}

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

#[test]
fn disk_full_writes_nothing_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(dir.path().join("bosun.db")).unwrap();
    s.create_run(new_run("small", 10), now()).unwrap();
    // Cap the database at its current size (in pages).
    let pages: i64 = rusqlite::Connection::open(s.path())
        .unwrap()
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    s.execute_raw(&format!("PRAGMA max_page_count = {pages}"))
        .unwrap();
    let err = s.create_run(new_run("big", 200_000), now()).unwrap_err();
    assert!(
        matches!(err, StoreError::Unavailable(ref m) if m.contains("full")),
        "{err:?}"
    );
    let jobs: Vec<String> = s
        .list(&RunFilter::default())
        .unwrap()
        .into_iter()
        .map(|r| r.job)
        .collect();
    assert_eq!(jobs, ["small"], "nothing of the failed run was written");
    s.execute_raw("PRAGMA max_page_count = 1073741823").unwrap();
    s.create_run(new_run("big", 200_000), now()).unwrap();
    assert_eq!(s.list(&RunFilter::default()).unwrap().len(), 2);
}

#[test]
fn a_locked_database_is_unavailable_not_stuck() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bosun.db");
    let opts = SqliteOptions {
        busy_timeout: Duration::from_millis(200),
        ..SqliteOptions::default()
    };
    let s = SqliteStore::open_with(&path, opts, None).unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = std::time::Instant::now();
    let err = s.create_run(new_run("a", 10), now()).unwrap_err();
    assert!(
        matches!(err, StoreError::Unavailable(ref m) if m.contains("locked")),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "gave up after the busy timeout"
    );
    other.execute_batch("ROLLBACK").unwrap();
    s.create_run(new_run("a", 10), now()).unwrap();
    assert_eq!(s.list(&RunFilter::default()).unwrap().len(), 1);
}

/// The writer keeps its own copy of the active runs it writes; a batch that
/// fails halfway must leave none of its changes there (a run moved by the
/// failed batch starts again from what is committed).
#[test]
fn a_failed_batch_leaves_nothing_in_the_writers_copies() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(dir.path().join("bosun.db")).unwrap();
    let pages: i64 = rusqlite::Connection::open(s.path())
        .unwrap()
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    s.execute_raw(&format!("PRAGMA max_page_count = {}", pages + 2))
        .unwrap();
    let id = s
        .create_run(new_run("small", 10), now())
        .unwrap()
        .run()
        .id
        .clone();
    let to = |description: String| {
        (
            id.clone(),
            Transition::to(RunState::Pending, now(), description),
        )
    };
    // The first transition is applied, the second does not fit: the batch
    // fails as a whole.
    let results = s.transitions(vec![to("Job triggered.".into()), to("x".repeat(200_000))]);
    assert!(
        results.iter().all(|r| r.is_err()),
        "the whole batch fails: {results:?}"
    );
    assert_eq!(s.get(&id).unwrap().unwrap().state, RunState::Triggered);
    // From `triggered` again: a first start, not a revival of a pending run.
    let run = s.transition(&id, to("Job triggered.".into()).1).unwrap();
    assert_eq!(run.state, RunState::Pending);
    assert_eq!(run.pod_revival_count, 0, "{run:?}");
    let run = s
        .transition(
            &id,
            Transition::to(RunState::Success, now(), "Job succeeded."),
        )
        .unwrap();
    assert!(run.completed_at.is_some());
    // A completed run never moves, whichever copy the writer starts from.
    let err = s.transition(&id, to("again".into()).1).unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidTransition { .. }),
        "{err:?}"
    );
}

/// The store's writer finishes a checkpoint itself once the WAL is long, so
/// SQLite starts the WAL over instead of appending to it for as long as the
/// load lasts.
#[test]
fn the_wal_stays_short_under_a_steady_stream_of_commits() {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("bosun.db-wal");
    let s = SqliteStore::open(dir.path().join("bosun.db")).unwrap();
    // One commit after another, with no pause for the checkpoint thread to
    // catch up: each commit writes about ten frames (the row and its
    // indexes), so 3,000 of them would grow an unbounded WAL past 80 MB.
    let mut longest = 0;
    for i in 0..3_000 {
        s.create_run(new_run(&format!("job-{i}"), 10), now())
            .unwrap();
        if i % 50 == 49 {
            longest = longest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
        }
    }
    // 4,096 frames of 4 KiB, a quarter more for a retry, and one commit.
    assert!(
        longest < 24 << 20,
        "the WAL grew to {longest} bytes under a steady load"
    );
    assert!(longest > 0, "the WAL was never seen");
}
