//! The WAL stays short under a steady stream of commits: the store's writer
//! finishes a checkpoint itself once the WAL is long, so SQLite starts it over
//! instead of appending to it for as long as the load lasts.

use std::collections::BTreeMap;

use bosun_config::types::JobType;
use bosun_store::sqlite::SqliteStore;
use bosun_store::{NewRun, RunState, Store};
use jiff::Timestamp;

fn manual_run(job: &str) -> NewRun {
    NewRun {
        job: job.into(),
        job_type: JobType::Periodic,
        periodic: Some(job.into()),
        configured_cluster: "default".into(),
        state: RunState::Triggered,
        refs: None,
        extra_refs: vec![],
        labels: BTreeMap::from([("created-by-prow".to_string(), "true".to_string())]).into(),
        annotations: BTreeMap::new().into(),
        spec: serde_json::json!({"containers": [{"image": "x", "command": ["/bin/true"]}]}).into(),
        scheduled_at: None,
        attempt: 0,
        description: String::new(),
    }
}

#[test]
fn the_wal_stays_short_under_a_steady_stream_of_commits() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bosun.db");
    let wal = dir.path().join("bosun.db-wal");
    let s = SqliteStore::open(&db).unwrap();
    let at = Timestamp::from_second(1_800_000_000).unwrap();
    // One commit after another, with no pause for the checkpoint thread to
    // catch up: each commit writes about ten frames (the row and its
    // indexes), so 3,000 of them would grow an unbounded WAL past 100 MB.
    let mut longest = 0;
    for i in 0..3_000 {
        s.create_run(manual_run(&format!("job-{}", i % 50)), at)
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
