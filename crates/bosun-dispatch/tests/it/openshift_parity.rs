//! Parity with OpenShift's prowjob-dispatcher rules (`DetermineClusterForJob`,
//! `DetermineTargetCluster`, the ephemeral-cluster round robin) over the
//! fixture tree `tests/fixtures/openshift/`. Every case names the rule of the
//! reference's §4 table it exercises ("rule N"). Where OpenShift's rule leaves
//! one candidate, bosun must give the same cluster; where it picks
//! `list[len(basename) % n]`, the expected pick is written out by hand and
//! bosun's candidate set must contain it.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bosun_dispatch::openshift::*;

const DIR: &str = "/var/repo/release/ci-operator/jobs/org/repo/";
// Basenames of known length: 17 (`% 2 == 1`, `% 3 == 2`), 18 (0, 0), 19 (1, 1).
const B17: &str = "a-presubmits.yaml";
const B18: &str = "aa-presubmits.yaml";
const B19: &str = "aaa-presubmits.yaml";

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/openshift")
        .join(name)
}

fn fixture_bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixture_path(name)).unwrap()
}

fn fixture() -> (OsConfig, OsClusters) {
    let config = OsConfig::parse("_config.yaml", &fixture_bytes("_config.yaml")).unwrap();
    let clusters = OsClusters::parse("_clusters.yaml", &fixture_bytes("_clusters.yaml")).unwrap();
    (config, clusters)
}

fn job(name: &str, file: &str) -> OsJob {
    OsJob::new(name, format!("{DIR}{file}"))
}

fn decide_fixture(job: &OsJob) -> OsDecision {
    let (config, clusters) = fixture();
    decide(job, &config, &clusters)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

#[track_caller]
fn assert_pinned(d: &OsDecision, cluster: &str, rule: u8) {
    assert_eq!(
        d,
        &OsDecision::Fixed {
            cluster: cluster.to_string(),
            rule
        }
    );
    assert_eq!(d.openshift_pick(), Some((cluster, false)));
}

/// `openshift_order` is the list OpenShift indexes; `expected` is its pick,
/// written out by hand.
#[track_caller]
fn assert_candidates(
    d: &OsDecision,
    job: &OsJob,
    rule: u8,
    openshift_order: &[&str],
    expected: &str,
) {
    let n = openshift_order.len();
    assert_eq!(
        openshift_order[job.basename.len() % n],
        expected,
        "hand-computed pick"
    );
    let sorted: BTreeSet<&str> = openshift_order.iter().copied().collect();
    match d {
        OsDecision::Candidates {
            clusters,
            rule: r,
            openshift,
        } => {
            assert_eq!(*r, rule, "{d:?}");
            assert_eq!(openshift, expected, "OpenShift's pick");
            assert_eq!(
                clusters.iter().map(String::as_str).collect::<Vec<_>>(),
                sorted.into_iter().collect::<Vec<_>>(),
                "the same candidates, sorted"
            );
            assert!(clusters.iter().any(|c| c == expected));
        }
        other => panic!("expected candidates of rule {rule}, got {other:?}"),
    }
    assert_eq!(d.openshift_pick(), Some((expected, false)));
}

#[track_caller]
fn assert_relocatable(d: &OsDecision, rule: u8, previous: Option<&str>, openshift: &str) {
    assert_eq!(
        d,
        &OsDecision::Relocatable {
            previous: previous.map(str::to_string),
            rule,
            default: "build03".to_string(),
        }
    );
    assert_eq!(d.openshift_pick(), Some((openshift, true)));
}

// ---------------------------------------------------------------------------
// parsing

#[test]
fn fixture_config_parses() {
    let (config, _) = fixture();
    assert_eq!(config.default, "build03");
    assert!(config.determine_e2e_by_job);
    assert_eq!(config.cloud_mapping["equinix-ocp-metal"], "aws");
    assert_eq!(config.ssh_bastion.as_deref(), Some("build01"));
    assert_eq!(config.kvm, ["build04", "build02"], "file order kept");
    assert_eq!(config.no_builds, ["build06", "build09", "build01"]);
    assert_eq!(config.manual_clusters, ["hive-manual"]);
    assert_eq!(
        config.build_farm_cloud("aws"),
        ["build01", "build03", "build05"]
    );
    assert_eq!(config.build_farm_cloud("gcp"), ["build02", "build04"]);
    assert!(config.build_farm_cloud("azure4").is_empty());
    assert_eq!(config.is_in_build_farm("build04"), Some("gcp"));
    assert_eq!(config.is_in_build_farm("app.ci"), None);
    assert_eq!(
        config.group_of_job("periodic-build01-upgrade"),
        Some("build01")
    );
    assert!(config.matching_path_regex("/x/openshift/release/infra-periodics.yaml"));
    assert!(!config.matching_path_regex("/x/openshift-release-infra-periodics.yaml"));
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}

#[test]
fn inventory_capacity_rule_and_blocked() {
    let (_, clusters) = fixture();
    let c = |n: &str| clusters.get(n).unwrap().clone();
    assert_eq!(c("build01").capacity, 100, "absent capacity reads as 100");
    assert_eq!(c("build06").capacity, 100, "capacity 0 reads as 100");
    assert_eq!(c("build09").capacity, 100, "capacity over 100 reads as 100");
    assert_eq!(c("build04").capacity, 60);
    assert!(c("build12").blocked, "negative capacity blocks");
    assert!(c("build05").blocked);
    assert_eq!(c("build05").capacity, 20);
    assert!(!c("build03").blocked);
    assert_eq!(
        c("build06").capabilities,
        ["arm64", "intranet"],
        "sorted, deduplicated"
    );
    assert_eq!(c("build02").provider, "gcp");
    assert_eq!(
        clusters.blocked(),
        ["build05", "build12"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    let specs = clusters.to_cluster_specs();
    assert_eq!(specs.len(), 8);
    let b04 = specs.iter().find(|s| s.name == "build04").unwrap();
    assert_eq!(b04.provider.as_deref(), Some("gcp"));
    assert_eq!(b04.capacity, 60);
    assert!(b04.capabilities.contains("rce"));
    assert!(specs.iter().find(|s| s.name == "build12").unwrap().blocked);
}

#[test]
fn real_openshift_clusters_yaml() {
    let bytes = std::fs::read("/work/shared/corpus/openshift/_clusters.yaml").unwrap();
    let clusters = OsClusters::parse("_clusters.yaml", &bytes).unwrap();
    assert_eq!(clusters.clusters.len(), 11);
    assert_eq!(
        clusters.blocked(),
        ["build05", "build11"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    assert_eq!(clusters.schedulable().count(), 9);
    assert_eq!(clusters.get("build05").unwrap().capacity, 20);
    assert_eq!(clusters.get("build03").unwrap().capacity, 100);
    assert_eq!(
        clusters
            .clusters
            .values()
            .filter(|c| c.provider == "aws")
            .count(),
        8
    );
    assert_eq!(
        clusters
            .clusters
            .values()
            .filter(|c| c.provider == "gcp")
            .count(),
        3
    );
    assert_eq!(
        clusters.get("build01").unwrap().capabilities,
        [
            "arm64",
            "build-tmpfs",
            "gpu",
            "highperf",
            "rce",
            "sshd-bastion"
        ]
    );
    assert!(clusters.warnings.is_empty());
    let specs: Vec<bosun_dispatch::model::ClusterSpec> = (&clusters).into();
    assert_eq!(specs.len(), 11);
}

#[test]
fn gzip_input_reads_the_same() {
    let plain = fixture();
    let config = OsConfig::parse("_config.yaml.gz", &gzip(&fixture_bytes("_config.yaml"))).unwrap();
    let clusters =
        OsClusters::parse("_clusters.yaml.gz", &gzip(&fixture_bytes("_clusters.yaml"))).unwrap();
    assert_eq!(clusters, plain.1);
    assert_eq!(config.default, plain.0.default);
    assert_eq!(config.build_farm, plain.0.build_farm);
    assert_eq!(config.kvm, plain.0.kvm);
    let j = job("pull-ci-org-repo-main-unit", B17);
    assert_eq!(
        decide(&j, &config, &clusters),
        decide(&j, &plain.0, &plain.1)
    );
}

#[test]
fn production_sized_build_farm() {
    // OpenShift's real _config.yaml lists ~20k basenames (~1.2 MB).
    let mut src = String::from("default: build03\ndetermineE2EByJob: true\nbuildFarm:\n  aws:\n");
    for c in 0..6 {
        src.push_str(&format!("    build{c:02}:\n      filenames:\n"));
        for i in 0..3400 {
            src.push_str(&format!(
                "      - org{i}-repo{c}-release-4.{i}-presubmits.yaml\n"
            ));
        }
    }
    let started = std::time::Instant::now();
    let config = OsConfig::parse("_config.yaml", src.as_bytes()).unwrap();
    let clusters = fixture().1;
    let j = job("pull-ci-x", "org77-repo4-release-4.77-presubmits.yaml");
    assert_relocatable(
        &decide(&j, &config, &clusters),
        12,
        Some("build04"),
        "build04",
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn config_errors_name_the_file_and_the_problem() {
    let err = |src: &[u8]| {
        OsConfig::parse("core/_config.yaml", src)
            .unwrap_err()
            .to_string()
    };

    let e = err(b"kvm: [build02]\n");
    assert_eq!(
        e,
        "core/_config.yaml: the default cluster must be set in the config"
    );
    let e = err(b"default: ''\n");
    assert!(
        e.starts_with("core/_config.yaml:1:10: the default cluster must be set"),
        "{e}"
    );
    assert!(err(b"").contains("the default cluster must be set in the config"));

    // One duplicated job name is enough (OpenShift's Validate needs two).
    let e = err(b"default: b\ngroups:\n  a: {jobs: [x]}\n  c: {jobs: [x, y]}\n");
    assert!(e.starts_with("core/_config.yaml:3:3: "), "{e}");
    assert!(
        e.ends_with("there are job names occurring more than once: [x]"),
        "{e}"
    );

    let e = err(b"default: b\ngroups:\n  a:\n    paths: ['ok', '([']\n");
    assert!(
        e.starts_with("core/_config.yaml:4:19: failed to compile regex groups[a].paths[1]"),
        "{e}"
    );

    let e = err(b"default: b\nkvm: {a: b}\n");
    assert!(e.starts_with("core/_config.yaml:2:6: "), "{e}");
    let e = err(b"default: b\ndetermineE2EByJob: maybe\n");
    assert!(e.starts_with("core/_config.yaml:2:20: "), "{e}");
    let e = err(b"default: [b\n");
    assert!(e.starts_with("core/_config.yaml:"), "{e}");

    let e = err(b"default: \xff\n");
    assert!(e.starts_with("core/_config.yaml: not UTF-8"), "{e}");
    let e = err(&[0x1f, 0x8b, 0, 1, 2, 3]);
    assert!(
        e.starts_with("core/_config.yaml: cannot decompress gzip data"),
        "{e}"
    );

    // Keys OpenShift ignores are warnings, not errors.
    let c = OsConfig::parse("c.yaml", b"default: b\nsurprise: 1\n").unwrap();
    assert_eq!(c.warnings.len(), 1);
    assert!(
        c.warnings[0].starts_with("c.yaml:2:1: unknown key \"surprise\""),
        "{:?}",
        c.warnings
    );
}

#[test]
fn clusters_errors_name_the_file_and_the_problem() {
    let err = |src: &[u8]| {
        OsClusters::parse("inv/_clusters.yaml", src)
            .unwrap_err()
            .to_string()
    };
    let e = err(b"aws: [{name: a}]\nazure4: [{name: b}]\n");
    assert!(
        e.starts_with("inv/_clusters.yaml:2:1: unsupported cloud provider \"azure4\""),
        "{e}"
    );
    let e = err(b"aws:\n  - name: ''\n");
    assert!(
        e.starts_with("inv/_clusters.yaml:2:5: a cluster of provider aws has an empty name"),
        "{e}"
    );
    let e = err(b"aws:\n  - capacity: 3\n");
    assert!(e.contains("empty name"), "{e}");
    let e = err(b"aws: [{name: a}]\ngcp: [{name: a}]\n");
    assert!(
        e.contains("cluster a is listed more than once (under aws and gcp)"),
        "{e}"
    );
    let e = err(b"aws: [{name: a, capacity: lots}]\n");
    assert!(e.starts_with("inv/_clusters.yaml:1:27: "), "{e}");
    let e = err(b"- a\n");
    assert!(
        e.contains("expected a mapping of provider to clusters"),
        "{e}"
    );
    assert!(OsClusters::parse("x", b"").unwrap().clusters.is_empty());
}

// ---------------------------------------------------------------------------
// rule 1

#[test]
fn rule_1_non_kubernetes_agent_is_not_dispatched() {
    let mut j = job("periodic-jenkins-job", B17).label(CLUSTER_LABEL, "build01");
    j.agent = "jenkins".into();
    assert_eq!(decide_fixture(&j), OsDecision::NotDispatched);
    assert_eq!(decide_fixture(&j).openshift_pick(), None);
    j.agent = "kubernetes".into();
    assert_pinned(&decide_fixture(&j), "build01", 5);
    j.agent = String::new();
    assert_pinned(&decide_fixture(&j), "build01", 5);
}

// ---------------------------------------------------------------------------
// rule 2

#[test]
fn rule_2_written_manual_cluster_stays() {
    // Rule 2 comes before the vsphere rule and the cluster label.
    let mut j = job("periodic-vsphere-manual", B17).label(CLUSTER_LABEL, "build01");
    j.written_cluster = Some("hive-manual".into());
    assert_pinned(&decide_fixture(&j), "hive-manual", 2);
    // A written build-farm cluster is no pin (rule 13 keeps it as previous).
    let mut j = job("pull-ci-org-repo-main-unit", B17);
    j.written_cluster = Some("build01".into());
    assert_relocatable(&decide_fixture(&j), 13, Some("build01"), "build03");
}

// ---------------------------------------------------------------------------
// rule 3

#[test]
fn rule_3_vsphere_jobs_go_to_vsphere02() {
    let j = job("periodic-ci-openshift-vsphere-e2e", B17)
        .label(SSH_BASTION_LABEL, "true")
        .label(CLUSTER_LABEL, "build01");
    assert_pinned(&decide_fixture(&j), "vsphere02", 3);
    // Not an applyconfig job: that falls through (here to rule 13).
    let mut j = job("periodic-ci-openshift-vsphere-applyconfig", B17);
    j.applyconfig = OsJob::applyconfig_images(&["registry.ci.openshift.org/ci/applyconfig:latest"]);
    assert!(j.applyconfig);
    assert!(!OsJob::applyconfig_images(&["applyconfig", "sidecar"]));
    assert_relocatable(&decide_fixture(&j), 13, None, "build03");
    // Not the vsphere-elastic-poc profile: that falls through (here to rule 8).
    let j = job("pull-ci-org-repo-main-e2e-vsphere-elastic", B18)
        .label(CLUSTER_PROFILE_LABEL, "vsphere-elastic-poc")
        .label(CLOUD_LABEL, "aws");
    let d = decide_fixture(&j);
    assert_candidates(&d, &j, 8, &["build01", "build03", "build05"], "build01");
}

// ---------------------------------------------------------------------------
// rule 4

#[test]
fn rule_4_ssh_bastion() {
    let j = job("pull-ci-org-repo-main-e2e-bastion", B17)
        .label(SSH_BASTION_LABEL, "true")
        .label(CLUSTER_LABEL, "build09");
    assert_pinned(&decide_fixture(&j), "build01", 4);
    // Without `sshBastion` the label means nothing: the cluster label decides.
    let clusters = fixture().1;
    let config = OsConfig::parse("c", b"default: build03\n").unwrap();
    assert_pinned(&decide(&j, &config, &clusters), "build09", 5);
    let config = OsConfig::parse("c", b"default: build03\nsshBastion: ''\n").unwrap();
    assert_pinned(&decide(&j, &config, &clusters), "build09", 5);
}

// ---------------------------------------------------------------------------
// rule 5

#[test]
fn rule_5_cluster_label_is_a_hard_pin() {
    // Before capabilities, kvm, the cloud and no-builds; any value, even
    // outside the inventory.
    let j = job("pull-ci-org-repo-main-e2e", B17)
        .label(CLUSTER_LABEL, "build99")
        .label("capability/rce", "rce")
        .label(KVM_LABEL, "")
        .label(CLOUD_LABEL, "aws")
        .label(NO_BUILDS_LABEL, "true");
    assert_pinned(&decide_fixture(&j), "build99", 5);
    let j = job("pull-ci-org-repo-main-e2e", B17).label(CLUSTER_LABEL, "");
    assert!(matches!(decide_fixture(&j), OsDecision::Error(e) if e.contains("empty")));
}

// ---------------------------------------------------------------------------
// rule 6

#[test]
fn rule_6_capabilities_restricted_to_the_jobs_cloud() {
    // aws clusters with arm64, blocked build05 and build12 excluded.
    let order = ["build01", "build06", "build09"];
    for (file, pick) in [(B17, "build09"), (B18, "build01"), (B19, "build06")] {
        let j = job("pull-ci-org-repo-main-e2e-arm", file)
            .label("capability/arm64", "arm64")
            .label(CLOUD_LABEL, "aws");
        assert_candidates(&decide_fixture(&j), &j, 6, &order, pick);
    }
    // cloudMapping applies: equinix-ocp-metal is aws.
    let j = job("pull-ci-org-repo-main-e2e-metal", B17)
        .label("capability/arm64", "arm64")
        .label(CLOUD_LABEL, "equinix-ocp-metal");
    assert_candidates(&decide_fixture(&j), &j, 6, &order, "build09");
    // CLUSTER_TYPE names the cloud when the label is absent.
    let mut j = job("pull-ci-org-repo-main-e2e-arm", B18).label("capability/arm64", "arm64");
    j.cluster_type_env = Some("aws".into());
    assert_candidates(&decide_fixture(&j), &j, 6, &order, "build01");
}

#[test]
fn rule_6_capabilities_without_a_capable_cluster_on_the_cloud() {
    // kvm exists only on gcp: an aws job gets every capable cluster.
    let j = job("pull-ci-org-repo-main-e2e-kvm", B17)
        .label("capability/kvm", "kvm")
        .label(CLOUD_LABEL, "aws");
    assert_candidates(
        &decide_fixture(&j),
        &j,
        6,
        &["build02", "build04"],
        "build04",
    );
    // intranet on gcp: none; aws build03 and build06 (build05 blocked).
    let j = job("pull-ci-org-repo-main-e2e", B18)
        .label("capability/intranet", "intranet")
        .label(CLOUD_LABEL, "gcp");
    assert_candidates(
        &decide_fixture(&j),
        &j,
        6,
        &["build03", "build06"],
        "build03",
    );
}

#[test]
fn rule_6_capabilities_without_a_cloud() {
    let j = job("pull-ci-org-repo-main-images", B17)
        .label("capability/arm64", "arm64")
        .label("capability/gpu", "gpu");
    assert_candidates(
        &decide_fixture(&j),
        &j,
        6,
        &["build01", "build09"],
        "build09",
    );
    // With determineE2EByJob off, the cloud does not restrict.
    let (mut config, clusters) = fixture();
    config.determine_e2e_by_job = false;
    let j = job("pull-ci-org-repo-main-e2e", B18)
        .label("capability/kvm", "kvm")
        .label(CLOUD_LABEL, "gcp");
    let d = decide(&j, &config, &clusters);
    assert_candidates(&d, &j, 6, &["build02", "build04"], "build02");
    let j = job("pull-ci-org-repo-main-e2e", B18)
        .label("capability/arm64", "arm64")
        .label(CLOUD_LABEL, "gcp");
    let d = decide(&j, &config, &clusters);
    assert_candidates(&d, &j, 6, &["build01", "build06", "build09"], "build01");
}

#[test]
fn rule_6_single_capable_cluster_is_a_pin() {
    let j = job("pull-ci-org-repo-main-e2e", B17).label("capability/rce", "rce");
    assert_pinned(&decide_fixture(&j), "build04", 6);
    // Capabilities come before kvm.
    let j = job("pull-ci-org-repo-main-e2e", B17)
        .label("capability/rce", "rce")
        .label(KVM_LABEL, "");
    assert_pinned(&decide_fixture(&j), "build04", 6);
}

#[test]
fn rule_6_error_when_no_cluster_has_the_capabilities() {
    let j = job("pull-ci-org-repo-main-e2e", B17)
        .label("capability/kvm", "kvm")
        .label("capability/arm64", "arm64");
    assert_eq!(
        decide_fixture(&j),
        OsDecision::Error(
            "job pull-ci-org-repo-main-e2e can't be matched with any cluster using provided capabilities: arm64,kvm"
                .into()
        )
    );
    // Blocked clusters do not count: build05 also has arm64 + intranet.
    let j = job("pull-ci-org-repo-main-e2e", B17)
        .label("capability/arm64", "arm64")
        .label("capability/intranet", "intranet");
    assert_pinned(&decide_fixture(&j), "build06", 6);
    // `capability/x: y` with y != x is no requirement (here: rule 13).
    let j = job("pull-ci-org-repo-main-e2e", B17).label("capability/arm64", "yes");
    assert_relocatable(&decide_fixture(&j), 13, None, "build03");
}

// ---------------------------------------------------------------------------
// rule 7

#[test]
fn rule_7_kvm_picks_in_file_order() {
    // kvm: [build04, build02]; OpenShift indexes the file order.
    let j = job("pull-ci-org-repo-main-e2e-kubevirt", B18).label(KVM_LABEL, "");
    assert_candidates(
        &decide_fixture(&j),
        &j,
        7,
        &["build04", "build02"],
        "build04",
    );
    let j = job("pull-ci-org-repo-main-e2e-kubevirt", B17).label(KVM_LABEL, "");
    assert_candidates(
        &decide_fixture(&j),
        &j,
        7,
        &["build04", "build02"],
        "build02",
    );
    // Before the cloud rule.
    let j = job("pull-ci-org-repo-main-e2e-kubevirt", B18)
        .label(KVM_LABEL, "")
        .label(CLOUD_LABEL, "aws");
    assert_candidates(
        &decide_fixture(&j),
        &j,
        7,
        &["build04", "build02"],
        "build04",
    );
    // One kvm cluster: a pin; no kvm clusters: the label means nothing.
    let clusters = fixture().1;
    let config = OsConfig::parse("c", b"default: build03\nkvm: [build02]\n").unwrap();
    assert_pinned(&decide(&j, &config, &clusters), "build02", 7);
    let config = OsConfig::parse("c", b"default: build03\nkvm: []\n").unwrap();
    assert_relocatable(&decide(&j, &config, &clusters), 13, None, "build03");
}

// ---------------------------------------------------------------------------
// rule 8 (determineE2EByJob, cloudMapping)

#[test]
fn rule_8_e2e_cloud_label() {
    let aws = ["build01", "build03", "build05"];
    for (file, pick) in [(B17, "build05"), (B18, "build01"), (B19, "build03")] {
        let j = job("pull-ci-org-repo-main-e2e-aws", file).label(CLOUD_LABEL, "aws");
        let d = decide_fixture(&j);
        assert_candidates(&d, &j, 8, &aws, pick);
    }
    let j = job("pull-ci-org-repo-main-e2e-gcp", B17).label(CLOUD_LABEL, "gcp");
    assert_candidates(
        &decide_fixture(&j),
        &j,
        8,
        &["build02", "build04"],
        "build04",
    );
    // Before no-builds.
    let j = job("pull-ci-org-repo-main-e2e-gcp", B18)
        .label(CLOUD_LABEL, "gcp")
        .label(NO_BUILDS_LABEL, "true");
    assert_candidates(
        &decide_fixture(&j),
        &j,
        8,
        &["build02", "build04"],
        "build02",
    );
}

#[test]
fn rule_8_cloud_mapping() {
    let j = job("pull-ci-org-repo-main-e2e-metal", B18).label(CLOUD_LABEL, "equinix-ocp-metal");
    let d = decide_fixture(&j);
    assert_candidates(&d, &j, 8, &["build01", "build03", "build05"], "build01");
    // An unmapped cloud without a build farm falls through (rule 13).
    let j = job("pull-ci-org-repo-main-e2e-azure", B18).label(CLOUD_LABEL, "azure4");
    assert_relocatable(&decide_fixture(&j), 13, None, "build03");
}

#[test]
fn rule_8_cluster_type_env_without_cloud_label() {
    let mut j = job("pull-ci-org-repo-main-e2e", B17);
    j.cluster_type_env = Some("gcp".into());
    assert_candidates(
        &decide_fixture(&j),
        &j,
        8,
        &["build02", "build04"],
        "build04",
    );
    // An empty label does not count; CLUSTER_TYPE does.
    let mut j = job("pull-ci-org-repo-main-e2e", B18).label(CLOUD_LABEL, "");
    j.cluster_type_env = Some("aws".into());
    assert_candidates(
        &decide_fixture(&j),
        &j,
        8,
        &["build01", "build03", "build05"],
        "build01",
    );
    // The label wins over CLUSTER_TYPE.
    let mut j = job("pull-ci-org-repo-main-e2e", B17).label(CLOUD_LABEL, "gcp");
    j.cluster_type_env = Some("aws".into());
    assert_candidates(
        &decide_fixture(&j),
        &j,
        8,
        &["build02", "build04"],
        "build04",
    );
    // Only aws and gcp count as CLUSTER_TYPE.
    let mut j = job("pull-ci-org-repo-main-e2e", B17);
    j.cluster_type_env = Some("azure4".into());
    assert_relocatable(&decide_fixture(&j), 13, None, "build03");
    // No label and no CLUSTER_TYPE: no cloud.
    let j = job("pull-ci-org-repo-main-e2e", B17);
    assert_relocatable(&decide_fixture(&j), 13, None, "build03");
}

#[test]
fn rule_8_off_without_determine_e2e_by_job() {
    let (mut config, clusters) = fixture();
    config.determine_e2e_by_job = false;
    let mut j = job("pull-ci-org-repo-main-e2e-aws", B17).label(CLOUD_LABEL, "aws");
    j.written_cluster = Some("build09".into());
    assert_relocatable(
        &decide(&j, &config, &clusters),
        13,
        Some("build09"),
        "build03",
    );
}

#[test]
fn rule_8_single_cluster_cloud_is_a_pin() {
    let clusters = fixture().1;
    let config = OsConfig::parse(
        "c",
        b"default: build03\ndetermineE2EByJob: true\nbuildFarm:\n  gcp:\n    build02: {}\n",
    )
    .unwrap();
    let j = job("pull-ci-org-repo-main-e2e-gcp", B17).label(CLOUD_LABEL, "gcp");
    assert_pinned(&decide(&j, &config, &clusters), "build02", 8);
}

// ---------------------------------------------------------------------------
// rule 9

#[test]
fn rule_9_no_builds_picks_in_file_order() {
    let order = ["build06", "build09", "build01"];
    for (file, pick) in [(B17, "build01"), (B18, "build06"), (B19, "build09")] {
        let j = job("pull-ci-org-repo-main-lint", file).label(NO_BUILDS_LABEL, "true");
        assert_candidates(&decide_fixture(&j), &j, 9, &order, pick);
    }
    // Before groups.
    let j = job("periodic-app-ci-config-updater", B18).label(NO_BUILDS_LABEL, "true");
    assert_candidates(&decide_fixture(&j), &j, 9, &order, "build06");
}

// ---------------------------------------------------------------------------
// rules 10 and 11

#[test]
fn rule_10_group_job_names() {
    let j = job("periodic-app-ci-config-updater", B17);
    assert_pinned(&decide_fixture(&j), "app.ci", 10);
    // The name decides even when the file is in a filenames list (one match).
    let j = job(
        "periodic-build01-upgrade",
        "openshift-console-main-presubmits.yaml",
    );
    assert_pinned(&decide_fixture(&j), "build01", 10);
}

#[test]
fn rule_11_group_paths_match_the_full_path() {
    let j = OsJob::new(
        "periodic-infra-mirror",
        "/var/repo/release/ci-operator/jobs/openshift/release/infra-periodics.yaml",
    );
    assert_pinned(&decide_fixture(&j), "app.ci", 11);
    // `[^-]infra-periodics` needs a character other than `-` before it.
    let j = job(
        "periodic-org-repo-infra",
        "openshift-release-infra-periodics.yaml",
    );
    assert_relocatable(&decide_fixture(&j), 13, None, "build03");
    let j = job(
        "branch-ci-openshift-hypershift-main-arm64-images",
        "openshift-hypershift-main-arm64-postsubmits.yaml",
    );
    assert_pinned(&decide_fixture(&j), "arm01", 11);
}

// ---------------------------------------------------------------------------
// rule 12

#[test]
fn rule_12_build_farm_filenames_are_the_previous_assignment() {
    let mut j = job(
        "pull-ci-openshift-installer-main-unit",
        "openshift-installer-main-presubmits.yaml",
    );
    j.written_cluster = Some("build09".into());
    // The filenames list wins over the written `cluster:` as previous.
    assert_relocatable(&decide_fixture(&j), 12, Some("build01"), "build01");
    let j = job(
        "periodic-ci-openshift-release-master-x",
        "openshift-release-master-periodics.yaml",
    );
    assert_relocatable(&decide_fixture(&j), 12, Some("build02"), "build02");
}

#[test]
fn rule_12_error_when_the_path_matches_more_than_once() {
    // Two filenames lists.
    let j = job("pull-ci-dup", "duplicated-file-presubmits.yaml");
    assert_eq!(
        decide_fixture(&j),
        OsDecision::Error(format!(
            "path {DIR}duplicated-file-presubmits.yaml matches more than 1 regex: \
             [duplicated-file-presubmits.yaml duplicated-file-presubmits.yaml]"
        ))
    );
    // A group path and a filenames list, even when a group job name decided.
    let j = job(
        "periodic-app-ci-config-updater",
        "infra-image-mirroring.yaml",
    );
    assert_eq!(
        decide_fixture(&j),
        OsDecision::Error(format!(
            "path {DIR}infra-image-mirroring.yaml matches more than 1 regex: \
             [infra-image-mirroring.yaml infra-image-mirroring\\.yaml$]"
        ))
    );
    assert_eq!(decide_fixture(&j).openshift_pick(), None);
}

// ---------------------------------------------------------------------------
// rule 13

#[test]
fn rule_13_default_with_the_written_cluster_as_previous() {
    let mut j = job("pull-ci-org-repo-main-unit", B17);
    j.written_cluster = Some("build09".into());
    assert_relocatable(&decide_fixture(&j), 13, Some("build09"), "build03");
    j.written_cluster = Some(String::new());
    assert_relocatable(&decide_fixture(&j), 13, None, "build03");
}

// ---------------------------------------------------------------------------
// DetermineTargetCluster: blocked targets, the exception

#[test]
fn blocked_target_falls_back_to_default() {
    let (config, clusters) = fixture();
    let blocked = clusters.blocked();
    // A pin onto a blocked cluster (rule 5).
    let j = job("pull-ci-org-repo-main-e2e", B17).label(CLUSTER_LABEL, "build05");
    let (determined, reloc) = decide(&j, &config, &clusters)
        .openshift_pick()
        .map(|(c, r)| (c.to_string(), r))
        .unwrap();
    assert_eq!((determined.as_str(), reloc), ("build05", false));
    assert_eq!(
        target_cluster(&j.name, "", &determined, &config.default, reloc, &blocked),
        "build03"
    );
    // Rule 8's pick on a blocked build-farm cluster.
    let j = job("pull-ci-org-repo-main-e2e-aws", B17).label(CLOUD_LABEL, "aws");
    let d = decide(&j, &config, &clusters);
    let (determined, reloc) = d.openshift_pick().unwrap();
    assert_eq!(determined, "build05");
    assert_eq!(
        target_cluster(&j.name, "", determined, &config.default, reloc, &blocked),
        "build03"
    );
    // Rule 12's previous cluster is blocked.
    let j = job("pull-ci-blocked", "openshift-blocked-main-presubmits.yaml");
    let d = decide(&j, &config, &clusters);
    assert_relocatable(&d, 12, Some("build05"), "build05");
    assert_eq!(
        target_cluster(&j.name, "build05", "build05", "build03", true, &blocked),
        "build03"
    );
}

#[test]
fn determine_target_cluster_cases() {
    let blocked: BTreeSet<String> = ["build05".to_string()].into();
    let t = |file: &str, det: &str, reloc: bool| {
        determine_target_cluster(file, det, "build03", reloc, &blocked)
    };
    assert_eq!(
        t("", "build06", false),
        "build06",
        "no file cluster: the determined one"
    );
    assert_eq!(
        t("build09", "build06", true),
        "build09",
        "relocatable: the file's cluster"
    );
    assert_eq!(
        t("build09", "build06", false),
        "build06",
        "pinned: the determined one"
    );
    assert_eq!(
        t("build09", "build05", false),
        "build09",
        "pinned on a blocked cluster: the file's"
    );
    assert_eq!(
        t("build05", "build06", true),
        "build03",
        "blocked target: default"
    );
    assert_eq!(
        t("build05", "build05", false),
        "build03",
        "blocked target: default"
    );
}

#[test]
fn periodic_buildnn_upgrade_stays_on_its_blocked_cluster() {
    let (config, clusters) = fixture();
    let blocked = clusters.blocked();
    let j = job(
        "periodic-build05-upgrade",
        "openshift-release-periodics.yaml",
    );
    let d = decide(&j, &config, &clusters);
    assert_pinned(&d, "build05", 10);
    assert_eq!(
        target_cluster(&j.name, "", "build05", &config.default, false, &blocked),
        "build05"
    );
    assert_eq!(
        target_cluster(
            &j.name,
            "build01",
            "build05",
            &config.default,
            false,
            &blocked
        ),
        "build05"
    );
    // The exception is exact: a longer name falls back to default.
    let j = job(
        "periodic-build05-upgrade-extra",
        "openshift-release-periodics.yaml",
    );
    assert_pinned(&decide(&j, &config, &clusters), "build05", 10);
    assert_eq!(
        target_cluster(&j.name, "", "build05", &config.default, false, &blocked),
        "build03"
    );
}

/// What bosun pins a job to (`pin_target`) is OpenShift's target for every
/// pin of the fixture: a blocked pin goes to `default`, the exception keeps
/// it, and the explanation says which.
#[test]
fn a_pin_onto_a_blocked_cluster_is_a_pin_onto_the_default() {
    let (config, clusters) = fixture();
    let blocked = clusters.blocked();
    let cases = [
        // (job, label pin, expected cluster, keeps a blocked pin)
        (
            "pull-ci-org-repo-main-e2e",
            Some("build05"),
            "build03",
            false,
        ),
        (
            "pull-ci-org-repo-main-unit",
            Some("build06"),
            "build06",
            false,
        ),
        ("periodic-build12-upgrade", Some("build12"), "build12", true),
        ("periodic-build05-upgrade", None, "build05", true),
        ("periodic-build05-upgrade-extra", None, "build03", false),
    ];
    for (name, label, expected, keeps) in cases {
        let mut j = job(name, "openshift-release-periodics.yaml");
        if let Some(c) = label {
            j = j.label(CLUSTER_LABEL, c);
        }
        let OsDecision::Fixed { cluster, rule } = decide(&j, &config, &clusters) else {
            panic!("{name}: not pinned");
        };
        let pin = pin_target(name, &cluster, rule, &config.default, &blocked);
        assert_eq!(
            pin.cluster,
            target_cluster(name, "", &cluster, &config.default, false, &blocked),
            "{name}: OpenShift's target"
        );
        assert_eq!((pin.cluster.as_str(), pin.keeps_blocked), (expected, keeps));
        match (blocked.contains(&cluster), keeps) {
            (false, _) => assert_eq!(pin.rule, format!("openshift rule {rule}: pinned")),
            (true, false) => assert_eq!(
                pin.rule,
                format!(
                    "openshift rule {rule}: pinned to {cluster}, which is blocked: \
                     sent to _config.yaml's default build03"
                )
            ),
            (true, true) => assert!(
                pin.rule.starts_with(&format!(
                    "openshift rule {rule}: pinned to {cluster}, which is blocked: kept there"
                )),
                "{}",
                pin.rule
            ),
        }
    }
}

// ---------------------------------------------------------------------------
// the daemon's build-farm synchronisation

#[test]
fn synchronize_build_farm_follows_the_inventory() {
    let (mut config, clusters) = fixture();
    config.synchronize_build_farm(&clusters);
    assert_eq!(
        config.build_farm_cloud("aws"),
        ["build01", "build03", "build06", "build09"]
    );
    assert_eq!(config.build_farm_cloud("gcp"), ["build02", "build04"]);
    // build05 left the build farm: its files fall to rule 13.
    let j = job("pull-ci-blocked", "openshift-blocked-main-presubmits.yaml");
    assert_relocatable(&decide(&j, &config, &clusters), 13, None, "build03");
}

// ---------------------------------------------------------------------------
// lookups: rehearsals, ephemeral clusters

#[test]
fn strip_rehearse_prefix() {
    assert_eq!(
        strip_rehearse("rehearse-12345-pull-ci-org-repo-main-e2e"),
        "pull-ci-org-repo-main-e2e"
    );
    assert_eq!(
        strip_rehearse("pull-ci-org-repo-main-e2e"),
        "pull-ci-org-repo-main-e2e"
    );
    assert_eq!(strip_rehearse("rehearse-abc-x"), "rehearse-abc-x");
}

#[test]
fn ephemeral_round_robin_with_24h_cache() {
    let clusters = fixture().1;
    let mut p = EphemeralPicker::new(&clusters);
    let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let day = Duration::from_secs(24 * 3600);
    assert!(is_ephemeral("ephemeralcluster-ci-a"));
    assert!(!is_ephemeral("pull-ci-ephemeralcluster-a"));
    // Non-blocked clusters in name order.
    let a = p.pick("ephemeralcluster-ci-a", t0);
    assert_eq!(a.as_deref(), Some("build01"));
    assert_eq!(
        p.pick("ephemeralcluster-ci-b", t0).as_deref(),
        Some("build02")
    );
    assert_eq!(
        p.pick("ephemeralcluster-ci-a", t0 + day).as_deref(),
        Some("build01"),
        "cached for 24h"
    );
    assert_eq!(
        p.pick("ephemeralcluster-ci-a", t0 + day + Duration::from_secs(1))
            .as_deref(),
        Some("build03"),
        "expired: next in the round robin"
    );
    let names: Vec<String> = (0..6)
        .map(|i| p.pick(&format!("ephemeralcluster-ci-n{i}"), t0).unwrap())
        .collect();
    assert_eq!(
        names,
        ["build04", "build06", "build09", "build01", "build02", "build03"]
    );
    assert_eq!(p.len(), 8);
    p.prune(t0 + 2 * day);
    assert_eq!(p.len(), 1, "only a's second entry (t0+24h+1s) is fresh");
    p.reset(&clusters);
    assert!(p.is_empty());
    assert_eq!(
        p.pick("ephemeralcluster-ci-b", t0).as_deref(),
        Some("build01"),
        "reset restarts"
    );
    let mut empty = EphemeralPicker::with_clusters(Vec::new());
    assert_eq!(
        empty.pick("ephemeralcluster-ci-a", SystemTime::UNIX_EPOCH),
        None
    );
}

#[test]
fn decisions_expose_rule_and_eligibility() {
    let j = job("pull-ci-org-repo-main-lint", B17).label(NO_BUILDS_LABEL, "true");
    let d = decide_fixture(&j);
    assert_eq!(d.rule(), Some(9));
    assert_eq!(d.eligible().unwrap(), ["build01", "build06", "build09"]);
    assert_eq!(rule_description(9), "no-builds label (noBuilds)");
    let j = job("pull-ci-org-repo-main-unit", B17);
    assert_eq!(decide_fixture(&j).eligible(), None);
}
