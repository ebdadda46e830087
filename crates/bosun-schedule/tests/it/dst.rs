//! The DST rule, in zones with 1-hour, 30-minute and 45-minute offsets and none.
//! Fixed-time schedules (no `*`, `?`, step or `H/n` in seconds, minutes, hours):
//! a tick in a spring-forward gap fires once at the first instant after the gap
//! (ticks landing on the same instant collapse), a tick in a fall-back fold fires
//! at its first occurrence only. Other schedules: ticks in a gap do not exist,
//! ticks in a fold fire at every real occurrence.

use bosun_schedule::{ParseOptions, Schedule};
use jiff::Timestamp;

fn fires(spec: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
    let s = Schedule::parse(
        spec,
        ParseOptions {
            timezone: Some(zone),
            identity: Some("job"),
        },
    )
    .unwrap();
    let mut t: Timestamp = from.parse().unwrap();
    (0..n)
        .map(|_| {
            t = s.next_after(t).unwrap();
            t.to_string()
        })
        .collect()
}

#[test]
fn new_york_spring_forward() {
    // 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z).
    assert_eq!(
        fires("30 2 * * *", "America/New_York", "2026-03-07T00:00:00Z", 3),
        [
            "2026-03-07T07:30:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-09T06:30:00Z"
        ]
    );
    assert_eq!(
        fires(
            "*/30 * * * *",
            "America/New_York",
            "2026-03-08T06:00:00Z",
            3
        ),
        [
            "2026-03-08T06:30:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-08T07:30:00Z"
        ]
    );
    // Two fixed ticks in the gap collapse into one run at 03:00 EDT.
    assert_eq!(
        fires(
            "0,30 2 * * *",
            "America/New_York",
            "2026-03-08T06:59:59Z",
            2
        ),
        ["2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"]
    );
    // A range counts as fixed.
    assert_eq!(
        fires("0 1-3 * * *", "America/New_York", "2026-03-08T05:30:00Z", 3),
        [
            "2026-03-08T06:00:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-09T05:00:00Z"
        ]
    );
}

#[test]
fn new_york_fall_back() {
    // 2026-11-01 02:00 EDT -> 01:00 EST (06:00Z): 01:00-01:59 happens twice.
    assert_eq!(
        fires("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", 3),
        [
            "2026-11-01T05:30:00Z",
            "2026-11-02T06:30:00Z",
            "2026-11-03T06:30:00Z"
        ]
    );
    assert_eq!(
        fires(
            "*/30 * * * *",
            "America/New_York",
            "2026-11-01T04:45:00Z",
            6
        ),
        [
            "2026-11-01T05:00:00Z",
            "2026-11-01T05:30:00Z",
            "2026-11-01T06:00:00Z",
            "2026-11-01T06:30:00Z",
            "2026-11-01T07:00:00Z",
            "2026-11-01T07:30:00Z"
        ]
    );
    assert_eq!(
        fires("0 * * * *", "America/New_York", "2026-11-01T03:30:00Z", 4),
        [
            "2026-11-01T04:00:00Z",
            "2026-11-01T05:00:00Z",
            "2026-11-01T06:00:00Z",
            "2026-11-01T07:00:00Z"
        ]
    );
}

#[test]
fn berlin() {
    // 2026-03-29 02:00 CET -> 03:00 CEST (01:00Z); 2026-10-25 03:00 CEST -> 02:00 CET (01:00Z).
    assert_eq!(
        fires("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", 2),
        ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]
    );
    // The Kubernetes CronJob bug (kubernetes#121594): 0 2 * * * ran twice.
    assert_eq!(
        fires("0 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", 2),
        ["2026-10-25T00:00:00Z", "2026-10-26T01:00:00Z"]
    );
    assert_eq!(
        fires("15 2 * * *", "Europe/Berlin", "2026-10-25T00:15:00Z", 1),
        ["2026-10-26T01:15:00Z"]
    );
    assert_eq!(
        fires("*/20 2 * * *", "Europe/Berlin", "2026-10-24T23:59:00Z", 7),
        [
            "2026-10-25T00:00:00Z",
            "2026-10-25T00:20:00Z",
            "2026-10-25T00:40:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T01:20:00Z",
            "2026-10-25T01:40:00Z",
            "2026-10-26T01:00:00Z"
        ]
    );
}

#[test]
fn lord_howe_half_hour_shift() {
    // Standard +10:30, DST +11. 2026-10-04 02:00 -> 02:30; 2026-04-05 02:00 -> 01:30.
    assert_eq!(
        fires(
            "15 2 * * *",
            "Australia/Lord_Howe",
            "2026-10-03T12:00:00Z",
            2
        ),
        ["2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"]
    );
    assert_eq!(
        fires(
            "*/15 * * * *",
            "Australia/Lord_Howe",
            "2026-10-03T15:10:00Z",
            2
        ),
        ["2026-10-03T15:15:00Z", "2026-10-03T15:30:00Z"]
    );
    assert_eq!(
        fires(
            "45 1 * * *",
            "Australia/Lord_Howe",
            "2026-04-04T12:00:00Z",
            2
        ),
        ["2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"]
    );
    assert_eq!(
        fires(
            "*/15 * * * *",
            "Australia/Lord_Howe",
            "2026-04-04T14:20:00Z",
            5
        ),
        [
            "2026-04-04T14:30:00Z",
            "2026-04-04T14:45:00Z",
            "2026-04-04T15:00:00Z",
            "2026-04-04T15:15:00Z",
            "2026-04-04T15:30:00Z"
        ]
    );
}

#[test]
fn kathmandu_quarter_hour_offset_without_dst() {
    assert_eq!(
        fires("0 9 * * *", "Asia/Kathmandu", "2026-06-01T00:00:00Z", 2),
        ["2026-06-01T03:15:00Z", "2026-06-02T03:15:00Z"]
    );
}

#[test]
fn chatham_three_quarter_hour_offset() {
    // +12:45 standard, +13:45 DST. 2026-09-27 02:45 -> 03:45; 2026-04-05 03:45 -> 02:45.
    assert_eq!(
        fires("0 3 * * *", "Pacific/Chatham", "2026-09-26T00:00:00Z", 2),
        ["2026-09-26T14:00:00Z", "2026-09-27T13:15:00Z"]
    );
    assert_eq!(
        fires("0 3 * * *", "Pacific/Chatham", "2026-04-04T00:00:00Z", 2),
        ["2026-04-04T13:15:00Z", "2026-04-05T14:15:00Z"]
    );
    assert_eq!(
        fires("0 * * * *", "Pacific/Chatham", "2026-04-04T12:30:00Z", 4),
        [
            "2026-04-04T13:15:00Z",
            "2026-04-04T14:15:00Z",
            "2026-04-04T15:15:00Z",
            "2026-04-04T16:15:00Z"
        ]
    );
}
