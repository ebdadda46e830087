//! The same measurement as `tools/robfig-oracle/bench.go`, for bosun's engine, so
//! `bench/schedule.sh` can put them side by side: expressions on stdin; per
//! expression, the mean ns of 50 successive `next` calls from four starts, repeated;
//! the median over expressions; parse ns per expression; `next` on a never-firing
//! expression.
//!
//! `next_bench [--parse-reps N] [--next-reps N] < exprs.txt`

use std::hint::black_box;
use std::io::BufRead;
use std::time::Instant;

use bosun_schedule::{ParseOptions, Schedule};
use jiff::Timestamp;

const STARTS: [i64; 4] = [1_704_067_200, 1_718_454_896, 1_764_460_799, 1_835_395_199];

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

fn main() {
    let mut parse_reps = 2000;
    let mut next_reps = 20;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().and_then(|v| v.parse().ok()).expect("a number");
        match a.as_str() {
            "--parse-reps" => parse_reps = v,
            "--next-reps" => next_reps = v,
            other => panic!("unknown argument {other}"),
        }
    }
    let exprs: Vec<String> = std::io::stdin()
        .lock()
        .lines()
        .map(Result::unwrap)
        .collect();
    let opts = ParseOptions::default();
    let (mut next_ns, mut parse_ns) = (Vec::new(), Vec::new());
    let mut total_calls = 0u64;
    for e in &exprs {
        let Ok(s) = Schedule::parse(e, opts) else {
            continue;
        };
        let t0 = Instant::now();
        for _ in 0..parse_reps {
            black_box(Schedule::parse(black_box(e), opts).is_ok());
        }
        parse_ns.push(t0.elapsed().as_nanos() as f64 / parse_reps as f64);
        let mut calls = 0u64;
        let t1 = Instant::now();
        for _ in 0..next_reps {
            for st in STARTS {
                let mut prev = Timestamp::from_second(st).unwrap();
                for _ in 0..50 {
                    calls += 1;
                    match black_box(&s).next_after(prev) {
                        Some(n) => prev = n,
                        None => break,
                    }
                }
                black_box(prev);
            }
        }
        next_ns.push(t1.elapsed().as_nanos() as f64 / calls as f64);
        total_calls += calls;
    }
    let never = Schedule::parse("0 0 31 2 *", opts).unwrap();
    let start = Timestamp::from_second(STARTS[2]).unwrap();
    let t2 = Instant::now();
    let reps = 1_000_000;
    for _ in 0..reps {
        black_box(black_box(&never).next_after(start));
    }
    let never_ns = t2.elapsed().as_nanos() as f64 / reps as f64;
    println!(
        "bosun next_median_ns={:.1} parse_median_ns={:.1} never_ns={never_ns:.1} exprs={} calls={total_calls}",
        median(next_ns.clone()),
        median(parse_ns),
        next_ns.len()
    );
}
