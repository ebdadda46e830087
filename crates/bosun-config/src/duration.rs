//! Go durations (`1h30m`, `10m`, `1.5s`), parsed as Go's `time.ParseDuration` does,
//! with Go's error texts. Prow writes every duration this way; `d` is not a unit.
//!
//! Written by hand: the grammar is small, and matching Go's acceptance set and error
//! texts exactly matters more here than anything a general crate offers.

use std::fmt;

use serde::de;

/// The hint of a diagnostic about a duration that does not parse.
pub(crate) const DURATION_HINT: &str =
    "durations are Go durations such as 90s, 10m, 1h30m (no `d`: write 24h)";

/// A Go duration, in nanoseconds (may be negative, as in Go).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(pub i64);

const NS: u64 = 1;
const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
const MIN: u64 = 60 * S;
const H: u64 = 60 * MIN;

impl GoDuration {
    /// Builds a duration from whole seconds.
    pub const fn from_secs(secs: i64) -> Self {
        GoDuration(secs * S as i64)
    }

    /// The duration in nanoseconds.
    pub fn as_nanos(self) -> i64 {
        self.0
    }

    /// The duration as a `std::time::Duration`; negative durations become zero.
    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0.max(0) as u64)
    }

    /// Parses like Go's `time.ParseDuration`.
    pub fn parse(s: &str) -> Result<GoDuration, String> {
        let invalid = || format!("time: invalid duration {}", go_quote(s));
        let mut rest = s;
        let mut neg = false;
        if let Some(r) = rest.strip_prefix('-') {
            neg = true;
            rest = r;
        } else if let Some(r) = rest.strip_prefix('+') {
            rest = r;
        }
        if rest == "0" {
            return Ok(GoDuration(0));
        }
        if rest.is_empty() {
            return Err(invalid());
        }
        let mut total: u64 = 0;
        while !rest.is_empty() {
            // The next character must be [0-9.].
            if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
                return Err(invalid());
            }
            let int_len = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            let int_part = &rest[..int_len];
            rest = &rest[int_len..];
            let mut frac_part = "";
            if let Some(r) = rest.strip_prefix('.') {
                let frac_len = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
                frac_part = &r[..frac_len];
                rest = &r[frac_len..];
            }
            if int_part.is_empty() && frac_part.is_empty() {
                return Err(invalid());
            }
            let unit_len = rest
                .find(|c: char| c == '.' || c.is_ascii_digit())
                .unwrap_or(rest.len());
            let unit = &rest[..unit_len];
            rest = &rest[unit_len..];
            if unit.is_empty() {
                return Err(format!("time: missing unit in duration {}", go_quote(s)));
            }
            let scale = match unit {
                "ns" => NS,
                "us" | "µs" | "μs" => US,
                "ms" => MS,
                "s" => S,
                "m" => MIN,
                "h" => H,
                _ => {
                    return Err(format!(
                        "time: unknown unit {} in duration {}",
                        go_quote(unit),
                        go_quote(s)
                    ))
                }
            };
            let whole: u64 = if int_part.is_empty() {
                0
            } else {
                int_part.parse().map_err(|_| invalid())?
            };
            let mut v = whole.checked_mul(scale).ok_or_else(invalid)?;
            if !frac_part.is_empty() {
                // Go truncates the fraction to nanosecond precision.
                let mut f = 0f64;
                let mut place = 1f64;
                for d in frac_part.bytes().take(30) {
                    place /= 10.0;
                    f += f64::from(d - b'0') * place;
                }
                v = v
                    .checked_add((f * scale as f64) as u64)
                    .ok_or_else(invalid)?;
            }
            total = total.checked_add(v).ok_or_else(invalid)?;
            if total > i64::MAX as u64 + u64::from(neg) {
                return Err(invalid());
            }
        }
        Ok(GoDuration(if neg {
            (total as i128).wrapping_neg() as i64
        } else {
            total as i64
        }))
    }
}

/// Quotes like Go's `%q` for the printable ASCII that durations are made of.
fn go_quote(s: &str) -> String {
    format!("{s:?}")
}

impl fmt::Display for GoDuration {
    /// Formats exactly as Go's `Duration.String`: `0s`; below a second, one
    /// unit with its fraction (`1ns`, `1.5µs`, `1.234567ms`); from a second
    /// on, `[Hh][Mm]S[.fraction]s` with hours and minutes only when needed
    /// (`1.5s`, `1m0s`, `2h0m0s`, `8m0.000000001s`); a `-` before negative
    /// values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut n = self.0.unsigned_abs();
        if n == 0 {
            return f.write_str("0s");
        }
        let sign = if self.0 < 0 { "-" } else { "" };
        if n < S {
            let (unit, digits) = if n < US {
                ("ns", 0)
            } else if n < MS {
                ("µs", 3)
            } else {
                ("ms", 6)
            };
            return write!(f, "{sign}{}{unit}", with_fraction(n, digits));
        }
        let secs = with_fraction(n % MIN, 9);
        n /= MIN;
        match (n / 60, n % 60) {
            (0, 0) => write!(f, "{sign}{secs}s"),
            (0, m) => write!(f, "{sign}{m}m{secs}s"),
            (h, m) => write!(f, "{sign}{h}h{m}m{secs}s"),
        }
    }
}

/// `v` scaled down by `10^digits`, its fraction written without trailing
/// zeros (and without the `.` when it is zero), as Go's `fmtFrac` and
/// `fmtInt` write it.
fn with_fraction(v: u64, digits: u32) -> String {
    let scale = 10u64.pow(digits);
    let (whole, rest) = (v / scale, v % scale);
    if rest == 0 {
        return whole.to_string();
    }
    let fraction = format!("{rest:0width$}", width = digits as usize);
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

impl<'de> de::Deserialize<'de> for GoDuration {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        GoDuration::parse(&s).map_err(de::Error::custom)
    }
}

impl serde::Serialize for GoDuration {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_go() {
        let ok = [
            ("0", 0),
            ("1h30m", 90 * MIN as i64),
            ("10m", 10 * MIN as i64),
            ("1.5s", 1_500_000_000),
            ("-2m", -2 * MIN as i64),
            ("+5s", 5 * S as i64),
            ("1h1m1s1ms1us1ns", (H + MIN + S + MS + US + NS) as i64),
            ("300ms", 300 * MS as i64),
            (".5h", 30 * MIN as i64),
            ("2µs", 2000),
        ];
        for (s, want) in ok {
            assert_eq!(GoDuration::parse(s), Ok(GoDuration(want)), "{s}");
        }
    }

    #[test]
    fn rejects_like_go() {
        let bad = [
            ("", "time: invalid duration \"\""),
            ("1d", "time: unknown unit \"d\" in duration \"1d\""),
            ("7", "time: missing unit in duration \"7\""),
            ("h", "time: invalid duration \"h\""),
            ("1h ", "time: unknown unit \"h \" in duration \"1h \""),
            (".s", "time: invalid duration \".s\""),
            ("-", "time: invalid duration \"-\""),
            ("3000000h", "time: invalid duration \"3000000h\""),
        ];
        for (s, want) in bad {
            assert_eq!(GoDuration::parse(s), Err(want.to_string()), "{s}");
        }
    }

    #[test]
    fn formats_like_go() {
        // What Go (go1.26) prints for `time.Duration(n).String()`.
        for (n, want) in [
            (0, "0s"),
            (1, "1ns"),
            (999, "999ns"),
            (1000, "1µs"),
            (1100, "1.1µs"),
            (1500, "1.5µs"),
            (999999, "999.999µs"),
            (1000000, "1ms"),
            (1234567, "1.234567ms"),
            (2200000, "2.2ms"),
            (250000000, "250ms"),
            (999999999, "999.999999ms"),
            (1000000000, "1s"),
            (1500000000, "1.5s"),
            (3300000000, "3.3s"),
            (12345678901, "12.345678901s"),
            (60000000000, "1m0s"),
            (90000000000, "1m30s"),
            (245000000000, "4m5s"),
            (245001000000, "4m5.001s"),
            (480000000001, "8m0.000000001s"),
            (3600000000000, "1h0m0s"),
            (3661000000000, "1h1m1s"),
            (18367001000000, "5h6m7.001s"),
            (172800000000000, "48h0m0s"),
            (-1, "-1ns"),
            (-1500, "-1.5µs"),
            (-1500000000, "-1.5s"),
            (-5400000000000, "-1h30m0s"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ] {
            assert_eq!(GoDuration(n).to_string(), want, "{n}ns");
        }
        assert_eq!(GoDuration::from_secs(5400).to_string(), "1h30m0s");
    }

    #[test]
    fn what_it_prints_parses_back() {
        for n in [
            1,
            1_500,
            1_234_567,
            12_345_678_901,
            480_000_000_001,
            -5_400_000_000_000,
        ] {
            let d = GoDuration(n);
            assert_eq!(GoDuration::parse(&d.to_string()), Ok(d), "{d}");
        }
    }
}
