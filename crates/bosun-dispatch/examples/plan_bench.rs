//! The planner at OpenShift's scale, side by side with OpenShift's greedy
//! algorithm, on OpenShift's real inventory and job volumes.
//!
//! Input: about 20,000 job files holding about 60,000 jobs, the demand of
//! each job drawn from the real weekly volumes (`job_volume.json`), the
//! real inventory (`_clusters.yaml`), and constraints in OpenShift's
//! proportions (a file's e2e cloud, capabilities, pins). Scenarios: fresh
//! (no previous assignment), a cluster blocked, a cluster added, and 20%
//! demand drift, each from the fresh plan as the previous assignment.
//!
//! For each: the lower bound on the max relative load, bosun's and the
//! greedy's max relative load, the demand each moved (forced moves
//! excluded) and bosun's budget; and the time of a full plan (median of
//! several). The greedy is OpenShift's stable `dispatchJobs` as the
//! reference describes it: units largest first, sticky while its cluster is
//! under 75% of its share, else the least-loaded candidate of capacity 100
//! (ties by name).
//!
//! `plan_bench [CLUSTERS_YAML] [JOB_VOLUME_JSON] [FILES]`
//! (defaults: the shared corpus; 20000 files)

use std::collections::BTreeSet;
use std::time::Instant;

use bosun_dispatch::model::{ClusterSpec, Options, Plan, PlanInput, UnitSpec};

/// A deterministic generator (SplitMix64): the same input every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// OpenShift's inventory from `_clusters.yaml`.
fn inventory(path: &str) -> Vec<ClusterSpec> {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let parsed =
        bosun_dispatch::openshift::OsClusters::parse(path, &text).unwrap_or_else(|e| panic!("{e}"));
    parsed.to_cluster_specs()
}

/// The real weekly volumes, one value per job.
fn volumes(path: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let map: std::collections::BTreeMap<String, f64> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    map.into_values().collect()
}

/// The units of `files` job files with OpenShift-like constraints.
fn units(clusters: &[ClusterSpec], volumes: &[f64], files: usize, rng: &mut Rng) -> Vec<UnitSpec> {
    let schedulable: Vec<&ClusterSpec> = clusters.iter().filter(|c| !c.blocked).collect();
    let on = |f: &dyn Fn(&ClusterSpec) -> bool| -> Vec<String> {
        clusters
            .iter()
            .filter(|c| f(c))
            .map(|c| c.name.clone())
            .collect()
    };
    let all = on(&|_| true);
    let aws = on(&|c| c.provider.as_deref() == Some("aws"));
    let gcp = on(&|c| c.provider.as_deref() == Some("gcp"));
    let arm64 = on(&|c| c.capabilities.contains("arm64"));
    let kvm = on(&|c| c.capabilities.contains("kvm"));
    let mut out = Vec::with_capacity(files);
    for i in 0..files {
        // Jobs per file: 1 to 5, three on average (about 60,000 jobs).
        let n = [1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 5, 5][rng.below(12)];
        let jobs: Vec<String> = (0..n).map(|j| format!("job-{i:05}-{j}")).collect();
        let demand: f64 = (0..n).map(|_| volumes[rng.below(volumes.len())]).sum();
        let roll = rng.unit();
        let (eligible, pinned, rule) = if roll < 0.02 {
            let c = schedulable[rng.below(schedulable.len())].name.clone();
            (vec![c.clone()], Some(c), "pinned".to_string())
        } else if roll < 0.07 {
            (arm64.clone(), None, "capability/arm64".to_string())
        } else if roll < 0.09 {
            (kvm.clone(), None, "capability/kvm".to_string())
        } else if roll < 0.60 {
            (aws.clone(), None, "provider aws".to_string())
        } else if roll < 0.70 {
            (gcp.clone(), None, "provider gcp".to_string())
        } else {
            (all.clone(), None, "balanced".to_string())
        };
        out.push(UnitSpec {
            id: format!("ci-operator/jobs/org{:04}/repo/file-{i:05}.yaml", i % 3000),
            jobs,
            demand,
            eligible,
            pinned,
            keeps_blocked_pin: false,
            previous: None,
            rule,
        });
    }
    out
}

/// Targets: each schedulable cluster's share of capacity times the demand.
fn targets(clusters: &[ClusterSpec], total: f64) -> Vec<f64> {
    let cap: f64 = clusters
        .iter()
        .filter(|c| !c.blocked)
        .map(|c| f64::from(c.capacity))
        .sum();
    clusters
        .iter()
        .map(|c| {
            if c.blocked || cap == 0.0 {
                0.0
            } else {
                f64::from(c.capacity) / cap * total
            }
        })
        .collect()
}

/// OpenShift's greedy placement; returns each unit's cluster index.
fn greedy(clusters: &[ClusterSpec], units: &[UnitSpec]) -> Vec<Option<usize>> {
    let index = |name: &str| clusters.iter().position(|c| c.name == name);
    let total: f64 = units.iter().map(|u| u.demand).sum();
    let share = targets(clusters, total);
    let mut volume = vec![0.0f64; clusters.len()];
    let mut order: Vec<usize> = (0..units.len()).collect();
    // Largest files first (jobs, then demand), ties by path.
    order.sort_by(|&a, &b| {
        let (ua, ub) = (&units[a], &units[b]);
        ub.jobs
            .len()
            .cmp(&ua.jobs.len())
            .then(ub.demand.total_cmp(&ua.demand))
            .then(ua.id.cmp(&ub.id))
    });
    let mut out = vec![None; units.len()];
    for i in order {
        let u = &units[i];
        let open = |c: usize| !clusters[c].blocked;
        let choice = if let Some(p) = u.pinned.as_deref().and_then(index) {
            Some(p)
        } else {
            let eligible: Vec<usize> = u
                .eligible
                .iter()
                .filter_map(|n| index(n))
                .filter(|&c| open(c))
                .collect();
            let sticky = u
                .previous
                .as_deref()
                .and_then(index)
                .filter(|p| eligible.contains(p) && volume[*p] < share[*p] * 0.75);
            sticky.or_else(|| {
                let full: Vec<usize> = eligible
                    .iter()
                    .copied()
                    .filter(|&c| clusters[c].capacity == 100)
                    .collect();
                let pool = if full.is_empty() { &eligible } else { &full };
                pool.iter().copied().min_by(|&a, &b| {
                    volume[a]
                        .total_cmp(&volume[b])
                        .then(clusters[a].name.cmp(&clusters[b].name))
                })
            })
        };
        if let Some(c) = choice {
            volume[c] += u.demand;
        }
        out[i] = choice;
    }
    out
}

/// The max relative load of an assignment (unit -> cluster index), by the
/// planner's own definitions (`plan::evaluate`: eligibility-aware targets).
fn max_relative_load(input: &PlanInput, at: &[Option<usize>]) -> f64 {
    let assignment: std::collections::BTreeMap<String, String> = input
        .units
        .iter()
        .zip(at)
        .filter_map(|(u, c)| Some((u.id.clone(), input.clusters[(*c)?].name.clone())))
        .collect();
    bosun_dispatch::plan::evaluate(input, &assignment)
        .iter()
        .map(|c| c.relative_load)
        .fold(0.0, f64::max)
}

/// Demand moved from each unit's previous cluster, forced moves (previous
/// blocked, removed or no longer eligible) excluded.
fn moved(clusters: &[ClusterSpec], units: &[UnitSpec], at: &[Option<usize>]) -> f64 {
    units
        .iter()
        .zip(at)
        .filter(|(u, c)| {
            let Some(prev) = u.previous.as_deref() else {
                return false;
            };
            let still = clusters.iter().any(|k| k.name == prev && !k.blocked)
                && (u.eligible.iter().any(|e| e == prev) || u.pinned.as_deref() == Some(prev));
            still && c.map(|c| clusters[c].name.as_str()) != Some(prev)
        })
        .map(|(u, _)| u.demand)
        // A float sum of nothing is -0.
        .sum::<f64>()
        + 0.0
}

/// The unit -> cluster index of a bosun plan.
fn of_plan(clusters: &[ClusterSpec], units: &[UnitSpec], plan: &Plan) -> Vec<Option<usize>> {
    units
        .iter()
        .map(|u| {
            let job = u.jobs.first()?;
            let c = &plan.assignments.get(job)?.cluster;
            clusters.iter().position(|k| &k.name == c)
        })
        .collect()
}

fn with_previous(
    units: &[UnitSpec],
    clusters: &[ClusterSpec],
    at: &[Option<usize>],
) -> Vec<UnitSpec> {
    units
        .iter()
        .zip(at)
        .map(|(u, c)| UnitSpec {
            previous: c.map(|c| clusters[c].name.clone()),
            ..u.clone()
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let corpus = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus/openshift"
    );
    let clusters_path = args
        .get(1)
        .cloned()
        .unwrap_or(format!("{corpus}/_clusters.yaml"));
    let volumes_path = args
        .get(2)
        .cloned()
        .unwrap_or(format!("{corpus}/job_volume.json"));
    let files: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let clusters = inventory(&clusters_path);
    let volumes = volumes(&volumes_path);
    let mut rng = Rng(0x5eed);
    let base = units(&clusters, &volumes, files, &mut rng);
    let jobs: usize = base.iter().map(|u| u.jobs.len()).sum();
    println!(
        "{} clusters ({} blocked), {} units, {} jobs, total demand {:.0}",
        clusters.len(),
        clusters.iter().filter(|c| c.blocked).count(),
        base.len(),
        jobs,
        base.iter().map(|u| u.demand).sum::<f64>()
    );
    let options = Options::default();
    let input = PlanInput {
        clusters: clusters.clone(),
        units: base.clone(),
        options,
    };
    // The time of a full plan: the median of 7.
    let mut times = Vec::new();
    let mut fresh = Plan::default();
    for _ in 0..7 {
        let t = Instant::now();
        fresh = bosun_dispatch::plan::plan(&input, 0);
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "full plan: median {:.1} ms of 7 (min {:.1}, max {:.1}; target < 250 ms)",
        times[3], times[0], times[6]
    );
    let fresh_at = of_plan(&clusters, &base, &fresh);

    println!(
        "{:<10} {:>7} {:>9} {:>9} {:>12} {:>12} {:>9}  verdict",
        "scenario", "bound", "bosun", "greedy", "bosun moved", "greedy moved", "budget"
    );
    let scenario = |name: &str, clusters: Vec<ClusterSpec>, units: Vec<UnitSpec>| {
        let input = PlanInput {
            clusters: clusters.clone(),
            units: units.clone(),
            options,
        };
        let bound = bosun_dispatch::plan::lower_bound(&input);
        let plan = bosun_dispatch::plan::plan(&input, 0);
        let at = of_plan(&clusters, &units, &plan);
        let g = greedy(&clusters, &units);
        let total: f64 = units.iter().map(|u| u.demand).sum();
        let budget = options.budget_share * total;
        let (b_max, g_max) = (
            max_relative_load(&input, &at),
            max_relative_load(&input, &g),
        );
        let (b_moved, g_moved) = (moved(&clusters, &units, &at), moved(&clusters, &units, &g));
        let ok = b_max <= f64::max(1.05, bound + 0.02) + 1e-9
            && b_moved <= g_moved + 1e-9
            && b_moved <= budget + 1e-9;
        println!(
            "{name:<10} {bound:>7.3} {b_max:>9.3} {g_max:>9.3} {b_moved:>12.0} {g_moved:>12.0} {budget:>9.0}  {}",
            if ok { "met" } else { "MISSED" }
        );
    };
    scenario("fresh", clusters.clone(), base.clone());
    let previous = with_previous(&base, &clusters, &fresh_at);
    // The largest schedulable cluster is blocked.
    let mut blocked = clusters.clone();
    if let Some(c) = blocked.iter_mut().find(|c| c.name == "build03") {
        c.blocked = true;
    }
    scenario("blocked", blocked, previous.clone());
    let mut added = clusters.clone();
    added.push(ClusterSpec {
        name: "build12".into(),
        capacity: 100,
        blocked: false,
        provider: Some("aws".into()),
        capabilities: BTreeSet::from(["arm64".to_string(), "gpu".to_string()]),
    });
    let added_units: Vec<UnitSpec> = previous
        .iter()
        .map(|u| {
            let mut u = u.clone();
            if u.rule == "provider aws" || u.rule == "balanced" || u.rule == "capability/arm64" {
                u.eligible.push("build12".into());
                u.eligible.sort();
            }
            u
        })
        .collect();
    scenario("added", added, added_units);
    let mut drift_rng = Rng(0xd41f7);
    let drifted: Vec<UnitSpec> = previous
        .iter()
        .map(|u| UnitSpec {
            demand: u.demand * (0.8 + 0.4 * drift_rng.unit()),
            ..u.clone()
        })
        .collect();
    scenario("drift 20%", clusters.clone(), drifted);
}
