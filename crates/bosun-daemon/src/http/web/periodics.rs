//! `/periodics`: every periodic with its schedule in words, time zone, next
//! fire, last runs (a strip of coloured squares), skipped ticks with their
//! reasons, pause/resume/trigger; above them, the next 24 hours of fires
//! across all periodics (a server-rendered SVG histogram: a thundering herd
//! shows as a spike).

use bosun_base::sync::Lock;
use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;
use bosun_config::{GoDuration, Periodic};
use bosun_schedule::{describe, ParseOptions, Schedule};
use bosun_store::{RunFilter, StoreError};
use jiff::Timestamp;
use serde::Deserialize;

use super::page::{local_next, see_other, Chrome, Ctx, Web};
use super::{fmt, svg};
use crate::runs::{blocking, RunRequest};

/// Periodics on a page.
const PAGE_SIZE: usize = 50;
/// Runs in a periodic's strip.
const STRIP: usize = 12;
/// Skipped tick ranges shown per periodic (the newest).
const SKIPS: usize = 4;
/// The timeline's buckets: 15 minutes each over 24 hours.
pub const BUCKET_SECS: i64 = 15 * 60;
const BUCKETS: usize = 96;
/// At most this many fires of one periodic are counted in the timeline (a
/// `* * * * *` cron fires 1,440 times a day).
const MAX_FIRES: usize = 1440;

/// A run in a periodic's strip.
pub struct Square {
    href: String,
    state: &'static str,
    title: String,
}

/// A range of skipped ticks.
pub struct Skip {
    when: String,
    count: u64,
    reason: String,
}

/// A periodic as a row of the page.
pub struct Row {
    identity: String,
    schedule: String,
    words: String,
    timezone: String,
    cluster: String,
    paused: bool,
    /// The schedule can never fire (`0 0 31 2 *`).
    never: bool,
    next: String,
    next_in: String,
    next_local: String,
    strip: Vec<Square>,
    skips: Vec<Skip>,
    skipped: u64,
}

/// The next 24 hours of fires, bucketed.
pub struct Timeline {
    start: Timestamp,
    counts: Vec<u32>,
    /// A few names per bucket (for the bar's tooltip).
    names: Vec<Vec<String>>,
    total: u64,
    /// Periodics with an interval, not a calendar: placed from their next
    /// fire on.
    approximate: usize,
}

/// The timeline, kept for the snapshot version and minute it was made for.
struct CachedTimeline {
    version: u64,
    minute: i64,
    timeline: Arc<Timeline>,
}

fn secs(d: Option<&str>) -> Option<i64> {
    d.and_then(|d| GoDuration::parse(d).ok())
        .map(|d| d.as_nanos().max(0) / 1_000_000_000)
        .filter(|s| *s > 0)
}

/// A periodic's cron schedule, parsed as the scheduler parses it.
fn cron(p: &Periodic) -> Option<Schedule> {
    let c = p.kind.cron.as_deref().filter(|c| !c.is_empty())?;
    let identity = p.identity();
    Schedule::parse(
        c,
        ParseOptions {
            timezone: p.kind.timezone.as_deref(),
            identity: Some(&identity),
        },
    )
    .ok()
}

/// A periodic's schedule as written and in words.
fn schedule_words(p: &Periodic) -> (String, String) {
    let k = &p.kind;
    if let Some(c) = k.cron.as_deref().filter(|c| !c.is_empty()) {
        let words = cron(p).map_or_else(|| "not a valid schedule".into(), |s| describe(&s));
        (c.to_string(), words)
    } else if let Some(i) = k.interval.as_deref() {
        (
            format!("interval {i}"),
            format!("Every {i} after the previous run was created"),
        )
    } else {
        let i = k.minimum_interval.as_deref().unwrap_or_default();
        (
            format!("minimum_interval {i}"),
            format!("{i} after the previous run ended"),
        )
    }
}

/// Every periodic's fires in `[now, now + 24 h)`.
fn timeline(web: &Web, now: Timestamp) -> Timeline {
    let snapshot = web.daemon.shared.snapshot();
    let start =
        Timestamp::from_second(now.as_second() - now.as_second() % BUCKET_SECS).unwrap_or(now);
    let end = start.as_second() + BUCKETS as i64 * BUCKET_SECS;
    let mut t = Timeline {
        start,
        counts: vec![0; BUCKETS],
        names: vec![Vec::new(); BUCKETS],
        total: 0,
        approximate: 0,
    };
    let next_fires: Vec<Option<Timestamp>> = {
        let scheduler = web.daemon.shared.scheduler.locked();
        snapshot
            .periodics
            .iter()
            .map(|p| scheduler.next_fire(&p.identity()))
            .collect()
    };
    let add = |t: &mut Timeline, at: i64, name: &str| {
        if at < now.as_second() || at >= end {
            return;
        }
        let b = ((at - start.as_second()) / BUCKET_SECS) as usize;
        t.counts[b] += 1;
        t.total += 1;
        if t.names[b].len() < 6 {
            t.names[b].push(name.to_string());
        }
    };
    for (p, next) in snapshot.periodics.iter().zip(next_fires) {
        let name = p.identity();
        if let Some(Schedule::Every(every)) = cron(p) {
            // `@every D`: counted per bucket, not listed (a second's period
            // fires 86,400 times a day).
            let every = every.max(1) as i64;
            let first = next.map_or(now.as_second() + every, |n| n.as_second());
            for b in 0..BUCKETS {
                let from = (start.as_second() + b as i64 * BUCKET_SECS)
                    .max(first)
                    .max(now.as_second());
                let to = start.as_second() + (b as i64 + 1) * BUCKET_SECS;
                if from >= to {
                    continue;
                }
                // Fires at first + k * every within [from, to).
                let k0 = (from - first + every - 1) / every;
                let k1 = (to - first + every - 1) / every;
                let n = (k1 - k0).max(0) as u32;
                t.counts[b] += n;
                t.total += u64::from(n);
                if n > 0 && t.names[b].len() < 6 {
                    t.names[b].push(name.clone());
                }
            }
        } else if let Some(s) = cron(p) {
            let mut at = Timestamp::from_second(now.as_second() - 1).unwrap_or(now);
            for _ in 0..MAX_FIRES {
                match s.next_after(at) {
                    Some(n) if n.as_second() < end => {
                        add(&mut t, n.as_second(), &name);
                        at = n;
                    }
                    _ => break,
                }
            }
        } else if let Some(next) = next {
            t.approximate += 1;
            let every = secs(p.kind.interval.as_deref());
            let mut at = next.as_second().max(now.as_second());
            for _ in 0..MAX_FIRES {
                if at >= end {
                    break;
                }
                add(&mut t, at, &name);
                match every {
                    Some(e) => at += e,
                    None => break,
                }
            }
        }
    }
    t
}

/// The timeline for now (made at most once a minute per configuration).
fn timeline_now(web: &Web) -> Arc<Timeline> {
    let now = web.now();
    let version = web.daemon.shared.snapshot().version;
    let minute = now.as_second() / 60;
    let mut cache = web.cache.locked();
    if let Some(c) = cache
        .get("timeline")
        .and_then(|c| c.clone().downcast::<CachedTimeline>().ok())
        .filter(|c| c.version == version && c.minute == minute)
    {
        return c.timeline.clone();
    }
    let t = Arc::new(timeline(web, now));
    cache.insert(
        "timeline",
        Arc::new(CachedTimeline {
            version,
            minute,
            timeline: t.clone(),
        }),
    );
    t
}

/// The timeline as an SVG histogram, and its caption.
fn timeline_svg(t: &Timeline) -> (String, String) {
    let bars: Vec<svg::Bar> = t
        .counts
        .iter()
        .zip(&t.names)
        .enumerate()
        .map(|(i, (n, names))| {
            let from = Timestamp::from_second(t.start.as_second() + i as i64 * BUCKET_SECS)
                .unwrap_or(t.start);
            let to = Timestamp::from_second(from.as_second() + BUCKET_SECS).unwrap_or(from);
            let more = if *n as usize > names.len() {
                format!(", +{} more", *n as usize - names.len())
            } else {
                String::new()
            };
            svg::Bar {
                value: f64::from(*n),
                label: if i % 8 == 0 {
                    from.strftime("%H:%M").to_string()
                } else {
                    String::new()
                },
                title: format!(
                    "{}–{} UTC: {n} fire{}{}{}",
                    from.strftime("%H:%M"),
                    to.strftime("%H:%M"),
                    if *n == 1 { "" } else { "s" },
                    if names.is_empty() {
                        String::new()
                    } else {
                        format!(" ({}", names.join(", "))
                    },
                    if names.is_empty() {
                        String::new()
                    } else {
                        format!("{more})")
                    },
                ),
            }
        })
        .collect();
    let busiest = t
        .counts
        .iter()
        .enumerate()
        .max_by_key(|(i, n)| (**n, std::cmp::Reverse(*i)))
        .filter(|(_, n)| **n > 0);
    let mut caption = format!(
        "{} fires in the next 24 hours, in 15-minute buckets (UTC).",
        t.total
    );
    if let Some((i, n)) = busiest {
        let from =
            Timestamp::from_second(t.start.as_second() + i as i64 * BUCKET_SECS).unwrap_or(t.start);
        caption.push_str(&format!(
            " Busiest: {} UTC, {n} fire{}.",
            from.strftime("%H:%M"),
            if *n == 1 { "" } else { "s" }
        ));
    }
    if t.approximate > 0 {
        caption.push_str(&format!(
            " {} interval periodic{} placed from {} next fire.",
            t.approximate,
            if t.approximate == 1 { "" } else { "s" },
            if t.approximate == 1 { "its" } else { "their" }
        ));
    }
    (svg::histogram(&bars, "timeline"), caption)
}

fn row(
    web: &Web,
    p: &Periodic,
    next: Option<Timestamp>,
    now: Timestamp,
) -> Result<Row, StoreError> {
    let store = &web.daemon.shared.store;
    let identity = p.identity();
    let (schedule, words) = schedule_words(p);
    let paused = store.periodic_state(&identity)?.is_some_and(|s| s.paused);
    let mut runs = store.list(&RunFilter {
        periodic: Some(identity.clone()),
        limit: STRIP,
        ..RunFilter::default()
    })?;
    runs.reverse();
    let strip = runs
        .iter()
        .map(|r| Square {
            href: format!("/runs/{}", r.id),
            state: r.state.as_str(),
            title: format!("{}: {}", fmt::time(r.created_at), r.state),
        })
        .collect();
    let skipped_ticks = store.skipped_ticks(&identity, SKIPS)?;
    let skipped = skipped_ticks.total;
    let skips = skipped_ticks
        .recent
        .iter()
        .map(|o| Skip {
            when: if o.first_tick == o.last_tick {
                fmt::time(o.first_tick)
            } else {
                format!("{} – {}", fmt::time(o.first_tick), fmt::time(o.last_tick))
            },
            count: o.count,
            reason: o.outcome.clone(),
        })
        .collect();
    let tz = p.kind.timezone.clone().unwrap_or_default();
    Ok(Row {
        schedule,
        words,
        cluster: p.base.cluster.clone(),
        paused,
        never: cron(p).is_some_and(|s| s.never_fires()),
        next: next.map(fmt::time).unwrap_or_default(),
        next_in: next.map(|n| fmt::relative(n, now)).unwrap_or_default(),
        next_local: match (next, tz.as_str()) {
            (Some(n), z) if !z.is_empty() && z != "UTC" => fmt::time_in(n, Some(z)),
            _ => String::new(),
        },
        timezone: tz,
        strip,
        skips,
        skipped,
        identity,
    })
}

#[derive(Debug, Default, Deserialize)]
pub struct PeriodicsQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    page: String,
}

#[derive(Template)]
#[template(path = "periodics.html")]
struct PeriodicsPage {
    chrome: Chrome,
    q: String,
    rows: Vec<Row>,
    total: usize,
    page: usize,
    prev: String,
    next: String,
    timeline: String,
    caption: String,
    error: String,
    back: String,
}

/// `GET /periodics`.
pub async fn page(
    ctx: Ctx,
    State(web): State<Arc<Web>>,
    Query(q): Query<PeriodicsQuery>,
) -> Response {
    let page_no = q.page.parse::<usize>().unwrap_or(1).max(1);
    let w = web.clone();
    let needle = q.q.trim().to_string();
    let built = blocking(move || {
        let snapshot = w.daemon.shared.snapshot();
        let now = w.now();
        let matching: Vec<&Periodic> = snapshot
            .periodics
            .iter()
            .filter(|p| needle.is_empty() || p.identity().contains(&needle))
            .collect();
        let total = matching.len();
        let shown: Vec<&Periodic> = matching
            .into_iter()
            .skip((page_no - 1) * PAGE_SIZE)
            .take(PAGE_SIZE)
            .collect();
        let nexts: Vec<Option<Timestamp>> = {
            let s = w.daemon.shared.scheduler.locked();
            shown.iter().map(|p| s.next_fire(&p.identity())).collect()
        };
        let rows = shown
            .iter()
            .zip(nexts)
            .map(|(p, next)| row(&w, p, next, now))
            .collect::<Result<Vec<_>, _>>();
        let timeline = timeline_now(&w);
        (rows, total, timeline_svg(&timeline))
    })
    .await;
    let (rows, total, (timeline, caption)) = built;
    let href = |n: usize| {
        let n = n.to_string();
        format!(
            "/periodics{}",
            fmt::query(&[("q", &q.q), ("page", if n == "1" { "" } else { &n })])
        )
    };
    let (rows, error, status) = match rows {
        Ok(r) => (r, String::new(), StatusCode::OK),
        Err(e) => (
            Vec::new(),
            format!("cannot read the store: {e}"),
            StatusCode::SERVICE_UNAVAILABLE,
        ),
    };
    let page = PeriodicsPage {
        chrome: ctx.chrome("Periodics", "/periodics"),
        q: q.q.clone(),
        rows,
        total,
        page: page_no,
        prev: if page_no > 1 {
            href(page_no - 1)
        } else {
            String::new()
        },
        next: if page_no * PAGE_SIZE < total {
            href(page_no + 1)
        } else {
            String::new()
        },
        timeline,
        caption,
        error,
        back: ctx.path.clone(),
    };
    ctx.page(status, &page)
}

#[derive(Deserialize)]
pub struct PeriodicForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    identity: String,
    back: Option<String>,
}

/// Pauses or resumes a periodic, then back to the page.
async fn set_paused(ctx: Ctx, web: Arc<Web>, form: PeriodicForm, paused: bool) -> Response {
    if let Err(r) = ctx.check_form(&form.csrf) {
        return *r;
    }
    let back = local_next(form.back.as_deref());
    let shared = web.daemon.shared.clone();
    let id = form.identity.clone();
    match blocking(move || crate::periodics::set_paused(&shared, &id, paused)).await {
        Ok(Some(_)) => see_other(&back),
        Ok(None) => ctx.message(
            StatusCode::NOT_FOUND,
            "No such periodic",
            &format!(
                "No periodic {:?} in the configuration in force.",
                form.identity
            ),
            &back,
        ),
        Err(e) => ctx.message(
            StatusCode::SERVICE_UNAVAILABLE,
            "Not done",
            &e.to_string(),
            &back,
        ),
    }
}

/// `POST /periodics/pause`.
pub async fn pause(
    ctx: Ctx,
    State(web): State<Arc<Web>>,
    Form(form): Form<PeriodicForm>,
) -> Response {
    set_paused(ctx, web, form, true).await
}

/// `POST /periodics/resume`.
pub async fn resume(
    ctx: Ctx,
    State(web): State<Arc<Web>>,
    Form(form): Form<PeriodicForm>,
) -> Response {
    set_paused(ctx, web, form, false).await
}

/// `POST /periodics/trigger`: a run now, outside the schedule.
pub async fn trigger(
    ctx: Ctx,
    State(web): State<Arc<Web>>,
    Form(form): Form<PeriodicForm>,
) -> Response {
    if let Err(r) = ctx.check_form(&form.csrf) {
        return *r;
    }
    let d = &web.daemon;
    match d
        .runs
        .create(
            &d.shared,
            &d.controller,
            RunRequest::Periodic(form.identity.clone()),
        )
        .await
    {
        Ok(run) => see_other(&format!("/runs/{}", run.id)),
        Err(e) => ctx.message(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Not done",
            &e.to_string(),
            &local_next(form.back.as_deref()),
        ),
    }
}
