//! Differential test against robfig/cron v3, Prow's cron library: every corpus
//! cron and 22,000 generated expressions (valid and invalid), 50 successive fire
//! times from four starts, produced by `tools/robfig-oracle` (see
//! `testdata/README.md`). Expressions without a zone must give the same times in
//! UTC; zone-prefixed ones are compared only away from DST transitions (bosun's DST
//! rule differs from robfig's by design); every expression robfig rejects, bosun
//! rejects. The one intended divergence: bosun refuses `TZ=Local`.

use std::io::{BufRead, BufReader};

use bosun_schedule::{ParseOptions, Schedule};
use jiff::Timestamp;
use serde_json::Value;

fn vectors() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/robfig-vectors.jsonl.gz"
    );
    let file = std::fs::File::open(path).expect("vectors");
    BufReader::new(flate2::read::GzDecoder::new(file))
        .lines()
        .map(|l| serde_json::from_str(&l.expect("line")).expect("json"))
        .collect()
}

fn zone_prefix(expr: &str) -> Option<&str> {
    let rest = expr
        .strip_prefix("TZ=")
        .or_else(|| expr.strip_prefix("CRON_TZ="))?;
    Some(rest.split(' ').next().unwrap_or(""))
}

#[test]
fn bosun_agrees_with_robfig() {
    let vectors = vectors();
    let meta = &vectors[0]["meta"];
    assert!(meta["tzdata"].is_string(), "first line is metadata");
    let (mut compared_exprs, mut compared_times, mut skipped_dst) = (0, 0, 0);
    let mut mismatches: Vec<String> = Vec::new();
    for v in &vectors[1..] {
        let expr = v["expr"].as_str().expect("expr");
        let parsed = Schedule::parse(expr, ParseOptions::default());
        let zone = zone_prefix(expr);
        if !v["ok"].as_bool().expect("ok") {
            if let Ok(_s) = parsed {
                mismatches.push(format!(
                    "{expr:?}: robfig rejects ({}), bosun accepts",
                    v["error"]
                ));
            }
            continue;
        }
        let s = match parsed {
            Ok(s) => s,
            Err(e) if zone == Some("Local") => {
                assert!(e.message.contains("Local"), "{e}");
                continue;
            }
            Err(e) => {
                mismatches.push(format!("{expr:?}: robfig accepts, bosun rejects: {e}"));
                continue;
            }
        };
        let tz = zone.map(|z| bosun_schedule::cron::zone(z).expect("zone"));
        compared_exprs += 1;
        for run in v["runs"].as_array().expect("runs") {
            let start = run[0].as_i64().expect("start");
            let times: Vec<i64> = run[1]
                .as_array()
                .expect("times")
                .iter()
                .map(|t| t.as_i64().unwrap())
                .collect();
            let mut prev = Timestamp::from_second(start).unwrap();
            for (i, want) in times.iter().enumerate() {
                let want_ts = Timestamp::from_second(*want).unwrap();
                if let Some(tz) = &tz {
                    // Stop at the first DST transition: bosun's rule differs there.
                    if tz
                        .following(prev)
                        .next()
                        .is_some_and(|t| t.timestamp() <= want_ts)
                    {
                        skipped_dst += 1;
                        break;
                    }
                }
                let got = s.next_after(prev);
                compared_times += 1;
                if got != Some(want_ts) {
                    mismatches.push(format!(
                        "{expr:?} from {start}: fire {i}: robfig {want_ts}, bosun {got:?}"
                    ));
                    break;
                }
                prev = want_ts;
            }
            if times.len() < 50 && tz.is_none() {
                // robfig gives up after 5 years; bosun may find a later time, or none.
                if let Some(n) = s.next_after(prev) {
                    let gap_years = (n.as_second() - prev.as_second()) / (365 * 86_400);
                    if gap_years < 4 {
                        mismatches.push(format!(
                            "{expr:?}: robfig found nothing after {prev}, bosun {n}"
                        ));
                    }
                }
            }
        }
    }
    eprintln!(
        "compared {compared_exprs} expressions, {compared_times} fire times; {skipped_dst} runs stopped at DST transitions; tzdata {}",
        meta["tzdata"]
    );
    assert!(compared_exprs > 14_000);
    assert!(
        mismatches.is_empty(),
        "{} mismatches, first:\n{}",
        mismatches.len(),
        mismatches
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
