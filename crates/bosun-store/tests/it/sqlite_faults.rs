//! SQLite faults: a full disk and a database locked by another process. The write
//! fails with `Unavailable` (the API answers 503 with Retry-After) and nothing is
//! half-written; once the fault clears, writes work again. And two that would
//! come slowly: a WAL that grows for as long as a steady load lasts, and a
//! checkpoint thread woken by every commit.

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

/// The store's checkpoint threads in this process (their names, as the
/// kernel keeps them, are cut to 15 bytes): their ids, each with its start
/// time, since an ended thread's id is given to new ones.
fn checkpoint_threads() -> std::collections::BTreeSet<(String, String)> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| {
            let t = t.ok()?.file_name().into_string().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/self/task/{t}/comm")).ok()?;
            let stat = std::fs::read_to_string(format!("/proc/self/task/{t}/stat")).ok()?;
            // The start time is the 22nd field, the 20th after the name's `)`.
            let started = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(19)?
                .to_string();
            (comm.trim_end() == "bosun-store-che").then_some((t, started))
        })
        .collect()
}

/// A thread's voluntary context switches so far (0 once it has ended).
fn voluntary_switches(tid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// The checkpoint thread hears of commits without being woken by each: under
/// a stream of commits it wakes about once a pause (500 ms), not once a
/// commit (each wake-up a system call of the writer's and a context switch).
#[test]
fn a_stream_of_commits_does_not_wake_the_checkpoint_thread_each_time() {
    let dir = tempfile::tempdir().unwrap();
    let before = checkpoint_threads();
    let s = SqliteStore::open(dir.path().join("bosun.db")).unwrap();
    // Another test may open a store meanwhile: every new checkpoint thread
    // is watched, and each must stay quiet (a busy store's too).
    // A thread names itself once it runs, so it is looked for a while.
    let mut ours: Vec<String> = Vec::new();
    for _ in 0..200 {
        ours = checkpoint_threads()
            .difference(&before)
            .map(|(tid, _)| tid.clone())
            .collect();
        if !ours.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!ours.is_empty(), "no checkpoint thread found");
    let switches0: Vec<u64> = ours.iter().map(|t| voluntary_switches(t)).collect();
    let start = std::time::Instant::now();
    let mut commits = 0u64;
    while start.elapsed() < Duration::from_millis(1200) || commits < 500 {
        s.create_run(new_run(&format!("job-{commits}"), 10), now())
            .unwrap();
        commits += 1;
    }
    let woken = ours
        .iter()
        .zip(&switches0)
        .map(|(t, s0)| voluntary_switches(t).saturating_sub(*s0))
        .max()
        .unwrap();
    // About three passes, each with its waits and its checkpoint's I/O
    // (every read and sync that waits for the disk is a switch too: dozens
    // on a slow disk). A wake-up a commit would switch about once a commit.
    assert!(
        woken * 4 < commits,
        "the checkpoint thread switched {woken} times for {commits} commits"
    );
}

/// Two transitions of one run in a row in a batch write its row once (the
/// second's write covers the first); when the second is refused by its
/// rules, the first is still written, and the batch's other requests
/// stand.
#[test]
fn a_refused_transition_after_another_of_its_run_keeps_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(dir.path().join("bosun.db")).unwrap();
    let id = |job| {
        s.create_run(new_run(job, 10), now())
            .unwrap()
            .run()
            .id
            .clone()
    };
    let (a, b) = (id("a"), id("b"));
    let to = |id: &String, state| (id.clone(), Transition::to(state, now(), "moved"));
    let results = s.transitions(vec![
        to(&a, RunState::Pending),
        // Refused: a pending run does not go back.
        to(&a, RunState::Triggered),
        to(&b, RunState::Pending),
        to(&b, RunState::Success),
    ]);
    assert!(results[0].is_ok(), "{results:?}");
    assert!(
        matches!(results[1], Err(StoreError::InvalidTransition { .. })),
        "{results:?}"
    );
    assert!(results[2].is_ok() && results[3].is_ok(), "{results:?}");
    // Read back from the file, by another store.
    drop(s);
    let s = SqliteStore::open(dir.path().join("bosun.db")).unwrap();
    let a = s.get(&a).unwrap().unwrap();
    assert_eq!(a.state, RunState::Pending, "{a:?}");
    assert!(a.pending_at.is_some(), "{a:?}");
    let b = s.get(&b).unwrap().unwrap();
    assert_eq!(b.state, RunState::Success, "{b:?}");
    assert!(b.pending_at.is_some() && b.completed_at.is_some(), "{b:?}");
}
