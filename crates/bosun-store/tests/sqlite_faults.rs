//! SQLite faults: a full disk and a database locked by another process. The write
//! fails with `Unavailable` (the API answers 503 with Retry-After) and nothing is
//! half-written; once the fault clears, writes work again.

use std::collections::BTreeMap;
use std::time::Duration;

use bosun_config::types::JobType;
use bosun_store::sqlite::{SqliteOptions, SqliteStore};
use bosun_store::{NewRun, RunFilter, RunState, Store, StoreError};
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
