//! The balancing plan: which cluster each unit of jobs goes to, and why.
//!
//! # Definitions
//!
//! * **Schedulable clusters**: the inventory's clusters that are not
//!   blocked. A blocked cluster gets nothing, its target is 0.
//! * **Weight** of a cluster: its capacity (a capacity of 0 counts as a
//!   negligible 10⁻⁶, so such a cluster only takes what can go nowhere
//!   else).
//! * **Demand counted** (`D`): the demand of every unit placed on a
//!   schedulable cluster of the inventory — balanced units, units pinned
//!   there, and unplaceable units kept on their previous cluster. Units
//!   pinned outside the inventory (OpenShift's `app.ci`, `arm01`, ...), and
//!   units that keep a pin onto a blocked cluster
//!   ([`UnitSpec::keeps_blocked_pin`]), are assigned there and count
//!   nowhere. Negative or non-finite demand is 0.
//! * **Target** of a cluster: its *share of the capacity eligible to the
//!   demand that can reach it*, times that demand. Without eligibility
//!   constraints that is `capacity / Σ capacity × D`. With them it is the
//!   water-filling (lexicographically optimal, "progressive filling")
//!   fractional balance: take the densest set of clusters `K` — the one
//!   maximising `λ = g(K) / weight(K)`, where `g(K)` is the demand of the
//!   units that can only go to clusters of `K` (pins count as units whose
//!   only eligible cluster is the pin) — give each cluster of `K` the
//!   target `λ × weight`, remove `K` and the units confined to it, repeat.
//!   If three GCP-only clusters must carry 40% of the demand, each gets
//!   ⅓ of that 40%, whatever the AWS clusters' capacity. Targets sum to `D`
//!   and depend on the input only (not on any assignment). The densest set
//!   is found exactly by Dinkelbach iteration over a max-flow feasibility
//!   check (source → eligibility groups → clusters with capacity
//!   `λ × weight` → sink), so clusters with no eligible demand get 0.
//! * **Relative load**: `load / target` (0 when the target is 0). 1.0 is
//!   "as balanced as the eligibility constraints allow with divisible
//!   demand", so the fractional optimum of the maximum relative load is
//!   exactly 1.0 under this definition.
//! * **Lower bound** ([`lower_bound`]): `max(fractional optimum = 1.0,
//!   max over units of demand / largest target among its allowed
//!   clusters)` — no integral assignment does better.
//! * **Imbalance** minimised by balancing moves:
//!   `Φ = Σ_k load_k² / target_k = D + Σ_k target_k (relative_k − 1)²`,
//!   the target-weighted squared deviation of relative loads. Its
//!   divisible-demand minimum is the water-filling above, where the
//!   maximum relative load is also minimal. Moving demand `d` from `a` to
//!   `b` changes it by `d (2 (r_b − r_a) + d (1/t_a + 1/t_b))`; a move is
//!   made only if that is negative *and* `b`'s relative load after the move
//!   stays at or below the current maximum, so the maximum relative load
//!   never increases through balancing.
//!
//! # Steps
//!
//! 1. Pinned units go to their pin; a pin onto a blocked cluster leaves the
//!    unit unplaced unless it keeps a blocked pin. Units whose `previous`
//!    cluster is schedulable and still eligible keep it.
//! 2. Forced: units whose previous cluster is blocked, not in the
//!    inventory, or no longer eligible, and new units (no previous), are
//!    placed, largest first, on the eligible cluster with the lowest
//!    relative load after placement (ties: the FNV-1a 64 [`stable_hash`] of
//!    (unit id, cluster), then the name). Pin changes are forced too. None
//!    of these count against the budget; new units are reported as moves
//!    with `from: None` ("placements").
//! 3. Free refinement: units already moving in this plan (step 2) are
//!    re-placed while that cuts `Φ` (the largest cut first) — it moves
//!    nothing more.
//! 4. Balancing: nothing at all while every cluster with a positive target
//!    is within `hysteresis_percent` of 1.0. Otherwise, repeatedly, the
//!    move of a unit kept on its previous cluster that cuts `Φ` most per
//!    unit of demand moved (for one pair of clusters that is the smallest
//!    eligible unit), interleaved with free refinement, until the clusters
//!    are within the hysteresis, no move cuts `Φ`, or every cutting move
//!    would exceed the budget (`budget_share × D`; a unit moved back to its
//!    previous cluster gives its demand back).
//!
//! A second plan on unchanged input, with the first plan as `previous`,
//! moves nothing unless the first was stopped by the budget
//! ([`PlanReport::budget_limited`]): then it carries on.
//!
//! Deterministic: clusters are sorted by name and units by id inside, loads
//! are integer sums of demand quantised to at least 10⁻⁶ (so the order of
//! additions never matters), and every tie is broken by the stable hash
//! and then by name.
//!
//! Generation: [`plan`] takes the previous plan's generation and returns
//! a plan of generation `previous_generation + 1` (0 for "no previous
//! plan", so a first plan is generation 1).
//!
//! Cost: `O(U × C)` to prepare, the water-filling on the distinct
//! eligibility sets only, and `O(C²)` ordered-set look-ups per balancing
//! move.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{Assignment, ClusterLoad, ClusterSpec, Move, Plan, PlanInput, UnitSpec};

/// The FNV-1a 64 hash of `(unit, 0, cluster)`: the planner's tie-breaker.
pub fn stable_hash(unit: &str, cluster: &str) -> u64 {
    let mut h = fnv(FNV_OFFSET, unit.as_bytes());
    h = fnv(h, &[0]);
    fnv(h, cluster.as_bytes())
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// What a plan did, in numbers (for the CLI, metrics and benchmarks).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanReport {
    /// The demand counted on the inventory's schedulable clusters (`D`).
    pub total_demand: f64,
    /// The movement budget: `budget_share × D`.
    pub budget: f64,
    /// Demand moved to balance load (the budgeted moves).
    pub moved_demand: f64,
    /// Demand moved because it had to (blocked, removed, ineligible, pin
    /// changed).
    pub forced_demand: f64,
    /// Demand of new units placed.
    pub placed_demand: f64,
    /// Balancing stopped with moves left that would have cut the imbalance
    /// but exceeded the budget: the next plan will carry on.
    pub budget_limited: bool,
    /// Balancing stopped (or never started) because every cluster was
    /// within the hysteresis.
    pub within_hysteresis: bool,
    /// [`lower_bound`] of the input.
    pub lower_bound: f64,
    /// The plan's maximum relative load.
    pub max_relative_load: f64,
    /// Balancing moves made (including re-placements of moving units).
    pub iterations: usize,
}

/// Plans the input; the plan's generation is `previous_generation + 1`.
pub fn plan(input: &PlanInput, previous_generation: u64) -> Plan {
    plan_with_report(input, previous_generation).0
}

/// The targets of the input's clusters (by name; blocked clusters 0).
pub fn targets(input: &PlanInput) -> BTreeMap<String, f64> {
    let inv = Inv::new(&input.clusters);
    let units = prepare(&inv, &input.units);
    let t = compute_targets(&inv, &units);
    inv.names.into_iter().zip(t).collect()
}

/// A lower bound on the maximum relative load of any assignment of the
/// input: `max(1.0, max over units of demand / largest target among the
/// clusters it may go to)` (0 when nothing is counted). The 1.0 is the
/// fractional optimum, exact by the definition of targets (module doc).
pub fn lower_bound(input: &PlanInput) -> f64 {
    let inv = Inv::new(&input.clusters);
    let units = prepare(&inv, &input.units);
    let t = compute_targets(&inv, &units);
    lower_bound_of(&units, &t)
}

fn lower_bound_of(units: &[U<'_>], t: &[f64]) -> f64 {
    let mut lb: f64 = if t.iter().any(|&x| x > 0.0) { 1.0 } else { 0.0 };
    for u in units {
        if u.d <= 0.0 {
            continue;
        }
        let best = match &u.status {
            Status::Pinned(k) => t[*k],
            Status::Unplaced {
                counted: Some(k), ..
            } => t[*k],
            Status::Kept | Status::Forced(_) | Status::New => {
                u.elig.iter().map(|&k| t[k]).fold(0.0, f64::max)
            }
            _ => continue,
        };
        if best > 0.0 {
            lb = lb.max(u.d / best);
        }
    }
    lb
}

/// Each inventory cluster's load under an assignment of units (unit id →
/// cluster; pinned units missing from it count on their pin if it is
/// schedulable), against the
/// input's targets — to judge any assignment, e.g. another algorithm's,
/// by the planner's definitions.
pub fn evaluate(input: &PlanInput, assignment: &BTreeMap<String, String>) -> Vec<ClusterLoad> {
    let inv = Inv::new(&input.clusters);
    let units = prepare(&inv, &input.units);
    let t = compute_targets(&inv, &units);
    let mut load = vec![0.0; inv.len()];
    for u in &units {
        let at = match assignment.get(&u.spec.id) {
            Some(c) => inv.find(c),
            None => match u.status {
                Status::Pinned(k) => Some(k),
                _ => None,
            },
        };
        if let Some(k) = at {
            load[k] += u.d;
        }
    }
    cluster_loads(&inv, &t, &load)
}

/// The unit → cluster map of a plan (from its assignments).
pub fn unit_clusters(plan: &Plan) -> BTreeMap<String, String> {
    plan.assignments
        .values()
        .map(|a| (a.unit.clone(), a.cluster.clone()))
        .collect()
}

fn cluster_loads(inv: &Inv, t: &[f64], load: &[f64]) -> Vec<ClusterLoad> {
    (0..inv.len())
        .map(|k| ClusterLoad {
            name: inv.names[k].clone(),
            capacity: inv.capacity[k],
            target: t[k],
            load: load[k],
            relative_load: if t[k] > 0.0 { load[k] / t[k] } else { 0.0 },
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Preparation

struct Inv {
    names: Vec<String>,
    capacity: Vec<u32>,
    blocked: Vec<bool>,
    weight: Vec<f64>,
}

impl Inv {
    fn new(clusters: &[ClusterSpec]) -> Inv {
        let mut cs: Vec<&ClusterSpec> = clusters.iter().collect();
        // Duplicate names: the blocked one, then the smallest capacity, wins.
        cs.sort_by(|a, b| {
            a.name
                .cmp(&b.name)
                .then(b.blocked.cmp(&a.blocked))
                .then(a.capacity.cmp(&b.capacity))
        });
        cs.dedup_by(|later, first| later.name == first.name);
        Inv {
            names: cs.iter().map(|c| c.name.clone()).collect(),
            capacity: cs.iter().map(|c| c.capacity).collect(),
            blocked: cs.iter().map(|c| c.blocked).collect(),
            weight: cs
                .iter()
                .map(|c| {
                    if c.capacity > 0 {
                        f64::from(c.capacity)
                    } else {
                        1e-6
                    }
                })
                .collect(),
        }
    }

    fn len(&self) -> usize {
        self.names.len()
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.names.binary_search_by(|n| n.as_str().cmp(name)).ok()
    }

    fn schedulable(&self, name: &str) -> Option<usize> {
        self.find(name).filter(|&k| !self.blocked[k])
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Forced {
    Blocked,
    Removed,
    Ineligible,
}

#[derive(Debug, Clone, PartialEq)]
enum Status {
    /// Pinned to a schedulable inventory cluster.
    Pinned(usize),
    /// Pinned to a cluster outside the inventory: assigned, not counted.
    PinnedOutside,
    /// Pinned to a blocked cluster it keeps ([`UnitSpec::keeps_blocked_pin`]):
    /// assigned, not counted.
    PinnedBlocked,
    /// Kept on its previous cluster (for now: balancing may move it).
    Kept,
    /// Its previous cluster cannot keep it.
    Forced(Forced),
    /// No previous cluster.
    New,
    /// Nowhere to go: why, the cluster it keeps, and that cluster's index
    /// when it is counted in the inventory.
    Unplaced {
        why: String,
        keep: Option<String>,
        counted: Option<usize>,
    },
}

struct U<'a> {
    spec: &'a UnitSpec,
    d: f64,
    hash: u64,
    /// Schedulable eligible clusters, sorted by index.
    elig: Vec<usize>,
    /// The previous cluster's index when it is in the inventory.
    prev: Option<usize>,
    status: Status,
}

impl U<'_> {
    /// Where it is fixed (not balanced) and counted.
    fn fixed_at(&self) -> Option<usize> {
        match &self.status {
            Status::Pinned(k) => Some(*k),
            Status::Unplaced { counted, .. } => *counted,
            _ => None,
        }
    }

    fn movable(&self) -> bool {
        matches!(self.status, Status::Kept | Status::Forced(_) | Status::New)
    }
}

fn sanitize(d: f64) -> f64 {
    if d.is_finite() && d > 0.0 {
        d
    } else {
        0.0
    }
}

fn prepare<'a>(inv: &Inv, specs: &'a [UnitSpec]) -> Vec<U<'a>> {
    let mut specs: Vec<&UnitSpec> = specs.iter().collect();
    specs.sort_by(|a, b| {
        a.id.cmp(&b.id)
            .then_with(|| a.jobs.cmp(&b.jobs))
            .then_with(|| a.demand.total_cmp(&b.demand))
    });
    let mut last: Option<(&[String], Vec<usize>)> = None;
    specs
        .into_iter()
        .map(|spec| {
            let elig = match &last {
                Some((names, elig)) if *names == spec.eligible.as_slice() => elig.clone(),
                _ => {
                    let mut elig: Vec<usize> = spec
                        .eligible
                        .iter()
                        .filter_map(|c| inv.schedulable(c))
                        .collect();
                    elig.sort_unstable();
                    elig.dedup();
                    last = Some((spec.eligible.as_slice(), elig.clone()));
                    elig
                }
            };
            let prev = spec.previous.as_ref().and_then(|p| inv.find(p));
            let status = classify(inv, spec, &elig, prev);
            U {
                spec,
                d: sanitize(spec.demand),
                hash: fnv(FNV_OFFSET, spec.id.as_bytes()),
                elig,
                prev,
                status,
            }
        })
        .collect()
}

fn classify(inv: &Inv, spec: &UnitSpec, elig: &[usize], prev: Option<usize>) -> Status {
    if let Some(pin) = &spec.pinned {
        return match inv.find(pin) {
            None => Status::PinnedOutside,
            Some(k) if !inv.blocked[k] => Status::Pinned(k),
            Some(_) if spec.keeps_blocked_pin => Status::PinnedBlocked,
            Some(_) => unplaced(
                inv,
                spec,
                prev,
                format!("pinned to {pin} by {}, which is blocked", spec.rule),
            ),
        };
    }
    if elig.is_empty() {
        let why = if spec.eligible.is_empty() {
            format!("no eligible cluster ({})", spec.rule)
        } else {
            format!(
                "no eligible cluster is schedulable ({} blocked or not in the inventory; {})",
                spec.eligible.join(", "),
                spec.rule
            )
        };
        return unplaced(inv, spec, prev, why);
    }
    match (&spec.previous, prev) {
        (None, _) => Status::New,
        (Some(_), None) => Status::Forced(Forced::Removed),
        (Some(_), Some(k)) if inv.blocked[k] => Status::Forced(Forced::Blocked),
        (Some(_), Some(k)) if elig.binary_search(&k).is_ok() => Status::Kept,
        (Some(_), Some(_)) => Status::Forced(Forced::Ineligible),
    }
}

fn unplaced(inv: &Inv, spec: &UnitSpec, prev: Option<usize>, why: String) -> Status {
    // It keeps its previous cluster unless that is blocked.
    let (keep, counted) = match (&spec.previous, prev) {
        (Some(p), None) => (Some(p.clone()), None),
        (Some(p), Some(k)) if !inv.blocked[k] => (Some(p.clone()), Some(k)),
        _ => (None, None),
    };
    Status::Unplaced { why, keep, counted }
}

// ---------------------------------------------------------------------------
// Targets: water-filling by densest sets

fn compute_targets(inv: &Inv, units: &[U<'_>]) -> Vec<f64> {
    let mut groups: BTreeMap<Vec<usize>, f64> = BTreeMap::new();
    for u in units {
        if u.d <= 0.0 {
            continue;
        }
        let set = match u.fixed_at() {
            Some(k) => vec![k],
            None if u.movable() => u.elig.clone(),
            None => continue,
        };
        *groups.entry(set).or_insert(0.0) += u.d;
    }
    waterfill(&inv.weight, groups.into_iter().collect())
}

fn waterfill(weight: &[f64], mut groups: Vec<(Vec<usize>, f64)>) -> Vec<f64> {
    let n = weight.len();
    let mut target = vec![0.0; n];
    let mut alive = vec![true; n];
    groups.retain(|g| g.1 > 0.0 && !g.0.is_empty());
    while !groups.is_empty() {
        for g in groups.iter_mut() {
            g.0.retain(|&k| alive[k]);
        }
        groups.retain(|g| !g.0.is_empty());
        if groups.is_empty() {
            break;
        }
        let mut used = vec![false; n];
        for g in &groups {
            for &k in &g.0 {
                used[k] = true;
            }
        }
        let clusters: Vec<usize> = (0..n).filter(|&k| used[k]).collect();
        let total: f64 = groups.iter().map(|g| g.1).sum();
        let wsum: f64 = clusters.iter().map(|&k| weight[k]).sum();
        let mut lambda = total / wsum;
        let mut dense: Option<Vec<bool>> = None;
        for _ in 0..100 {
            let Some(set) = violated_set(n, &clusters, weight, &groups, lambda, total) else {
                break;
            };
            let g: f64 = groups
                .iter()
                .filter(|g| g.0.iter().all(|&k| set[k]))
                .map(|g| g.1)
                .sum();
            let w: f64 = (0..n).filter(|&k| set[k]).map(|k| weight[k]).sum();
            let next = g / w;
            if next.is_nan() || next <= lambda * (1.0 + 1e-12) {
                break;
            }
            lambda = next;
            dense = Some(set);
        }
        match dense {
            None => {
                for &k in &clusters {
                    target[k] = lambda * weight[k];
                }
                break;
            }
            Some(set) => {
                for k in 0..n {
                    if set[k] {
                        target[k] = lambda * weight[k];
                        alive[k] = false;
                    }
                }
                groups.retain(|g| !g.0.iter().all(|&k| set[k]));
            }
        }
    }
    target
}

/// Max-flow feasibility of "every group's demand fits on its clusters with
/// cluster capacities `lambda × weight`". None when feasible, else the
/// clusters on the source side of a minimum cut (a set whose confined
/// demand exceeds `lambda × weight`).
fn violated_set(
    n: usize,
    clusters: &[usize],
    weight: &[f64],
    groups: &[(Vec<usize>, f64)],
    lambda: f64,
    total: f64,
) -> Option<Vec<bool>> {
    let g = groups.len();
    let mut node_of = vec![usize::MAX; n];
    for (i, &k) in clusters.iter().enumerate() {
        node_of[k] = 1 + g + i;
    }
    let sink = 1 + g + clusters.len();
    let mut net = Net::new(sink + 1);
    for (i, grp) in groups.iter().enumerate() {
        net.add(0, 1 + i, grp.1);
        for &k in &grp.0 {
            net.add(1 + i, node_of[k], f64::INFINITY);
        }
    }
    for &k in clusters {
        net.add(node_of[k], sink, lambda * weight[k]);
    }
    let eps = total * 1e-12;
    let flow = net.max_flow(0, sink, eps);
    if flow >= total * (1.0 - 1e-9) {
        return None;
    }
    let reach = net.reachable(0, eps);
    let mut set = vec![false; n];
    let mut any = false;
    for &k in clusters {
        if reach[node_of[k]] {
            set[k] = true;
            any = true;
        }
    }
    any.then_some(set)
}

/// Dinic's max flow on f64 capacities.
struct Net {
    head: Vec<Vec<usize>>,
    to: Vec<usize>,
    cap: Vec<f64>,
}

impl Net {
    fn new(n: usize) -> Net {
        Net {
            head: vec![Vec::new(); n],
            to: Vec::new(),
            cap: Vec::new(),
        }
    }

    fn add(&mut self, a: usize, b: usize, c: f64) {
        self.head[a].push(self.to.len());
        self.to.push(b);
        self.cap.push(c);
        self.head[b].push(self.to.len());
        self.to.push(a);
        self.cap.push(0.0);
    }

    fn levels(&self, s: usize, eps: f64) -> Vec<usize> {
        let mut level = vec![usize::MAX; self.head.len()];
        level[s] = 0;
        let mut queue = std::collections::VecDeque::from([s]);
        while let Some(v) = queue.pop_front() {
            for &e in &self.head[v] {
                let w = self.to[e];
                if self.cap[e] > eps && level[w] == usize::MAX {
                    level[w] = level[v] + 1;
                    queue.push_back(w);
                }
            }
        }
        level
    }

    fn reachable(&self, s: usize, eps: f64) -> Vec<bool> {
        self.levels(s, eps)
            .into_iter()
            .map(|l| l != usize::MAX)
            .collect()
    }

    fn max_flow(&mut self, s: usize, t: usize, eps: f64) -> f64 {
        let mut flow = 0.0;
        for _ in 0..(4 * self.head.len() + 16) {
            let level = self.levels(s, eps);
            if level[t] == usize::MAX {
                break;
            }
            let mut it = vec![0usize; self.head.len()];
            loop {
                let f = self.push(s, t, f64::INFINITY, &level, &mut it, eps);
                if f <= eps {
                    break;
                }
                flow += f;
            }
        }
        flow
    }

    fn push(
        &mut self,
        v: usize,
        t: usize,
        limit: f64,
        level: &[usize],
        it: &mut [usize],
        eps: f64,
    ) -> f64 {
        if v == t {
            return limit;
        }
        while it[v] < self.head[v].len() {
            let e = self.head[v][it[v]];
            let w = self.to[e];
            if self.cap[e] > eps && level[w] == level[v] + 1 {
                let f = self.push(w, t, limit.min(self.cap[e]), level, it, eps);
                if f > eps {
                    self.cap[e] -= f;
                    self.cap[e ^ 1] += f;
                    return f;
                }
            }
            it[v] += 1;
        }
        0.0
    }
}

// ---------------------------------------------------------------------------
// Planning

const COSTLY: usize = 0;
const FREE: usize = 1;
/// A move must cut Φ by more than this per unit of demand (in relative
/// load).
const MIN_GAIN: f64 = 1e-9;

fn rel(load: u64, t: f64) -> f64 {
    if t > 0.0 {
        load as f64 / t
    } else if load > 0 {
        f64::INFINITY
    } else {
        0.0
    }
}

type Key = (u64, u64, u32);

struct State<'u, 'a> {
    units: &'u [U<'a>],
    k: usize,
    dq: Vec<u64>,
    cur: Vec<Option<usize>>,
    load: Vec<u64>,
    tq: Vec<f64>,
    sets: Vec<BTreeSet<Key>>,
    used: i128,
    moved_order: Vec<usize>,
    moved: Vec<bool>,
    rebalanced: Vec<bool>,
}

impl State<'_, '_> {
    fn class(&self, i: usize) -> usize {
        if self.units[i].status == Status::Kept && self.cur[i] == self.units[i].prev {
            COSTLY
        } else {
            FREE
        }
    }

    fn indexed(&self, i: usize) -> bool {
        self.units[i].movable() && self.units[i].elig.len() >= 2 && self.dq[i] > 0
    }

    fn index(&mut self, i: usize, insert: bool) {
        if !self.indexed(i) {
            return;
        }
        let Some(a) = self.cur[i] else { return };
        let key = (self.dq[i], self.units[i].hash, i as u32);
        let base = self.class(i) * self.k * self.k + a * self.k;
        for &x in &self.units[i].elig {
            if x != a {
                if insert {
                    self.sets[base + x].insert(key);
                } else {
                    self.sets[base + x].remove(&key);
                }
            }
        }
    }

    /// Indexes every unit at once (bulk-built sets).
    fn index_all(&mut self) {
        let mut keys: Vec<Vec<Key>> = vec![Vec::new(); self.sets.len()];
        for i in 0..self.units.len() {
            let Some(a) = self.cur[i].filter(|_| self.indexed(i)) else {
                continue;
            };
            let key = (self.dq[i], self.units[i].hash, i as u32);
            let base = self.class(i) * self.k * self.k + a * self.k;
            for &x in &self.units[i].elig {
                if x != a {
                    keys[base + x].push(key);
                }
            }
        }
        for (set, keys) in self.sets.iter_mut().zip(keys) {
            *set = keys.into_iter().collect();
        }
    }

    fn apply(&mut self, i: usize, b: usize) {
        let a = self.cur[i].expect("moving a placed unit");
        self.index(i, false);
        self.load[a] -= self.dq[i];
        self.load[b] += self.dq[i];
        self.cur[i] = Some(b);
        let u = &self.units[i];
        if u.status == Status::Kept {
            if Some(a) == u.prev {
                self.used += i128::from(self.dq[i]);
            }
            if Some(b) == u.prev {
                self.used -= i128::from(self.dq[i]);
            }
            if !self.moved[i] {
                self.moved[i] = true;
                self.moved_order.push(i);
            }
        } else {
            self.rebalanced[i] = true;
        }
        self.index(i, true);
    }
}

struct Best {
    score: f64,
    tie: u64,
    unit: usize,
    to: usize,
}

impl Best {
    fn better_than(&self, other: &Option<Best>) -> bool {
        match other {
            None => true,
            Some(o) => {
                self.score > o.score
                    || (self.score == o.score
                        && (self.tie, self.unit, self.to) < (o.tie, o.unit, o.to))
            }
        }
    }
}

/// Plans the input and says what the plan did.
pub fn plan_with_report(input: &PlanInput, previous_generation: u64) -> (Plan, PlanReport) {
    let inv = Inv::new(&input.clusters);
    let units = prepare(&inv, &input.units);
    let target = compute_targets(&inv, &units);
    let k = inv.len();
    let n = units.len();

    let counted = |u: &U<'_>| u.fixed_at().is_some() || u.movable();
    let total: f64 = units.iter().filter(|u| counted(u)).map(|u| u.d).sum();
    let scale = if total > 0.0 {
        1e6f64.min(2f64.powi(52) / total)
    } else {
        1e6
    };
    let dq: Vec<u64> = units.iter().map(|u| (u.d * scale).round() as u64).collect();
    let total_q: u64 = units
        .iter()
        .zip(&dq)
        .filter(|(u, _)| counted(u))
        .map(|(_, &q)| q)
        .sum();
    let tq: Vec<f64> = target.iter().map(|t| t * scale).collect();
    let share = input.options.budget_share;
    let share = if share.is_finite() && share > 0.0 {
        share
    } else {
        0.0
    };
    let budget_q = (share * total_q as f64).floor().min(i128::MAX as f64 / 2.0) as i128;
    let hyst = {
        let h = input.options.hysteresis_percent;
        if h.is_finite() && h > 0.0 {
            h / 100.0
        } else {
            0.0
        }
    };

    let mut st = State {
        units: &units,
        k,
        dq,
        cur: vec![None; n],
        load: vec![0; k],
        tq,
        sets: (0..2 * k * k).map(|_| BTreeSet::new()).collect(),
        used: 0,
        moved_order: Vec::new(),
        moved: vec![false; n],
        rebalanced: vec![false; n],
    };

    // 1. Pinned and kept.
    for (i, u) in units.iter().enumerate() {
        let at = match u.status {
            Status::Kept => u.prev,
            _ => u.fixed_at(),
        };
        if let Some(a) = at {
            st.cur[i] = Some(a);
            st.load[a] += st.dq[i];
        }
    }

    // 2. Forced and new, largest first.
    let mut order: Vec<usize> = (0..n)
        .filter(|&i| matches!(units[i].status, Status::Forced(_) | Status::New))
        .collect();
    order.sort_by(|&x, &y| {
        st.dq[y]
            .cmp(&st.dq[x])
            .then(units[x].hash.cmp(&units[y].hash))
            .then(x.cmp(&y))
    });
    for &i in &order {
        let u = &units[i];
        // The lowest relative load after placement; the hash only on ties.
        let mut best: Option<(f64, Option<u64>, usize)> = None;
        for &c in &u.elig {
            let r = rel(st.load[c] + st.dq[i], st.tq[c]);
            best = match best {
                None => Some((r, None, c)),
                Some((br, bh, bc)) => match r.total_cmp(&br) {
                    std::cmp::Ordering::Less => Some((r, None, c)),
                    std::cmp::Ordering::Greater => Some((br, bh, bc)),
                    std::cmp::Ordering::Equal => {
                        let bh = bh.unwrap_or_else(|| stable_hash(&u.spec.id, &inv.names[bc]));
                        let h = stable_hash(&u.spec.id, &inv.names[c]);
                        if (h, c) < (bh, bc) {
                            Some((r, Some(h), c))
                        } else {
                            Some((br, Some(bh), bc))
                        }
                    }
                },
            };
        }
        let best = best.expect("movable units have an eligible cluster").2;
        st.cur[i] = Some(best);
        st.load[best] += st.dq[i];
    }
    let start_rel: Vec<f64> = (0..k).map(|c| rel(st.load[c], st.tq[c])).collect();

    // 3-4. Refinement and balancing.
    st.index_all();
    let mut budget_limited = false;
    let mut within_hysteresis = false;
    let mut iterations = 0usize;
    let cap = 20 * n + 1000;
    while iterations < cap && k >= 2 {
        let r: Vec<f64> = (0..k).map(|c| rel(st.load[c], st.tq[c])).collect();
        let m = (0..k)
            .filter(|&c| st.tq[c] > 0.0)
            .map(|c| r[c])
            .fold(0.0, f64::max);
        // Free re-placements: the largest cut of Φ.
        let mut best: Option<Best> = None;
        for a in 0..k {
            if st.tq[a] <= 0.0 {
                continue;
            }
            for b in 0..k {
                if b == a || st.tq[b] <= 0.0 || r[a] <= r[b] {
                    continue;
                }
                let set = &st.sets[FREE * k * k + a * k + b];
                if set.is_empty() {
                    continue;
                }
                let c = 1.0 / st.tq[a] + 1.0 / st.tq[b];
                let gap = r[a] - r[b];
                let dstar = gap / c;
                let ucap = ((m - r[b]) * st.tq[b]).min(2.0 * dstar);
                if ucap < 1.0 {
                    continue;
                }
                let lo = dstar.min(ucap).floor() as u64;
                let below = if lo >= 1 {
                    set.range((1, 0, 0)..=(lo, u64::MAX, u32::MAX)).next_back()
                } else {
                    None
                };
                let above = set
                    .range((lo.saturating_add(1), 0, 0)..)
                    .next()
                    .filter(|key| key.0 as f64 <= ucap);
                for key in below.into_iter().chain(above) {
                    let d = key.0 as f64;
                    let per = 2.0 * gap - d * c;
                    if per <= MIN_GAIN {
                        continue;
                    }
                    let i = key.2 as usize;
                    let cand = Best {
                        score: d * per,
                        tie: stable_hash(&units[i].spec.id, &inv.names[b]),
                        unit: i,
                        to: b,
                    };
                    if cand.better_than(&best) {
                        best = Some(cand);
                    }
                }
            }
        }
        if let Some(b) = best {
            st.apply(b.unit, b.to);
            iterations += 1;
            continue;
        }
        if (0..k).all(|c| st.tq[c] <= 0.0 || (r[c] - 1.0).abs() <= hyst + 1e-12) {
            within_hysteresis = true;
            break;
        }
        // Budgeted moves: the largest cut of Φ per unit of demand moved.
        let remaining = budget_q - st.used;
        let mut over_budget = false;
        for a in 0..k {
            if st.tq[a] <= 0.0 {
                continue;
            }
            for b in 0..k {
                if b == a || st.tq[b] <= 0.0 || r[a] <= r[b] {
                    continue;
                }
                let set = &st.sets[COSTLY * k * k + a * k + b];
                let Some(key) = set.range((1, 0, 0)..).next() else {
                    continue;
                };
                let d = key.0 as f64;
                let c = 1.0 / st.tq[a] + 1.0 / st.tq[b];
                let per = 2.0 * (r[a] - r[b]) - d * c;
                if per <= MIN_GAIN || r[b] + d / st.tq[b] > m {
                    continue;
                }
                if i128::from(key.0) > remaining {
                    over_budget = true;
                    continue;
                }
                let i = key.2 as usize;
                let cand = Best {
                    score: per,
                    tie: stable_hash(&units[i].spec.id, &inv.names[b]),
                    unit: i,
                    to: b,
                };
                if cand.better_than(&best) {
                    best = Some(cand);
                }
            }
        }
        match best {
            Some(b) => {
                st.apply(b.unit, b.to);
                iterations += 1;
            }
            None => {
                budget_limited = over_budget;
                break;
            }
        }
    }

    // Assemble.
    let mut load = vec![0.0; k];
    for (i, u) in units.iter().enumerate() {
        if counted(u) {
            if let Some(c) = st.cur[i] {
                load[c] += u.d;
            }
        }
    }
    let clusters = cluster_loads(&inv, &target, &load);
    let final_rel: Vec<f64> = clusters.iter().map(|c| c.relative_load).collect();
    let mut assignments = Vec::new();
    let mut moves = Vec::new();
    let mut pin_moves = Vec::new();
    let mut unplaced = Vec::new();
    let mut report = PlanReport {
        total_demand: total,
        budget: share * total,
        lower_bound: lower_bound_of(&units, &target),
        max_relative_load: final_rel.iter().copied().fold(0.0, f64::max),
        budget_limited,
        within_hysteresis,
        iterations,
        ..PlanReport::default()
    };
    let mut reasons: Vec<Option<(String, String)>> = vec![None; n];
    for (i, u) in units.iter().enumerate() {
        let spec = u.spec;
        let prev_name = spec.previous.clone();
        let (cluster, reason) = match &u.status {
            Status::Pinned(_) | Status::PinnedOutside | Status::PinnedBlocked => {
                let pin = spec.pinned.clone().unwrap_or_default();
                let mut reason = format!("pinned by {}: {pin}", spec.rule);
                if u.status == Status::PinnedOutside {
                    reason.push_str(" (not in the inventory: not balanced)");
                }
                if u.status == Status::PinnedBlocked {
                    reason.push_str(" (blocked, kept there: not balanced)");
                }
                if let Some(p) = prev_name.as_ref().filter(|p| **p != pin) {
                    reason.push_str(&format!(" (moved from {p})"));
                    pin_moves.push(Move {
                        unit: spec.id.clone(),
                        from: Some(p.clone()),
                        to: pin.clone(),
                        demand: u.d,
                        forced: true,
                        reason: reason.clone(),
                    });
                    report.forced_demand += u.d;
                }
                (pin, reason)
            }
            Status::Unplaced { why, keep, .. } => match keep {
                Some(c) => {
                    unplaced.push((
                        spec.id.clone(),
                        format!("{why}; kept on {c} (previous plan)"),
                    ));
                    (
                        c.clone(),
                        format!("unplaced: {why}; kept on {c} (previous plan)"),
                    )
                }
                None => {
                    unplaced.push((
                        spec.id.clone(),
                        format!("{why}; no previous cluster to keep"),
                    ));
                    continue;
                }
            },
            Status::Kept => {
                let c = st.cur[i].expect("placed");
                let to = inv.names[c].clone();
                let from = prev_name.clone().unwrap_or_default();
                if Some(c) == u.prev {
                    (to.clone(), format!("kept on {to} (previous plan)"))
                } else {
                    let a = u.prev.expect("kept units have a previous cluster");
                    let reason = format!(
                        "moved from {from} to {to} to balance load (relative load: {from} {:.2} -> {:.2}, {to} {:.2} -> {:.2})",
                        start_rel[a], final_rel[a], start_rel[c], final_rel[c]
                    );
                    (to, reason)
                }
            }
            Status::Forced(f) => {
                let c = st.cur[i].expect("placed");
                let to = inv.names[c].clone();
                let from = prev_name.clone().unwrap_or_default();
                let reason = match f {
                    Forced::Blocked => format!("moved from {from} to {to}: {from} is blocked"),
                    Forced::Removed => {
                        format!("moved from {from} to {to}: {from} is not in the inventory")
                    }
                    Forced::Ineligible => format!(
                        "moved from {from} to {to}: {from} is no longer eligible ({})",
                        spec.rule
                    ),
                };
                (to, reason)
            }
            Status::New => {
                let c = st.cur[i].expect("placed");
                let to = inv.names[c].clone();
                let why = if st.rebalanced[i] {
                    "to balance load"
                } else {
                    "lowest relative load"
                };
                (to.clone(), format!("placed new on {to} ({why})"))
            }
        };
        for job in &spec.jobs {
            assignments.push((
                job.clone(),
                Assignment {
                    cluster: cluster.clone(),
                    unit: spec.id.clone(),
                    rule: spec.rule.clone(),
                    previous: prev_name.clone(),
                    reason: reason.clone(),
                },
            ));
        }
        reasons[i] = Some((cluster, reason));
    }
    moves.extend(pin_moves);
    for &i in &order {
        let u = &units[i];
        let (to, reason) = reasons[i].clone().expect("placed");
        if u.status == Status::New {
            report.placed_demand += u.d;
        } else {
            report.forced_demand += u.d;
        }
        moves.push(Move {
            unit: u.spec.id.clone(),
            from: u.spec.previous.clone(),
            to,
            demand: u.d,
            forced: true,
            reason,
        });
    }
    for &i in &st.moved_order {
        let u = &units[i];
        if st.cur[i] == u.prev {
            continue;
        }
        let (to, reason) = reasons[i].clone().expect("placed");
        report.moved_demand += u.d;
        moves.push(Move {
            unit: u.spec.id.clone(),
            from: u.spec.previous.clone(),
            to,
            demand: u.d,
            forced: false,
            reason,
        });
    }
    let plan = Plan {
        generation: previous_generation + 1,
        clusters,
        assignments: assignments.into_iter().collect(),
        moves,
        unplaced,
    };
    (plan, report)
}

// ---------------------------------------------------------------------------
// Placing one new unit

/// Places one new unit on top of a plan without moving anything else: the
/// returned plan has `generation + 1`, the new jobs' assignments, the
/// cluster's load updated (targets unchanged until the next full plan) and
/// `moves` holding only this placement.
///
/// Joining: when the plan already has jobs of a unit with this `id` (on a
/// cluster not blocked since), the unit's new jobs (those the plan does
/// not know) go to that unit's cluster, with demand
/// `unit.demand / unit.jobs.len()` each. Otherwise a pinned unit goes to
/// its pin (unplaced when it is blocked, unless the unit keeps a blocked
/// pin: then it is assigned there, counted nowhere), and any other to the
/// eligible schedulable cluster with the lowest relative load after
/// placement (ties: the stable hash). A unit with nowhere to go is added to `unplaced`. Nothing new:
/// the plan is returned unchanged.
pub fn place_new(plan: &Plan, input: &PlanInput, unit: &UnitSpec) -> Plan {
    let new_jobs: Vec<&String> = unit
        .jobs
        .iter()
        .filter(|j| !plan.assignments.contains_key(*j))
        .collect();
    if new_jobs.is_empty() {
        return plan.clone();
    }
    let inv = Inv::new(&input.clusters);
    let mut out = plan.clone();
    out.generation += 1;
    out.moves.clear();
    let d_all = sanitize(unit.demand);
    let existing = plan
        .assignments
        .values()
        .find(|a| a.unit == unit.id)
        .map(|a| a.cluster.clone())
        // Not onto a cluster blocked since.
        .filter(|c| inv.find(c).is_none_or(|k| !inv.blocked[k]));
    let (dest, demand, reason) = if let Some(c) = existing {
        let per_job = d_all / unit.jobs.len().max(1) as f64;
        let reason = format!("placed new on {c} (joins unit {} there)", unit.id);
        (Some(c), per_job * new_jobs.len() as f64, reason)
    } else if let Some(pin) = &unit.pinned {
        match inv.find(pin) {
            Some(k) if inv.blocked[k] && !unit.keeps_blocked_pin => {
                out.unplaced.push((
                    unit.id.clone(),
                    format!("pinned to {pin} by {}, which is blocked", unit.rule),
                ));
                (None, d_all, String::new())
            }
            _ => (
                Some(pin.clone()),
                d_all,
                format!("pinned by {}: {pin}", unit.rule),
            ),
        }
    } else {
        let best = unit
            .eligible
            .iter()
            .filter(|c| inv.schedulable(c).is_some())
            .map(|c| {
                let (load, target) = out
                    .clusters
                    .iter()
                    .find(|l| &l.name == c)
                    .map(|l| (l.load, l.target))
                    .unwrap_or((0.0, 0.0));
                let after = load + d_all;
                let r = if target > 0.0 {
                    after / target
                } else if after > 0.0 {
                    f64::INFINITY
                } else {
                    0.0
                };
                (r, stable_hash(&unit.id, c), c.clone())
            })
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        match best {
            Some((_, _, c)) => {
                let reason = format!("placed new on {c} (lowest relative load)");
                (Some(c), d_all, reason)
            }
            None => {
                out.unplaced.push((
                    unit.id.clone(),
                    format!("no eligible cluster is schedulable ({})", unit.rule),
                ));
                (None, d_all, String::new())
            }
        }
    };
    let Some(dest) = dest else {
        return out;
    };
    // A blocked cluster a pin keeps counts nothing, as in a full plan.
    let counted = inv.schedulable(&dest).is_some();
    if let Some(l) = out.clusters.iter_mut().find(|l| counted && l.name == dest) {
        l.load += demand;
        l.relative_load = if l.target > 0.0 {
            l.load / l.target
        } else {
            0.0
        };
    }
    for job in new_jobs {
        out.assignments.insert(
            job.clone(),
            Assignment {
                cluster: dest.clone(),
                unit: unit.id.clone(),
                rule: unit.rule.clone(),
                previous: None,
                reason: reason.clone(),
            },
        );
    }
    out.moves.push(Move {
        unit: unit.id.clone(),
        from: None,
        to: dest,
        demand,
        forced: true,
        reason,
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Options;

    fn cluster(name: &str) -> ClusterSpec {
        ClusterSpec {
            name: name.to_string(),
            ..ClusterSpec::default()
        }
    }

    fn blocked(name: &str) -> ClusterSpec {
        ClusterSpec {
            blocked: true,
            ..cluster(name)
        }
    }

    fn unit(id: &str, d: f64, eligible: &[&str], previous: Option<&str>) -> UnitSpec {
        UnitSpec {
            id: id.to_string(),
            jobs: vec![format!("{id}-a"), format!("{id}-b")],
            demand: d,
            eligible: eligible.iter().map(|c| c.to_string()).collect(),
            pinned: None,
            keeps_blocked_pin: false,
            previous: previous.map(str::to_string),
            rule: "default".to_string(),
        }
    }

    fn input(clusters: Vec<ClusterSpec>, units: Vec<UnitSpec>) -> PlanInput {
        PlanInput {
            clusters,
            units,
            options: Options::default(),
        }
    }

    fn at<'p>(p: &'p Plan, unit: &str) -> &'p Assignment {
        &p.assignments[&format!("{unit}-a")]
    }

    fn load(p: &Plan, c: &str) -> f64 {
        p.clusters.iter().find(|l| l.name == c).unwrap().load
    }

    fn max_rel(p: &Plan) -> f64 {
        p.clusters
            .iter()
            .map(|c| c.relative_load)
            .fold(0.0, f64::max)
    }

    const ABC: &[&str] = &["a", "b", "c"];

    #[test]
    fn kept_units_stay_with_their_reason() {
        let inp = input(
            vec![cluster("a"), cluster("b")],
            vec![
                unit("u1", 1.0, &["a", "b"], Some("a")),
                unit("u2", 1.0, &["a", "b"], Some("b")),
            ],
        );
        let p = plan(&inp, 4);
        assert_eq!(p.generation, 5);
        assert!(p.moves.is_empty(), "{:?}", p.moves);
        let a = at(&p, "u1");
        assert_eq!(a.cluster, "a");
        assert_eq!(a.reason, "kept on a (previous plan)");
        assert_eq!(a.previous.as_deref(), Some("a"));
        assert_eq!(a.unit, "u1");
        assert_eq!(a.rule, "default");
        assert_eq!(p.assignments.len(), 4);
        assert_eq!(p.clusters[0].target, 1.0);
        assert_eq!(p.clusters[0].relative_load, 1.0);
    }

    #[test]
    fn pins_win_and_count_in_load() {
        let mut pinned = unit("p", 5.0, &["a", "b"], Some("b"));
        pinned.pinned = Some("a".into());
        pinned.rule = "cluster".into();
        let mut outside = unit("o", 2.0, &[], None);
        outside.pinned = Some("app.ci".into());
        outside.rule = "group app.ci".into();
        let mut on_blocked = unit("x", 2.0, &["a"], Some("a"));
        on_blocked.pinned = Some("z".into());
        let inp = input(
            vec![cluster("a"), cluster("b"), blocked("z")],
            vec![pinned, outside, on_blocked],
        );
        let p = plan(&inp, 0);
        assert_eq!(at(&p, "p").cluster, "a");
        assert_eq!(at(&p, "p").reason, "pinned by cluster: a (moved from b)");
        assert_eq!(
            load(&p, "a"),
            5.0 + 2.0,
            "the pin counts; so does x kept on a"
        );
        assert_eq!(at(&p, "o").cluster, "app.ci");
        assert!(at(&p, "o")
            .reason
            .starts_with("pinned by group app.ci: app.ci"));
        let m = p.moves.iter().find(|m| m.unit == "p").unwrap();
        assert!(m.forced);
        assert_eq!(m.from.as_deref(), Some("b"));
        // Pinned to a blocked cluster: unplaced, keeps its previous.
        assert_eq!(p.unplaced.len(), 1);
        assert_eq!(p.unplaced[0].0, "x");
        assert!(
            p.unplaced[0].1.contains("which is blocked"),
            "{:?}",
            p.unplaced
        );
        assert_eq!(at(&p, "x").cluster, "a");
        assert!(at(&p, "x").reason.contains("kept on a"));
    }

    #[test]
    fn a_unit_that_keeps_a_blocked_pin_is_assigned_there_counted_nowhere() {
        let mut upgrade = unit("u", 4.0, &["z"], Some("z"));
        upgrade.pinned = Some("z".into());
        upgrade.keeps_blocked_pin = true;
        upgrade.rule = "upgrade".into();
        let inp = input(
            vec![cluster("a"), blocked("z")],
            vec![upgrade.clone(), unit("r", 1.0, &["a", "z"], None)],
        );
        let p = plan(&inp, 0);
        assert!(p.unplaced.is_empty(), "{:?}", p.unplaced);
        assert_eq!(at(&p, "u").cluster, "z");
        assert_eq!(
            at(&p, "u").reason,
            "pinned by upgrade: z (blocked, kept there: not balanced)"
        );
        assert_eq!(load(&p, "z"), 0.0, "a blocked cluster counts nothing");
        assert_eq!(at(&p, "r").cluster, "a", "nothing else goes there");
        // Placed on its own: the same.
        let base = plan(&input(vec![cluster("a"), blocked("z")], vec![]), 0);
        let q = place_new(&base, &inp, &upgrade);
        assert!(q.unplaced.is_empty(), "{:?}", q.unplaced);
        assert_eq!(at(&q, "u").cluster, "z");
        assert_eq!(load(&q, "z"), 0.0);
        // Without the flag, the pin cannot be honoured.
        upgrade.keeps_blocked_pin = false;
        let q = place_new(&base, &inp, &upgrade);
        assert!(q.assignments.is_empty());
        assert!(q.unplaced[0].1.contains("which is blocked"), "{q:?}");
    }

    #[test]
    fn forced_moves_off_blocked_removed_and_ineligible_ignore_the_budget() {
        let mut inp = input(
            vec![cluster("a"), cluster("b"), blocked("c")],
            vec![
                unit("blk", 3.0, ABC, Some("c")),
                unit("gone", 3.0, ABC, Some("old")),
                unit("inel", 3.0, &["a"], Some("b")),
                unit("stay", 3.0, ABC, Some("b")),
            ],
        );
        inp.options.budget_share = 0.0;
        let p = plan(&inp, 0);
        assert_eq!(
            at(&p, "blk").reason,
            format!("moved from c to {}: c is blocked", at(&p, "blk").cluster)
        );
        assert_eq!(
            at(&p, "gone").reason,
            format!(
                "moved from old to {}: old is not in the inventory",
                at(&p, "gone").cluster
            )
        );
        assert_eq!(at(&p, "inel").cluster, "a");
        assert_eq!(
            at(&p, "inel").reason,
            "moved from b to a: b is no longer eligible (default)"
        );
        assert_eq!(at(&p, "stay").cluster, "b");
        assert_eq!(p.moves.len(), 3);
        assert!(p.moves.iter().all(|m| m.forced));
        assert_eq!(load(&p, "c"), 0.0);
        assert!(p.assignments.values().all(|a| a.cluster != "c"));
        // a: inel (3), b: stay (3); blk and gone split between them.
        assert_eq!(load(&p, "a"), 6.0);
        assert_eq!(load(&p, "b"), 6.0);
    }

    #[test]
    fn new_units_go_to_the_lowest_relative_load_as_placements() {
        let mut big = cluster("big");
        big.capacity = 300;
        let inp = input(
            vec![cluster("a"), big],
            vec![
                unit("old", 4.0, &["a", "big"], Some("a")),
                unit("n1", 4.0, &["a", "big"], None),
                unit("n2", 1.0, &["a", "big"], None),
            ],
        );
        let p = plan(&inp, 0);
        // Targets: a 9/4 = 2.25, big 6.75. n1 on big (4/6.75 < 8/2.25),
        // then n2 on big too (5/6.75 = 0.74 < 5/2.25).
        assert_eq!(at(&p, "n1").cluster, "big");
        assert_eq!(
            at(&p, "n1").reason,
            "placed new on big (lowest relative load)"
        );
        assert_eq!(at(&p, "n2").cluster, "big");
        let placements: Vec<&Move> = p.moves.iter().filter(|m| m.from.is_none()).collect();
        assert_eq!(placements.len(), 2);
        assert!(placements.iter().all(|m| m.forced));
        assert_eq!(placements[0].unit, "n1", "largest first");
        // "old" is on a at 4/2.25 = 1.78: balancing moves it? Only if that
        // cuts the imbalance: a 0, big 9/6.75 = 1.33 is no better for max.
        assert_eq!(at(&p, "old").cluster, "a");
    }

    #[test]
    fn hysteresis_stops_balancing() {
        let units = vec![
            unit("u1", 51.0, &["a", "b"], Some("a")),
            unit("u2", 1.0, &["a", "b"], Some("a")),
            unit("u3", 48.0, &["a", "b"], Some("b")),
        ];
        // a: 52 / 50 = 1.04, b: 0.96.
        let mut inp = input(vec![cluster("a"), cluster("b")], units);
        let (p, r) = plan_with_report(&inp, 0);
        assert_eq!(p.moves.len(), 1, "outside 3%: u2 moves");
        assert_eq!(p.moves[0].unit, "u2");
        assert!(!p.moves[0].forced);
        assert_eq!(
            p.moves[0].reason,
            "moved from a to b to balance load (relative load: a 1.04 -> 1.02, b 0.96 -> 0.98)"
        );
        assert!(r.within_hysteresis);
        inp.options.hysteresis_percent = 5.0;
        let (p, r) = plan_with_report(&inp, 0);
        assert!(p.moves.is_empty());
        assert!(r.within_hysteresis);
    }

    #[test]
    fn budget_caps_balancing() {
        let units: Vec<UnitSpec> = (0..10)
            .map(|i| unit(&format!("u{i}"), 1.0, &["a", "b"], Some("a")))
            .collect();
        let mut inp = input(vec![cluster("a"), cluster("b")], units);
        inp.options.budget_share = 0.0;
        let (p, r) = plan_with_report(&inp, 0);
        assert!(p.moves.is_empty());
        assert!(r.budget_limited);
        inp.options.budget_share = 0.25;
        let (p, r) = plan_with_report(&inp, 0);
        assert_eq!(p.moves.len(), 2);
        assert_eq!(r.moved_demand, 2.0);
        assert!(r.budget_limited);
        inp.options.budget_share = 1.0;
        let (p, r) = plan_with_report(&inp, 0);
        assert_eq!(p.moves.len(), 5);
        assert!(!r.budget_limited);
        assert_eq!(max_rel(&p), 1.0);
    }

    #[test]
    fn balancing_prefers_small_units_and_lowers_the_max() {
        let mut units = vec![unit("big", 30.0, ABC, Some("a"))];
        for i in 0..30 {
            units.push(unit(&format!("s{i:02}"), 1.0, ABC, Some("a")));
        }
        let inp = input(vec![cluster("a"), cluster("b"), cluster("c")], units);
        let before = 3.0;
        let (p, r) = plan_with_report(&inp, 0);
        assert!(max_rel(&p) < before);
        assert!(p.moves.iter().all(|m| m.unit != "big"), "{:?}", p.moves);
        assert!(r.moved_demand <= r.budget + 1e-9);
        assert!((r.moved_demand - 6.0).abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn targets_follow_eligible_capacity() {
        // 3 gcp clusters must carry 60; 6 aws-only must carry 30; 10 can go anywhere.
        let mut clusters: Vec<ClusterSpec> = (1..=3).map(|i| cluster(&format!("g{i}"))).collect();
        clusters.extend((1..=6).map(|i| cluster(&format!("w{i}"))));
        let gcp: Vec<String> = (1..=3).map(|i| format!("g{i}")).collect();
        let aws: Vec<String> = (1..=6).map(|i| format!("w{i}")).collect();
        let all: Vec<String> = gcp.iter().chain(&aws).cloned().collect();
        let mk = |id: &str, d: f64, e: &[String]| UnitSpec {
            eligible: e.to_vec(),
            ..unit(id, d, &[], None)
        };
        let inp = input(
            clusters,
            vec![
                mk("gcp", 60.0, &gcp),
                mk("aws", 30.0, &aws),
                mk("any", 10.0, &all),
            ],
        );
        let t = targets(&inp);
        for g in &gcp {
            assert!((t[g] - 20.0).abs() < 1e-9, "{t:?}");
        }
        for w in &aws {
            assert!((t[w] - 40.0 / 6.0).abs() < 1e-9, "{t:?}");
        }
        let lb = lower_bound(&inp);
        // The aws unit, 30, over its largest target, 40/6.
        assert!((lb - 4.5).abs() < 1e-9, "{lb}");
        // A cluster nobody may use gets no target.
        let mut inp2 = inp.clone();
        inp2.clusters.push(cluster("idle"));
        assert_eq!(targets(&inp2)["idle"], 0.0);
        assert_eq!(lower_bound(&input(vec![cluster("a")], vec![])), 0.0);
    }

    #[test]
    fn plans_are_deterministic_under_shuffled_input() {
        let mut units = Vec::new();
        for i in 0..60 {
            let prev = match i % 4 {
                0 => None,
                1 => Some("a"),
                2 => Some("d"),
                _ => Some("c"),
            };
            let elig: &[&str] = if i % 5 == 0 {
                &["a", "b"]
            } else {
                &["a", "b", "c", "d"]
            };
            units.push(unit(&format!("u{i}"), 1.0 + (i % 7) as f64, elig, prev));
        }
        let clusters = vec![cluster("a"), cluster("b"), cluster("c"), blocked("d")];
        let inp = input(clusters.clone(), units.clone());
        let p = plan(&inp, 0);
        units.reverse();
        units.rotate_left(17);
        let mut cs = clusters;
        cs.reverse();
        let q = plan(&input(cs, units), 0);
        assert_eq!(p, q);
    }

    #[test]
    fn a_second_plan_moves_nothing() {
        let mut units = Vec::new();
        for i in 0..40 {
            let prev = ["a", "b", "gone", "d"][i % 4];
            units.push(unit(
                &format!("u{i}"),
                (i % 9) as f64 + 0.5,
                ABC,
                if i % 3 == 0 { None } else { Some(prev) },
            ));
        }
        let mut inp = input(
            vec![cluster("a"), cluster("b"), cluster("c"), blocked("d")],
            units,
        );
        inp.options.budget_share = 1.0;
        let (p1, r1) = plan_with_report(&inp, 0);
        assert!(!r1.budget_limited);
        let prev: BTreeMap<String, String> = p1
            .assignments
            .iter()
            .map(|(j, a)| (j.clone(), a.cluster.clone()))
            .collect();
        crate::format::apply_previous(&mut inp.units, &prev);
        let p2 = plan(&inp, p1.generation);
        assert!(p2.moves.is_empty(), "{:?}", p2.moves);
        assert_eq!(p2.generation, 2);
        for (job, a) in &p2.assignments {
            assert_eq!(a.cluster, p1.assignments[job].cluster);
            assert_eq!(a.reason, format!("kept on {} (previous plan)", a.cluster));
        }
    }

    #[test]
    fn unplaceable_units_keep_their_previous_and_say_so() {
        let inp = input(
            vec![cluster("a"), blocked("b")],
            vec![
                unit("nowhere", 1.0, &[], Some("a")),
                unit("only-blocked", 1.0, &["b"], Some("b")),
                unit("fresh", 1.0, &["x"], None),
            ],
        );
        let p = plan(&inp, 0);
        assert_eq!(p.unplaced.len(), 3);
        assert_eq!(at(&p, "nowhere").cluster, "a");
        assert_eq!(
            at(&p, "nowhere").reason,
            "unplaced: no eligible cluster (default); kept on a (previous plan)"
        );
        assert!(
            !p.assignments.contains_key("only-blocked-a"),
            "blocked clusters get nothing"
        );
        assert!(!p.assignments.contains_key("fresh-a"));
        let why: BTreeMap<_, _> = p.unplaced.iter().cloned().collect();
        assert_eq!(
            why["only-blocked"],
            "no eligible cluster is schedulable (b blocked or not in the inventory; default); no previous cluster to keep"
        );
        assert_eq!(load(&p, "a"), 1.0);
    }

    #[test]
    fn zero_capacity_clusters_take_only_what_must_go_there() {
        let mut zero = cluster("z");
        zero.capacity = 0;
        let inp = input(
            vec![cluster("a"), zero],
            vec![
                unit("u1", 1.0, &["a", "z"], None),
                unit("u2", 1.0, &["z"], None),
            ],
        );
        let p = plan(&inp, 0);
        assert_eq!(at(&p, "u1").cluster, "a");
        assert_eq!(at(&p, "u2").cluster, "z");
        assert!(
            p.clusters
                .iter()
                .all(|c| (c.relative_load - 1.0).abs() < 1e-6),
            "{:?}",
            p.clusters
        );
    }

    #[test]
    fn place_new_moves_nothing_else() {
        let inp = input(
            vec![cluster("a"), cluster("b")],
            vec![
                unit("u1", 3.0, &["a", "b"], Some("a")),
                unit("u2", 1.0, &["a", "b"], Some("b")),
            ],
        );
        let mut inp = inp;
        inp.options.hysteresis_percent = 100.0;
        let p = plan(&inp, 0);
        let new = unit("n", 1.0, &["a", "b"], None);
        let q = place_new(&p, &inp, &new);
        assert_eq!(q.generation, p.generation + 1);
        assert_eq!(at(&q, "n").cluster, "b");
        assert_eq!(at(&q, "n").reason, "placed new on b (lowest relative load)");
        assert_eq!(q.moves.len(), 1);
        assert_eq!(q.moves[0].from, None);
        for (job, a) in &p.assignments {
            assert_eq!(&q.assignments[job], a);
        }
        assert_eq!(load(&q, "b"), 2.0);
        // A job joining an existing unit goes where its unit is.
        let mut grown = unit("u1", 4.0, &["a", "b"], Some("a"));
        grown.jobs.push("u1-c".into());
        let r = place_new(&q, &inp, &grown);
        assert_eq!(r.assignments["u1-c"].cluster, "a");
        assert_eq!(
            r.assignments["u1-c"].reason,
            "placed new on a (joins unit u1 there)"
        );
        assert!((load(&r, "a") - (3.0 + 4.0 / 3.0)).abs() < 1e-9);
        // Nothing new: unchanged.
        assert_eq!(place_new(&r, &inp, &grown), r);
        // Its unit's cluster blocked since: the lowest relative load instead.
        let mut blocked_a = inp.clone();
        blocked_a.clusters[0].blocked = true;
        grown.jobs.push("u1-d".into());
        let s = place_new(&r, &blocked_a, &grown);
        assert_eq!(s.assignments["u1-d"].cluster, "b");
        assert_eq!(s.assignments["u1-c"].cluster, "a", "nothing else moves");
        // Pinned and unplaceable.
        let mut pinned = unit("pin", 1.0, &[], None);
        pinned.pinned = Some("app.ci".into());
        assert_eq!(at(&place_new(&p, &inp, &pinned), "pin").cluster, "app.ci");
        let stuck = place_new(&p, &inp, &unit("stuck", 1.0, &["zz"], None));
        assert_eq!(stuck.unplaced.len(), 1);
        assert!(!stuck.assignments.contains_key("stuck-a"));
    }

    #[test]
    fn stable_hash_is_fnv1a() {
        // FNV-1a 64 of the empty input is the offset basis; of "a" a known value.
        assert_eq!(fnv(FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(stable_hash("u", "a"), stable_hash("u", "b"));
        assert_ne!(stable_hash("ua", ""), stable_hash("u", "a"));
    }

    /// OpenShift scale: `cargo test -p bosun-dispatch --release -- --ignored --nocapture timing`.
    #[test]
    #[ignore]
    fn timing_openshift_scale() {
        let names: Vec<String> = (1..=11).map(|i| format!("build{i:02}")).collect();
        let mut clusters: Vec<ClusterSpec> = names.iter().map(|n| cluster(n)).collect();
        clusters[4].blocked = true;
        clusters[10].blocked = true;
        let mut seed = 12345u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let units: Vec<UnitSpec> = (0..20_000)
            .map(|i| {
                let d =
                    1.0 + (rnd() % 1000) as f64 / 10.0 * if rnd() % 50 == 0 { 20.0 } else { 1.0 };
                let elig: Vec<&str> = match rnd() % 10 {
                    0..=1 => names[8..].iter().map(String::as_str).collect(),
                    2..=6 => names[..8].iter().map(String::as_str).collect(),
                    _ => names.iter().map(String::as_str).collect(),
                };
                let prev = names[(rnd() % 11) as usize].clone();
                UnitSpec {
                    jobs: (0..3).map(|j| format!("job-{i}-{j}")).collect(),
                    ..unit(&format!("unit-{i:05}"), d, &elig, Some(&prev))
                }
            })
            .collect();
        let mut inp = input(clusters, units);
        for (label, budget) in [("default budget", 0.10), ("unlimited", 10.0)] {
            inp.options.budget_share = budget;
            // The best of 5 (the machine may be shared).
            let mut el = std::time::Duration::MAX;
            let mut out = None;
            for _ in 0..5 {
                let t0 = std::time::Instant::now();
                out = Some(plan_with_report(&inp, 0));
                el = el.min(t0.elapsed());
            }
            let (p, r) = out.unwrap();
            println!(
                "{label}: {:?}; {} moves, moved {:.0} / budget {:.0}, forced {:.0}, max rel {:.4}, lb {:.4}, iterations {}",
                el, p.moves.len(), r.moved_demand, r.budget, r.forced_demand, r.max_relative_load, r.lower_bound, r.iterations
            );
            let mut fresh = inp.clone();
            for u in &mut fresh.units {
                u.previous = None;
            }
            let mut el = std::time::Duration::MAX;
            let mut out = None;
            for _ in 0..5 {
                let t0 = std::time::Instant::now();
                out = Some(plan_with_report(&fresh, 0));
                el = el.min(t0.elapsed());
            }
            let (_, r) = out.unwrap();
            println!(
                "{label} fresh: {:?}; max rel {:.4}, lb {:.4}, iterations {}",
                el, r.max_relative_load, r.lower_bound, r.iterations
            );
        }
    }
}
