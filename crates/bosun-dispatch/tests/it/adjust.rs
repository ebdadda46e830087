//! The effective plan: overrides with a TTL, drains and the health overlay
//! on top of a plan made by the planner.

use std::collections::{BTreeMap, BTreeSet};

use bosun_dispatch::adjust::{
    adjust, adjust_with_files, validate, validate_with_files, Adjusted, Override, OverrideTarget,
};
use bosun_dispatch::model::{ClusterSpec, Options, Plan, PlanInput, UnitSpec};
use bosun_dispatch::plan::plan;
use jiff::{SignedDuration, Timestamp};

const ALL: &[&str] = &["build01", "build02", "build03"];

fn now() -> Timestamp {
    "2026-12-02T00:00:00Z".parse().unwrap()
}

fn cluster(name: &str) -> ClusterSpec {
    ClusterSpec {
        name: name.to_string(),
        ..ClusterSpec::default()
    }
}

fn unit(id: &str, jobs: &[&str], d: f64, eligible: &[&str], previous: &str) -> UnitSpec {
    UnitSpec {
        id: id.to_string(),
        jobs: jobs.iter().map(|j| j.to_string()).collect(),
        demand: d,
        eligible: eligible.iter().map(|c| c.to_string()).collect(),
        pinned: None,
        keeps_blocked_pin: false,
        previous: Some(previous.to_string()),
        rule: "default".to_string(),
    }
}

fn pinned(id: &str, jobs: &[&str], d: f64, pin: &str) -> UnitSpec {
    UnitSpec {
        pinned: Some(pin.to_string()),
        keeps_blocked_pin: false,
        rule: "cluster: written".to_string(),
        ..unit(id, jobs, d, &[pin], pin)
    }
}

/// No budget: the plan keeps every unit where it was, so the tests know
/// where each unit starts.
fn input(clusters: Vec<ClusterSpec>, units: Vec<UnitSpec>) -> PlanInput {
    PlanInput {
        clusters,
        units,
        options: Options {
            budget_share: 0.0,
            hysteresis_percent: 3.0,
        },
    }
}

/// build01: a (10), b (6), pinned (3); build02: c (4); build03: d (2, only
/// there), e (5); build04 blocked.
fn fixture() -> (PlanInput, Plan) {
    let mut blocked = cluster("build04");
    blocked.blocked = true;
    let inp = input(
        vec![
            cluster("build01"),
            cluster("build02"),
            cluster("build03"),
            blocked,
        ],
        vec![
            unit("f/a.yaml", &["a1", "a2"], 10.0, ALL, "build01"),
            unit("f/b.yaml", &["b1"], 6.0, &["build01", "build02"], "build01"),
            unit("f/c.yaml", &["c1", "c2"], 4.0, ALL, "build02"),
            pinned("job:pinned", &["pinned"], 3.0, "build01"),
            unit("f/d.yaml", &["d1"], 2.0, &["build03"], "build03"),
            unit("f/e.yaml", &["e1"], 5.0, ALL, "build03"),
        ],
    );
    let p = plan(&inp, 6);
    assert!(p.moves.is_empty(), "the base plan keeps everything");
    (inp, p)
}

fn ov(id: &str, target: OverrideTarget, cluster: Option<&str>) -> Override {
    Override {
        id: id.to_string(),
        target,
        cluster: cluster.map(str::to_string),
        created_at: now() - SignedDuration::from_mins(10),
        expires_at: now() + SignedDuration::from_hours(2),
        reason: "capacity test".to_string(),
        actor: "alice".to_string(),
    }
}

fn job(name: &str, to: &str) -> Override {
    ov(name, OverrideTarget::Job(name.to_string()), Some(to))
}

fn drain(id: &str, c: &str) -> Override {
    ov(id, OverrideTarget::Drain(c.to_string()), None)
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn at(a: &Adjusted, job: &str) -> String {
    a.plan.assignments[job].cluster.clone()
}

fn load(p: &Plan, c: &str) -> f64 {
    p.clusters.iter().find(|l| l.name == c).unwrap().load
}

/// Every cluster's load is the demand of the units the effective plan puts
/// there, and its relative load is load / target (the targets are the
/// plan's); everything else of the plan is unchanged.
fn check_loads(inp: &PlanInput, base: &Plan, a: &Adjusted) {
    let mut want: BTreeMap<&str, f64> = BTreeMap::new();
    for u in &inp.units {
        if let Some(x) = a.plan.assignments.get(&u.jobs[0]) {
            *want.entry(x.cluster.as_str()).or_default() += u.demand;
        }
    }
    assert_eq!(a.plan.clusters.len(), base.clusters.len());
    for (c, b) in a.plan.clusters.iter().zip(&base.clusters) {
        assert_eq!(
            (&c.name, c.capacity, c.target),
            (&b.name, b.capacity, b.target)
        );
        let w = want.get(c.name.as_str()).copied().unwrap_or(0.0);
        assert!((c.load - w).abs() < 1e-9, "{}: {} != {w}", c.name, c.load);
        let r = if c.target > 0.0 {
            c.load / c.target
        } else {
            0.0
        };
        assert!((c.relative_load - r).abs() < 1e-12, "{}", c.name);
    }
    assert_eq!(a.plan.generation, base.generation);
    assert_eq!(a.plan.moves, base.moves);
    assert_eq!(a.plan.unplaced, base.unplaced);
    assert_eq!(
        a.plan.assignments.keys().collect::<Vec<_>>(),
        base.assignments.keys().collect::<Vec<_>>()
    );
    for (j, x) in &a.plan.assignments {
        assert_eq!(x.previous, base.assignments[j].previous, "{j}");
        assert_eq!(x.unit, base.assignments[j].unit, "{j}");
    }
}

#[test]
fn nothing_to_do_serves_the_plan() {
    let (inp, p) = fixture();
    let a = adjust(&p, &inp, &[], &BTreeSet::new(), now());
    assert_eq!(a.plan, p);
    assert!(a.overlay.is_empty() && a.overridden.is_empty() && a.skipped.is_empty());
    assert_eq!(a.active_overrides, 0);
}

#[test]
fn a_job_override_moves_its_unit_and_says_who_and_until_when() {
    let (inp, p) = fixture();
    let before = p.clone();
    let a = adjust(&p, &inp, &[job("b1", "build02")], &BTreeSet::new(), now());
    assert_eq!(p, before, "the plan itself is unchanged");
    let b1 = &a.plan.assignments["b1"];
    assert_eq!(b1.cluster, "build02");
    assert_eq!(b1.rule, "override");
    assert_eq!(b1.previous.as_deref(), Some("build01"));
    assert_eq!(
        b1.reason,
        r#"override b1 by alice until 2026-12-02T02:00:00Z: "capacity test" (plan: build01)"#
    );
    assert_eq!(a.overridden.len(), 1);
    let m = &a.overridden[0];
    assert_eq!(
        (
            m.unit.as_str(),
            m.from.as_deref(),
            m.to.as_str(),
            m.demand,
            m.forced
        ),
        ("f/b.yaml", Some("build01"), "build02", 6.0, true)
    );
    assert!(a.overlay.is_empty());
    assert_eq!(a.active_overrides, 1);
    assert!(a.skipped.is_empty());
    // Other jobs are untouched.
    assert_eq!(a.plan.assignments["a1"], p.assignments["a1"]);
    assert_eq!(load(&a.plan, "build01"), load(&p, "build01") - 6.0);
    assert_eq!(load(&a.plan, "build02"), load(&p, "build02") + 6.0);
    check_loads(&inp, &p, &a);
}

#[test]
fn an_override_onto_the_units_own_cluster_moves_nothing_but_holds_it() {
    let (inp, p) = fixture();
    let a = adjust(&p, &inp, &[job("c1", "build02")], &BTreeSet::new(), now());
    assert!(a.overridden.is_empty());
    assert_eq!(a.active_overrides, 1);
    for j in ["c1", "c2"] {
        let x = &a.plan.assignments[j];
        assert_eq!(
            (x.cluster.as_str(), x.rule.as_str()),
            ("build02", "override")
        );
        assert!(x.reason.ends_with("(plan: build02)"), "{}", x.reason);
    }
    // It holds the unit there against a drain.
    let a = adjust(
        &p,
        &inp,
        &[job("c1", "build02"), drain("dr", "build02")],
        &BTreeSet::new(),
        now(),
    );
    assert_eq!(at(&a, "c1"), "build02");
}

#[test]
fn a_file_override_moves_the_unit_of_that_file() {
    let (inp, p) = fixture();
    let o = ov(
        "ov-f",
        OverrideTarget::File("f/c.yaml".into()),
        Some("build03"),
    );
    let a = adjust(&p, &inp, &[o], &BTreeSet::new(), now());
    assert_eq!(
        (at(&a, "c1"), at(&a, "c2")),
        ("build03".into(), "build03".into())
    );
    assert_eq!(a.overridden.len(), 1);
    check_loads(&inp, &p, &a);
}

/// With `unit: job`, a file's jobs are separate units: the caller's job →
/// file map finds them; its pinned jobs stay on their pins.
#[test]
fn a_file_override_with_units_by_job_uses_the_callers_map() {
    let inp = input(
        ALL.iter().map(|c| cluster(c)).collect(),
        vec![
            unit("job:x", &["x"], 1.0, ALL, "build01"),
            unit("job:y", &["y"], 2.0, &["build01", "build02"], "build01"),
            pinned("job:z", &["z"], 1.0, "build01"),
            unit("job:w", &["w"], 1.0, ALL, "build03"),
        ],
    );
    let p = plan(&inp, 0);
    let files: BTreeMap<String, String> = [
        ("x", "o/r/o-r-main-presubmits.yaml"),
        ("y", "o/r/o-r-main-presubmits.yaml"),
        ("z", "o/r/o-r-main-presubmits.yaml"),
        ("w", "o/r/o-r-main-periodics.yaml"),
    ]
    .into_iter()
    .map(|(j, f)| (j.to_string(), f.to_string()))
    .collect();
    let o = ov(
        "ov-f",
        OverrideTarget::File("o/r/o-r-main-presubmits.yaml".into()),
        Some("build02"),
    );
    // Without the map, the file is no unit's id.
    let err = validate(&inp, &p, &o, now()).unwrap_err();
    assert!(err.contains("unknown file"), "{err}");
    assert_eq!(validate_with_files(&inp, &p, &o, now(), &files), Ok(()));
    let a = adjust_with_files(
        &p,
        &inp,
        std::slice::from_ref(&o),
        &BTreeSet::new(),
        now(),
        &files,
    );
    assert_eq!(at(&a, "x"), "build02");
    assert_eq!(at(&a, "y"), "build02");
    assert_eq!(at(&a, "z"), "build01", "pinned jobs stay");
    assert_eq!(at(&a, "w"), "build03");
    assert_eq!(
        a.overridden
            .iter()
            .map(|m| m.unit.as_str())
            .collect::<Vec<_>>(),
        ["job:x", "job:y"]
    );
    check_loads(&inp, &p, &a);
    // build03 is not eligible for y: the whole override is refused.
    let o3 = ov(
        "ov-3",
        OverrideTarget::File("o/r/o-r-main-presubmits.yaml".into()),
        Some("build03"),
    );
    let err = validate_with_files(&inp, &p, &o3, now(), &files).unwrap_err();
    assert_eq!(
        err,
        "build03 is not eligible for unit job:y (eligible: build01, build02; default)"
    );
    // A file of pinned jobs only.
    let mut only = files.clone();
    only.insert("z".into(), "o/r/pinned.yaml".into());
    let oz = ov(
        "ov-z",
        OverrideTarget::File("o/r/pinned.yaml".into()),
        Some("build01"),
    );
    let err = validate_with_files(&inp, &p, &oz, now(), &only).unwrap_err();
    assert!(
        err.contains("an override cannot move a pinned unit"),
        "{err}"
    );
}

#[test]
fn a_drain_moves_relocatable_units_to_the_least_loaded() {
    let (inp, p) = fixture();
    let a = adjust(
        &p,
        &inp,
        &[drain("dr-1", "build01")],
        &BTreeSet::new(),
        now(),
    );
    // a (10) first: build02 (4 + 10) beats build03 (7 + 10); then b (6) can
    // only go to build02. The pinned job stays.
    assert_eq!(at(&a, "a1"), "build02");
    assert_eq!(at(&a, "b1"), "build02");
    assert_eq!(at(&a, "pinned"), "build01");
    assert_eq!(a.plan.assignments["pinned"], p.assignments["pinned"]);
    assert_eq!(a.plan.assignments["a1"].rule, "drain");
    assert_eq!(
        a.plan.assignments["a1"].reason,
        r#"drain dr-1 of build01 by alice until 2026-12-02T02:00:00Z: "capacity test"; served from build02, the least loaded eligible healthy cluster (plan: build01)"#
    );
    assert_eq!(
        a.overridden
            .iter()
            .map(|m| m.unit.as_str())
            .collect::<Vec<_>>(),
        ["f/a.yaml", "f/b.yaml"]
    );
    assert_eq!(load(&a.plan, "build01"), 3.0);
    assert_eq!(a.active_overrides, 1);
    check_loads(&inp, &p, &a);
}

#[test]
fn a_drained_unit_with_nowhere_to_go_stays_and_says_why() {
    let (inp, p) = fixture();
    let a = adjust(
        &p,
        &inp,
        &[drain("dr-1", "build03")],
        &BTreeSet::new(),
        now(),
    );
    assert_eq!(at(&a, "e1"), "build02");
    assert_eq!(at(&a, "d1"), "build03");
    let d1 = &a.plan.assignments["d1"];
    assert_eq!(d1.rule, "default");
    assert_eq!(
        d1.reason,
        r#"drain dr-1 of build03 by alice until 2026-12-02T02:00:00Z: "capacity test"; no other eligible cluster (eligible: build03); stays on build03 (plan: build03)"#
    );
    check_loads(&inp, &p, &a);
}

#[test]
fn the_overlay_moves_relocatable_units_off_unhealthy_clusters() {
    let (inp, p) = fixture();
    let a = adjust(&p, &inp, &[], &set(&["build03"]), now());
    // e (5): build02 (4 + 5) beats build01 (19 + 5).
    assert_eq!(at(&a, "e1"), "build02");
    let e1 = &a.plan.assignments["e1"];
    assert_eq!(e1.rule, "health overlay");
    assert_eq!(
        e1.reason,
        "health overlay: build03 not Reachable; served from build02, the least loaded eligible healthy cluster (plan: build03)"
    );
    assert_eq!(e1.previous.as_deref(), Some("build03"));
    // d can only run on build03: it stays, and says why.
    let d1 = &a.plan.assignments["d1"];
    assert_eq!(d1.cluster, "build03");
    assert_eq!(
        d1.reason,
        "health overlay: build03 not Reachable; no other eligible cluster (eligible: build03); stays on build03 (plan: build03)"
    );
    assert_eq!(a.overlay.len(), 1);
    assert_eq!(
        (
            a.overlay[0].unit.as_str(),
            a.overlay[0].from.as_deref(),
            a.overlay[0].to.as_str()
        ),
        ("f/e.yaml", Some("build03"), "build02")
    );
    assert!(a.overridden.is_empty());
    check_loads(&inp, &p, &a);
}

#[test]
fn the_overlay_leaves_pinned_units_alone() {
    let (inp, p) = fixture();
    let a = adjust(&p, &inp, &[], &set(&["build01"]), now());
    assert_eq!(a.plan.assignments["pinned"], p.assignments["pinned"]);
    assert_ne!(at(&a, "a1"), "build01");
    assert_eq!(at(&a, "b1"), "build02");
    check_loads(&inp, &p, &a);
}

#[test]
fn the_overlay_takes_the_least_loaded_and_updates_loads_as_it_goes() {
    let inp = input(
        ALL.iter().map(|c| cluster(c)).collect(),
        vec![
            unit("big1", &["big1"], 5.0, ALL, "build01"),
            unit("big2", &["big2"], 5.0, ALL, "build01"),
            unit("small", &["small"], 1.0, ALL, "build02"),
            unit("mid", &["mid"], 2.0, ALL, "build03"),
        ],
    );
    let p = plan(&inp, 0);
    assert!(p.moves.is_empty());
    let a = adjust(&p, &inp, &[], &set(&["build01"]), now());
    // Ties by unit id: big1 first, to build02 (1 + 5 < 2 + 5); then build02
    // carries 6 and big2 goes to build03 (2 + 5 < 6 + 5).
    assert_eq!(at(&a, "big1"), "build02");
    assert_eq!(at(&a, "big2"), "build03");
    assert_eq!(
        a.overlay
            .iter()
            .map(|m| m.unit.as_str())
            .collect::<Vec<_>>(),
        ["big1", "big2"]
    );
    assert_eq!(load(&a.plan, "build01"), 0.0);
    assert_eq!(load(&a.plan, "build02"), 6.0);
    assert_eq!(load(&a.plan, "build03"), 7.0);
    let t = p.clusters[1].target;
    assert!((a.plan.clusters[1].relative_load - 6.0 / t).abs() < 1e-12);
    assert_eq!(a.plan.clusters[0].relative_load, 0.0);
    check_loads(&inp, &p, &a);
}

#[test]
fn the_overlay_follows_relative_load_not_raw_load() {
    // build02 has twice build03's capacity: with equal loads it is the less
    // loaded relative to its target.
    let mut big = cluster("build02");
    big.capacity = 200;
    let inp = input(
        vec![cluster("build01"), big, cluster("build03")],
        vec![
            unit("u", &["u"], 2.0, ALL, "build01"),
            unit("v", &["v"], 4.0, ALL, "build02"),
            unit("w", &["w"], 4.0, ALL, "build03"),
        ],
    );
    let p = plan(&inp, 0);
    let a = adjust(&p, &inp, &[], &set(&["build01"]), now());
    assert_eq!(at(&a, "u"), "build02");
    check_loads(&inp, &p, &a);
}

#[test]
fn a_drained_cluster_receives_nothing_from_the_overlay() {
    let (inp, p) = fixture();
    let a = adjust(
        &p,
        &inp,
        &[drain("dr-2", "build02")],
        &set(&["build03"]),
        now(),
    );
    // The drain moves c off build02 to build01 (build03 is unhealthy); the
    // overlay then moves e to build01 although build02 is now empty.
    assert_eq!(at(&a, "c1"), "build01");
    assert_eq!(at(&a, "e1"), "build01");
    assert!(a.overlay.iter().all(|m| m.to != "build02"));
    assert_eq!(load(&a.plan, "build02"), 0.0);
    // d stays, its reason naming why each other cluster is out.
    assert_eq!(at(&a, "d1"), "build03");
    assert_eq!(
        a.plan.assignments["d1"].reason,
        "health overlay: build03 not Reachable; no other eligible cluster (eligible: build03); stays on build03 (plan: build03)"
    );
    check_loads(&inp, &p, &a);
    // A unit whose only other clusters are drained or unhealthy.
    let a = adjust(
        &p,
        &inp,
        &[drain("dr-2", "build02")],
        &set(&["build01", "build03"]),
        now(),
    );
    assert_eq!(at(&a, "e1"), "build03");
    assert_eq!(
        a.plan.assignments["e1"].reason,
        "health overlay: build03 not Reachable; no other eligible cluster is healthy, schedulable and not drained (build01: not Reachable, build02: drained); stays on build03 (plan: build03)"
    );
    check_loads(&inp, &p, &a);
}

#[test]
fn overrides_then_drains_then_the_overlay() {
    let (inp, p) = fixture();
    // A job forced onto a drained cluster stays there: the order about one
    // job beats the order about a cluster.
    let a = adjust(
        &p,
        &inp,
        &[job("c1", "build03"), drain("dr", "build03")],
        &BTreeSet::new(),
        now(),
    );
    assert_eq!(at(&a, "c1"), "build03");
    assert_eq!(a.plan.assignments["c1"].rule, "override");
    assert_eq!(at(&a, "e1"), "build02", "the drain moves the others");
    assert_eq!(a.active_overrides, 2);
    check_loads(&inp, &p, &a);

    // A job forced onto a cluster that becomes unhealthy is still protected
    // by the overlay, which says what the override did.
    let a = adjust(&p, &inp, &[job("c1", "build03")], &set(&["build03"]), now());
    assert_ne!(at(&a, "c1"), "build03");
    let c1 = &a.plan.assignments["c1"];
    assert_eq!(c1.rule, "health overlay");
    assert!(
        c1.reason
            .ends_with("(override c1 put it on build03; plan: build02)"),
        "{}",
        c1.reason
    );
    assert_eq!(a.overridden.len(), 1);
    assert_eq!(a.overridden[0].to, "build03");
    assert_eq!(a.overlay.iter().filter(|m| m.unit == "f/c.yaml").count(), 1);
    assert_eq!(
        a.overlay
            .iter()
            .find(|m| m.unit == "f/c.yaml")
            .unwrap()
            .from
            .as_deref(),
        Some("build03")
    );
    check_loads(&inp, &p, &a);
}

#[test]
fn the_newest_override_of_a_unit_wins() {
    let (inp, p) = fixture();
    let mut old = job("c1", "build01");
    old.id = "ov-old".into();
    let mut new = job("c2", "build03");
    new.id = "ov-new".into();
    new.created_at = old.created_at + SignedDuration::from_secs(1);
    // The older also names another unit: it stays in effect for that one.
    let mut file = ov(
        "ov-file",
        OverrideTarget::File("f/a.yaml".into()),
        Some("build03"),
    );
    file.created_at = old.created_at - SignedDuration::from_secs(1);
    let a = adjust(
        &p,
        &inp,
        &[new.clone(), old.clone(), file],
        &BTreeSet::new(),
        now(),
    );
    assert_eq!(at(&a, "c1"), "build03");
    assert_eq!(at(&a, "a1"), "build03");
    assert!(a.plan.assignments["c1"]
        .reason
        .starts_with("override ov-new "));
    assert_eq!(a.active_overrides, 2);
    assert_eq!(
        a.skipped,
        [(
            "ov-old".to_string(),
            "superseded by the newer override ov-new for every unit it names".to_string()
        )]
    );
}

#[test]
fn expired_overrides_are_ignored() {
    let (inp, p) = fixture();
    let mut o = job("b1", "build02");
    o.expires_at = now();
    let mut d = drain("dr", "build01");
    d.expires_at = now() - SignedDuration::from_secs(1);
    let a = adjust(&p, &inp, &[o.clone(), d], &BTreeSet::new(), now());
    assert_eq!(a.plan, p);
    assert_eq!(a.active_overrides, 0);
    assert!(a.skipped.is_empty() && a.overridden.is_empty());
    // A second earlier, it acts.
    let a = adjust(
        &p,
        &inp,
        &[o],
        &BTreeSet::new(),
        now() - SignedDuration::from_secs(1),
    );
    assert_eq!(at(&a, "b1"), "build02");
}

#[test]
fn validation_refuses_with_clear_messages() {
    let (inp, p) = fixture();
    let check = |o: &Override| validate(&inp, &p, o, now());
    assert_eq!(check(&job("b1", "build02")), Ok(()));
    assert_eq!(check(&drain("dr", "build01")), Ok(()));

    let mut long = job("b1", "build02");
    long.expires_at = now() + SignedDuration::from_hours(24) + SignedDuration::from_secs(1);
    assert_eq!(
        check(&long).unwrap_err(),
        "its time to live (24h 1s, until 2026-12-03T00:00:01Z) is longer than 24h"
    );
    long.expires_at = now() + SignedDuration::from_hours(24);
    assert_eq!(check(&long), Ok(()));
    let mut past = job("b1", "build02");
    past.expires_at = now();
    assert_eq!(
        check(&past).unwrap_err(),
        "it expires at 2026-12-02T00:00:00Z, not after now (2026-12-02T00:00:00Z)"
    );

    assert_eq!(
        check(&job("b1", "build03")).unwrap_err(),
        "build03 is not eligible for job b1 (eligible: build01, build02; default)"
    );
    assert_eq!(
        check(&job("pinned", "build02")).unwrap_err(),
        "job pinned is pinned to build01 (cluster: written): an override cannot move a pinned unit"
    );
    assert_eq!(
        check(&job("nope", "build02")).unwrap_err(),
        "unknown job nope: the plan in force does not place it"
    );
    assert_eq!(
        check(&job("b1", "build99")).unwrap_err(),
        "unknown cluster build99 (not in the inventory)"
    );
    assert_eq!(
        check(&job("b1", "build04")).unwrap_err(),
        "cluster build04 is blocked"
    );
    assert_eq!(
        check(&drain("dr", "build99")).unwrap_err(),
        "cannot drain unknown cluster build99 (not in the inventory)"
    );
    assert_eq!(
        check(&ov(
            "f",
            OverrideTarget::File("f/zz.yaml".into()),
            Some("build01")
        ))
        .unwrap_err(),
        "unknown file f/zz.yaml: no unit or job of the plan in force comes from it"
    );
    assert_eq!(
        check(&ov("j", OverrideTarget::Job("b1".into()), None)).unwrap_err(),
        "a job or file override needs a cluster to go to"
    );
    assert_eq!(
        check(&ov(
            "d",
            OverrideTarget::Drain("build01".into()),
            Some("build02")
        ))
        .unwrap_err(),
        "a drain names no cluster to go to (it drains build01; cluster build02 given)"
    );
    let mut anonymous = job("b1", "build02");
    anonymous.actor = " ".into();
    assert!(check(&anonymous).unwrap_err().contains("actor"));

    // adjust skips what validation refuses, saying why, and does the rest.
    let a = adjust(
        &p,
        &inp,
        &[
            job("b1", "build03"),
            job("pinned", "build02"),
            job("e1", "build01"),
        ],
        &BTreeSet::new(),
        now(),
    );
    assert_eq!(at(&a, "e1"), "build01");
    assert_eq!(at(&a, "b1"), "build01");
    assert_eq!(a.active_overrides, 1);
    assert_eq!(
        a.skipped,
        [
            (
                "b1".to_string(),
                "build03 is not eligible for job b1 (eligible: build01, build02; default)".to_string()
            ),
            (
                "pinned".to_string(),
                "job pinned is pinned to build01 (cluster: written): an override cannot move a pinned unit".to_string()
            ),
        ]
    );
}

#[test]
fn the_result_is_deterministic() {
    let (inp, p) = fixture();
    let overrides = vec![
        job("b1", "build02"),
        drain("dr", "build03"),
        ov(
            "ov-f",
            OverrideTarget::File("f/c.yaml".into()),
            Some("build01"),
        ),
        job("b1", "build01"), // a duplicated id
    ];
    let unhealthy = set(&["build02"]);
    let first = adjust(&p, &inp, &overrides, &unhealthy, now());
    assert_eq!(
        first.skipped,
        [(
            "b1".to_string(),
            "another override with this id comes first".to_string()
        )]
    );
    let mut shuffled_input = inp.clone();
    shuffled_input.units.reverse();
    shuffled_input.clusters.reverse();
    for i in 0..overrides.len() {
        let mut o = overrides.clone();
        o.rotate_left(i);
        if i % 2 == 1 {
            o.reverse();
        }
        assert_eq!(adjust(&p, &inp, &o, &unhealthy, now()), first);
        assert_eq!(adjust(&p, &shuffled_input, &o, &unhealthy, now()), first);
    }
}

#[test]
fn overrides_are_json() {
    let o = ov(
        "ov-3",
        OverrideTarget::Job("pull-ci-x".into()),
        Some("build01"),
    );
    let v = serde_json::to_value(&o).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "id": "ov-3",
            "target": {"job": "pull-ci-x"},
            "cluster": "build01",
            "created_at": "2026-12-01T23:50:00Z",
            "expires_at": "2026-12-02T02:00:00Z",
            "reason": "capacity test",
            "actor": "alice",
        })
    );
    assert_eq!(serde_json::from_value::<Override>(v).unwrap(), o);
    let d = drain("dr", "build02");
    let v = serde_json::to_value(&d).unwrap();
    assert_eq!(v["target"], serde_json::json!({"drain": "build02"}));
    assert!(v.get("cluster").is_none());
    assert_eq!(serde_json::from_value::<Override>(v).unwrap(), d);
}

/// 60,000 jobs in 20,000 units over 11 clusters: no scan of jobs × units.
#[test]
fn fast_at_openshift_scale() {
    let names: Vec<String> = (1..=11).map(|i| format!("build{i:02}")).collect();
    let mut seed = 12345u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let units: Vec<UnitSpec> = (0..20_000)
        .map(|i| {
            let d = 1.0 + (rnd() % 1000) as f64 / 10.0;
            let elig: Vec<&str> = match rnd() % 10 {
                0..=1 => names[8..].iter().map(String::as_str).collect(),
                2..=6 => names[..8].iter().map(String::as_str).collect(),
                _ => names.iter().map(String::as_str).collect(),
            };
            let prev = elig[(rnd() % elig.len() as u64) as usize].to_string();
            let jobs: Vec<String> = (0..3).map(|j| format!("job-{i:05}-{j}")).collect();
            let jobs: Vec<&str> = jobs.iter().map(String::as_str).collect();
            unit(&format!("unit-{i:05}"), &jobs, d, &elig, &prev)
        })
        .collect();
    let inp = input(names.iter().map(|n| cluster(n)).collect(), units);
    let p = plan(&inp, 0);
    assert_eq!(p.assignments.len(), 60_000);
    let overrides = vec![
        job("job-00001-0", "build09"),
        drain("dr", "build05"),
        ov(
            "ov-f",
            OverrideTarget::File("unit-00002".into()),
            Some("build01"),
        ),
    ];
    let unhealthy = set(&["build02", "build10"]);
    let t0 = std::time::Instant::now();
    let a = adjust(&p, &inp, &overrides, &unhealthy, now());
    let el = t0.elapsed();
    println!(
        "adjust at 60,000 jobs: {el:?}; overlay {} moves, overrides {} moves",
        a.overlay.len(),
        a.overridden.len()
    );
    assert!(el < std::time::Duration::from_secs(10), "{el:?}");
    // Every relocatable unit left on an unhealthy or drained cluster has
    // nowhere else to go.
    for u in &inp.units {
        let c = &a.plan.assignments[&u.jobs[0]].cluster;
        if unhealthy.contains(c) || c == "build05" {
            assert!(
                a.plan.assignments[&u.jobs[0]].reason.contains("stays on"),
                "{}",
                u.id
            );
        }
    }
    assert!(!a.overlay.is_empty() && a.overridden.len() > 2);
    check_loads(&inp, &p, &a);
}
