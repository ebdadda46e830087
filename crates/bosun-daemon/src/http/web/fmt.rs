//! How the dashboard writes times, durations, sizes and URLs (the
//! percent-encoding itself is `http::url`'s, shared with the read check's
//! redirect).

use jiff::Timestamp;

pub use crate::http::url::{path_escape, query_escape};

/// `2026-03-02 10:00:05Z`.
pub fn time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%d %H:%M:%SZ").to_string()
}

/// `t` in `zone` (an IANA name), `2026-03-02 11:00 CET`; UTC when the zone is
/// unknown.
pub fn time_in(t: Timestamp, zone: Option<&str>) -> String {
    match zone.and_then(|z| jiff::tz::TimeZone::get(z).ok()) {
        Some(tz) => t.to_zoned(tz).strftime("%Y-%m-%d %H:%M %Z").to_string(),
        None => time(t),
    }
}

/// A duration in whole seconds, as people say it: `4s`, `1m30s`, `2h05m`,
/// `3d4h`.
pub fn duration(secs: i64) -> String {
    let secs = secs.max(0);
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d{h}h")
    } else if h > 0 {
        format!("{h}h{m:02}m")
    } else if m > 0 {
        format!("{m}m{s:02}s")
    } else {
        format!("{s}s")
    }
}

/// `t` relative to `now`: `5m ago`, `in 2h05m`, `now`.
pub fn relative(t: Timestamp, now: Timestamp) -> String {
    let secs = t.as_second() - now.as_second();
    if secs.abs() < 1 {
        "now".into()
    } else if secs > 0 {
        format!("in {}", duration(secs))
    } else {
        format!("{} ago", duration(-secs))
    }
}

/// A query string from `pairs`, leaving out empty values: `?a=1&b=x%20y`
/// (empty when nothing is left).
pub fn query(pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", query_escape(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// A byte count: `512 B`, `1.5 KiB`, `3.2 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert_eq!(duration(4), "4s");
        assert_eq!(duration(90), "1m30s");
        assert_eq!(duration(7500), "2h05m");
        assert_eq!(duration(3 * 86400 + 4 * 3600 + 5), "3d4h");
        let now: Timestamp = "2026-03-02T10:00:00Z".parse().unwrap();
        let later: Timestamp = "2026-03-02T10:05:00Z".parse().unwrap();
        assert_eq!(relative(later, now), "in 5m00s");
        assert_eq!(relative(now, later), "5m00s ago");
        assert_eq!(time(now), "2026-03-02 10:00:00Z");
        assert_eq!(time_in(now, Some("Europe/Paris")), "2026-03-02 11:00 CET");
        assert_eq!(query_escape("a b/c&d"), "a%20b%2Fc%26d");
        assert_eq!(path_escape("dir x/f#1"), "dir%20x/f%231");
        assert_eq!(query(&[("job", "x y"), ("state", "")]), "?job=x%20y");
        assert_eq!(bytes(1536), "1.5 KiB");
    }
}
