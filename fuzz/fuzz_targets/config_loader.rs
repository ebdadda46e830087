//! Fuzzes the whole configuration loader: `bosun_config::load` over an in-memory
//! file tree built from the input.
//!
//! Input format: the bytes are split on NUL (0x00), at most into four parts:
//!
//! 0. a job-config file, `/cfg/jobs/org/repo/fuzz.yaml` (loaded through the directory
//!    walk of `--job-config /cfg/jobs`);
//! 1. if present, Prow's central `/cfg/config.yaml` (`--config`);
//! 2. if present, an in-repo `/repo/.prow.yaml` of `org/repo` (`--in-repo org/repo=/repo`);
//! 3. if present, a Lighthouse `/repo/.lighthouse/jenkins-x/triggers.yaml` of the same checkout.
//!
//! An input without NUL is therefore just one job-config file, so any real job-config
//! YAML is a valid seed. NUL is never valid inside YAML, so splitting on it loses nothing.
//!
//! Invariants checked, besides "no panic" (and no hang / OOM, which libFuzzer reports):
//! - every diagnostic names a file;
//! - a snapshot is produced only when there is no error diagnostic;
//! - diagnostics come out sorted (by `Diagnostic::sort_key`) and render with `Display`;
//! - loading the same tree twice gives identical diagnostics, stats and snapshot
//!   (apart from the snapshot's process-wide `version` counter).
#![no_main]

use std::path::PathBuf;

use bosun_config::source::MemFiles;
use bosun_config::types::InRepoSource;
use bosun_config::{load, LoadOptions, Loaded};
use libfuzzer_sys::fuzz_target;

const JOBS_DIR: &str = "/cfg/jobs";
const JOB_FILE: &str = "/cfg/jobs/org/repo/fuzz.yaml";
const CONFIG_FILE: &str = "/cfg/config.yaml";
const REPO_DIR: &str = "/repo";
const PROW_YAML: &str = "/repo/.prow.yaml";
const TRIGGERS_YAML: &str = "/repo/.lighthouse/jenkins-x/triggers.yaml";

fn tree(data: &[u8]) -> (LoadOptions, MemFiles) {
    let mut parts = data.splitn(4, |&b| b == 0);
    let mut fs = MemFiles::new();
    let mut opts = LoadOptions {
        job_config: vec![PathBuf::from(JOBS_DIR)],
        ..LoadOptions::default()
    };
    fs.file(JOB_FILE, parts.next().unwrap_or_default());
    if let Some(config) = parts.next() {
        fs.file(CONFIG_FILE, config);
        opts.config = Some(PathBuf::from(CONFIG_FILE));
    }
    let prow = parts.next();
    let triggers = parts.next();
    if prow.is_some() || triggers.is_some() {
        opts.in_repo.push(InRepoSource {
            repo: "org/repo".to_string(),
            path: REPO_DIR.to_string(),
            branch: None,
            ..InRepoSource::default()
        });
        if let Some(p) = prow {
            fs.file(PROW_YAML, p);
        }
        if let Some(t) = triggers {
            fs.file(TRIGGERS_YAML, t);
        }
    }
    (opts, fs)
}

/// The snapshot as JSON, without the process-wide version counter.
fn snapshot_json(loaded: &Loaded) -> Option<serde_json::Value> {
    loaded.snapshot.as_ref().map(|s| {
        let mut v = serde_json::to_value(s).expect("a snapshot serializes");
        if let Some(obj) = v.as_object_mut() {
            obj.remove("version");
        }
        v
    })
}

fuzz_target!(|data: &[u8]| {
    let (opts, fs) = tree(data);
    let first = load(&opts, &fs);

    for d in &first.diagnostics {
        assert!(d.file.is_some(), "diagnostic without a file: {d:?}");
        let _ = d.to_string();
    }
    if first.snapshot.is_some() {
        assert_eq!(
            first.errors(),
            0,
            "a snapshot was produced despite errors: {:#?}",
            first.diagnostics
        );
    }
    assert!(
        first
            .diagnostics
            .windows(2)
            .all(|w| w[0].sort_key() <= w[1].sort_key()),
        "diagnostics are not sorted: {:#?}",
        first.diagnostics
    );

    // Determinism: the same files give the same result.
    let second = load(&opts, &fs);
    assert_eq!(
        first.diagnostics, second.diagnostics,
        "two loads of the same input gave different diagnostics"
    );
    assert_eq!(first.stats, second.stats, "two loads gave different stats");
    assert_eq!(
        snapshot_json(&first),
        snapshot_json(&second),
        "two loads gave different snapshots"
    );
});
