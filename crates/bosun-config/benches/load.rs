//! Criterion benchmark: load + validate the real Prow corpus
//! (`../shared/corpus/test-infra`), parse one large job file, and put one
//! repository's jobs into a snapshot of 10,000 periodics (`with_repos`).
//! The side-by-side comparison with PyYAML and libyaml is `bench/config-load.sh`.

use std::path::{Path, PathBuf};

use bosun_config::source::MemFiles;
use bosun_config::{load, load_repo, LoadOptions, OsFiles, RepoLoadOptions};
use criterion::{criterion_group, criterion_main, Criterion};

fn corpus() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/test-infra/config");
    p.is_dir().then_some(p)
}

/// A snapshot of 10,000 central periodics (with a preset), and one
/// repository's jobs loaded against it: `with_repos` copies the snapshot's
/// jobs once and validates nothing.
fn with_repos(c: &mut Criterion) {
    let mut jobs = String::from(
        "presets:\n- labels: {preset-x: 'true'}\n  env: [{name: X, value: x}]\nperiodics:\n",
    );
    for i in 0..10_000 {
        jobs.push_str(&format!(
            "- name: p{i}\n  interval: 1h\n  labels: {{preset-x: 'true'}}\n  spec: {{containers: [{{image: alpine, command: [make, test]}}]}}\n"
        ));
    }
    let mut fs = MemFiles::new();
    fs.file("/c/jobs/jobs.yaml", jobs).file(
        "org/app@c0ffee/.prow.yaml",
        "presubmits:\n- name: unit\n  labels: {preset-x: 'true'}\n  spec: {containers: [{image: golang}]}\n",
    );
    let opts = LoadOptions {
        job_config: vec!["/c/jobs".into()],
        ..LoadOptions::default()
    };
    let base = load(&opts, &fs).snapshot.expect("a snapshot");
    let repo = RepoLoadOptions {
        repo: "org/app".into(),
        branch: "main".into(),
        root: "org/app@c0ffee".into(),
        kubeconfig_clusters: Vec::new(),
        schedule_check: None,
    };
    let app = load_repo(&base, &repo, &fs).jobs.expect("jobs");
    c.bench_function("with_repos_10000_periodics", |b| {
        b.iter_with_large_drop(|| base.with_repos([("org/app".to_string(), Some(app.clone()))]))
    });
}

fn bench(c: &mut Criterion) {
    with_repos(c);
    let Some(root) = corpus() else {
        eprintln!("corpus not found beside the project; nothing to benchmark");
        return;
    };
    let opts = LoadOptions {
        config: Some(root.join("prow/config.yaml")),
        job_config: vec![root.join("jobs")],
        ..LoadOptions::default()
    };
    let mut g = c.benchmark_group("corpus");
    g.sample_size(20);
    g.bench_function("load_and_validate", |b| b.iter(|| load(&opts, &OsFiles)));
    g.finish();

    let big = root.join("jobs/kubernetes/sig-release/release-branch-jobs/1.34.yaml");
    if let Ok(text) = std::fs::read_to_string(&big) {
        c.bench_function("parse_one_file", |b| {
            b.iter(|| bosun_config::yaml::parse_documents(&text).unwrap().len())
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
