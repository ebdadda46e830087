//! Criterion benchmark: load + validate the real Prow corpus
//! (`../shared/corpus/test-infra`), and parse one large job file.
//! The side-by-side comparison with PyYAML and libyaml is `bench/config-load.sh`.

use std::path::{Path, PathBuf};

use bosun_config::{load, LoadOptions, OsFiles};
use criterion::{criterion_group, criterion_main, Criterion};

fn corpus() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/test-infra/config");
    p.is_dir().then_some(p)
}

fn bench(c: &mut Criterion) {
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
