//! Criterion benchmark of the cron engine over the Prow corpus's 229 distinct cron
//! expressions (the first lines of `testdata/robfig-vectors.jsonl.gz`): `next`
//! (median over expressions is reported by `bench/schedule.sh`, side by side with
//! robfig/cron v3), `parse`, and `next` on never-firing expressions.

use std::io::{BufRead, BufReader};

use bosun_schedule::{ParseOptions, Schedule};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use jiff::Timestamp;

fn corpus_crons() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/robfig-vectors.jsonl.gz"
    );
    let file = std::fs::File::open(path).expect("vectors");
    BufReader::new(flate2::read::GzDecoder::new(file))
        .lines()
        .skip(1)
        .take(229)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(&l.unwrap()).unwrap();
            v["expr"].as_str().unwrap().to_string()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let exprs = corpus_crons();
    let scheds: Vec<Schedule> = exprs
        .iter()
        .map(|e| Schedule::parse(e, ParseOptions::default()).unwrap())
        .collect();
    let start = Timestamp::from_second(1_764_460_799).unwrap();

    c.bench_function("next/corpus_all", |b| {
        b.iter(|| {
            let mut n = 0i64;
            for s in &scheds {
                if let Some(t) = s.next_after(start) {
                    n += t.as_second();
                }
            }
            n
        })
    });
    c.bench_function("parse/corpus_all", |b| {
        b.iter(|| {
            exprs
                .iter()
                .filter(|e| Schedule::parse(e, ParseOptions::default()).is_ok())
                .count()
        })
    });
    let never = Schedule::parse("0 0 31 2 *", ParseOptions::default()).unwrap();
    c.bench_with_input(BenchmarkId::new("next", "never_firing"), &never, |b, s| {
        b.iter(|| s.next_after(start))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
