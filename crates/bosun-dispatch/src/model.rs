//! The planner's vocabulary, shared by the rules that produce its input and
//! the services that serve its output.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// A build cluster as the planner sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterSpec {
    /// Its alias.
    pub name: String,
    /// Relative weight for balancing (default 100).
    pub capacity: u32,
    /// A blocked cluster gets nothing; what it had must move.
    pub blocked: bool,
    /// Its cloud provider (`aws`, `gcp`, ...), for provider rules.
    pub provider: Option<String>,
    /// What it offers (`arm64`, `gpu`, ...).
    pub capabilities: BTreeSet<String>,
}

/// A unit of placement: jobs that always share a cluster (all jobs of one
/// name; by default the relocatable jobs of one job-config file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitSpec {
    /// Its identity: a job-config file path (relative to its directory), or
    /// `job:NAME`.
    pub id: String,
    /// The names of its jobs, sorted, unique.
    pub jobs: Vec<String>,
    /// Its demand: the sum of its jobs' demand (run-hours, runs, ...).
    pub demand: f64,
    /// The clusters it may be placed on, sorted. Empty: it cannot be placed
    /// (the plan says so; it keeps `previous` if it has one).
    pub eligible: Vec<String>,
    /// A cluster it must be on (a pin), which balancing never changes. Its
    /// demand still counts in that cluster's load.
    pub pinned: Option<String>,
    /// Its pin holds even when that cluster is blocked (OpenShift's
    /// `periodic-buildNN-upgrade` jobs): it is assigned there and, like a
    /// pin outside the inventory, counted nowhere. Otherwise a pin onto a
    /// blocked cluster cannot be honoured and the unit is unplaced.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keeps_blocked_pin: bool,
    /// Where it was: the previous plan's cluster, else the `cluster:` its
    /// job file writes.
    pub previous: Option<String>,
    /// The rule that decided its eligibility or pin, for explanations.
    pub rule: String,
}

/// The planner's knobs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// The share of total demand one plan may move (forced moves excluded).
    /// Default 0.10.
    pub budget_share: f64,
    /// No move at all while every cluster's relative load is within this
    /// many percent of 1.0. Default 3.
    pub hysteresis_percent: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            budget_share: 0.10,
            hysteresis_percent: 3.0,
        }
    }
}

/// What the planner is given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanInput {
    /// The inventory.
    pub clusters: Vec<ClusterSpec>,
    /// The units to place.
    pub units: Vec<UnitSpec>,
    /// The knobs.
    pub options: Options,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            name: String::new(),
            capacity: 100,
            blocked: false,
            provider: None,
            capabilities: BTreeSet::new(),
        }
    }
}

/// A cluster's place in a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterLoad {
    /// Its alias.
    pub name: String,
    /// Its capacity.
    pub capacity: u32,
    /// The demand it should carry: its share of the schedulable capacity
    /// times the total demand — with eligibility constraints, its share of
    /// the capacity eligible to the demand that can reach it (the
    /// water-filling balance, see `plan`).
    pub target: f64,
    /// The demand it carries.
    pub load: f64,
    /// `load / target` (1.0 is balanced; 0 when its target is 0).
    pub relative_load: f64,
}

/// Where one job goes, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// The cluster.
    pub cluster: String,
    /// Its unit.
    pub unit: String,
    /// The rule that made it eligible there or pinned it.
    pub rule: String,
    /// Where it was before this plan.
    pub previous: Option<String>,
    /// Why it is here: kept, pinned, moved (and why), placed new.
    pub reason: String,
}

/// A unit moved by a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Move {
    /// The unit.
    pub unit: String,
    /// Where it was.
    pub from: Option<String>,
    /// Where it goes.
    pub to: String,
    /// Its demand.
    pub demand: f64,
    /// Forced (its cluster is blocked, removed, or no longer eligible):
    /// outside the movement budget.
    pub forced: bool,
    /// Why.
    pub reason: String,
}

/// A plan: every job's cluster with its explanation, each cluster's load
/// against its target, and the moves from the previous assignment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Increases with every plan made from a previous one.
    pub generation: u64,
    /// Per cluster, in name order.
    pub clusters: Vec<ClusterLoad>,
    /// Per job name.
    pub assignments: BTreeMap<String, Assignment>,
    /// The moves, in the order made.
    pub moves: Vec<Move>,
    /// Units that could not be placed anywhere, with why.
    pub unplaced: Vec<(String, String)>,
}

impl Options {
    /// The knobs `dispatcher:` sets (`budget` as a share, `hysteresis_percent`),
    /// defaulted as documented there.
    pub fn from_config(dispatcher: &bosun_config::types::DispatcherConfig) -> Options {
        Options {
            budget_share: dispatcher.budget_share(),
            hysteresis_percent: dispatcher.hysteresis_percent(),
        }
    }
}
