//! The effective plan: the plan in force with two temporary adjustments on
//! top, outside the movement budget, leaving the plan itself unchanged.
//!
//! # Adjustments
//!
//! * **Overrides** ([`Override`]), each with a time to live of at most 24
//!   hours ([`MAX_TTL`]); one whose `expires_at` is not after `now` is
//!   ignored. [`OverrideTarget::Job`] forces the unit of a job (all jobs of
//!   that name) onto `cluster`; [`OverrideTarget::File`] forces the
//!   relocatable units of a job-config file onto `cluster` (its pinned jobs
//!   stay on their pins); [`OverrideTarget::Drain`] moves a cluster's
//!   relocatable units off it. The cluster must be in the inventory, not
//!   blocked, and eligible for every unit moved; a pinned unit is never
//!   moved by an override ([`validate`]).
//! * **Health overlay**: the relocatable units of a cluster of the
//!   `unhealthy` set are served from another cluster. Pinned units are left
//!   alone: their runs wait or fail over, which is the caller's business.
//!
//! # Order and precedence
//!
//! 1. Job and file overrides. When several name one unit, the newest wins
//!    (`created_at`, then `id`); one that wins no unit is skipped as
//!    superseded. A unit already on the override's cluster stays, and is
//!    still the override's.
//! 2. Drains, over all drained clusters at once. A unit placed by a job or
//!    file override stays on its cluster even if that cluster is drained
//!    (the specific order beats the general one: "drain build01 but keep
//!    this canary there").
//! 3. The health overlay, over every relocatable unit on an unhealthy
//!    cluster, overridden units included (an override onto a cluster that
//!    becomes unhealthy is still protected by the overlay).
//!
//! Drains and the overlay move units the same way: largest demand first
//! (ties by unit id), each to the cluster of its `eligible` list that is
//! in the inventory, not blocked, healthy and not drained with the lowest
//! relative load *after* placing it (`(load + demand) / target`, as the
//! planner places units; a cluster with target 0 only when no other is
//! left), ties by name; loads are updated as units are placed. A unit with
//! no such cluster stays, and its reason says why.
//!
//! # The effective plan
//!
//! The plan's assignments with each adjusted unit's jobs on their new
//! cluster, with `rule` `override`, `drain` or `health overlay` and a
//! `reason` saying exactly what happened and where the plan put them (a
//! unit that stays keeps its rule and gets a reason saying why it stays);
//! `previous` is kept. Cluster loads are the plan's with the moved units'
//! demand shifted (their `demand` in the input), targets are the plan's,
//! relative loads recomputed; the generation, `moves` and `unplaced` are
//! the plan's. (A cluster of the inventory that the plan does not list
//! counts with target 0 and gets no load line until the next plan.)
//! [`Adjusted`] also lists the moves made by overrides and drains and by
//! the overlay, step by step.
//!
//! Cost: `O(J)` to index the plan's jobs by unit and clone the plan, plus
//! `O(U log U + U × C)` for the units that move (and `O(J)` per file
//! override given a job → file map). Deterministic: the overrides' order
//! and hash-map iteration never matter.
//!
//! Units: with `dispatcher.unit: file` a file override's unit is the unit
//! whose id is the file. [`UnitSpec`] does not know its jobs' files, so
//! with `dispatcher.unit: job` (or to reach the pinned and merged units of
//! a file) the caller gives a job → file map ([`adjust_with_files`],
//! [`validate_with_files`]): the file's units are then also those of its
//! jobs.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::model::{Move, Plan, PlanInput, UnitSpec};

/// The longest time to live of an override.
pub const MAX_TTL: SignedDuration = SignedDuration::from_hours(24);

/// What an override acts on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverrideTarget {
    /// A job name: the unit of every job of that name goes to the
    /// override's cluster.
    Job(String),
    /// A job-config file path relative to its directory: the relocatable
    /// units of its jobs go to the override's cluster.
    File(String),
    /// A cluster: its relocatable units move off it.
    Drain(String),
}

/// An operator's temporary order: force a job or a file onto a cluster, or
/// drain a cluster, until it expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Override {
    /// Its identity (unique among the overrides in force).
    pub id: String,
    /// What it acts on.
    pub target: OverrideTarget,
    /// The cluster a job or file goes to; none for a drain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// When it was made.
    pub created_at: Timestamp,
    /// When it stops acting (at most [`MAX_TTL`] after it is validated).
    pub expires_at: Timestamp,
    /// Why.
    pub reason: String,
    /// Who made it.
    pub actor: String,
}

impl Override {
    /// Whether it has stopped acting at `now` (`expires_at` is not after
    /// it): [`adjust`] ignores it.
    pub fn expired(&self, now: Timestamp) -> bool {
        self.expires_at <= now
    }
}

/// The effective plan and what made it differ from the plan in force.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Adjusted {
    /// The effective plan (same generation as the plan in force).
    pub plan: Plan,
    /// Units moved by the health overlay.
    pub overlay: Vec<Move>,
    /// Units moved by job and file overrides and by drains.
    pub overridden: Vec<Move>,
    /// The overrides in effect: not expired, valid, not superseded.
    pub active_overrides: usize,
    /// Overrides not expired but not in effect: (id, why).
    pub skipped: Vec<(String, String)>,
}

/// Whether `o` may be applied to `plan` (made from `input`) at `now`: its
/// fields, its time to live (more than 0, at most [`MAX_TTL`]), its job,
/// file or cluster, and for a job or file that the cluster is in the
/// inventory, not blocked and eligible for every unit it moves, none of
/// them pinned. A file's units are the unit whose id is the file (see
/// [`validate_with_files`]).
pub fn validate(
    input: &PlanInput,
    plan: &Plan,
    o: &Override,
    now: Timestamp,
) -> Result<(), String> {
    Ctx::new(plan, input, None).check(o, now).map(|_| ())
}

/// [`validate`], a file's units being also those of its jobs by `files`
/// (job name → job-config file path relative to its directory).
pub fn validate_with_files(
    input: &PlanInput,
    plan: &Plan,
    o: &Override,
    now: Timestamp,
    files: &BTreeMap<String, String>,
) -> Result<(), String> {
    Ctx::new(plan, input, Some(files)).check(o, now).map(|_| ())
}

/// The effective plan of `plan` (made from `input`) at `now`: `overrides`
/// then the health overlay for the `unhealthy` clusters (module doc). A file
/// override's units are the unit whose id is the file (see
/// [`adjust_with_files`]).
pub fn adjust(
    plan: &Plan,
    input: &PlanInput,
    overrides: &[Override],
    unhealthy: &BTreeSet<String>,
    now: Timestamp,
) -> Adjusted {
    run(Ctx::new(plan, input, None), overrides, unhealthy, now)
}

/// [`adjust`], a file's units being also those of its jobs by `files`
/// (job name → job-config file path relative to its directory).
pub fn adjust_with_files(
    plan: &Plan,
    input: &PlanInput,
    overrides: &[Override],
    unhealthy: &BTreeSet<String>,
    now: Timestamp,
    files: &BTreeMap<String, String>,
) -> Adjusted {
    run(
        Ctx::new(plan, input, Some(files)),
        overrides,
        unhealthy,
        now,
    )
}

// ---------------------------------------------------------------------------
// Context

struct Ctx<'a> {
    plan: &'a Plan,
    files: Option<&'a BTreeMap<String, String>>,
    /// The input's units by id (the first of a duplicated id).
    specs: HashMap<&'a str, &'a UnitSpec>,
    /// The inventory: name → blocked (a name listed twice is blocked if
    /// either is, as the planner reads it).
    inventory: HashMap<&'a str, bool>,
}

/// What a valid override does.
enum Valid<'a> {
    /// Force these units (relocatable, sorted by id, unique) onto a cluster.
    Force(Vec<&'a UnitSpec>, &'a str),
    /// Drain a cluster.
    Drain(&'a str),
}

impl<'a> Ctx<'a> {
    fn new(
        plan: &'a Plan,
        input: &'a PlanInput,
        files: Option<&'a BTreeMap<String, String>>,
    ) -> Ctx<'a> {
        let mut specs = HashMap::with_capacity(input.units.len());
        for u in &input.units {
            specs.entry(u.id.as_str()).or_insert(u);
        }
        let mut inventory: HashMap<&str, bool> = HashMap::new();
        for c in &input.clusters {
            *inventory.entry(c.name.as_str()).or_insert(false) |= c.blocked;
        }
        Ctx {
            plan,
            files,
            specs,
            inventory,
        }
    }

    /// Whether the plan places `spec`'s jobs as its unit.
    fn placed(&self, spec: &UnitSpec) -> bool {
        spec.jobs.iter().any(|j| {
            self.plan
                .assignments
                .get(j)
                .is_some_and(|a| a.unit == spec.id)
        })
    }

    fn check(&self, o: &'a Override, now: Timestamp) -> Result<Valid<'a>, String> {
        if o.id.trim().is_empty() {
            return Err("an override needs an id".into());
        }
        if o.actor.trim().is_empty() {
            return Err("an override needs an actor (who makes it)".into());
        }
        if o.reason.trim().is_empty() {
            return Err("an override needs a reason".into());
        }
        let ttl = o.expires_at.duration_since(now);
        if ttl <= SignedDuration::ZERO {
            return Err(format!(
                "it expires at {}, not after now ({now})",
                o.expires_at
            ));
        }
        if ttl > MAX_TTL {
            return Err(format!(
                "its time to live ({ttl:#}, until {}) is longer than {MAX_TTL:#}",
                o.expires_at
            ));
        }
        let cluster = match (&o.target, &o.cluster) {
            (OverrideTarget::Drain(c), None) => {
                if !self.inventory.contains_key(c.as_str()) {
                    return Err(format!(
                        "cannot drain unknown cluster {c} (not in the inventory)"
                    ));
                }
                return Ok(Valid::Drain(c));
            }
            (OverrideTarget::Drain(c), Some(other)) => {
                return Err(format!(
                    "a drain names no cluster to go to (it drains {c}; cluster {other} given)"
                ))
            }
            (_, None) => return Err("a job or file override needs a cluster to go to".into()),
            (_, Some(c)) => c.as_str(),
        };
        match self.inventory.get(cluster) {
            None => return Err(format!("unknown cluster {cluster} (not in the inventory)")),
            Some(true) => return Err(format!("cluster {cluster} is blocked")),
            Some(false) => {}
        }
        let units = match &o.target {
            OverrideTarget::Job(job) => {
                let a = self.plan.assignments.get(job).ok_or_else(|| {
                    format!("unknown job {job}: the plan in force does not place it")
                })?;
                let spec = self.specs.get(a.unit.as_str()).ok_or_else(|| {
                    format!(
                        "job {job}'s unit {} is not in the planner's input (re-plan first)",
                        a.unit
                    )
                })?;
                if let Some(pin) = &spec.pinned {
                    return Err(format!(
                        "job {job} is pinned to {pin} ({}): an override cannot move a pinned unit",
                        spec.rule
                    ));
                }
                vec![*spec]
            }
            OverrideTarget::File(file) => self.file_units(file)?,
            OverrideTarget::Drain(_) => unreachable!("handled above"),
        };
        for spec in &units {
            if !spec.eligible.iter().any(|c| c == cluster) {
                let what = match &o.target {
                    OverrideTarget::Job(job) => format!("job {job}"),
                    _ => format!("unit {}", spec.id),
                };
                return Err(format!(
                    "{cluster} is not eligible for {what} (eligible: {}; {})",
                    list(&spec.eligible),
                    spec.rule
                ));
            }
        }
        Ok(Valid::Force(units, cluster))
    }

    /// A file's relocatable units: the unit whose id is the file and, with
    /// a job → file map, the units of its jobs.
    fn file_units(&self, file: &str) -> Result<Vec<&'a UnitSpec>, String> {
        let mut ids: BTreeSet<&str> = BTreeSet::new();
        let mut jobs_seen = false;
        if let Some(spec) = self.specs.get(file) {
            if self.placed(spec) {
                ids.insert(spec.id.as_str());
            }
        }
        if let Some(files) = self.files {
            for (job, f) in files {
                if f != file {
                    continue;
                }
                if let Some(a) = self.plan.assignments.get(job) {
                    jobs_seen = true;
                    if self.specs.contains_key(a.unit.as_str()) {
                        ids.insert(a.unit.as_str());
                    }
                }
            }
        }
        if ids.is_empty() {
            return Err(if jobs_seen {
                format!("the units of file {file}'s jobs are not in the planner's input (re-plan first)")
            } else {
                format!("unknown file {file}: no unit or job of the plan in force comes from it")
            });
        }
        let (pinned, free): (Vec<&UnitSpec>, Vec<&UnitSpec>) = ids
            .into_iter()
            .map(|id| self.specs[id])
            .partition(|s| s.pinned.is_some());
        if free.is_empty() {
            let s = pinned[0];
            return Err(format!(
                "every job of file {file} is pinned (unit {} to {}: {}): an override cannot move a pinned unit",
                s.id,
                s.pinned.as_deref().unwrap_or_default(),
                s.rule
            ));
        }
        Ok(free)
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

fn sanitize(d: f64) -> f64 {
    if d.is_finite() && d > 0.0 {
        d
    } else {
        0.0
    }
}

/// The total order overrides are taken in: oldest first.
fn order(a: &Override, b: &Override) -> Ordering {
    (
        a.created_at,
        &a.id,
        a.expires_at,
        &a.target,
        &a.cluster,
        &a.actor,
        &a.reason,
    )
        .cmp(&(
            b.created_at,
            &b.id,
            b.expires_at,
            &b.target,
            &b.cluster,
            &b.actor,
            &b.reason,
        ))
}

fn who(o: &Override) -> String {
    format!(
        "{} by {} until {}: {:?}",
        o.id, o.actor, o.expires_at, o.reason
    )
}

// ---------------------------------------------------------------------------
// Adjusting

/// A cluster's load as units move.
struct Load {
    base: f64,
    load: f64,
    moved_in: f64,
    target: f64,
}

/// An adjusted unit.
struct Unit<'a> {
    /// Where it is now.
    cur: &'a str,
    /// The rule of its jobs' assignments (None: unchanged).
    rule: Option<&'static str>,
    reason: String,
    /// What an earlier step did, for the reasons of later ones.
    note: Option<String>,
}

struct State<'a> {
    ctx: Ctx<'a>,
    /// The plan's jobs per unit id (in name order) and the unit's cluster
    /// in the plan (its first job's).
    jobs: HashMap<&'a str, (&'a str, Vec<&'a str>)>,
    loads: HashMap<&'a str, Load>,
    units: HashMap<&'a str, Unit<'a>>,
    unhealthy: &'a BTreeSet<String>,
    drained: BTreeMap<&'a str, &'a Override>,
}

impl<'a> State<'a> {
    fn cur(&self, unit: &str) -> Option<&'a str> {
        match self.units.get(unit) {
            Some(u) => Some(u.cur),
            None => self.jobs.get(unit).map(|j| j.0),
        }
    }

    fn base(&self, unit: &str) -> &'a str {
        self.jobs[unit].0
    }

    fn shift(&mut self, from: &str, to: &'a str, d: f64) {
        if let Some(l) = self.loads.get_mut(from) {
            l.load -= d;
        }
        let l = self.loads.entry(to).or_insert(Load {
            base: 0.0,
            load: 0.0,
            moved_in: 0.0,
            target: 0.0,
        });
        l.load += d;
        l.moved_in += d;
    }

    /// Why `c` cannot take a unit moved by a drain or the overlay (None: it
    /// can).
    fn refuses(&self, c: &str) -> Option<&'static str> {
        match self.ctx.inventory.get(c) {
            None => Some("not in the inventory"),
            Some(true) => Some("blocked"),
            Some(false) if self.unhealthy.contains(c) => Some("not Reachable"),
            Some(false) if self.drained.contains_key(c) => Some("drained"),
            Some(false) => None,
        }
    }

    /// The eligible cluster with the lowest relative load after placing
    /// demand `d`, ties by name.
    fn pick(&self, spec: &'a UnitSpec, d: f64, cur: &str) -> Option<&'a str> {
        let mut best: Option<(f64, &'a str)> = None;
        for c in &spec.eligible {
            if c == cur || self.refuses(c).is_some() {
                continue;
            }
            let (load, target) = self
                .loads
                .get(c.as_str())
                .map_or((0.0, 0.0), |l| (l.load, l.target));
            let after = load + d;
            let r = if target > 0.0 {
                after / target
            } else if after > 0.0 {
                f64::INFINITY
            } else {
                0.0
            };
            let better = match best {
                None => true,
                Some((br, bc)) => r.total_cmp(&br).then(c.as_str().cmp(bc)) == Ordering::Less,
            };
            if better {
                best = Some((r, c));
            }
        }
        best.map(|b| b.1)
    }

    /// Why no cluster can take the unit: each eligible cluster but `cur`
    /// with its reason.
    fn nowhere(&self, spec: &UnitSpec, cur: &str) -> String {
        let others: Vec<String> = spec
            .eligible
            .iter()
            .filter(|c| *c != cur)
            .map(|c| format!("{c}: {}", self.refuses(c).unwrap_or("eligible")))
            .collect();
        if others.is_empty() {
            format!(
                "no other eligible cluster (eligible: {})",
                list(&spec.eligible)
            )
        } else {
            format!(
                "no other eligible cluster is healthy, schedulable and not drained ({})",
                others.join(", ")
            )
        }
    }

    /// `(plan: X)`, after what an earlier step did.
    fn context(&self, unit: &str) -> String {
        let base = self.base(unit);
        match self.units.get(unit).and_then(|u| u.note.as_ref()) {
            Some(note) => format!("({note}; plan: {base})"),
            None => format!("(plan: {base})"),
        }
    }

    /// Moves `unit` (demand `d`, now on `from`) to the least loaded
    /// eligible healthy cluster, as a drain or the overlay does, recording
    /// the move in `moves`: where it goes (`None`: it stays) and why, the
    /// reason starting with `head`.
    fn evacuate(
        &mut self,
        unit: &str,
        spec: Option<&'a UnitSpec>,
        d: f64,
        from: &'a str,
        head: &str,
        moves: &mut Vec<Move>,
    ) -> (Option<&'a str>, String) {
        let to = spec.and_then(|s| self.pick(s, d, from));
        let ctx = self.context(unit);
        match (to, spec) {
            (Some(to), _) => {
                let reason = format!(
                    "{head}; served from {to}, the least loaded eligible healthy cluster {ctx}"
                );
                self.shift(from, to, d);
                moves.push(Move {
                    unit: unit.to_string(),
                    from: Some(from.to_string()),
                    to: to.to_string(),
                    demand: d,
                    forced: true,
                    reason: reason.clone(),
                });
                (Some(to), reason)
            }
            (None, Some(s)) => (
                None,
                format!("{head}; {}; stays on {from} {ctx}", self.nowhere(s, from)),
            ),
            (None, None) => (
                None,
                format!("{head}; its unit is not in the planner's input; stays on {from} {ctx}"),
            ),
        }
    }

    /// The units on `clusters` that a drain or the overlay may move (not
    /// pinned, not `protected`), largest demand first, ties by id.
    fn on(
        &self,
        clusters: impl Fn(&str) -> bool,
        protected: &HashSet<&str>,
    ) -> Vec<(&'a str, Option<&'a UnitSpec>, f64)> {
        let mut out: Vec<(&'a str, Option<&'a UnitSpec>, f64)> = self
            .jobs
            .keys()
            .filter(|u| !protected.contains(*u))
            .filter(|u| self.cur(u).is_some_and(&clusters))
            .filter_map(|&u| match self.ctx.specs.get(u) {
                Some(s) if s.pinned.is_some() => None,
                Some(s) => Some((u, Some(*s), sanitize(s.demand))),
                None => Some((u, None, 0.0)),
            })
            .collect();
        out.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(b.0)));
        out
    }
}

fn run(
    ctx: Ctx<'_>,
    overrides: &[Override],
    unhealthy: &BTreeSet<String>,
    now: Timestamp,
) -> Adjusted {
    let plan = ctx.plan;
    let mut skipped = Vec::new();
    let mut active = 0usize;

    // The overrides in effect, oldest first.
    let mut live: Vec<&Override> = overrides.iter().filter(|o| !o.expired(now)).collect();
    live.sort_by(|a, b| order(a, b));
    let mut ids: HashSet<&str> = HashSet::new();
    let mut forces: Vec<(&Override, Vec<&UnitSpec>, &str)> = Vec::new();
    let mut drained: BTreeMap<&str, &Override> = BTreeMap::new();
    for o in live {
        if !ids.insert(o.id.as_str()) {
            skipped.push((
                o.id.clone(),
                "another override with this id comes first".to_string(),
            ));
            continue;
        }
        match ctx.check(o, now) {
            Err(why) => skipped.push((o.id.clone(), why)),
            Ok(Valid::Force(units, c)) => forces.push((o, units, c)),
            Ok(Valid::Drain(c)) => {
                active += 1;
                drained.entry(c).or_insert(o);
            }
        }
    }
    if forces.is_empty() && drained.is_empty() && unhealthy.is_empty() {
        return Adjusted {
            plan: plan.clone(),
            overlay: Vec::new(),
            overridden: Vec::new(),
            active_overrides: active,
            skipped,
        };
    }

    let mut jobs: HashMap<&str, (&str, Vec<&str>)> = HashMap::new();
    for (job, a) in &plan.assignments {
        jobs.entry(a.unit.as_str())
            .or_insert_with(|| (a.cluster.as_str(), Vec::new()))
            .1
            .push(job.as_str());
    }
    let loads = plan
        .clusters
        .iter()
        .map(|l| {
            (
                l.name.as_str(),
                Load {
                    base: l.load,
                    load: l.load,
                    moved_in: 0.0,
                    target: l.target,
                },
            )
        })
        .collect();
    let mut st = State {
        ctx,
        jobs,
        loads,
        units: HashMap::new(),
        unhealthy,
        drained,
    };
    let mut overridden = Vec::new();
    let mut overlay = Vec::new();

    // 1. Job and file overrides: the newest wins each unit.
    let mut winner: HashMap<&str, usize> = HashMap::new();
    for (i, (_, units, _)) in forces.iter().enumerate() {
        for u in units {
            winner.insert(u.id.as_str(), i);
        }
    }
    for (i, (o, units, _)) in forces.iter().enumerate() {
        if units.iter().any(|u| winner[u.id.as_str()] == i) {
            active += 1;
        } else {
            let by = forces[winner[units[0].id.as_str()]].0;
            skipped.push((
                o.id.clone(),
                format!(
                    "superseded by the newer override {} for every unit it names",
                    by.id
                ),
            ));
        }
    }
    let mut won: Vec<(&str, usize)> = winner.iter().map(|(u, i)| (*u, *i)).collect();
    won.sort_unstable();
    let protected: HashSet<&str> = won.iter().map(|w| w.0).collect();
    for (unit, i) in won {
        let (o, _, to) = &forces[i];
        let spec = st.ctx.specs[unit];
        let from = st.base(unit);
        let reason = format!("override {} {}", who(o), st.context(unit));
        if from != *to {
            st.shift(from, to, sanitize(spec.demand));
            overridden.push(Move {
                unit: unit.to_string(),
                from: Some(from.to_string()),
                to: to.to_string(),
                demand: sanitize(spec.demand),
                forced: true,
                reason: reason.clone(),
            });
        }
        let verb = if from == *to { "keeps" } else { "put" };
        st.units.insert(
            unit,
            Unit {
                cur: to,
                rule: Some("override"),
                reason,
                note: Some(format!("override {} {verb} it on {to}", o.id)),
            },
        );
    }

    // 2. Drains.
    if !st.drained.is_empty() {
        let drained = st.drained.clone();
        for (unit, spec, d) in st.on(|c| drained.contains_key(c), &protected) {
            let from = st.cur(unit).expect("a unit of the plan");
            let o = drained[from];
            let head = format!(
                "drain {} of {from} by {} until {}: {:?}",
                o.id, o.actor, o.expires_at, o.reason
            );
            let (to, reason) = st.evacuate(unit, spec, d, from, &head, &mut overridden);
            let entry = match to {
                Some(to) => Unit {
                    cur: to,
                    rule: Some("drain"),
                    reason,
                    note: Some(format!("drain {} moved it to {to}", o.id)),
                },
                None => Unit {
                    cur: from,
                    rule: None,
                    reason,
                    note: Some(format!("drain {} of {from} could not move it", o.id)),
                },
            };
            st.units.insert(unit, entry);
        }
    }

    // 3. The health overlay.
    if !unhealthy.is_empty() {
        for (unit, spec, d) in st.on(|c| unhealthy.contains(c), &HashSet::new()) {
            let from = st.cur(unit).expect("a unit of the plan");
            let head = format!("health overlay: {from} not Reachable");
            let rule = st.units.get(unit).and_then(|u| u.rule);
            let note = st.units.get(unit).and_then(|u| u.note.clone());
            let (to, reason) = st.evacuate(unit, spec, d, from, &head, &mut overlay);
            let entry = match to {
                Some(to) => Unit {
                    cur: to,
                    rule: Some("health overlay"),
                    reason,
                    note,
                },
                None => Unit {
                    cur: from,
                    rule,
                    reason,
                    note,
                },
            };
            st.units.insert(unit, entry);
        }
    }

    // The effective plan.
    let mut out = plan.clone();
    for (unit, u) in &st.units {
        for job in &st.jobs[unit].1 {
            let a = out.assignments.get_mut(*job).expect("a job of the plan");
            a.cluster = u.cur.to_string();
            if let Some(rule) = u.rule {
                a.rule = rule.to_string();
            }
            a.reason.clone_from(&u.reason);
        }
    }
    for c in &mut out.clusters {
        let l = &st.loads[c.name.as_str()];
        let mut load = l.load;
        // Rounding of the shifts: what is left of a cluster emptied.
        if load.abs() <= 1e-9 * l.base.max(l.moved_in) {
            load = 0.0;
        }
        c.load = load.max(0.0);
        c.relative_load = if c.target > 0.0 {
            c.load / c.target
        } else {
            0.0
        };
    }
    Adjusted {
        plan: out,
        overlay,
        overridden,
        active_overrides: active,
        skipped,
    }
}
