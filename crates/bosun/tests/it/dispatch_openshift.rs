//! OpenShift's files drop-in, through the whole pipeline: a job-config tree
//! planned by `bosun dispatch plan --openshift-config --openshift-clusters`.
//! Every job OpenShift's rules pin gets OpenShift's cluster; every job they
//! give candidates gets one of the candidates; relocatable jobs stay in the
//! build farm, and a job file's written `cluster:` is its previous
//! assignment (day one moves nothing that is balanced).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use bosun_dispatch::openshift::{decide, target_cluster, OsClusters, OsConfig, OsDecision, OsJob};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bosun-dispatch/tests/fixtures/openshift")
}

/// A job of the tree: its file (relative to the job-config directory), its
/// name, its labels and written cluster.
struct Job {
    file: &'static str,
    name: &'static str,
    labels: &'static [(&'static str, &'static str)],
    cluster: Option<&'static str>,
}

const JOBS: &[Job] = &[
    // Rule 2: a job written onto a manual cluster stays there.
    Job {
        file: "openshift/hive/openshift-hive-main-periodics.yaml",
        name: "periodic-ci-openshift-hive-main-manual",
        labels: &[],
        cluster: Some("hive-manual"),
    },
    // Rule 3: vsphere jobs go to vsphere02.
    Job {
        file: "openshift/installer/openshift-installer-main-presubmits.yaml",
        name: "pull-ci-openshift-installer-main-e2e-vsphere",
        labels: &[],
        cluster: Some("build01"),
    },
    // Rule 4: the ssh bastion.
    Job {
        file: "openshift/origin/openshift-origin-main-periodics.yaml",
        name: "periodic-ci-openshift-origin-main-bastion",
        labels: &[("dptp.openshift.io/ssh-bastion", "true")],
        cluster: Some("build01"),
    },
    // Rule 5: the cluster label is a hard pin.
    Job {
        file: "openshift/console/openshift-console-main-presubmits.yaml",
        name: "pull-ci-openshift-console-main-pinned",
        labels: &[("ci-operator.openshift.io/cluster", "build06")],
        cluster: Some("build03"),
    },
    // Rule 6: capabilities (arm64: several candidates).
    Job {
        file: "openshift/console/openshift-console-main-presubmits.yaml",
        name: "pull-ci-openshift-console-main-arm64",
        labels: &[("capability/arm64", "arm64")],
        cluster: Some("build03"),
    },
    // Rule 7: kvm.
    Job {
        file: "openshift/kubevirt/openshift-kubevirt-main-presubmits.yaml",
        name: "pull-ci-openshift-kubevirt-main-e2e",
        labels: &[("devices.kubevirt.io/kvm", "true")],
        cluster: Some("build02"),
    },
    // Rule 8: an e2e job on its cloud's build farm.
    Job {
        file: "openshift/origin/openshift-origin-main-periodics.yaml",
        name: "periodic-ci-openshift-origin-main-e2e-gcp",
        labels: &[("ci-operator.openshift.io/cloud", "gcp")],
        cluster: Some("build02"),
    },
    // Rule 9: no builds.
    Job {
        file: "openshift/origin/openshift-origin-main-periodics.yaml",
        name: "periodic-ci-openshift-origin-main-nobuilds",
        labels: &[("ci.openshift.io/no-builds", "true")],
        cluster: Some("build06"),
    },
    // Rule 10: a group's job name.
    Job {
        file: "openshift/config/openshift-config-main-periodics.yaml",
        name: "periodic-app-ci-config-updater",
        labels: &[],
        cluster: Some("app.ci"),
    },
    // Rule 11: a group's path.
    Job {
        file: "infra/infra-periodics.yaml",
        name: "periodic-image-mirroring-openshift",
        labels: &[],
        cluster: Some("app.ci"),
    },
    // Rule 12: the previous dispatch's file list.
    Job {
        file: "openshift/installer/openshift-installer-main-presubmits.yaml",
        name: "pull-ci-openshift-installer-main-unit",
        labels: &[],
        cluster: Some("build01"),
    },
    // Rule 13: nothing matches: relocatable, previously on its written cluster.
    Job {
        file: "acme/widget/acme-widget-main-presubmits.yaml",
        name: "pull-ci-acme-widget-main-unit",
        labels: &[],
        cluster: Some("build09"),
    },
];

/// Writes the job-config tree of `jobs` (one file per job file, Prow's
/// format) below `DIR/jobs`, and bosun's configuration naming `clusters`.
fn write_tree(dir: &Path, jobs: &[Job], clusters: &[&str]) {
    let mut files: BTreeMap<&str, String> = BTreeMap::new();
    for j in jobs {
        let labels: String = j
            .labels
            .iter()
            .map(|(k, v)| format!("    {k}: \"{v}\"\n"))
            .collect();
        let labels = if labels.is_empty() {
            String::new()
        } else {
            format!("  labels:\n{labels}")
        };
        let cluster = j
            .cluster
            .map(|c| format!("  cluster: {c}\n"))
            .unwrap_or_default();
        files.entry(j.file).or_insert_with(|| "periodics:\n".into()).push_str(&format!(
            "- name: {}\n  interval: 1h\n{cluster}{labels}  spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n",
            j.name
        ));
    }
    for (file, text) in &files {
        let path = dir.join("jobs").join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let config: String = std::iter::once("build_clusters:\n".to_string())
        .chain(clusters.iter().map(|c| format!("  {c}: {{kind: local}}\n")))
        .collect();
    std::fs::write(dir.join("config.yaml"), config).unwrap();
}

/// `bosun dispatch plan --format json` of the tree in `dir` under the
/// fixture's `_config.yaml` and `_clusters.yaml`.
fn plan_json(dir: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["dispatch", "plan", "--format", "json", "--config"])
        .arg(dir.join("config.yaml"))
        .arg("--job-config")
        .arg(dir.join("jobs"))
        .arg("--openshift-config")
        .arg(fixtures().join("_config.yaml"))
        .arg("--openshift-clusters")
        .arg(fixtures().join("_clusters.yaml"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn openshifts_rules_decide_through_bosun_dispatch_plan() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    // bosun's own configuration names the clusters the jobs write.
    let clusters = [
        "app.ci",
        "hive-manual",
        "vsphere02",
        "build01",
        "build02",
        "build03",
        "build04",
        "build06",
        "build09",
    ];
    write_tree(dir, JOBS, &clusters);
    let plan = plan_json(dir);
    let assigned = |job: &str| plan["assignments"][job].as_str().map(String::from);

    // OpenShift's own decision for each job, as its rules give it.
    let read = |name: &str| std::fs::read(fixtures().join(name)).unwrap();
    let os_config = OsConfig::parse("_config.yaml", &read("_config.yaml")).unwrap();
    let os_clusters = OsClusters::parse("_clusters.yaml", &read("_clusters.yaml")).unwrap();
    let mut rules_seen = std::collections::BTreeSet::new();
    for j in JOBS {
        let mut job = OsJob::new(j.name, j.file);
        job.labels = j
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        job.written_cluster = j.cluster.map(String::from);
        let decision = decide(&job, &os_config, &os_clusters);
        rules_seen.extend(decision.rule());
        let got = assigned(j.name);
        match &decision {
            OsDecision::Fixed { cluster, rule } => {
                assert_eq!(
                    got.as_deref(),
                    Some(cluster.as_str()),
                    "{}: rule {rule}",
                    j.name
                )
            }
            OsDecision::Candidates { clusters, rule, .. } => {
                let got = got.unwrap_or_else(|| panic!("{}: not placed", j.name));
                assert!(
                    clusters.contains(&got),
                    "{}: rule {rule}: {got} not in {clusters:?}",
                    j.name
                )
            }
            OsDecision::Relocatable { rule, previous, .. } => {
                // Day one: a balanced unit keeps its previous cluster while
                // the plan is within its hysteresis and budget, and it is in
                // the build farm.
                let got = got.unwrap_or_else(|| panic!("{}: not placed", j.name));
                let farm: Vec<&String> = os_config
                    .build_farm
                    .values()
                    .flat_map(|c| c.keys())
                    .collect();
                assert!(
                    farm.contains(&&got) || Some(&got) == previous.as_ref(),
                    "{}: rule {rule}: {got}",
                    j.name
                );
            }
            other => panic!("{}: {other:?}", j.name),
        }
    }
    // Every rule but 1 (non-kubernetes jobs are not dispatched) was exercised.
    assert_eq!(
        rules_seen.into_iter().collect::<Vec<_>>(),
        (2..=13).collect::<Vec<u8>>(),
        "{plan}"
    );
}

/// A pin onto a cluster `_clusters.yaml` blocks (build05, and build12 by its
/// negative capacity) goes to `_config.yaml`'s `default` (build03), as
/// OpenShift's `target_cluster` sends it, and the explanation says so; a
/// `periodic-buildNN-upgrade` job keeps its blocked cluster.
#[test]
fn a_pin_onto_a_blocked_cluster_goes_to_the_default_through_bosun_dispatch_plan() {
    const FILE: &str = "openshift/ops/openshift-ops-main-periodics.yaml";
    const BLOCKED: &[Job] = &[
        // Rule 5 onto build05.
        Job {
            file: FILE,
            name: "periodic-ci-openshift-ops-main-on-build05",
            labels: &[("ci-operator.openshift.io/cluster", "build05")],
            cluster: Some("build05"),
        },
        // Rule 10 (groups.build05.jobs) onto build05.
        Job {
            file: FILE,
            name: "periodic-build05-upgrade-extra",
            labels: &[],
            cluster: Some("build05"),
        },
        // Rule 10 onto build05, and rule 5 onto build12: the exception.
        Job {
            file: FILE,
            name: "periodic-build05-upgrade",
            labels: &[],
            cluster: Some("build05"),
        },
        Job {
            file: FILE,
            name: "periodic-build12-upgrade",
            labels: &[("ci-operator.openshift.io/cluster", "build12")],
            cluster: Some("build12"),
        },
    ];
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    write_tree(dir, BLOCKED, &["build01", "build03", "build05", "build12"]);
    let plan = plan_json(dir);
    assert_eq!(plan["unplaced"], serde_json::json!([]), "{plan}");

    let read = |name: &str| std::fs::read(fixtures().join(name)).unwrap();
    let os_config = OsConfig::parse("_config.yaml", &read("_config.yaml")).unwrap();
    let os_clusters = OsClusters::parse("_clusters.yaml", &read("_clusters.yaml")).unwrap();
    let blocked = os_clusters.blocked();
    let expected = [
        ("periodic-ci-openshift-ops-main-on-build05", "build03"),
        ("periodic-build05-upgrade-extra", "build03"),
        ("periodic-build05-upgrade", "build05"),
        ("periodic-build12-upgrade", "build12"),
    ];
    for (j, (name, cluster)) in BLOCKED.iter().zip(expected) {
        assert_eq!(j.name, name);
        // OpenShift's target for the job.
        let mut job = OsJob::new(j.name, j.file);
        job.labels = j
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let decision = decide(&job, &os_config, &os_clusters);
        let (determined, relocatable) = decision.openshift_pick().unwrap();
        assert!(blocked.contains(determined), "{name}: {decision:?}");
        let target = target_cluster(
            name,
            "",
            determined,
            &os_config.default,
            relocatable,
            &blocked,
        );
        assert_eq!(target, cluster, "{name}");
        // bosun's plan gives it, and says why.
        assert_eq!(plan["assignments"][name], cluster, "{name}: {plan}");
        let rule = plan["explanations"][name]["rule"].as_str().unwrap();
        let why = if cluster == determined {
            format!("pinned to {determined}, which is blocked: kept there")
        } else {
            format!(
                "pinned to {determined}, which is blocked: sent to _config.yaml's default build03"
            )
        };
        assert!(rule.contains(&why), "{name}: {rule}");
    }
}
