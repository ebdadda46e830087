//! Properties of `next`, checked by brute force on small horizons:
//! `next(t) > t`, `next(t)` matches, and nothing matches strictly between them.

use bosun_schedule::cron::MAX_STEPS;
use bosun_schedule::{ParseOptions, Schedule};
use jiff::Timestamp;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// One cron field item: numbers, ranges, steps, names, stars and H.
fn item(min: u32, max: u32, names: &'static [&'static str]) -> impl Strategy<Value = String> {
    let n = min..=max;
    prop_oneof![
        Just("*".to_string()),
        n.clone().prop_map(|v| v.to_string()),
        (n.clone(), n.clone()).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b))),
        (n.clone(), 1..=(max - min + 1)).prop_map(|(a, s)| format!("{a}/{s}")),
        (1..=(max - min + 1)).prop_map(|s| format!("*/{s}")),
        Just("H".to_string()),
        (1..=(max - min + 1)).prop_map(|s| format!("H/{s}")),
        (n.clone(), n).prop_map(|(a, b)| format!("H({}-{})", a.min(b), a.max(b))),
        proptest::sample::select(if names.is_empty() {
            vec!["*"]
        } else {
            names.to_vec()
        })
        .prop_map(str::to_string),
    ]
}

fn field(min: u32, max: u32, names: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::collection::vec(item(min, max, names), 1..3).prop_map(|v| v.join(","))
}

const MONTHS: &[&str] = &["JAN", "feb", "Mar", "dec"];
const DAYS: &[&str] = &["SUN", "mon", "Fri", "sat"];

fn expr() -> impl Strategy<Value = String> {
    (
        proptest::option::of(field(0, 59, &[])),
        field(0, 59, &[]),
        field(0, 23, &[]),
        field(1, 31, &[]),
        field(1, 12, MONTHS),
        field(0, 6, DAYS),
    )
        .prop_map(|(s, mi, h, dom, mo, dow)| match s {
            Some(s) => format!("{s} {mi} {h} {dom} {mo} {dow}"),
            None => format!("{mi} {h} {dom} {mo} {dow}"),
        })
}

fn instant() -> impl Strategy<Value = Timestamp> {
    // 2000-01-01 .. 2040-01-01, whole seconds.
    (946_684_800i64..2_208_988_800).prop_map(|s| Timestamp::from_second(s).unwrap())
}

proptest! {
    // The saved failures are in the `.proptest-regressions` file beside this
    // one. proptest's default (`SourceParallel`) would look for them in
    // `tests/proptest-regressions/properties.txt`, as `tests/it/` has a `main.rs`.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(
            FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..ProptestConfig::with_cases(1500)
    })]

    #[test]
    fn next_is_the_first_match_after_t(spec in expr(), t in instant(), id in "[a-z]{1,8}") {
        let Ok(s) = Schedule::parse(&spec, ParseOptions { identity: Some(&id), ..Default::default() }) else {
            return Ok(()); // e.g. a reversed H range
        };
        let cron = s.as_cron().unwrap();
        let (next, steps) = cron.next_utc_with_steps(t);
        prop_assert!(steps <= MAX_STEPS, "{spec}: {steps} steps");
        prop_assert_eq!(next, s.next_after(t));
        let Some(n) = next else {
            prop_assert!(s.never_fires(), "{} gave no next but is not never-firing", spec);
            return Ok(());
        };
        prop_assert!(!s.never_fires());
        prop_assert!(n > t);
        prop_assert!(cron.matches(n), "{spec}: {n} does not match");
        // Brute force: nothing matches in (t, n), over a bounded horizon.
        let gap = n.as_second() - t.as_second();
        let horizon = gap.min(86_400);
        let step = if spec.split_whitespace().count() == 5 { 60 } else { 1 };
        let mut x = t.as_second() + 1;
        if step == 60 {
            x = (x + 59) / 60 * 60;
        }
        while x < t.as_second() + horizon {
            let ts = Timestamp::from_second(x).unwrap();
            prop_assert!(x == n.as_second() || !cron.matches(ts), "{spec}: {ts} matches before {n}");
            x += step;
        }
    }

    #[test]
    fn h_is_stable_and_in_range(id in "[a-zA-Z0-9/:_.-]{1,40}") {
        let opts = ParseOptions { identity: Some(&id), ..Default::default() };
        let a = Schedule::parse("H H H(3-9) H *", opts).unwrap();
        let b = Schedule::parse("H H H(3-9) H *", opts).unwrap();
        let t = Timestamp::from_second(1_800_000_000).unwrap();
        prop_assert_eq!(a.next_after(t), b.next_after(t));
        // Minute, hour, dom 3-9, month, dow: every fire falls in those ranges.
        let mut x = t;
        for _ in 0..3 {
            x = a.next_after(x).unwrap();
            let z = x.to_zoned(jiff::tz::TimeZone::UTC);
            prop_assert!((3..=9).contains(&z.day()));
        }
    }
}

#[test]
fn steps_stay_bounded_in_the_worst_cases() {
    // Sparse schedules: 29 February (leap years only), 31st of 31-day months,
    // a weekday-and-day AND that needs many months.
    for spec in [
        "0 0 29 2 *",
        "0 0 31 * *",
        "59 23 31 12 *",
        "0 0 29 2 MON",
        "0 0 * 2 MON",
    ] {
        let s = Schedule::parse(spec, ParseOptions::default()).unwrap();
        let cron = s.as_cron().unwrap();
        let mut t = Timestamp::from_second(946_684_800).unwrap();
        for _ in 0..200 {
            let (n, steps) = cron.next_utc_with_steps(t);
            assert!(steps <= MAX_STEPS, "{spec}: {steps}");
            t = n.unwrap();
        }
    }
}
