//! Cron expressions: robfig/cron v3's grammar as Prow configures it
//! (`SecondOptional | Minute | Hour | Dom | Month | Dow | Descriptor`), plus
//! Jenkins' `H` and time zones, compiled to bit sets so that finding the next fire
//! time is a handful of bit operations per calendar field.
//!
//! Written by hand rather than with a cron crate: none implements robfig's exact
//! acceptance set and day-of-month/day-of-week rule, Jenkins' `H`, and the DST rule
//! bosun documents; and the bit-set search is what makes `next` cheap.

use std::fmt;
use std::sync::OnceLock;

use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone, TimeZoneDatabase};
use jiff::Timestamp;

use crate::hash::Hash;

/// A parse error, pointing at the offending field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based column (in characters) of the offending part of the expression.
    pub column: usize,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

impl std::error::Error for ParseError {}

/// The bundled tz database (bosun never depends on the host's zoneinfo).
fn tzdb() -> &'static TimeZoneDatabase {
    static DB: OnceLock<TimeZoneDatabase> = OnceLock::new();
    DB.get_or_init(TimeZoneDatabase::bundled)
}

/// Looks up an IANA zone in the bundled database. `Local` is refused: a schedule
/// must not depend on the machine it runs on.
pub fn zone(name: &str) -> Result<TimeZone, String> {
    if name == "Local" {
        return Err(
            "time zone Local is not allowed: name an IANA zone such as Europe/Berlin (or UTC)"
                .into(),
        );
    }
    if name.is_empty() || name == "UTC" {
        return Ok(TimeZone::UTC);
    }
    match tzdb().get(name) {
        // The database matches names case-insensitively; Go (and so Prow) does not.
        Ok(tz) if tz.iana_name() == Some(name) => Ok(tz),
        _ => Err(format!("unknown time zone {name:?}")),
    }
}

/// A field's bounds.
#[derive(Clone, Copy)]
struct Bounds {
    min: u32,
    max: u32,
    names: &'static [(&'static str, u32)],
    what: &'static str,
}

const SECONDS: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
    what: "seconds",
};
const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
    what: "minutes",
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
    what: "hours",
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
    what: "day of month",
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
    what: "month",
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
    what: "day of week",
};
const FIELDS: [Bounds; 6] = [SECONDS, MINUTES, HOURS, DOM, MONTHS, DOW];

/// A parsed cron schedule.
#[derive(Debug, Clone)]
pub struct Cron {
    seconds: u64,
    minutes: u64,
    hours: u32,
    /// Bits 1..=31.
    dom: u32,
    /// Bits 1..=12.
    months: u16,
    /// robfig: when either day field is `*` or `?`, both must match; else either.
    days_and: bool,
    /// Days of the month matching `dow`, for each weekday of the 1st (bits 1..=31).
    dow_by_first: [u32; 7],
    /// True when seconds, minutes and hours have no `*`, `?`, step or `H/n`
    /// (the DST rule).
    fixed_time: bool,
    never: bool,
    zone: TimeZone,
    utc: bool,
}

/// A schedule: a cron expression or `@every`.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Calendar schedule.
    Cron(Box<Cron>),
    /// `@every D`: D after the previous tick (whole seconds, at least 1s).
    Every(u64),
}

/// What a parse needs besides the expression.
#[derive(Debug, Clone, Copy, Default)]
pub struct ParseOptions<'a> {
    /// The periodic's `timezone` field.
    pub timezone: Option<&'a str>,
    /// The periodic's identity, which seeds `H`. `H` is refused without one.
    pub identity: Option<&'a str>,
}

impl Schedule {
    /// Parses an expression.
    pub fn parse(spec: &str, opts: ParseOptions<'_>) -> Result<Schedule, ParseError> {
        parse(spec, opts)
    }

    /// The first fire time strictly after `t`, or `None` if it never fires.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let secs = t.as_second();
        let next = match self {
            Schedule::Every(d) => secs.checked_add(*d as i64)?,
            Schedule::Cron(c) => c.next_after_secs(secs)?,
        };
        Timestamp::from_second(next).ok()
    }

    /// True when it can never fire (`0 0 31 2 *`); known at parse time.
    pub fn never_fires(&self) -> bool {
        matches!(self, Schedule::Cron(c) if c.never)
    }

    /// The cron schedule, if this is one.
    pub fn as_cron(&self) -> Option<&Cron> {
        match self {
            Schedule::Cron(c) => Some(c),
            Schedule::Every(_) => None,
        }
    }
}

struct Field<'s> {
    text: &'s str,
    /// Byte offset of `text` in the original expression.
    column: usize,
}

fn err(column: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        column,
        message: message.into(),
    }
}

fn col_of(spec: &str, byte: usize) -> usize {
    spec[..byte].chars().count() + 1
}

fn parse(spec: &str, opts: ParseOptions<'_>) -> Result<Schedule, ParseError> {
    // Positions are byte offsets while parsing (cheap), columns in the result.
    parse_bytes(spec, opts).map_err(|mut e| {
        let byte = e.column.min(spec.len());
        e.column = if spec.is_char_boundary(byte) {
            col_of(spec, byte)
        } else {
            1
        };
        e
    })
}

fn parse_bytes(spec: &str, opts: ParseOptions<'_>) -> Result<Schedule, ParseError> {
    if spec.is_empty() {
        return Err(err(
            1,
            "empty schedule: expected 5 or 6 fields, or a descriptor such as @daily",
        ));
    }
    let mut rest = spec;
    let mut offset = 0usize;
    let mut prefix_zone: Option<&str> = None;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let eq = spec.find('=').expect("prefix has =");
        // robfig takes the zone up to the first space (only a space).
        let Some(space) = spec.find(' ') else {
            return Err(err(
                0,
                "a TZ=/CRON_TZ= prefix must be followed by a space and the schedule",
            ));
        };
        if space < eq {
            return Err(err(
                0,
                "a TZ=/CRON_TZ= prefix must be followed by a space and the schedule",
            ));
        }
        prefix_zone = Some(&spec[eq + 1..space]);
        let after = &spec[space..];
        let trimmed = after.trim_start();
        offset = space + (after.len() - trimmed.len());
        rest = trimmed.trim_end();
    }
    let zone_name = match (prefix_zone, opts.timezone) {
        (Some(p), Some(f)) if p != f && !(p.is_empty() && f == "UTC") => {
            return Err(err(
                0,
                format!("the schedule's zone prefix {p:?} disagrees with timezone: {f:?}"),
            ))
        }
        (Some(p), _) => p,
        (None, Some(f)) => f,
        (None, None) => "UTC",
    };
    let tz = zone(zone_name).map_err(|m| err(0, m))?;

    if rest.starts_with('@') {
        return descriptor(rest, offset, tz);
    }
    let fields: Vec<Field<'_>> = split_fields(rest, offset);
    if !(5..=6).contains(&fields.len()) {
        return Err(err(
            fields.get(6).map_or(offset, |f| f.column),
            format!(
                "expected 5 fields (minute hour day-of-month month day-of-week) or 6 (with leading seconds), found {}",
                fields.len()
            ),
        ));
    }
    let mut hash = opts.identity.map(Hash::from_seed);
    let zero = Field {
        text: "0",
        column: 0,
    };
    let all: Vec<&Field<'_>> = if fields.len() == 5 {
        std::iter::once(&zero).chain(fields.iter()).collect()
    } else {
        fields.iter().collect()
    };
    let mut bits = [0u64; 6];
    let mut star = [false; 6];
    let mut fixed = true;
    for (i, f) in all.iter().enumerate() {
        let parsed = parse_field(f, FIELDS[i], i == 3, &mut hash)?;
        bits[i] = parsed.bits;
        star[i] = parsed.star;
        if i < 3 && !parsed.fixed {
            fixed = false;
        }
    }
    Ok(Schedule::Cron(Box::new(Cron::new(
        bits,
        star[3] || star[5],
        fixed,
        tz,
    ))))
}

/// robfig splits on any white space (Go's `strings.Fields`).
fn split_fields(rest: &str, offset: usize) -> Vec<Field<'_>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in rest.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                out.push(Field {
                    text: &rest[s..i],
                    column: offset + s,
                });
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push(Field {
            text: &rest[s..],
            column: offset + s,
        });
    }
    out
}

fn descriptor(d: &str, offset: usize, tz: TimeZone) -> Result<Schedule, ParseError> {
    let all = u64::MAX;
    // (seconds, minutes, hours, dom, months, dow, dom-or-dow star, fixed)
    let (bits, star, fixed): ([u64; 6], bool, bool) = match d {
        "@yearly" | "@annually" => ([1, 1, 1, 1 << 1, 1 << 1, all], true, true),
        "@monthly" => ([1, 1, 1, 1 << 1, all, all], true, true),
        "@weekly" => ([1, 1, 1, all, all, 1], true, true),
        "@daily" | "@midnight" => ([1, 1, 1, all, all, all], true, true),
        "@hourly" => ([1, 1, all, all, all, all], true, false),
        _ => {
            if let Some(dur) = d.strip_prefix("@every ") {
                let nanos = bosun_config::GoDuration::parse(dur)
                    .map(|d| d.as_nanos())
                    .map_err(|m| {
                        err(
                            offset + 7,
                            format!("@every needs a Go duration such as 90s or 1h30m: {m}"),
                        )
                    })?;
                // robfig: at least one second, truncated to whole seconds.
                let secs = if nanos < 1_000_000_000 {
                    1
                } else {
                    (nanos / 1_000_000_000) as u64
                };
                return Ok(Schedule::Every(secs));
            }
            return Err(err(
                offset,
                format!("unknown descriptor {d:?}: expected @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every DURATION"),
            ));
        }
    };
    let mut masked = bits;
    for (i, b) in FIELDS.iter().enumerate() {
        masked[i] &= range_bits(b.min, b.max, 1);
    }
    Ok(Schedule::Cron(Box::new(Cron::new(masked, star, fixed, tz))))
}

struct ParsedField {
    bits: u64,
    star: bool,
    fixed: bool,
}

fn range_bits(min: u32, max: u32, step: u32) -> u64 {
    if step == 1 {
        let high = if max >= 63 {
            u64::MAX
        } else {
            (1u64 << (max + 1)) - 1
        };
        return high & (u64::MAX << min);
    }
    let mut bits = 0;
    let mut i = min;
    while i <= max {
        bits |= 1 << i;
        let Some(n) = i.checked_add(step) else { break };
        i = n;
    }
    bits
}

/// Go's `strconv.Atoi` on what robfig accepts: optional sign, ASCII digits.
fn atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

fn parse_field(
    f: &Field<'_>,
    b: Bounds,
    is_dom: bool,
    hash: &mut Option<Hash>,
) -> Result<ParsedField, ParseError> {
    let mut out = ParsedField {
        bits: 0,
        star: false,
        fixed: true,
    };
    // robfig drops empty list items (`1,,2` is `1,2`; `,` selects nothing).
    let mut pos = 0;
    for item in f.text.split(',') {
        let column = f.column + pos;
        pos += item.len() + 1;
        if item.is_empty() {
            continue;
        }
        let r = parse_range(item, column, b, is_dom, hash)?;
        out.bits |= r.bits;
        out.star |= r.star;
        out.fixed &= r.fixed;
    }
    Ok(out)
}

fn value(text: &str, column: usize, b: Bounds) -> Result<u32, ParseError> {
    if let Some((_, v)) = b.names.iter().find(|(n, _)| n.eq_ignore_ascii_case(text)) {
        return Ok(*v);
    }
    let expected = || {
        if b.names.is_empty() {
            format!("a number {}-{}", b.min, b.max)
        } else {
            format!(
                "a number {}-{} or a name ({})",
                b.min,
                b.max,
                b.names
                    .iter()
                    .map(|(n, _)| n.to_ascii_uppercase())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    };
    match atoi(text) {
        Some(v) if v < 0 => Err(err(
            column,
            format!(
                "{}: negative number {v} not allowed: expected {}",
                b.what,
                expected()
            ),
        )),
        Some(v) => Ok(u32::try_from(v).unwrap_or(u32::MAX)),
        None => Err(err(
            column,
            format!("{}: {text:?} is not valid: expected {}", b.what, expected()),
        )),
    }
}

fn parse_range(
    expr: &str,
    column: usize,
    b: Bounds,
    is_dom: bool,
    hash: &mut Option<Hash>,
) -> Result<ParsedField, ParseError> {
    let (range, step_text) = match expr.split_once('/') {
        Some((r, s)) => {
            if s.contains('/') {
                return Err(err(
                    column,
                    format!(
                        "{}: too many slashes in {expr:?}: expected RANGE/STEP",
                        b.what
                    ),
                ));
            }
            (r, Some(s))
        }
        None => (expr, None),
    };
    let step_column = column + range.len() + 1;
    let step = match step_text {
        None => 1,
        Some(s) => match atoi(s) {
            Some(v) if v > 0 => u32::try_from(v).unwrap_or(u32::MAX),
            Some(_) => {
                return Err(err(
                    step_column,
                    format!("{}: the step of {expr:?} must be a positive number", b.what),
                ))
            }
            None => {
                return Err(err(
                    step_column,
                    format!("{}: step {s:?} is not a number", b.what),
                ))
            }
        },
    };

    // Jenkins' H: `H`, `H(a-b)`, `H/n`, `H(a-b)/n`.
    if let Some(h) = range.strip_prefix('H') {
        let (lo, hi) = if h.is_empty() {
            // Day of month hashes into 1-28 so the slot exists in every month.
            (b.min, if is_dom { 28 } else { b.max })
        } else if let Some(inner) = h.strip_prefix('(').and_then(|x| x.strip_suffix(')')) {
            let Some((a, z)) = inner.split_once('-') else {
                return Err(err(
                    column,
                    format!("{}: expected H(a-b), found {range:?}", b.what),
                ));
            };
            let lo = value(a, column + 2, b)?;
            let hi = value(z, column + 3 + a.len(), b)?;
            check_bounds(lo, hi, column, expr, b)?;
            (lo, hi)
        } else {
            return Err(err(
                column,
                format!(
                    "{}: expected H, H(a-b), H/n or H(a-b)/n, found {range:?}",
                    b.what
                ),
            ));
        };
        let Some(hash) = hash.as_mut() else {
            return Err(err(column, "H needs the periodic's identity to hash"));
        };
        let span = hi - lo + 1;
        let bits = if step_text.is_none() {
            1u64 << (lo + hash.next(span))
        } else {
            let start = lo + hash.next(step.min(span));
            range_bits(start, hi, step)
        };
        return Ok(ParsedField {
            bits,
            star: false,
            fixed: step_text.is_none(),
        });
    }

    let mut extra_star = false;
    let (start, end, single) = if range == "*" || range == "?" {
        // robfig ignores anything after `*-` (`*-5` is `*`).
        extra_star = true;
        (b.min, b.max, true)
    } else if range.starts_with("*-") || range.starts_with("?-") {
        extra_star = true;
        (b.min, b.max, false)
    } else {
        let parts: Vec<&str> = range.split('-').collect();
        match parts.as_slice() {
            [one] => {
                let v = value(one, column, b)?;
                (v, v, true)
            }
            [a, z] => {
                let lo = value(a, column, b)?;
                let hi = value(z, column + a.len() + 1, b)?;
                (lo, hi, false)
            }
            _ => {
                return Err(err(
                    column,
                    format!(
                        "{}: too many hyphens in {range:?}: expected a or a-b",
                        b.what
                    ),
                ))
            }
        }
    };
    // robfig: `N/step` means `N-max/step`.
    let end = if step_text.is_some() && single {
        b.max
    } else {
        end
    };
    check_bounds(start, end, column, expr, b)?;
    let star = extra_star && step <= 1;
    let fixed = !extra_star && step_text.is_none();
    Ok(ParsedField {
        bits: range_bits(start, end, step),
        star,
        fixed,
    })
}

fn check_bounds(
    start: u32,
    end: u32,
    column: usize,
    expr: &str,
    b: Bounds,
) -> Result<(), ParseError> {
    if start < b.min {
        return Err(err(
            column,
            format!(
                "{}: {start} in {expr:?} is below the minimum {}",
                b.what, b.min
            ),
        ));
    }
    if end > b.max {
        return Err(err(
            column,
            format!(
                "{}: {end} in {expr:?} is above the maximum {}",
                b.what, b.max
            ),
        ));
    }
    if start > end {
        return Err(err(
            column,
            format!("{}: range {expr:?} starts after it ends", b.what),
        ));
    }
    Ok(())
}

// --- Calendar arithmetic on Unix seconds (proleptic Gregorian).

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Lowest set bit at or above `from`.
#[inline]
fn next_bit(bits: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let m = bits >> from;
    (m != 0).then(|| from + m.trailing_zeros())
}

/// Calendar steps one search may take: at most two per month visited (one to
/// find the day, one more when the day's last time has passed), and a schedule
/// that fires at all fires within 8 years (29 February recurs within 8).
pub const MAX_STEPS: u32 = 2 * (12 * 8 + 1) + 2;

impl Cron {
    fn new(bits: [u64; 6], days_star: bool, fixed_time: bool, zone: TimeZone) -> Cron {
        let dow = bits[5] as u8 & 0x7f;
        // Day d of a month whose 1st is weekday w0 falls on weekday (w0 + d - 1) % 7:
        // rotate the weekday set by w0 and repeat it every 7 days from bit 1.
        let mut dow_by_first = [0u32; 7];
        for (w0, mask) in dow_by_first.iter_mut().enumerate() {
            let r = u32::from(((dow >> w0) | (dow << (7 - w0))) & 0x7f);
            let week = r | r << 7 | r << 14 | r << 21 | r << 28;
            *mask = (week << 1) & 0xffff_fffe;
        }
        let mut c = Cron {
            seconds: bits[0],
            minutes: bits[1],
            hours: bits[2] as u32,
            dom: bits[3] as u32 & !1,
            months: bits[4] as u16 & 0x1ffe,
            days_and: days_star,
            dow_by_first,
            fixed_time,
            never: false,
            utc: zone == TimeZone::UTC,
            zone,
        };
        c.never = !c.can_fire();
        c
    }

    /// False when no calendar date can ever match (checked once, at parse time).
    fn can_fire(&self) -> bool {
        if self.seconds == 0 || self.minutes == 0 || self.hours == 0 || self.months == 0 {
            return false;
        }
        (1..=12u32)
            .filter(|m| self.months & (1 << m) != 0)
            .any(|m| {
                // A leap year gives every month its longest length, and over the years
                // the 1st of a month falls on every weekday.
                let len_mask = range_bits(1, days_in_month(2000, m), 1) as u32;
                (0..7).any(|w0| self.day_mask(len_mask, w0) != 0)
            })
    }

    #[inline]
    fn day_mask(&self, len_mask: u32, first_weekday: usize) -> u32 {
        let dow = self.dow_by_first[first_weekday];
        let days = if self.days_and {
            self.dom & dow
        } else {
            self.dom | dow
        };
        days & len_mask
    }

    /// True for the DST rule's fixed-time schedules.
    pub fn is_fixed_time(&self) -> bool {
        self.fixed_time
    }

    /// The schedule's time zone.
    pub fn zone(&self) -> &TimeZone {
        &self.zone
    }

    /// True if it can never fire.
    pub fn never_fires(&self) -> bool {
        self.never
    }

    /// The fields as bit sets, for descriptions:
    /// (seconds, minutes, hours, day of month, months, day of week, days AND).
    pub fn fields(&self) -> (u64, u64, u32, u32, u16, u8, bool) {
        let mut dow_bits = 0u8;
        for w in 0..7u32 {
            // With the 1st on a Sunday, day w+1 falls on weekday w.
            if self.dow_by_first[0] & (1 << (w + 1)) != 0 {
                dow_bits |= 1 << w;
            }
        }
        (
            self.seconds,
            self.minutes,
            self.hours,
            self.dom,
            self.months,
            dow_bits,
            self.days_and,
        )
    }

    /// True when the civil time of `t` in the schedule's zone matches every field.
    pub fn matches(&self, t: Timestamp) -> bool {
        let off = i64::from(self.zone.to_offset(t).seconds());
        let c = t.as_second() + off;
        let (y, m, d) = civil_from_days(c.div_euclid(86_400));
        let sod = c.rem_euclid(86_400) as u32;
        let w0 = (days_from_civil(y, m, 1) + 4).rem_euclid(7) as usize;
        let len_mask = range_bits(1, days_in_month(y, m), 1) as u32;
        self.months & (1 << m) != 0
            && self.day_mask(len_mask, w0) & (1 << d) != 0
            && self.hours & (1 << (sod / 3600)) != 0
            && self.minutes & (1 << (sod / 60 % 60)) != 0
            && self.seconds & (1 << (sod % 60)) != 0
    }

    /// [`Schedule::next_after`] for a UTC schedule, with the number of search
    /// steps taken (bounded by [`MAX_STEPS`]); for tests.
    #[doc(hidden)]
    pub fn next_utc_with_steps(&self, t: Timestamp) -> (Option<Timestamp>, u32) {
        if self.never {
            return (None, 0);
        }
        let mut steps = 0;
        let n = self.next_civil(t.as_second() + 1, &mut steps);
        (n.and_then(|s| Timestamp::from_second(s).ok()), steps)
    }

    fn next_after_secs(&self, after: i64) -> Option<i64> {
        if self.never {
            return None;
        }
        if self.utc {
            return self.next_civil(after.checked_add(1)?, &mut 0);
        }
        self.next_zoned(after)
    }

    /// The smallest matching civil time (as seconds on a UTC-like civil axis) at
    /// or after `from`. `steps` counts the loop's iterations.
    fn next_civil(&self, from: i64, steps: &mut u32) -> Option<i64> {
        let days = from.div_euclid(86_400);
        let sod = from.rem_euclid(86_400) as u32;
        let (mut y, mut mo, mut d) = civil_from_days(days);
        let (mut h, mut mi, mut s) = (sod / 3600, sod / 60 % 60, sod % 60);
        loop {
            *steps += 1;
            if *steps > MAX_STEPS {
                return None;
            }
            // Month.
            match next_bit(u64::from(self.months), mo) {
                Some(m) if m == mo => {}
                Some(m) => {
                    (mo, d, h, mi, s) = (m, 1, 0, 0, 0);
                }
                None => {
                    y += 1;
                    mo = self.months.trailing_zeros();
                    (d, h, mi, s) = (1, 0, 0, 0);
                }
            }
            // Day.
            let first = days_from_civil(y, mo, 1);
            let w0 = (first + 4).rem_euclid(7) as usize;
            let len_mask = range_bits(1, days_in_month(y, mo), 1) as u32;
            let dm = self.day_mask(len_mask, w0);
            match next_bit(u64::from(dm), d) {
                Some(nd) if nd == d => {}
                Some(nd) => {
                    (d, h, mi, s) = (nd, 0, 0, 0);
                }
                None => {
                    (mo, d, h, mi, s) = (mo + 1, 1, 0, 0, 0);
                    if mo > 12 {
                        (y, mo) = (y + 1, 1);
                    }
                    continue;
                }
            }
            // Time of day; past the last one, the next day (the day search
            // above moves on to the next month when the month is over).
            let Some(t) = self.next_time_of_day(h, mi, s) else {
                (d, h, mi, s) = (d + 1, 0, 0, 0);
                continue;
            };
            return Some(days_from_civil(y, mo, d) * 86_400 + i64::from(t));
        }
    }

    /// The first matching second of the day at or after h:mi:s, in seconds.
    #[inline]
    fn next_time_of_day(&self, h: u32, mi: u32, s: u32) -> Option<u32> {
        let (mut h, mut mi, mut s) = (h, mi, s);
        loop {
            let nh = next_bit(u64::from(self.hours), h)?;
            if nh != h {
                (h, mi, s) = (nh, 0, 0);
            }
            let Some(nmi) = next_bit(self.minutes, mi) else {
                (h, mi, s) = (h + 1, 0, 0);
                continue;
            };
            if nmi != mi {
                (mi, s) = (nmi, 0);
            }
            let Some(ns) = next_bit(self.seconds, s) else {
                mi += 1;
                s = 0;
                if mi > 59 {
                    (h, mi) = (h + 1, 0);
                }
                continue;
            };
            return Some(h * 3600 + mi * 60 + ns);
        }
    }

    /// The DST rule: in a gap, fixed-time ticks fire once at the first instant
    /// after it and other ticks do not exist; in a fold, fixed-time ticks fire at
    /// the first occurrence only and other ticks at every real occurrence.
    fn next_zoned(&self, after: i64) -> Option<i64> {
        let tz = &self.zone;
        let ts = |s: i64| Timestamp::from_second(s).ok();
        let offset_at = |s: i64| i64::from(tz.to_offset(ts(s).expect("in range")).seconds());
        let mut from = after.checked_add(offset_at(after))?.checked_add(1)?;
        let mut found = None;
        for _ in 0..16 {
            let c = self.next_civil(from, &mut 0)?;
            let dt = civil_datetime(c)?;
            let inst = match tz.to_ambiguous_timestamp(dt).offset() {
                AmbiguousOffset::Unambiguous { offset } => Some(c - i64::from(offset.seconds())),
                AmbiguousOffset::Gap { after: later, .. } => {
                    if self.fixed_time {
                        // The first instant after the gap: the transition itself.
                        let probe = ts(c - i64::from(later.seconds()))?;
                        tz.following(probe)
                            .next()
                            .map(|t| t.timestamp().as_second())
                    } else {
                        None
                    }
                }
                AmbiguousOffset::Fold {
                    before,
                    after: later,
                } => {
                    let first = c - i64::from(before.seconds());
                    let second = c - i64::from(later.seconds());
                    if first > after {
                        Some(first)
                    } else if !self.fixed_time && second > after {
                        Some(second)
                    } else {
                        None
                    }
                }
            };
            match inst {
                Some(i) if i > after => {
                    found = Some(i);
                    break;
                }
                _ => from = c + 1,
            }
        }
        // Non-fixed ticks also recur in the second pass of a fold that starts
        // before the candidate found in civil order.
        if !self.fixed_time {
            if let Some(tr) = tz.following(ts(after)?).next() {
                let t = tr.timestamp().as_second();
                let new_off = i64::from(tr.offset().seconds());
                let old_off = offset_at(t - 1);
                if new_off < old_off && found.is_none_or(|f| t < f) {
                    let fold_start = t + new_off;
                    let fold_end = t + old_off;
                    if let Some(c) = self.next_civil(fold_start, &mut 0) {
                        if c < fold_end {
                            let i = c - new_off;
                            if i > after && found.is_none_or(|f| i < f) {
                                found = Some(i);
                            }
                        }
                    }
                }
            }
        }
        found
    }
}

fn civil_datetime(c: i64) -> Option<DateTime> {
    let (y, m, d) = civil_from_days(c.div_euclid(86_400));
    let sod = c.rem_euclid(86_400);
    DateTime::new(
        i16::try_from(y).ok()?,
        m as i8,
        d as i8,
        (sod / 3600) as i8,
        (sod / 60 % 60) as i8,
        (sod % 60) as i8,
        0,
    )
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn p(spec: &str) -> Schedule {
        Schedule::parse(
            spec,
            ParseOptions {
                identity: Some("job"),
                ..Default::default()
            },
        )
        .unwrap()
    }

    fn nexts(spec: &str, from: &str, n: usize) -> Vec<String> {
        let s = p(spec);
        let mut t = utc(from);
        let mut out = Vec::new();
        for _ in 0..n {
            t = s.next_after(t).unwrap();
            out.push(t.to_string());
        }
        out
    }

    #[test]
    fn calendar_arithmetic_round_trips() {
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn basic_utc_schedules() {
        assert_eq!(
            nexts("*/15 * * * *", "2026-01-01T00:07:00Z", 3),
            [
                "2026-01-01T00:15:00Z",
                "2026-01-01T00:30:00Z",
                "2026-01-01T00:45:00Z"
            ]
        );
        assert_eq!(
            nexts("05 15 * * 1-5", "2026-11-27T16:00:00Z", 2),
            ["2026-11-30T15:05:00Z", "2026-12-01T15:05:00Z"]
        );
        assert_eq!(
            nexts("@monthly", "2026-01-31T00:00:00Z", 2),
            ["2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"]
        );
        assert_eq!(
            nexts("0 0 29 2 *", "2026-01-01T00:00:00Z", 1),
            ["2028-02-29T00:00:00Z"]
        );
        assert_eq!(
            nexts("*/10 * * * * *", "2026-01-01T00:00:00Z", 2),
            ["2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"]
        );
        // Both day fields restricted: either matches (robfig).
        assert_eq!(
            nexts("0 0 13 * 5", "2026-02-01T00:00:00Z", 3),
            [
                "2026-02-06T00:00:00Z",
                "2026-02-13T00:00:00Z",
                "2026-02-20T00:00:00Z"
            ]
        );
        assert_eq!(
            nexts("0 23 31 12 *", "2026-12-31T23:00:00Z", 1),
            ["2027-12-31T23:00:00Z"]
        );
    }

    #[test]
    fn every_is_anchored_at_the_previous_tick() {
        let s = p("@every 1h30m");
        assert_eq!(
            s.next_after(utc("2026-01-01T00:00:00.5Z")).unwrap(),
            utc("2026-01-01T01:30:00Z")
        );
        assert!(matches!(p("@every 500ms"), Schedule::Every(1)));
        assert!(matches!(p("@every 1.5s"), Schedule::Every(1)));
    }

    #[test]
    fn never_firing_schedules_are_known_at_parse_time() {
        for spec in [
            "0 0 30 2 *",
            "0 0 31 2 *",
            "0 0 31 4,6,9,11 *",
            "0 0 0 , * *",
        ] {
            let s = p(spec);
            assert!(s.never_fires(), "{spec}");
            assert_eq!(s.next_after(utc("2026-01-01T00:00:00Z")), None);
        }
        assert!(!p("0 0 29 2 *").never_fires());
        assert!(!p("0 0 31 2 MON").never_fires());
    }

    #[test]
    fn rejects_what_robfig_rejects() {
        for spec in [
            "",
            "* * * *",
            "* * * * * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 7",
            "*/0 * * * *",
            "5-1 * * * *",
            "1-2-3 * * * *",
            "1/2/3 * * * *",
            "x * * * *",
            "-1 * * * *",
            "* * JAN * *",
            "@daily ",
            "@weekly2",
            "@every",
            "@every 1d",
            "TZ=Nowhere/Zone 0 * * * *",
            "TZ=UTC",
            "TZ=Local 0 * * * *",
        ] {
            assert!(
                Schedule::parse(spec, ParseOptions::default()).is_err(),
                "{spec:?}"
            );
        }
        for spec in [
            "+5 * * * *",
            "007 * * * *",
            "1,,2 * * * *",
            "*-5 * * * *",
            "* * * jan-MAR mon-fri",
            "? * * * ?",
            "TZ=UTC 0 * * * *",
            "CRON_TZ=Europe/Berlin 0 9 * * *",
        ] {
            assert!(
                Schedule::parse(spec, ParseOptions::default()).is_ok(),
                "{spec:?}"
            );
        }
    }

    #[test]
    fn errors_point_at_the_field() {
        let e = Schedule::parse("0 25 * * *", ParseOptions::default()).unwrap_err();
        assert_eq!(e.column, 3);
        assert_eq!(e.message, "hours: 25 in \"25\" is above the maximum 23");
        let e = Schedule::parse("CRON_TZ=UTC 0 0 * * MOON", ParseOptions::default()).unwrap_err();
        assert_eq!(e.column, 21);
        assert!(
            e.message.starts_with("day of week: \"MOON\" is not valid"),
            "{}",
            e.message
        );
        let e = Schedule::parse("*/0 * * * *", ParseOptions::default()).unwrap_err();
        assert_eq!(e.column, 3);
    }

    #[test]
    fn zones_prefix_and_field() {
        let berlin = ParseOptions {
            timezone: Some("Europe/Berlin"),
            identity: None,
        };
        let s = Schedule::parse("0 9 * * *", berlin).unwrap();
        assert_eq!(
            s.next_after(utc("2026-07-01T00:00:00Z")).unwrap(),
            utc("2026-07-01T07:00:00Z")
        );
        assert!(Schedule::parse("TZ=Europe/Paris 0 9 * * *", berlin).is_err());
        assert!(Schedule::parse("TZ=Europe/Berlin 0 9 * * *", berlin).is_ok());
        assert!(Schedule::parse(
            "0 9 * * *",
            ParseOptions {
                timezone: Some("europe/berlin"),
                identity: None
            }
        )
        .is_err());
        assert!(Schedule::parse(
            "0 9 * * *",
            ParseOptions {
                timezone: Some("Local"),
                identity: None
            }
        )
        .is_err());
    }

    #[test]
    fn h_is_stable_and_in_range() {
        let a = Schedule::parse(
            "H H * * *",
            ParseOptions {
                identity: Some("ci-a"),
                ..Default::default()
            },
        )
        .unwrap();
        let b = Schedule::parse(
            "H H * * *",
            ParseOptions {
                identity: Some("ci-a"),
                ..Default::default()
            },
        )
        .unwrap();
        let t = utc("2026-01-01T00:00:00Z");
        assert_eq!(a.next_after(t), b.next_after(t));
        assert!(a.as_cron().unwrap().is_fixed_time());
        assert!(!p("H/15 * * * *").as_cron().unwrap().is_fixed_time());
        let c = p("H H(1-5) H * *").as_cron().unwrap().clone();
        assert_eq!(c.hours.count_ones(), 1);
        assert!(c.hours.trailing_zeros() >= 1 && c.hours.trailing_zeros() <= 5);
        assert!(c.dom.trailing_zeros() >= 1 && c.dom.trailing_zeros() <= 28);
        let q = p("H/15 * * * *").as_cron().unwrap().clone();
        assert_eq!(q.minutes.count_ones(), 4);
        assert!(q.minutes.trailing_zeros() < 15);
        assert!(Schedule::parse("H * * * *", ParseOptions::default()).is_err());
    }
}
