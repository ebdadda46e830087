//! Properties of the planner on random inventories and units.

use std::collections::BTreeMap;

use bosun_dispatch::format::{apply_previous, previous_from_json, to_json};
use bosun_dispatch::model::{ClusterSpec, Options, Plan, PlanInput, UnitSpec};
use bosun_dispatch::plan::{evaluate, lower_bound, plan, plan_with_report, unit_clusters};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

const NAMES: &[&str] = &["c0", "c1", "c2", "c3", "c4", "c5"];

/// A cluster: (capacity, blocked).
fn clusters() -> impl Strategy<Value = Vec<ClusterSpec>> {
    prop::collection::vec(
        (
            prop_oneof![Just(100u32), 0u32..300],
            prop::bool::weighted(0.2),
        ),
        1..=6,
    )
    .prop_map(|cs| {
        cs.into_iter()
            .enumerate()
            .map(|(i, (capacity, blocked))| ClusterSpec {
                name: NAMES[i].to_string(),
                capacity,
                blocked,
                ..ClusterSpec::default()
            })
            .collect()
    })
}

/// A cluster name: mostly the inventory's, sometimes one outside it.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => (0..NAMES.len()).prop_map(|i| NAMES[i].to_string()),
        1 => Just("gone".to_string()),
    ]
}

fn units() -> impl Strategy<Value = Vec<UnitSpec>> {
    let unit = (
        prop_oneof![Just(0.0), 0.01f64..10.0, 10.0f64..100.0],
        prop::collection::btree_set(name(), 0..5),
        prop::option::weighted(0.1, prop_oneof![name(), Just("app.ci".to_string())]),
        prop::option::weighted(0.7, name()),
        1usize..4,
    );
    prop::collection::vec(unit, 0..40).prop_map(|us| {
        us.into_iter()
            .enumerate()
            .map(|(i, (demand, eligible, pinned, previous, jobs))| UnitSpec {
                id: format!("unit-{i:02}"),
                jobs: (0..jobs).map(|j| format!("job-{i:02}-{j}")).collect(),
                demand,
                eligible: eligible.into_iter().collect(),
                pinned,
                keeps_blocked_pin: false,
                previous,
                rule: "test".to_string(),
            })
            .collect()
    })
}

fn inputs() -> impl Strategy<Value = PlanInput> {
    (clusters(), units(), 0.0f64..0.5, 0.0f64..10.0).prop_map(|(clusters, units, budget, hyst)| {
        PlanInput {
            clusters,
            units,
            options: Options {
                budget_share: budget,
                hysteresis_percent: hyst,
            },
        }
    })
}

fn blocked(input: &PlanInput, c: &str) -> bool {
    input.clusters.iter().any(|s| s.name == c && s.blocked)
}

fn max_rel(loads: &[bosun_dispatch::model::ClusterLoad]) -> f64 {
    loads.iter().map(|c| c.relative_load).fold(0.0, f64::max)
}

fn shuffled<T: Clone>(v: &[T], seed: u64) -> Vec<T> {
    let mut v = v.to_vec();
    let mut s = seed | 1;
    for i in (1..v.len()).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.swap(i, (s % (i as u64 + 1)) as usize);
    }
    v
}

fn next_input(input: &PlanInput, p: &Plan) -> PlanInput {
    let prev = previous_from_json(&to_json(p)).unwrap();
    let mut next = input.clone();
    apply_previous(&mut next.units, &prev);
    next
}

proptest! {
    // The saved failures are in the `.proptest-regressions` file beside this
    // one. proptest's default (`SourceParallel`) would look for them in
    // `tests/proptest-regressions/plan_properties.txt`, as `tests/it/` has a `main.rs`.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(
            FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..ProptestConfig::with_cases(300)
    })]

    #[test]
    fn pins_eligibility_and_blocked_clusters_are_respected(input in inputs()) {
        let p = plan(&input, 0);
        let unplaced: BTreeMap<_, _> = p.unplaced.iter().cloned().collect();
        for u in &input.units {
            for job in &u.jobs {
                let Some(a) = p.assignments.get(job) else {
                    prop_assert!(unplaced.contains_key(&u.id), "{job} has no cluster and is not unplaced");
                    continue;
                };
                prop_assert!(!blocked(&input, &a.cluster), "{job} on blocked {}", a.cluster);
                prop_assert_eq!(&a.unit, &u.id);
                if unplaced.contains_key(&u.id) {
                    prop_assert_eq!(Some(&a.cluster), u.previous.as_ref(), "unplaced keeps its previous");
                } else if let Some(pin) = &u.pinned {
                    prop_assert_eq!(&a.cluster, pin);
                } else {
                    prop_assert!(u.eligible.contains(&a.cluster), "{job} on ineligible {}", a.cluster);
                    prop_assert!(input.clusters.iter().any(|c| c.name == a.cluster));
                }
            }
        }
        for c in &p.clusters {
            if blocked(&input, &c.name) {
                prop_assert_eq!(c.load, 0.0);
                prop_assert_eq!(c.target, 0.0);
            }
        }
    }

    #[test]
    fn deterministic_under_shuffled_input(input in inputs(), seed in any::<u64>()) {
        let p = plan(&input, 7);
        let mut q_in = input.clone();
        q_in.units = shuffled(&input.units, seed);
        q_in.clusters = shuffled(&input.clusters, seed.rotate_left(17));
        let q = plan(&q_in, 7);
        prop_assert_eq!(to_json(&p), to_json(&q));
    }

    #[test]
    fn a_second_plan_moves_nothing(input in inputs()) {
        let (p, r) = plan_with_report(&input, 0);
        let next = next_input(&input, &p);
        let (q, _) = plan_with_report(&next, p.generation);
        if r.budget_limited {
            // It carries on, never undoing: whatever it moves is budgeted.
            prop_assert!(q.moves.iter().all(|m| !m.forced));
        } else {
            prop_assert!(q.moves.is_empty(), "{:?}", q.moves);
            prop_assert_eq!(unit_clusters(&p), unit_clusters(&q));
        }
    }

    #[test]
    fn an_unlimited_budget_converges_in_one_plan(mut input in inputs()) {
        input.options.budget_share = 100.0;
        let (p, r) = plan_with_report(&input, 0);
        prop_assert!(!r.budget_limited);
        let q = plan(&next_input(&input, &p), 1);
        prop_assert!(q.moves.is_empty(), "{:?}", q.moves);
    }

    #[test]
    fn the_budget_bounds_balancing_moves(input in inputs()) {
        let (p, r) = plan_with_report(&input, 0);
        let moved: f64 = p.moves.iter().filter(|m| !m.forced).map(|m| m.demand).sum();
        prop_assert!(moved <= input.options.budget_share * r.total_demand + 1e-6,
            "moved {moved} > budget {}", r.budget);
        prop_assert!((moved - r.moved_demand).abs() < 1e-6);
        // Balancing moves only units that had a valid previous cluster.
        for m in p.moves.iter().filter(|m| !m.forced) {
            prop_assert!(m.from.is_some());
            prop_assert_ne!(m.from.as_ref(), Some(&m.to));
        }
    }

    #[test]
    fn balancing_never_raises_the_max_relative_load(input in inputs()) {
        // Make every previous valid (no forced moves, no new units), then
        // compare with the previous assignment judged by the same targets.
        let mut input = input;
        let schedulable: Vec<String> = input.clusters.iter().filter(|c| !c.blocked).map(|c| c.name.clone()).collect();
        for u in &mut input.units {
            u.eligible.retain(|c| schedulable.contains(c));
            u.pinned = None;
            if let Some(first) = u.eligible.first().cloned() {
                if !u.previous.as_ref().is_some_and(|p| u.eligible.contains(p)) {
                    u.previous = Some(first);
                }
            }
        }
        let before: BTreeMap<String, String> = input
            .units
            .iter()
            .filter_map(|u| u.previous.clone().map(|p| (u.id.clone(), p)))
            .collect();
        let before = max_rel(&evaluate(&input, &before));
        let p = plan(&input, 0);
        prop_assert!(p.moves.iter().all(|m| !m.forced));
        prop_assert!(max_rel(&p.clusters) <= before + 1e-9, "{} > {before}", max_rel(&p.clusters));
    }

    #[test]
    fn the_lower_bound_holds(input in inputs()) {
        let p = plan(&input, 0);
        let lb = lower_bound(&input);
        prop_assert!(lb <= max_rel(&p.clusters) + 1e-6, "lb {lb} > {}", max_rel(&p.clusters));
        // Targets share out exactly the counted demand.
        let t: f64 = p.clusters.iter().map(|c| c.target).sum();
        let l: f64 = p.clusters.iter().map(|c| c.load).sum();
        prop_assert!((t - l).abs() <= 1e-6 * l.max(1.0), "targets {t} vs loads {l}");
        prop_assert_eq!(evaluate(&input, &unit_clusters(&p)), p.clusters);
    }

    #[test]
    fn json_is_accepted_back(input in inputs()) {
        let p = plan(&input, 3);
        let prev = previous_from_json(&to_json(&p)).unwrap();
        let want: BTreeMap<String, String> = p.assignments.iter().map(|(j, a)| (j.clone(), a.cluster.clone())).collect();
        prop_assert_eq!(prev, want);
        // Floats may come back one ulp off (serde_json without
        // `float_roundtrip`); everything else exactly.
        let back = bosun_dispatch::format::plan_from_json(&to_json(&p)).unwrap();
        prop_assert_eq!(&back.assignments, &p.assignments);
        prop_assert_eq!(&back.unplaced, &p.unplaced);
        prop_assert_eq!(back.generation, p.generation);
        prop_assert_eq!(back.moves.len(), p.moves.len());
        for (b, c) in back.clusters.iter().zip(&p.clusters) {
            prop_assert_eq!(&b.name, &c.name);
            prop_assert!((b.relative_load - c.relative_load).abs() <= 1e-12 * c.relative_load.max(1.0));
            prop_assert!((b.load - c.load).abs() <= 1e-12 * c.load.max(1.0));
        }
    }
}

/// The benchmark's scenarios at a smaller scale: fresh, a cluster blocked,
/// one added, 20% demand drift — each from the previous plan, with the
/// default budget and hysteresis.
#[test]
fn benchmark_scenarios_meet_the_criterion() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let aws: Vec<String> = (1..=7).map(|i| format!("aws{i}")).collect();
    let gcp: Vec<String> = (1..=3).map(|i| format!("gcp{i}")).collect();
    let mut clusters: Vec<ClusterSpec> = aws
        .iter()
        .chain(&gcp)
        .map(|n| ClusterSpec {
            name: n.clone(),
            ..ClusterSpec::default()
        })
        .collect();
    clusters[6].capacity = 50;
    let units: Vec<UnitSpec> = (0..3000)
        .map(|i| {
            let x = rnd();
            let demand = 1.0 + x * x * x * 200.0;
            let eligible: Vec<String> = match (rnd() * 10.0) as u32 {
                0..=1 => gcp.clone(),
                2..=6 => aws.clone(),
                _ => aws.iter().chain(&gcp).cloned().collect(),
            };
            UnitSpec {
                id: format!("org-repo-{i:04}.yaml"),
                jobs: vec![format!("job-{i:04}-a"), format!("job-{i:04}-b")],
                demand,
                eligible,
                pinned: (i % 97 == 0).then(|| "aws1".to_string()),
                keeps_blocked_pin: false,
                previous: None,
                rule: "default".to_string(),
            }
        })
        .collect();
    let mut input = PlanInput {
        clusters,
        units,
        options: Options::default(),
    };
    let check = |label: &str, input: &PlanInput, gen: u64| {
        let (p, r) = plan_with_report(input, gen);
        let bound = 1.05f64.max(r.lower_bound + 0.02);
        println!(
            "{label}: max {:.4} (lb {:.4}), moved {:.0} of budget {:.0}, forced {:.0}, {} moves",
            r.max_relative_load,
            r.lower_bound,
            r.moved_demand,
            r.budget,
            r.forced_demand,
            p.moves.len()
        );
        assert!(r.max_relative_load <= bound, "{label}: {r:?}");
        assert!(r.moved_demand <= r.budget + 1e-6, "{label}: {r:?}");
        p
    };
    let p = check("fresh", &input, 0);
    assert!(p.moves.iter().all(|m| m.forced));
    input = next_input(&input, &p);
    let steady = plan(&input, 1);
    assert!(steady.moves.is_empty());

    let mut blocked = input.clone();
    blocked.clusters[2].blocked = true;
    check("blocked", &blocked, 1);

    let mut added = input.clone();
    added.clusters.push(ClusterSpec {
        name: "aws8".into(),
        ..ClusterSpec::default()
    });
    for u in &mut added.units {
        if u.eligible.contains(&"aws1".to_string()) {
            u.eligible.push("aws8".into());
        }
    }
    check("added", &added, 1);

    let mut drift = input.clone();
    for u in &mut drift.units {
        u.demand *= 0.8 + 0.4 * rnd();
    }
    check("drift", &drift, 1);
}
