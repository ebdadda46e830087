//! The dispatcher's inputs from real configurations (loaded by bosun-config
//! from memory): the inventory, job facts, units, and every placement rule in
//! its precedence, one test per rule; then the whole test-infra corpus.

use std::path::PathBuf;

use bosun_config::model::Snapshot;
use bosun_config::source::MemFiles;
use bosun_config::types::{InRepoSource, JobType};
use bosun_config::{load, LoadOptions, OsFiles};
use bosun_dispatch::inventory::Inventory;
use bosun_dispatch::jobs::{facts, units, JobFacts};
use bosun_dispatch::model::{ClusterSpec, Options, UnitSpec};
use bosun_dispatch::rules::{unit_specs, Rule, Rules};

const CONFIG: &str = "/c/config.yaml";
const JOBS_DIR: &str = "/c/jobs";

/// Strips the first newline and the common indentation.
fn y(s: &str) -> String {
    let s = s.strip_prefix('\n').unwrap_or(s);
    let indent = s
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    s.lines()
        .map(|l| format!("{}\n", l.get(indent..).unwrap_or_else(|| l.trim_start())))
        .collect()
}

/// A loaded configuration with its job facts.
struct World {
    snapshot: Snapshot,
    facts: Vec<JobFacts>,
}

/// Loads `config` and job files (`(path below /c/jobs, yaml)`), plus in-repo
/// files (`(path, yaml)` below `/repo`, for `o/r`), expecting no error.
fn world_with(config: &str, jobs: &[(&str, &str)], in_repo: &[(&str, &str)]) -> World {
    let mut fs = MemFiles::new();
    fs.file(CONFIG, y(config));
    fs.file(format!("{JOBS_DIR}/empty.yaml"), "");
    for (path, text) in jobs {
        fs.file(format!("{JOBS_DIR}/{path}"), y(text));
    }
    for (path, text) in in_repo {
        fs.file(format!("/repo/{path}"), y(text));
    }
    let opts = LoadOptions {
        config: Some(CONFIG.into()),
        job_config: vec![JOBS_DIR.into()],
        in_repo: if in_repo.is_empty() {
            vec![]
        } else {
            vec![InRepoSource {
                repo: "o/r".into(),
                path: "/repo".into(),
                ..InRepoSource::default()
            }]
        },
        ..LoadOptions::default()
    };
    let l = load(&opts, &fs);
    assert_eq!(l.errors(), 0, "{:#?}", l.diagnostics);
    let snapshot = l.snapshot.expect("snapshot");
    let facts = facts(&snapshot, &[PathBuf::from(JOBS_DIR)]);
    World { snapshot, facts }
}

fn world(config: &str, jobs: &[(&str, &str)]) -> World {
    world_with(config, jobs, &[])
}

impl World {
    fn inventory(&self) -> Inventory {
        Inventory::from_config(&self.snapshot.config, &[])
    }

    /// Every unit, over the config's inventory, demand 1 per job.
    fn specs(&self) -> Vec<UnitSpec> {
        self.specs_over(&self.inventory())
    }

    fn specs_over(&self, inventory: &Inventory) -> Vec<UnitSpec> {
        let ones = self.facts.iter().map(|f| (f.name.clone(), 1.0)).collect();
        unit_specs(&self.snapshot.config, inventory, &self.facts, &ones)
    }

    /// The unit holding job `name`.
    fn unit(&self, name: &str) -> UnitSpec {
        unit_of(&self.specs(), name)
    }
}

#[track_caller]
fn unit_of(specs: &[UnitSpec], name: &str) -> UnitSpec {
    specs
        .iter()
        .find(|u| u.jobs.iter().any(|j| j == name))
        .unwrap_or_else(|| panic!("no unit holds {name}: {specs:#?}"))
        .clone()
}

#[track_caller]
fn assert_unit(u: &UnitSpec, rule: Rule, eligible: &[&str], pinned: Option<&str>) {
    assert_eq!(Rule::of(&u.rule), Some(rule), "rule of {u:#?}");
    assert_eq!(u.eligible, eligible, "eligible of {u:#?}");
    assert_eq!(u.pinned.as_deref(), pinned, "pinned of {u:#?}");
}

/// A periodic named `name` with extra fields (YAML lines at the job's level).
fn periodic(name: &str, extra: &str) -> String {
    let mut s =
        format!("- name: {name}\n  interval: 1h\n  spec: {{containers: [{{image: alpine}}]}}\n");
    for l in extra.lines().filter(|l| !l.trim().is_empty()) {
        s.push_str(&format!("  {}\n", l.trim()));
    }
    s
}

fn periodics(jobs: &[String]) -> String {
    format!("periodics:\n{}", jobs.concat())
}

const THREE: &str = "
    build_clusters:
      a: {provider: aws, capabilities: [arm64, gpu]}
      b: {provider: aws, capabilities: [arm64]}
      c: {provider: gcp, capacity: 50}
    dispatcher: {}
    ";

// --- Inventory.

#[test]
fn inventory_from_config_and_contexts() {
    let w = world(
        "
        build_clusters:
          a: {capacity: 20, capabilities: [gpu, arm64], provider: aws, blocked: true}
          b: {}
        ",
        &[],
    );
    let inv = Inventory::from_config(&w.snapshot.config, &["ctx".to_string(), "b".to_string()]);
    let specs = inv.to_cluster_specs();
    assert_eq!(
        specs,
        vec![
            ClusterSpec {
                name: "a".into(),
                capacity: 20,
                blocked: true,
                provider: Some("aws".into()),
                capabilities: ["arm64".to_string(), "gpu".to_string()].into(),
            },
            ClusterSpec {
                name: "b".into(),
                ..ClusterSpec::default()
            },
            ClusterSpec {
                name: "ctx".into(),
                ..ClusterSpec::default()
            },
        ]
    );
    assert_eq!(inv.schedulable().collect::<Vec<_>>(), ["b", "ctx"]);
}

#[test]
fn inventory_without_clusters_is_the_implicit_default() {
    let w = world("", &[]);
    let inv = w.inventory();
    assert_eq!(
        inv.to_cluster_specs(),
        vec![ClusterSpec {
            name: "default".into(),
            ..ClusterSpec::default()
        }]
    );
}

fn os(name: &str, provider: &str, capacity: u32, caps: &[&str], blocked: bool) -> ClusterSpec {
    ClusterSpec {
        name: name.into(),
        capacity,
        blocked,
        provider: Some(provider.into()),
        capabilities: caps.iter().map(|c| c.to_string()).collect(),
    }
}

#[test]
fn openshift_inventory_is_the_whole_inventory_without_build_clusters() {
    let w = world("", &[]);
    let openshift = vec![
        os("build01", "aws", 100, &["arm64"], false),
        os("build05", "aws", 20, &[], true),
    ];
    let (inv, unknown) = w.inventory().annotate(openshift.clone());
    assert!(unknown.is_empty());
    assert_eq!(inv.to_cluster_specs(), openshift);
}

#[test]
fn openshift_inventory_annotates_defined_clusters_and_reports_unknown_names() {
    let w = world(
        "
        build_clusters:
          build01: {capacity: 10, capabilities: [old], provider: gcp}
          build02: {blocked: true}
          build03: {}
        ",
        &[],
    );
    let (inv, unknown) = w.inventory().annotate(vec![
        os("build01", "aws", 100, &["arm64", "gpu"], false),
        os("build02", "gcp", 50, &[], false),
        os("ghost", "aws", 100, &[], false),
        os("build99", "aws", 100, &[], true),
    ]);
    assert_eq!(unknown, ["build99", "ghost"]);
    let specs = inv.to_cluster_specs();
    assert_eq!(
        specs[0],
        os("build01", "aws", 100, &["arm64", "gpu"], false)
    );
    // Blocked in bosun's config stays blocked.
    assert_eq!(specs[1], os("build02", "gcp", 50, &[], true));
    assert_eq!(
        specs[2],
        ClusterSpec {
            name: "build03".into(),
            ..ClusterSpec::default()
        }
    );
    assert_eq!(specs.len(), 3);
}

// --- Job facts.

#[test]
fn facts_of_every_kind_of_job() {
    let w = world_with(
        "
        build_clusters: {a: {}}
        in_repo_config:
          allowed_clusters: {o/r: [a]}
        ",
        &[
            (
                "o/r/o-r-periodics.yaml",
                "
                periodics:
                - name: p
                  interval: 1h
                  cluster: a
                  labels: {k: v}
                  extra_refs: [{org: o, repo: x, base_ref: main}]
                  spec: {containers: [{image: alpine}]}
                ",
            ),
            (
                "o/r/o-r-presubmits.yaml",
                "
                presubmits:
                  o/r:
                  - name: pre
                    branches: [main]
                    skip_branches: [old]
                    spec: {containers: [{image: alpine}]}
                postsubmits:
                  o/r:
                  - name: post
                    agent: jenkins
                ",
            ),
        ],
        &[(
            ".prow.yaml",
            "
            presubmits:
            - name: in-repo
              cluster: a
              spec: {containers: [{image: alpine}]}
            ",
        )],
    );
    let by_name = |n: &str| w.facts.iter().find(|f| f.name == n).unwrap().clone();
    let p = by_name("p");
    assert_eq!(
        (p.ty, p.file.as_str(), p.repo.as_deref()),
        (JobType::Periodic, "o/r/o-r-periodics.yaml", Some("o/x"))
    );
    assert_eq!((p.cluster.as_str(), p.cluster_written), ("a", true));
    assert_eq!(p.labels.get("k").map(String::as_str), Some("v"));
    let pre = by_name("pre");
    assert_eq!(
        (pre.ty, pre.file.as_str(), pre.repo.as_deref()),
        (JobType::Presubmit, "o/r/o-r-presubmits.yaml", Some("o/r"))
    );
    assert_eq!(
        (pre.branches.clone(), pre.skip_branches.clone()),
        (vec!["main".to_string()], vec!["old".to_string()])
    );
    assert_eq!(
        (pre.cluster.as_str(), pre.cluster_written, pre.in_repo),
        ("default", false, false)
    );
    let post = by_name("post");
    assert_eq!(
        (post.ty, post.agent.as_str()),
        (JobType::Postsubmit, "jenkins")
    );
    let ir = by_name("in-repo");
    assert_eq!(
        (ir.file.as_str(), ir.repo.as_deref(), ir.in_repo),
        ("o/r:.prow.yaml", Some("o/r"), true)
    );
    assert_eq!(w.facts.len(), 4);
}

// --- Units.

const UNIT_JOBS: &[(&str, &str)] = &[
    (
        "one.yaml",
        "
        periodics:
        - {name: r1, interval: 1h, spec: {containers: [{image: alpine}]}}
        - {name: r2, interval: 1h, cluster: b, spec: {containers: [{image: alpine}]}}
        - {name: pinned, interval: 1h, cluster: a, spec: {containers: [{image: alpine}]}}
        ",
    ),
    (
        "two.yaml",
        "
        periodics:
        - {name: r3, interval: 1h, spec: {containers: [{image: alpine}]}}
        presubmits:
          o/r:
          - {name: r1, spec: {containers: [{image: alpine}]}}
        ",
    ),
    (
        "three.yaml",
        "
        periodics:
        - {name: r4, interval: 1h, spec: {containers: [{image: alpine}]}}
        - {name: pinned2, interval: 1h, cluster: a, spec: {containers: [{image: alpine}]}}
        ",
    ),
];

fn unit_ids_and_jobs(w: &World) -> Vec<(String, Vec<String>)> {
    units(&w.facts, &w.snapshot.config)
        .into_iter()
        .map(|u| (u.id, u.names))
        .collect()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn units_by_file_join_files_through_shared_names() {
    let w = world(
        "
        build_clusters: {a: {}, b: {}}
        dispatcher: {relocatable_clusters: [b]}
        ",
        UNIT_JOBS,
    );
    // one.yaml and two.yaml share r1; pinned jobs stay on their own.
    assert_eq!(
        unit_ids_and_jobs(&w),
        vec![
            ("job:pinned".to_string(), s(&["pinned"])),
            ("job:pinned2".to_string(), s(&["pinned2"])),
            ("one.yaml".to_string(), s(&["r1", "r2", "r3"])),
            ("three.yaml".to_string(), s(&["r4"])),
        ]
    );
}

#[test]
fn units_by_job_keep_only_names_together() {
    let w = world(
        "
        build_clusters: {a: {}, b: {}}
        dispatcher: {relocatable_clusters: [b], unit: job}
        ",
        UNIT_JOBS,
    );
    assert_eq!(
        unit_ids_and_jobs(&w),
        vec![
            ("job:pinned".to_string(), s(&["pinned"])),
            ("job:pinned2".to_string(), s(&["pinned2"])),
            ("job:r1".to_string(), s(&["r1"])),
            ("job:r2".to_string(), s(&["r2"])),
            ("job:r3".to_string(), s(&["r3"])),
            ("job:r4".to_string(), s(&["r4"])),
        ]
    );
    // r1's two jobs (a periodic and a presubmit) are one unit.
    let u = units(&w.facts, &w.snapshot.config);
    assert_eq!(u.iter().find(|u| u.id == "job:r1").unwrap().jobs.len(), 2);
}

#[test]
fn a_pin_pins_every_job_of_its_name_and_their_file() {
    let w = world(
        "
        build_clusters: {a: {}, b: {}}
        dispatcher: {}
        ",
        &[
            (
                "one.yaml",
                "
                periodics:
                - {name: x, interval: 1h, cluster: a, spec: {containers: [{image: alpine}]}}
                ",
            ),
            (
                "two.yaml",
                "
                presubmits:
                  o/r:
                  - {name: x, cluster: a, spec: {containers: [{image: alpine}]}}
                  - {name: y, spec: {containers: [{image: alpine}]}}
                ",
            ),
        ],
    );
    let specs = w.specs();
    assert_eq!(specs.len(), 2);
    assert_unit(&unit_of(&specs, "x"), Rule::Pin, &["a"], Some("a"));
    assert_unit(&unit_of(&specs, "y"), Rule::Balance, &["a", "b"], None);
}

// --- Rules, in precedence order.

#[test]
fn eligibility_excludes_blocked_clusters() {
    let w = world(
        "
        build_clusters: {a: {}, b: {blocked: true}}
        dispatcher: {}
        ",
        &[("j.yaml", &periodics(&[periodic("j", "")]))],
    );
    let u = w.unit("j");
    assert_unit(&u, Rule::Balance, &["a"], None);
    assert!(u.rule.contains("b (blocked)"), "{}", u.rule);
    assert_eq!(u.previous.as_deref(), Some("default"));
}

#[test]
fn eligibility_admits_trusted_clusters_only_for_admitted_jobs() {
    let w = world(
        "
        build_clusters:
          a: {}
          secure:
            trusted:
            - jobs: ['post-.*']
              repos: [o/r]
        dispatcher: {}
        ",
        &[
            ("one.yaml", &periodics(&[periodic("other", "")])),
            (
                "two.yaml",
                "
                postsubmits:
                  o/r:
                  - {name: post-deploy, spec: {containers: [{image: alpine}]}}
                ",
            ),
        ],
    );
    assert_unit(
        &w.unit("post-deploy"),
        Rule::Balance,
        &["a", "secure"],
        None,
    );
    let u = w.unit("other");
    assert_unit(&u, Rule::Balance, &["a"], None);
    assert!(
        u.rule.contains("secure (trusted; job other not admitted)"),
        "{}",
        u.rule
    );
}

#[test]
fn eligibility_limits_in_repo_jobs_to_allowed_clusters() {
    let w = world_with(
        "
        build_clusters: {a: {}, b: {}, c: {}}
        in_repo_config:
          allowed_clusters: {o/r: [b], o: [c]}
        dispatcher: {relocatable_clusters: [b]}
        ",
        &[],
        &[(
            ".prow.yaml",
            "
            presubmits:
            - {name: ir, cluster: b, spec: {containers: [{image: alpine}]}}
            ",
        )],
    );
    let u = w.unit("ir");
    assert_unit(&u, Rule::Balance, &["b", "c"], None);
    assert!(u.rule.contains("a (in-repo job ir of o/r"), "{}", u.rule);
    assert_eq!(u.id, "o/r:.prow.yaml");
}

#[test]
fn a_unit_with_no_eligible_cluster_says_why() {
    let w = world(
        "
        build_clusters: {a: {blocked: true}}
        dispatcher: {}
        ",
        &[("j.yaml", &periodics(&[periodic("j", "")]))],
    );
    let u = w.unit("j");
    assert_unit(&u, Rule::Eligibility, &[], None);
    assert_eq!(
        u.rule,
        "eligibility: no cluster is eligible [not eligible: a (blocked)]"
    );
}

#[test]
fn pins_outside_relocatable_clusters() {
    let w = world(
        "
        build_clusters: {a: {}, b: {}}
        dispatcher: {relocatable_clusters: [b]}
        ",
        &[(
            "j.yaml",
            &periodics(&[
                periodic("pinned", "cluster: a"),
                periodic("free", "cluster: b"),
            ]),
        )],
    );
    let u = w.unit("pinned");
    assert_unit(&u, Rule::Pin, &["a"], Some("a"));
    assert_eq!(
        u.rule,
        "pin: cluster a of job pinned in j.yaml (written, not in dispatcher.relocatable_clusters)"
    );
    assert_eq!(u.id, "job:pinned");
    let u = w.unit("free");
    assert_unit(&u, Rule::Balance, &["a", "b"], None);
    assert_eq!(u.id, "j.yaml");
    assert_eq!(u.previous.as_deref(), Some("b"));
}

#[test]
fn pins_on_blocked_or_missing_clusters_are_unplaceable() {
    let w = world(
        "
        build_clusters: {a: {blocked: true}, b: {}}
        dispatcher: {}
        ",
        &[(
            "j.yaml",
            &periodics(&[
                periodic("on-a", "cluster: a"),
                periodic("on-b", "cluster: b"),
            ]),
        )],
    );
    let u = w.unit("on-a");
    assert_unit(&u, Rule::Pin, &[], Some("a"));
    assert!(u.rule.ends_with(", which is blocked"), "{}", u.rule);
    // An inventory without b (from _clusters.yaml, say).
    let inv = Inventory::from_specs([os("a", "aws", 100, &[], false)]);
    let u = unit_of(&w.specs_over(&inv), "on-b");
    assert_unit(&u, Rule::Pin, &[], Some("b"));
    assert!(
        u.rule.ends_with(", which is not in the inventory"),
        "{}",
        u.rule
    );
}

#[test]
fn jobs_with_other_agents_stay_where_they_are() {
    let w = world(
        "
        build_clusters: {a: {}, b: {}}
        dispatcher: {}
        ",
        &[(
            "j.yaml",
            "
            postsubmits:
              o/r:
              - {name: jenkins-job, agent: jenkins}
              - {name: k8s-job, spec: {containers: [{image: alpine}]}}
            ",
        )],
    );
    let specs = w.specs_over(&Inventory::from_specs([
        os("a", "aws", 100, &[], false),
        os("default", "aws", 100, &[], false),
    ]));
    let u = unit_of(&specs, "jenkins-job");
    assert_unit(&u, Rule::Pin, &["default"], Some("default"));
    assert!(
        u.rule.contains("agent jenkins is not dispatched"),
        "{}",
        u.rule
    );
    assert_eq!(unit_of(&specs, "k8s-job").id, "j.yaml");
}

#[test]
fn capabilities_narrow_or_leave_nothing() {
    let w = world(
        THREE,
        &[(
            "j.yaml",
            &periodics(&[
                periodic("arm", "labels: {capability/arm64: arm64}"),
                periodic(
                    "gpu",
                    "labels: {capability/arm64: arm64, capability/gpu: gpu}",
                ),
                periodic("kvm", "labels: {capability/kvm: kvm}"),
                periodic("mismatch", "labels: {capability/kvm: yes}"),
            ]),
        )],
    );
    let specs = w.specs_over(&w.inventory());
    // One file: one unit; its jobs' capabilities add up, and nothing offers kvm.
    assert_eq!(specs.len(), 1);
    assert_unit(&specs[0], Rule::Capabilities, &[], None);
    assert_eq!(
        specs[0].rule,
        "capabilities: no eligible cluster offers arm64, gpu, kvm"
    );

    let w = world(
        "
        build_clusters:
          a: {provider: aws, capabilities: [arm64, gpu]}
          b: {provider: aws, capabilities: [arm64]}
          c: {provider: gcp, capacity: 50}
        dispatcher: {unit: job}
        ",
        &[(
            "j.yaml",
            &periodics(&[
                periodic("arm", "labels: {capability/arm64: arm64}"),
                periodic(
                    "gpu",
                    "labels: {capability/arm64: arm64, capability/gpu: gpu}",
                ),
                periodic("mismatch", "labels: {capability/kvm: yes}"),
            ]),
        )],
    );
    let u = w.unit("arm");
    assert_unit(&u, Rule::Balance, &["a", "b"], None);
    assert_eq!(u.rule, "balance: a, b [capabilities: arm64]");
    assert_unit(&w.unit("gpu"), Rule::Balance, &["a"], None);
    // A label whose value differs from its suffix requires nothing.
    assert_unit(&w.unit("mismatch"), Rule::Balance, &["a", "b", "c"], None);
}

const GROUPS: &str = "
    build_clusters:
      a: {provider: aws, capabilities: [arm64]}
      b: {provider: aws}
      c: {provider: gcp}
    dispatcher:
      unit: job
      groups:
      - cluster: c
        jobs: ['infra-.*', exact]
      - cluster: b
        paths: ['infra-periodics\\.yaml$']
    ";

#[test]
fn groups_by_job_name() {
    let w = world(
        GROUPS,
        &[(
            "j.yaml",
            &periodics(&[
                periodic("infra-mirror", ""),
                periodic("exact", ""),
                periodic("exactly", ""),
            ]),
        )],
    );
    let u = w.unit("infra-mirror");
    assert_unit(&u, Rule::Group, &["c"], Some("c"));
    assert_eq!(u.rule, "group: dispatcher.groups[0] (job infra-mirror): c");
    assert_unit(&w.unit("exact"), Rule::Group, &["c"], Some("c"));
    // Names are anchored.
    assert_unit(&w.unit("exactly"), Rule::Balance, &["a", "b", "c"], None);
}

#[test]
fn groups_by_file_path() {
    let w = world(
        GROUPS,
        &[
            (
                "o/r/o-r-infra-periodics.yaml",
                &periodics(&[periodic("by-path", "")]),
            ),
            ("o/r/other.yaml", &periodics(&[periodic("elsewhere", "")])),
        ],
    );
    let u = w.unit("by-path");
    assert_unit(&u, Rule::Group, &["b"], Some("b"));
    assert_eq!(
        u.rule,
        "group: dispatcher.groups[1] (file o/r/o-r-infra-periodics.yaml): b"
    );
    assert_unit(&w.unit("elsewhere"), Rule::Balance, &["a", "b", "c"], None);
}

#[test]
fn provider_affinity_from_labels_with_mapping() {
    let w = world(
        "
        build_clusters:
          a: {provider: aws}
          b: {provider: aws}
          c: {provider: gcp}
        dispatcher:
          unit: job
          provider_mapping: {equinix-ocp-metal: aws}
        ",
        &[(
            "j.yaml",
            &periodics(&[
                periodic("bosun", "labels: {dispatcher.bosun.dev/provider: gcp}"),
                periodic("openshift", "labels: {ci-operator.openshift.io/cloud: equinix-ocp-metal}"),
                periodic("nowhere", "labels: {dispatcher.bosun.dev/provider: azure4}"),
                periodic("both", "labels: {dispatcher.bosun.dev/provider: gcp, ci-operator.openshift.io/cloud: aws}"),
            ]),
        )],
    );
    let u = w.unit("bosun");
    assert_unit(&u, Rule::Provider, &["c"], None);
    assert_eq!(
        u.rule,
        "provider: gcp (label dispatcher.bosun.dev/provider of job bosun): c"
    );
    let u = w.unit("openshift");
    assert_unit(&u, Rule::Provider, &["a", "b"], None);
    assert!(
        u.rule
            .contains("equinix-ocp-metal of job openshift, mapped"),
        "{}",
        u.rule
    );
    let u = w.unit("nowhere");
    assert_unit(&u, Rule::Balance, &["a", "b", "c"], None);
    assert!(u.rule.contains("provider azure4"), "{}", u.rule);
    // bosun's label comes first.
    assert_unit(&w.unit("both"), Rule::Provider, &["c"], None);
}

/// Each rule against the next: eligibility over pins, pins over
/// capabilities, capabilities over groups, groups over provider.
#[test]
fn precedence() {
    let w = world(
        "
        build_clusters:
          a: {provider: aws, capabilities: [arm64]}
          b: {provider: gcp}
          blocked: {blocked: true, capabilities: [arm64]}
        dispatcher:
          unit: job
          groups:
          - {cluster: b, jobs: ['grp-.*']}
          - {cluster: a, jobs: ['grp-.*']}
        ",
        &[(
            "j.yaml",
            &periodics(&[
                // A pin on a blocked cluster: eligibility wins, unplaceable.
                periodic(
                    "pin-blocked",
                    "cluster: blocked\nlabels: {capability/arm64: arm64}",
                ),
                // A pin wins over capabilities it lacks.
                periodic("pin-caps", "cluster: b\nlabels: {capability/arm64: arm64}"),
                // Capabilities win over a group: group 0 (b) is skipped, group 1 (a) applies.
                periodic("grp-arm", "labels: {capability/arm64: arm64}"),
                // A group wins over provider.
                periodic("grp-plain", "labels: {dispatcher.bosun.dev/provider: aws}"),
                // A pin wins over a group.
                periodic("grp-pinned", "cluster: a"),
            ]),
        )],
    );
    let u = w.unit("pin-blocked");
    assert_unit(&u, Rule::Pin, &[], Some("blocked"));
    assert_unit(&w.unit("pin-caps"), Rule::Pin, &["b"], Some("b"));
    let u = w.unit("grp-arm");
    assert_unit(&u, Rule::Group, &["a"], Some("a"));
    assert!(
        u.rule
            .contains("dispatcher.groups[0] (job grp-arm) skipped: b is not eligible"),
        "{}",
        u.rule
    );
    assert_unit(&w.unit("grp-plain"), Rule::Group, &["b"], Some("b"));
    assert_unit(&w.unit("grp-pinned"), Rule::Pin, &["a"], Some("a"));
}

#[test]
fn options_come_from_the_dispatcher_section() {
    let w = world("dispatcher: {budget: 25%, hysteresis_percent: 5}\n", &[]);
    let o = Options::from_config(w.snapshot.config.dispatcher.as_ref().unwrap());
    assert_eq!((o.budget_share, o.hysteresis_percent), (0.25, 5.0));
    let o = Options::from_config(&Default::default());
    assert_eq!(o, Options::default());
}

#[test]
fn rules_run_without_a_dispatcher_section() {
    let w = world(
        "build_clusters: {a: {}, b: {}}\n",
        &[(
            "j.yaml",
            &periodics(&[periodic("x", ""), periodic("y", "cluster: b")]),
        )],
    );
    let inv = w.inventory();
    let rules = Rules::new(&w.snapshot.config, &inv);
    let seeds = units(&w.facts, &w.snapshot.config);
    let specs: Vec<UnitSpec> = seeds.iter().map(|s| rules.unit(s, &w.facts)).collect();
    assert_unit(&unit_of(&specs, "x"), Rule::Balance, &["a", "b"], None);
    assert_unit(&unit_of(&specs, "y"), Rule::Pin, &["b"], Some("b"));
}

// --- The corpus.

/// Every job of the test-infra corpus lands in exactly one unit, and the
/// rules decide every unit without panicking.
#[test]
fn corpus_jobs_land_in_exactly_one_unit() {
    let root =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/test-infra/config");
    let root = match root.canonicalize() {
        Ok(r) => r,
        Err(_) => PathBuf::from("/work/shared/corpus/test-infra/config"),
    };
    let jobs_dir = root.join("jobs");
    let opts = LoadOptions {
        config: Some(root.join("prow/config.yaml")),
        job_config: vec![jobs_dir.clone()],
        ..LoadOptions::default()
    };
    let l = load(&opts, &OsFiles);
    let mut snapshot = l.snapshot.expect("the corpus loads");
    // A dispatcher that may move the two general-purpose clusters.
    snapshot.config.dispatcher = Some(bosun_config::types::DispatcherConfig {
        relocatable_clusters: vec![
            "k8s-infra-prow-build".into(),
            "eks-prow-build-cluster".into(),
        ],
        ..Default::default()
    });
    let facts = facts(&snapshot, &[jobs_dir]);
    let counts = snapshot.counts();
    assert_eq!(
        facts.len(),
        counts.periodics + counts.presubmits + counts.postsubmits
    );
    assert!(
        facts.iter().all(|f| !f.file.starts_with('/')),
        "relative files"
    );
    let contexts: Vec<String> = facts
        .iter()
        .map(|f| f.cluster.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let inventory = Inventory::from_config(&snapshot.config, &contexts);
    let seeds = units(&facts, &snapshot.config);
    let mut seen = vec![0usize; facts.len()];
    for s in &seeds {
        for &i in &s.jobs {
            seen[i] += 1;
        }
    }
    assert!(
        seen.iter().all(|&n| n == 1),
        "every job in exactly one unit"
    );
    let ids: std::collections::BTreeSet<&str> = seeds.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids.len(), seeds.len(), "unit ids are unique");
    let ones = facts.iter().map(|f| (f.name.clone(), 1.0)).collect();
    let specs = Rules::new(&snapshot.config, &inventory).unit_specs(&seeds, &facts, &ones);
    assert_eq!(specs.len(), seeds.len());
    for u in &specs {
        assert!(Rule::of(&u.rule).is_some(), "{}", u.rule);
        assert!(u.demand >= 1.0);
        if let Some(p) = &u.pinned {
            assert!(u.eligible.is_empty() || u.eligible == [p.clone()]);
        }
    }
    // Jobs on the relocatable clusters are balanced by file.
    assert!(specs
        .iter()
        .any(|u| Rule::of(&u.rule) == Some(Rule::Balance) && !u.id.starts_with("job:")));
    assert!(specs.iter().any(|u| Rule::of(&u.rule) == Some(Rule::Pin)));
}
