//! Fuzz target: the cron parser and `next`. Input: a cron expression (UTF-8;
//! the first line) and optionally a time zone (the second line). Invariants: no
//! panic; parsing is deterministic; a parse error has a column within the
//! expression; for a parsed schedule, `next_after(t) > t`, a never-firing schedule
//! never yields a time, and (zone-less) the result matches the schedule.
#![no_main]

use bosun_schedule::{ParseOptions, Schedule};
use jiff::Timestamp;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.splitn(2, '\n');
    let spec = lines.next().unwrap_or_default();
    let zone = lines.next().filter(|z| !z.is_empty() && z.len() < 64);
    let opts = ParseOptions { timezone: zone, identity: Some("fuzz/repo:job") };
    let parsed = Schedule::parse(spec, opts);
    match (&parsed, Schedule::parse(spec, opts)) {
        (Ok(_), Ok(_)) => {}
        (Err(a), Err(b)) => assert_eq!(a, &b, "parse errors differ between two runs"),
        _ => panic!("parse is not deterministic"),
    }
    let s = match parsed {
        Ok(s) => s,
        Err(e) => {
            assert!(e.column >= 1 && e.column <= spec.chars().count() + 1, "column {} out of {spec:?}", e.column);
            return;
        }
    };
    let mut t = Timestamp::from_second(1_764_460_799).unwrap();
    for _ in 0..8 {
        match s.next_after(t) {
            Some(n) => {
                assert!(!s.never_fires());
                assert!(n > t, "next {n} not after {t}");
                if let Some(c) = s.as_cron() {
                    if zone.is_none() && !spec.starts_with("TZ=") && !spec.starts_with("CRON_TZ=") {
                        assert!(c.matches(n), "{spec:?}: {n} does not match");
                    }
                }
                t = n;
            }
            None => break,
        }
    }
});
