//! Demand: OpenShift's `job_volume.json` parsed (plain or gzip), bad values
//! refused with the job named, and jobs without data given the median of
//! their type, or 1.

use std::collections::BTreeMap;
use std::io::Write;

use bosun_config::types::JobType;
use bosun_dispatch::demand::{fill, unit_demand, Demand, DemandError, NO_DATA_DEMAND};
use bosun_dispatch::jobs::{JobFacts, UnitSeed};

fn job(name: &str, ty: JobType) -> JobFacts {
    JobFacts {
        name: name.into(),
        ty,
        file: "f.yaml".into(),
        repo: None,
        branches: vec![],
        skip_branches: vec![],
        cluster: "default".into(),
        cluster_written: false,
        labels: BTreeMap::new(),
        agent: "kubernetes".into(),
        in_repo: false,
        cluster_type: None,
    }
}

#[test]
fn parses_job_volume_json() {
    let d = Demand::from_json(br#"{"a": 9, "b": 0, "c": 2.5}"#).unwrap();
    assert_eq!(
        d.0,
        BTreeMap::from([("a".into(), 9.0), ("b".into(), 0.0), ("c".into(), 2.5)])
    );
    assert_eq!(d.get("a"), Some(9.0));
    assert_eq!(d.get("zzz"), None);
    assert_eq!(Demand::from_json(b"{}").unwrap(), Demand::default());
}

#[test]
fn parses_gzip() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(br#"{"a": 3}"#).unwrap();
    let bytes = gz.finish().unwrap();
    assert_eq!(Demand::from_json(&bytes).unwrap().get("a"), Some(3.0));
    let err = Demand::from_json(&[0x1f, 0x8b, 0, 1]).unwrap_err();
    assert!(matches!(err, DemandError::Gzip(_)), "{err}");
}

#[test]
fn refuses_bad_values_naming_the_job() {
    let err = Demand::from_json(br#"{"ok": 1, "neg": -2}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"demand file: job "neg": demand must be a non-negative finite number, found -2"#
    );
    let err = Demand::from_json(br#"{"s": "12"}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"demand file: job "s": "12" is not a number"#
    );
    let err = Demand::from_json(br#"{"n": null}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"demand file: job "n": null is not a number"#
    );
    let err = Demand::from_json(br#"[1, 2]"#).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("demand file is not a JSON object of job names to numbers: "),
        "{err}"
    );
    // 1e999 overflows to infinity in some parsers; serde_json refuses it.
    assert!(Demand::from_json(br#"{"big": 1e999}"#).is_err());
}

#[test]
fn from_map_drops_what_is_not_demand() {
    let d = Demand::from_map([
        ("a".to_string(), 2.0),
        ("nan".to_string(), f64::NAN),
        ("neg".to_string(), -1.0),
        ("inf".to_string(), f64::INFINITY),
    ]);
    assert_eq!(d.0, BTreeMap::from([("a".into(), 2.0)]));
}

#[test]
fn jobs_without_data_get_the_median_of_their_type() {
    let facts = vec![
        job("p1", JobType::Periodic),
        job("p2", JobType::Periodic),
        job("p3", JobType::Periodic),
        job("p-new", JobType::Periodic),
        job("pre1", JobType::Presubmit),
        job("pre2", JobType::Presubmit),
        job("pre-new", JobType::Presubmit),
        job("post-new", JobType::Postsubmit),
    ];
    let d =
        Demand::from_json(br#"{"p1": 1, "p2": 10, "p3": 4, "pre1": 2, "pre2": 5, "gone": 100}"#)
            .unwrap();
    let per_job = fill(&d, &facts);
    assert_eq!(per_job["p1"], 1.0);
    assert_eq!(per_job["p-new"], 4.0, "median of 1, 4, 10");
    assert_eq!(per_job["pre-new"], 3.5, "median of 2 and 5");
    assert_eq!(
        per_job["post-new"], NO_DATA_DEMAND,
        "no postsubmit has data"
    );
    // Only configured jobs are listed.
    assert!(!per_job.contains_key("gone"));
    assert_eq!(per_job.len(), facts.len());
}

#[test]
fn a_name_of_several_types_counts_once() {
    let facts = vec![
        job("shared", JobType::Periodic),
        job("shared", JobType::Presubmit),
        job("p", JobType::Periodic),
        job("pre", JobType::Presubmit),
        job("both-new", JobType::Periodic),
        job("both-new", JobType::Presubmit),
    ];
    let d = Demand::from_json(br#"{"shared": 6, "p": 2, "pre": 20}"#).unwrap();
    let per_job = fill(&d, &facts);
    assert_eq!(per_job["shared"], 6.0);
    // Periodic median: 6 and 2 -> 4; presubmit median: 6 and 20 -> 13; the larger.
    assert_eq!(per_job["both-new"], 13.0);
    let unit = UnitSeed {
        id: "f.yaml".into(),
        jobs: vec![0, 1, 2],
        names: vec!["p".into(), "shared".into()],
    };
    assert_eq!(unit_demand(&unit, &per_job), 8.0, "shared counted once");
}

#[test]
fn no_data_at_all_is_one_per_job() {
    let facts = vec![job("a", JobType::Periodic), job("b", JobType::Presubmit)];
    let per_job = fill(&Demand::default(), &facts);
    assert_eq!(per_job.values().copied().collect::<Vec<_>>(), [1.0, 1.0]);
}

/// The real OpenShift file parses, and every value is a whole number.
#[test]
fn openshift_job_volume_parses() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/openshift/job_volume.json");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: the OpenShift corpus is not beside the project (../shared/corpus/openshift): this test reads it",
            path.display()
        )
    });
    let d = Demand::from_json(&bytes).unwrap();
    assert!(d.0.len() > 1000, "{}", d.0.len());
    assert!(d.0.values().all(|v| v.fract() == 0.0 && *v >= 0.0));
}
