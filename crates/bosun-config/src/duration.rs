//! Go durations (`1h30m`, `10m`, `1.5s`), parsed as Go's `time.ParseDuration` does,
//! with Go's error texts. Prow writes every duration this way; `d` is not a unit.
//!
//! Written by hand: the grammar is small, and matching Go's acceptance set and error
//! texts exactly matters more here than anything a general crate offers.

use std::fmt;

use serde::de;

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
    /// Formats like Go's `Duration.String` for whole-second and larger values
    /// (`1h30m0s`, `10m0s`, `0s`); sub-second values print as `1.5s`, `250ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut n = self.0.unsigned_abs();
        if self.0 < 0 {
            f.write_str("-")?;
        }
        if n == 0 {
            return f.write_str("0s");
        }
        if n < S {
            return if n.is_multiple_of(MS) {
                write!(f, "{}ms", n / MS)
            } else if n.is_multiple_of(US) {
                write!(f, "{}µs", n / US)
            } else {
                write!(f, "{n}ns")
            };
        }
        let h = n / H;
        n %= H;
        let m = n / MIN;
        n %= MIN;
        if h > 0 {
            write!(f, "{h}h{m}m")?;
        } else if m > 0 {
            write!(f, "{m}m")?;
        }
        let secs = n / S;
        let frac = n % S;
        if frac == 0 {
            write!(f, "{secs}s")
        } else {
            let digits = format!("{frac:09}");
            write!(f, "{secs}.{}s", digits.trim_end_matches('0'))
        }
    }
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
        for (d, want) in [
            (GoDuration::from_secs(5400), "1h30m0s"),
            (GoDuration::from_secs(600), "10m0s"),
            (GoDuration::from_secs(0), "0s"),
            (GoDuration(1_500_000_000), "1.5s"),
            (GoDuration(250 * MS as i64), "250ms"),
            (GoDuration::from_secs(48 * 3600), "48h0m0s"),
        ] {
            assert_eq!(d.to_string(), want);
        }
    }
}
