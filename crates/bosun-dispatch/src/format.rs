//! The plan's formats: JSON (what `--format json` prints and `--previous`
//! reads back) and a plain-text table.
//!
//! ```json
//! {
//!   "generation": 3,
//!   "clusters": [{"name", "capacity", "target", "load", "relative_load"}],
//!   "assignments": {"JOB": "CLUSTER"},
//!   "explanations": {"JOB": {"cluster", "unit", "rule", "previous", "reason"}},
//!   "moves": [{"unit", "from", "to", "demand", "forced", "reason"}],
//!   "unplaced": [{"unit", "reason"}]
//! }
//! ```
//!
//! Keys are written in that order, maps sorted by job name. On input only
//! `assignments` is required; a bare `{"JOB": "CLUSTER"}` map is accepted
//! too ([`previous_from_json`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::model::{Assignment, ClusterLoad, Move, Plan, UnitSpec};

/// A unit that could not be placed, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unplaced {
    /// The unit.
    pub unit: String,
    /// Why (and the cluster it keeps, if any).
    pub reason: String,
}

/// The plan as a file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanFile {
    /// The plan's generation.
    #[serde(default)]
    pub generation: u64,
    /// Per cluster, in name order.
    #[serde(default)]
    pub clusters: Vec<ClusterLoad>,
    /// Job → cluster.
    pub assignments: BTreeMap<String, String>,
    /// Job → its assignment with the explanation (optional on input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanations: Option<BTreeMap<String, Assignment>>,
    /// The moves, in the order made.
    #[serde(default)]
    pub moves: Vec<Move>,
    /// The units that could not be placed.
    #[serde(default)]
    pub unplaced: Vec<Unplaced>,
}

/// What reading a plan file can fail on.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// Not JSON at all.
    #[error("not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON, but neither a plan nor a job → cluster map.
    #[error(
        "neither a plan (an object with \"assignments\") nor a {{\"JOB\": \"CLUSTER\"}} map: {0}"
    )]
    Shape(String),
}

impl PlanFile {
    /// The file of a plan.
    pub fn from_plan(plan: &Plan) -> PlanFile {
        PlanFile {
            generation: plan.generation,
            clusters: plan.clusters.clone(),
            assignments: plan
                .assignments
                .iter()
                .map(|(job, a)| (job.clone(), a.cluster.clone()))
                .collect(),
            explanations: Some(plan.assignments.clone()),
            moves: plan.moves.clone(),
            unplaced: plan
                .unplaced
                .iter()
                .map(|(unit, reason)| Unplaced {
                    unit: unit.clone(),
                    reason: reason.clone(),
                })
                .collect(),
        }
    }

    /// Back to a plan. Without explanations, each job's assignment has
    /// only its cluster (unit and rule empty, reason "from a plan file").
    pub fn into_plan(self) -> Plan {
        let assignments = match self.explanations {
            Some(e) => e,
            None => self
                .assignments
                .into_iter()
                .map(|(job, cluster)| {
                    (
                        job,
                        Assignment {
                            cluster,
                            unit: String::new(),
                            rule: String::new(),
                            previous: None,
                            reason: "from a plan file".to_string(),
                        },
                    )
                })
                .collect(),
        };
        Plan {
            generation: self.generation,
            clusters: self.clusters,
            assignments,
            moves: self.moves,
            unplaced: self
                .unplaced
                .into_iter()
                .map(|u| (u.unit, u.reason))
                .collect(),
        }
    }
}

/// The plan as pretty JSON (stable order; ends without a newline).
pub fn to_json(plan: &Plan) -> String {
    serde_json::to_string_pretty(&PlanFile::from_plan(plan)).expect("a plan serialises")
}

/// A plan read back from [`to_json`]'s output (or any [`PlanFile`]).
pub fn plan_from_json(text: &str) -> Result<Plan, FormatError> {
    Ok(serde_json::from_str::<PlanFile>(text)?.into_plan())
}

/// The job → cluster map of a previous plan: [`to_json`]'s output (the CLI's
/// `--format json`), any object with an `"assignments"` object of strings,
/// or a bare `{"JOB": "CLUSTER"}` map.
pub fn previous_from_json(text: &str) -> Result<BTreeMap<String, String>, FormatError> {
    let value: serde_json::Value = serde_json::from_str(text)?;
    let serde_json::Value::Object(map) = value else {
        return Err(FormatError::Shape("not an object".to_string()));
    };
    let source = match map.get("assignments") {
        Some(serde_json::Value::Object(a)) => a,
        _ => &map,
    };
    source
        .iter()
        .map(|(job, cluster)| match cluster {
            serde_json::Value::String(c) => Ok((job.clone(), c.clone())),
            other => Err(FormatError::Shape(format!(
                "{job:?} maps to {other}, not a cluster name"
            ))),
        })
        .collect()
}

/// A unit's previous cluster from a job → cluster map: the cluster of most
/// of its jobs (ties: the first name); None when none of its jobs is there.
pub fn unit_previous(jobs: &[String], previous: &BTreeMap<String, String>) -> Option<String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for job in jobs {
        if let Some(c) = previous.get(job) {
            *count.entry(c.as_str()).or_insert(0) += 1;
        }
    }
    let max = count.values().copied().max()?;
    count
        .into_iter()
        .find(|(_, n)| *n == max)
        .map(|(c, _)| c.to_string())
}

/// Sets each unit's `previous` from a job → cluster map ([`unit_previous`]);
/// units none of whose jobs are in the map keep theirs.
pub fn apply_previous(units: &mut [UnitSpec], previous: &BTreeMap<String, String>) {
    for unit in units {
        if let Some(c) = unit_previous(&unit.jobs, previous) {
            unit.previous = Some(c);
        }
    }
}

/// The plan as a plain-text table: the clusters (name, capacity, target,
/// load, relative load), then the moves, then the unplaced units.
pub fn to_table(plan: &Plan) -> String {
    let mut out = String::new();
    let width = plan
        .clusters
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0)
        .max("CLUSTER".len());
    let _ = writeln!(out, "generation {}", plan.generation);
    let _ = writeln!(
        out,
        "{:<width$}  {:>8}  {:>12}  {:>12}  {:>8}",
        "CLUSTER", "CAPACITY", "TARGET", "LOAD", "RELATIVE"
    );
    for c in &plan.clusters {
        let _ = writeln!(
            out,
            "{:<width$}  {:>8}  {:>12.2}  {:>12.2}  {:>8.3}",
            c.name, c.capacity, c.target, c.load, c.relative_load
        );
    }
    let forced = plan.moves.iter().filter(|m| m.forced).count();
    let moved: f64 = plan
        .moves
        .iter()
        .filter(|m| !m.forced)
        .map(|m| m.demand)
        .sum::<f64>()
        // A float sum of nothing is -0, which would print as "-0.00".
        + 0.0;
    let _ = writeln!(
        out,
        "\n{} moves ({} forced or new; {:.2} demand moved to balance)",
        plan.moves.len(),
        forced,
        moved
    );
    for m in &plan.moves {
        let _ = writeln!(
            out,
            "  {}{}: {} -> {} ({:.2}): {}",
            m.unit,
            if m.forced { " [forced]" } else { "" },
            m.from.as_deref().unwrap_or("(new)"),
            m.to,
            m.demand,
            m.reason
        );
    }
    if !plan.unplaced.is_empty() {
        let _ = writeln!(out, "\n{} unplaced", plan.unplaced.len());
        for (unit, why) in &plan.unplaced {
            let _ = writeln!(out, "  {unit}: {why}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClusterSpec, PlanInput};
    use crate::plan::plan;

    fn input() -> PlanInput {
        let cluster = |name: &str, blocked: bool| ClusterSpec {
            name: name.to_string(),
            blocked,
            ..ClusterSpec::default()
        };
        let unit = |id: &str, jobs: &[&str], d: f64, prev: Option<&str>| UnitSpec {
            id: id.to_string(),
            jobs: jobs.iter().map(|j| j.to_string()).collect(),
            demand: d,
            eligible: vec!["a".into(), "b".into(), "c".into()],
            pinned: None,
            keeps_blocked_pin: false,
            previous: prev.map(str::to_string),
            rule: "default".to_string(),
        };
        PlanInput {
            clusters: vec![cluster("a", false), cluster("b", false), cluster("c", true)],
            units: vec![
                unit("u1", &["j1", "j2"], 5.0, Some("a")),
                unit("u2", &["j3"], 3.0, Some("c")),
                unit("u3", &["j4"], 2.0, None),
            ],
            options: Default::default(),
        }
    }

    #[test]
    fn json_round_trips_and_is_accepted_as_previous() {
        let p = plan(&input(), 0);
        let text = to_json(&p);
        let back = plan_from_json(&text).unwrap();
        assert_eq!(back.assignments, p.assignments);
        assert_eq!(back.moves, p.moves);
        assert_eq!(back.unplaced, p.unplaced);
        assert_eq!(back.generation, p.generation);
        let prev = previous_from_json(&text).unwrap();
        assert_eq!(prev.len(), 4);
        assert_eq!(prev["j1"], "a");
        for (job, a) in &p.assignments {
            assert_eq!(prev[job], a.cluster);
        }
        // Stable: the same plan prints the same text.
        assert_eq!(to_json(&plan(&input(), 0)), text);
        // The documented key order.
        let keys = [
            "\"generation\"",
            "\"clusters\"",
            "\"assignments\"",
            "\"explanations\"",
            "\"moves\"",
            "\"unplaced\"",
        ];
        let pos: Vec<usize> = keys.iter().map(|k| text.find(k).unwrap()).collect();
        assert!(pos.windows(2).all(|w| w[0] < w[1]), "{pos:?}");
    }

    #[test]
    fn minimal_cli_json_and_bare_maps_are_accepted() {
        let cli = r#"{"clusters": [{"name": "a", "capacity": 100, "target": 1.0, "load": 1.0, "relative_load": 1.0}],
                      "assignments": {"j1": "a", "j2": "b"}, "moves": []}"#;
        let m = previous_from_json(cli).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m["j2"], "b");
        let plan = plan_from_json(cli).unwrap();
        assert_eq!(plan.assignments["j1"].cluster, "a");
        let bare = previous_from_json(r#"{"j1": "a", "j9": "c"}"#).unwrap();
        assert_eq!(bare["j9"], "c");
        assert!(matches!(
            previous_from_json("[1]"),
            Err(FormatError::Shape(_))
        ));
        assert!(matches!(
            previous_from_json(r#"{"j1": 3}"#),
            Err(FormatError::Shape(_))
        ));
        assert!(matches!(previous_from_json("{"), Err(FormatError::Json(_))));
    }

    #[test]
    fn unit_previous_is_the_majority_with_ties_by_name() {
        let map: BTreeMap<String, String> = [("x", "b"), ("y", "a"), ("z", "b"), ("w", "c")]
            .iter()
            .map(|(j, c)| (j.to_string(), c.to_string()))
            .collect();
        let jobs = |js: &[&str]| js.iter().map(|j| j.to_string()).collect::<Vec<_>>();
        assert_eq!(
            unit_previous(&jobs(&["x", "y", "z"]), &map).as_deref(),
            Some("b")
        );
        assert_eq!(
            unit_previous(&jobs(&["y", "w"]), &map).as_deref(),
            Some("a")
        );
        assert_eq!(unit_previous(&jobs(&["q"]), &map), None);
        let mut units = input().units;
        units[2].previous = Some("keep".into());
        apply_previous(&mut units, &map);
        assert_eq!(units[2].previous.as_deref(), Some("keep"));
    }

    #[test]
    fn table_lists_clusters_and_moves() {
        let t = to_table(&plan(&input(), 0));
        assert!(t.contains("CLUSTER"), "{t}");
        assert!(t.contains("RELATIVE"), "{t}");
        assert!(t.contains("u2 [forced]: c -> "), "{t}");
        assert!(t.contains("u3 [forced]: (new) -> "), "{t}");
    }
}
