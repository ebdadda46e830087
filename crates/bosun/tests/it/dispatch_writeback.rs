//! `bosun dispatch write-back` on copies of test-infra corpus files (with
//! comments; some edited so that a `cluster:` is quoted or missing), a
//! synthetic file of anchors, aliases, merge keys and a flow mapping, and an
//! in-repo `.prow.yaml`:
//! - every line it changes is a `cluster:` line (a value replaced with its
//!   key, quoting and comment kept, or a line inserted), byte for byte;
//! - the files reloaded by bosun's loader give the same jobs with the new
//!   clusters, and nothing else differs;
//! - anchored, aliased and merged clusters, pinned jobs, plan values that
//!   would pin a job and in-repo files are reported and left untouched;
//! - from a running `bosun dispatcher` (`--server`), the files end up saying
//!   what the dispatcher answers;
//! - with OpenShift's `_config.yaml`, the `buildFarm` lists are regenerated
//!   and nothing else of the file changes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use bosun_config::model::{Job, Origin};
use bosun_config::types::InRepoSource;
use bosun_config::{load, LoadOptions, OsFiles, Snapshot};
use bosun_dispatch::openshift::OsConfig;
use expect_test::expect;

use crate::common;

/// The corpus files copied, relative to `config/jobs`.
const FILES: &[&str] = &[
    "kubernetes/sig-testing/verify.yaml",
    "kubernetes/sig-testing/update.yaml",
    "kubernetes/sig-k8s-infra/registry.k8s.io/canaries.yaml",
    "kubernetes/test-infra/janitors.yaml",
    "kubernetes-sigs/cluster-api/cluster-api-main-presubmits-v2.yaml",
];

/// Clusters whose jobs the dispatcher may move.
const RELOCATABLE: [&str; 2] = ["k8s-infra-prow-build", "eks-prow-build-cluster"];

/// Jobs sharing values through anchors and merge keys, and one in a flow
/// mapping without `cluster:`.
const SYNTHETIC: &str = "\
# Synthetic jobs: clusters shared through anchors and merge keys.
periodics:
- name: wb-anchored
  interval: 1h
  cluster: &relocatable k8s-infra-prow-build  # another job uses this value
  spec: &spec
    containers:
    - image: busybox
      command: [\"true\"]
- name: wb-aliased
  interval: 1h
  cluster: *relocatable
  spec: *spec
- &template
  name: wb-template
  interval: 1h
  cluster: eks-prow-build-cluster
  spec: *spec
- <<: *template
  name: wb-merged
- name: wb-merged-own
  <<: *template
  cluster: eks-prow-build-cluster # its own value wins over the merged one
- {name: wb-flow, interval: 1h, spec: *spec}
";

/// An in-repo configuration (another repository's file).
const PROW_YAML: &str = "\
presubmits:
- name: wb-in-repo
  cluster: k8s-infra-prow-build # in-repo: never rewritten
  always_run: true
  spec:
    containers:
    - image: busybox
      command: [\"true\"]
";

/// The plan the tests write back: jobs moved between the relocatable
/// clusters, one left on `default`, pinned jobs, and one job the plan does
/// not name (`pull-cluster-api-e2e-main-v2`).
const PLAN: &[(&str, &str)] = &[
    // `cluster:` removed from the copy: a line is inserted.
    ("pull-kubernetes-verify", "eks-prow-build-cluster"),
    // `cluster:` removed from the copy; the plan leaves it on default.
    ("ci-kubernetes-verify-master", "default"),
    ("pull-kubernetes-linter-hints", "k8s-infra-prow-build"),
    // Already there.
    (
        "kubernetes-verify-go-licenses-periodical",
        "eks-prow-build-cluster",
    ),
    ("pull-kubernetes-update", "eks-prow-build-cluster"),
    // Double-quoted in the copy.
    ("registry-sandbox-e2e-gcp", "eks-prow-build-cluster"),
    // Single-quoted in the copy.
    ("registry-sandbox-e2e-aws", "k8s-infra-prow-build"),
    // Pinned (k8s-infra-ppc64le-prow-build is not relocatable).
    ("registry-sandbox-e2e-ibm", "k8s-infra-prow-build"),
    ("e2e-kops-staging-registry-gcp", "eks-prow-build-cluster"),
    // Writing a pinning value would pin it.
    (
        "e2e-kops-staging-registry-azure",
        "k8s-infra-kops-prow-build",
    ),
    ("maintenance-ci-shared-aws-janitor", "k8s-infra-prow-build"),
    ("maintenance-ci-aws-janitor", "k8s-infra-kops-prow-build"),
    (
        "maintenance-ci-kops-aws-janitor",
        "k8s-infra-kops-prow-build",
    ),
    ("wb-anchored", "eks-prow-build-cluster"),
    ("wb-aliased", "eks-prow-build-cluster"),
    ("wb-template", "k8s-infra-prow-build"),
    ("wb-merged", "k8s-infra-prow-build"),
    ("wb-merged-own", "k8s-infra-prow-build"),
    ("wb-flow", "eks-prow-build-cluster"),
    ("wb-in-repo", "eks-prow-build-cluster"),
];

/// The jobs whose `cluster:` the plan above rewrites.
const REWRITTEN: &[&str] = &[
    "pull-kubernetes-verify",
    "pull-kubernetes-linter-hints",
    "pull-kubernetes-update",
    "registry-sandbox-e2e-gcp",
    "registry-sandbox-e2e-aws",
    "e2e-kops-staging-registry-gcp",
    "maintenance-ci-shared-aws-janitor",
    "wb-merged-own",
    "wb-flow",
];

fn corpus_jobs() -> PathBuf {
    let root =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/test-infra/config");
    root.canonicalize()
        .unwrap_or_else(|_| PathBuf::from("/work/shared/corpus/test-infra/config"))
}

/// `text` with `from` replaced by `to`, exactly once.
fn edit_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "{from:?}");
    text.replacen(from, to, 1)
}

/// The tree under `dir`: `config.yaml` (the corpus' Prow config with a
/// dispatcher section and `extra`), `jobs/` and an in-repo checkout `repo/`.
fn tree(dir: &Path, extra: &str) {
    let corpus = corpus_jobs();
    let config = std::fs::read_to_string(corpus.join("prow/config.yaml")).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "{config}dispatcher:\n  relocatable_clusters: [{}]\nin_repo_config:\n  allowed_clusters:\n    \"*\": [{}]\n{extra}",
            RELOCATABLE.join(", "),
            RELOCATABLE.join(", ")
        ),
    )
    .unwrap();
    for f in FILES {
        let mut text = std::fs::read_to_string(corpus.join("jobs").join(f)).unwrap();
        if f.ends_with("verify.yaml") {
            text = edit_once(
                &text,
                "  - name: pull-kubernetes-verify\n    cluster: k8s-infra-prow-build\n",
                "  - name: pull-kubernetes-verify\n",
            );
            text = edit_once(
                &text,
                "  cluster: k8s-infra-prow-build\n  name: ci-kubernetes-verify-master\n",
                "  name: ci-kubernetes-verify-master\n",
            );
        }
        if f.ends_with("canaries.yaml") {
            text = edit_once(
                &text,
                "- name: registry-sandbox-e2e-gcp\n  cluster: k8s-infra-prow-build\n",
                "- name: registry-sandbox-e2e-gcp\n  cluster: \"k8s-infra-prow-build\"\n",
            );
            text = edit_once(
                &text,
                "- name: registry-sandbox-e2e-aws\n  cluster: eks-prow-build-cluster\n",
                "- name: registry-sandbox-e2e-aws\n  cluster: 'eks-prow-build-cluster'\n",
            );
        }
        let path = dir.join("jobs").join(f);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::fs::create_dir_all(dir.join("jobs/synthetic")).unwrap();
    std::fs::write(dir.join("jobs/synthetic/anchors.yaml"), SYNTHETIC).unwrap();
    std::fs::create_dir_all(dir.join("repo")).unwrap();
    std::fs::write(dir.join("repo/.prow.yaml"), PROW_YAML).unwrap();
}

fn config_args(dir: &Path) -> Vec<String> {
    vec![
        "--config".into(),
        dir.join("config.yaml").display().to_string(),
        "--job-config".into(),
        dir.join("jobs").display().to_string(),
        "--in-repo".into(),
        format!("acme/widget={}", dir.join("repo").display()),
    ]
}

fn bosun(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(args)
        .output()
        .unwrap()
}

fn write_back(dir: &Path, extra: &[&str]) -> (bool, String) {
    let mut args: Vec<String> = vec!["dispatch".into(), "write-back".into()];
    args.extend(config_args(dir));
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = bosun(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (
        out.status.success(),
        format!("{stdout}{stderr}").replace(&dir.display().to_string(), "DIR"),
    )
}

fn snapshot(dir: &Path) -> Snapshot {
    let loaded = load(
        &LoadOptions {
            config: Some(dir.join("config.yaml")),
            job_config: vec![dir.join("jobs")],
            in_repo: vec![InRepoSource {
                repo: "acme/widget".into(),
                path: dir.join("repo").display().to_string(),
                ..InRepoSource::default()
            }],
            ..LoadOptions::default()
        },
        &OsFiles,
    );
    loaded.snapshot.unwrap_or_else(|| {
        panic!(
            "{}",
            loaded
                .diagnostics
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

/// Every file below `dir`, by path relative to it, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// `(key and indentation, quote, the rest after the value)` of a
/// `cluster:` line, or `None` for another line.
fn cluster_line(line: &str) -> Option<(&str, Option<char>, &str)> {
    let at = line.find("cluster: ")?;
    if !line[..at].trim_start_matches([' ', '-']).is_empty() {
        return None;
    }
    let prefix = &line[..at + "cluster: ".len()];
    let value = &line[prefix.len()..];
    let quote = value.chars().next().filter(|c| *c == '"' || *c == '\'');
    let end = match quote {
        Some(q) => value[1..].find(q).map(|i| i + 2).unwrap(),
        None => value.find(char::is_whitespace).unwrap_or(value.len()),
    };
    Some((prefix, quote, &value[end..]))
}

/// Asserts that every line `new` changes from `old` is a `cluster:` line
/// (its value replaced: key, indentation, quoting and what follows kept; or
/// inserted) or a flow mapping that gained `, cluster: X`; returns how many.
fn only_cluster_lines_changed(file: &str, old: &str, new: &str) -> usize {
    let a: Vec<&str> = old.split_inclusive('\n').collect();
    let b: Vec<&str> = new.split_inclusive('\n').collect();
    let (mut i, mut j, mut changed) = (0, 0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
            continue;
        }
        changed += 1;
        let new_line = b.get(j).copied().unwrap_or_default();
        let old_line = a.get(i).copied().unwrap_or_default();
        match (cluster_line(old_line), cluster_line(new_line)) {
            // Replaced.
            (Some(x), Some(y)) if x == y => {
                i += 1;
                j += 1;
            }
            // Inserted before the old line.
            (_, Some(_)) if b.get(j + 1) == a.get(i) => j += 1,
            // A flow mapping that gained a `cluster:`.
            _ if new_line.contains("{")
                && new_line.find(", cluster: ").is_some_and(|at| {
                    let rest = &new_line[at + ", cluster: ".len()..];
                    let end = rest.find([',', '}']).unwrap();
                    format!("{}{}", &new_line[..at], &rest[end..]) == old_line
                }) =>
            {
                i += 1;
                j += 1;
            }
            _ => panic!(
                "{file}: line {} is not a cluster: line change:\n- {old_line}+ {new_line}",
                j + 1
            ),
        }
    }
    changed
}

/// A job with what write-back may change masked: its cluster, whether it is
/// written, and its positions (an inserted line moves the jobs after it).
fn masked<K: Clone>(job: &Job<K>) -> Job<K> {
    let mut j = job.clone();
    j.base.cluster.clear();
    j.cluster_written = false;
    j.origin = Origin {
        file: j.origin.file.clone(),
        mark: Default::default(),
        keys: Box::new([]),
    };
    j
}

/// Each job's cluster and whether it is written, by name (names are unique
/// in these trees).
fn clusters(s: &Snapshot) -> BTreeMap<String, (String, bool)> {
    let mut out = BTreeMap::new();
    let mut add = |name: &str, cluster: &str, written: bool| {
        out.insert(name.to_string(), (cluster.to_string(), written));
    };
    for j in &s.periodics {
        add(&j.base.name, &j.base.cluster, j.cluster_written);
    }
    for j in s.presubmits.values().flatten() {
        add(&j.base.name, &j.base.cluster, j.cluster_written);
    }
    for j in s.postsubmits.values().flatten() {
        add(&j.base.name, &j.base.cluster, j.cluster_written);
    }
    out
}

/// `after` has the same jobs as `before`, masked (see [`masked`]).
fn same_jobs_but_clusters(before: &Snapshot, after: &Snapshot) {
    assert_eq!(before.periodics.len(), after.periodics.len());
    for (x, y) in before.periodics.iter().zip(&after.periodics) {
        assert_eq!(masked(x), masked(y), "{}", x.base.name);
    }
    assert_eq!(
        before.presubmits.keys().collect::<Vec<_>>(),
        after.presubmits.keys().collect::<Vec<_>>()
    );
    for (repo, jobs) in &before.presubmits {
        let other = &after.presubmits[repo];
        assert_eq!(jobs.len(), other.len(), "{repo}");
        for (x, y) in jobs.iter().zip(other) {
            assert_eq!(masked(x), masked(y), "{}", x.base.name);
        }
    }
    assert_eq!(
        before.postsubmits.keys().collect::<Vec<_>>(),
        after.postsubmits.keys().collect::<Vec<_>>()
    );
    for (repo, jobs) in &before.postsubmits {
        for (x, y) in jobs.iter().zip(&after.postsubmits[repo]) {
            assert_eq!(masked(x), masked(y), "{}", x.base.name);
        }
    }
    assert_eq!(before.presets.len(), after.presets.len());
    for (x, y) in before.presets.iter().zip(&after.presets) {
        assert_eq!(x.preset, y.preset);
    }
    assert_eq!(before.config, after.config);
}

#[test]
fn write_back_changes_only_cluster_lines_and_the_jobs_reload_the_same() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    tree(dir, "");
    let plan: BTreeMap<&str, &str> = PLAN.iter().copied().collect();
    std::fs::write(
        dir.join("plan.json"),
        serde_json::to_string_pretty(&serde_json::json!({ "generation": 7, "assignments": plan }))
            .unwrap(),
    )
    .unwrap();
    let before_files = files(dir);
    let before = snapshot(dir);
    let plan_arg = ["--plan", &dir.join("plan.json").display().to_string()].map(String::from);
    let plan_arg: Vec<&str> = plan_arg.iter().map(String::as_str).collect();

    // Dry run: the report, and not a byte written.
    let (ok, dry) = write_back(dir, &[plan_arg.clone(), vec!["--dry-run"]].concat());
    assert!(ok, "{dry}");
    assert_eq!(files(dir), before_files, "a dry run writes nothing");
    expect![[r#"
        kubernetes/sig-k8s-infra/registry.k8s.io/canaries.yaml: registry-sandbox-e2e-gcp: k8s-infra-prow-build -> eks-prow-build-cluster
        kubernetes/sig-k8s-infra/registry.k8s.io/canaries.yaml: registry-sandbox-e2e-aws: eks-prow-build-cluster -> k8s-infra-prow-build
        kubernetes/sig-k8s-infra/registry.k8s.io/canaries.yaml: e2e-kops-staging-registry-gcp: k8s-infra-prow-build -> eks-prow-build-cluster
        kubernetes/sig-testing/update.yaml: pull-kubernetes-update: k8s-infra-prow-build -> eks-prow-build-cluster
        kubernetes/sig-testing/verify.yaml: pull-kubernetes-verify: (no cluster:) -> eks-prow-build-cluster (line added)
        kubernetes/sig-testing/verify.yaml: pull-kubernetes-linter-hints: eks-prow-build-cluster -> k8s-infra-prow-build
        kubernetes/test-infra/janitors.yaml: maintenance-ci-shared-aws-janitor: eks-prow-build-cluster -> k8s-infra-prow-build
        synthetic/anchors.yaml: wb-merged-own: eks-prow-build-cluster -> k8s-infra-prow-build
        synthetic/anchors.yaml: wb-flow: (no cluster:) -> eks-prow-build-cluster (line added)
        left alone:
          acme/widget:.prow.yaml: wb-in-repo: k8s-infra-prow-build -> eks-prow-build-cluster: in-repo configuration of acme/widget: its own repository's file
          kubernetes/sig-k8s-infra/registry.k8s.io/canaries.yaml: registry-sandbox-e2e-ibm: k8s-infra-ppc64le-prow-build -> k8s-infra-prow-build: pinned: k8s-infra-ppc64le-prow-build is not in dispatcher.relocatable_clusters
          kubernetes/sig-k8s-infra/registry.k8s.io/canaries.yaml: e2e-kops-staging-registry-azure: k8s-infra-prow-build -> k8s-infra-kops-prow-build: k8s-infra-kops-prow-build is not in dispatcher.relocatable_clusters: writing it would pin the job
          synthetic/anchors.yaml: wb-anchored: k8s-infra-prow-build -> eks-prow-build-cluster: its cluster: carries an anchor (&relocatable) other values may share
          synthetic/anchors.yaml: wb-aliased: k8s-infra-prow-build -> eks-prow-build-cluster: its cluster: is an alias (*relocatable)
          synthetic/anchors.yaml: wb-template: eks-prow-build-cluster -> k8s-infra-prow-build: its definition is shared through an anchor (&template): an alias repeats it
          synthetic/anchors.yaml: wb-merged: eks-prow-build-cluster -> k8s-infra-prow-build: its cluster: comes from a merge key (<<)
        1 relocatable job(s) not in the plan: left as they are
        9 job(s) in 5 file(s), 7 left alone (dry run: nothing written)
    "#]]
    .assert_eq(&dry);

    // For real: the same report, and the files written.
    let (ok, wet) = write_back(dir, &plan_arg);
    assert!(ok, "{wet}");
    assert_eq!(
        wet.replace("; 5 file(s) written", " (dry run: nothing written)"),
        dry
    );
    let after_files = files(dir);

    // (a) Only `cluster:` lines changed, in the files expected.
    let mut changed_files = BTreeSet::new();
    let mut changed_lines = 0;
    for (name, old) in &before_files {
        let new = &after_files[name];
        if old != new {
            changed_files.insert(name.as_str());
            changed_lines += only_cluster_lines_changed(
                name,
                std::str::from_utf8(old).unwrap(),
                std::str::from_utf8(new).unwrap(),
            );
        }
    }
    assert_eq!(
        changed_files,
        BTreeSet::from([
            "jobs/kubernetes/sig-k8s-infra/registry.k8s.io/canaries.yaml",
            "jobs/kubernetes/sig-testing/update.yaml",
            "jobs/kubernetes/sig-testing/verify.yaml",
            "jobs/kubernetes/test-infra/janitors.yaml",
            "jobs/synthetic/anchors.yaml",
        ])
    );
    assert_eq!(changed_lines, REWRITTEN.len());
    // The quoting is kept.
    let canaries = String::from_utf8(
        after_files["jobs/kubernetes/sig-k8s-infra/registry.k8s.io/canaries.yaml"].clone(),
    )
    .unwrap();
    assert!(canaries
        .contains("- name: registry-sandbox-e2e-gcp\n  cluster: \"eks-prow-build-cluster\"\n"));
    assert!(
        canaries.contains("- name: registry-sandbox-e2e-aws\n  cluster: 'k8s-infra-prow-build'\n")
    );
    // The inserted line has the job's indentation, right after its name.
    let verify =
        String::from_utf8(after_files["jobs/kubernetes/sig-testing/verify.yaml"].clone()).unwrap();
    assert!(verify.contains(
        "  - name: pull-kubernetes-verify\n    cluster: eks-prow-build-cluster\n    always_run: true\n"
    ));
    // In-repo files are never written.
    assert_eq!(after_files["repo/.prow.yaml"], PROW_YAML.as_bytes());

    // (b) Reloaded: the same jobs, with the plan's clusters where written.
    let after = snapshot(dir);
    same_jobs_but_clusters(&before, &after);
    let (old, new) = (clusters(&before), clusters(&after));
    for (job, (cluster, _)) in &new {
        if REWRITTEN.contains(&job.as_str()) {
            assert_eq!(cluster, plan[job.as_str()], "{job}");
        } else {
            assert_eq!(cluster, &old[job].0, "{job}: left as it was");
        }
    }
    // Written jobs stay relocatable.
    let dispatcher = after.config.dispatcher.clone().unwrap();
    for p in &after.periodics {
        if REWRITTEN.contains(&p.base.name.as_str()) {
            assert!(dispatcher.relocatable(&p.base.cluster, p.cluster_written));
        }
    }

    // Again: nothing left to write.
    let (ok, again) = write_back(dir, &plan_arg);
    assert!(ok, "{again}");
    assert!(
        again.contains("0 job(s) in 0 file(s), 7 left alone; 0 file(s) written"),
        "{again}"
    );
    assert_eq!(files(dir), after_files);
}

#[test]
fn a_bare_map_and_errors() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    tree(dir, "");
    std::fs::write(
        dir.join("plan.json"),
        r#"{"pull-kubernetes-update": "eks-prow-build-cluster"}"#,
    )
    .unwrap();
    let (ok, out) = write_back(
        dir,
        &["--plan", &dir.join("plan.json").display().to_string()],
    );
    assert!(ok, "{out}");
    assert!(
        out.starts_with("kubernetes/sig-testing/update.yaml: pull-kubernetes-update: k8s-infra-prow-build -> eks-prow-build-cluster\n"),
        "{out}"
    );
    // Neither a plan nor a server; a plan that is not one; a server that is
    // not there.
    let (ok, out) = write_back(dir, &[]);
    assert!(!ok && out.contains("--plan"), "{out}");
    std::fs::write(dir.join("bad.json"), r#"{"job": 3}"#).unwrap();
    let (ok, out) = write_back(
        dir,
        &["--plan", &dir.join("bad.json").display().to_string()],
    );
    assert!(!ok && out.contains("not a cluster name"), "{out}");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let (ok, out) = write_back(dir, &["--server", &format!("http://127.0.0.1:{port}")]);
    assert!(!ok && out.contains("/plan"), "{out}");
}

/// A `bosun dispatcher` on the tree; killed on drop.
struct Dispatcher {
    child: std::process::Child,
    port: u16,
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn write_back_from_a_running_dispatcher_makes_the_fallback_its_answer() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    // Only k8s-infra-prow-build takes jobs: the plan moves every
    // relocatable job there (eks-prow-build-cluster is blocked), and pinned
    // jobs stay pinned.
    tree(
        dir,
        "build_clusters:
  k8s-infra-prow-build: {kind: local}
  eks-prow-build-cluster: {kind: local, blocked: true}
  k8s-infra-kops-prow-build: {kind: local, blocked: true}
  k8s-infra-ppc64le-prow-build: {kind: local, blocked: true}
  default: {kind: local, blocked: true}
",
    );
    let before = snapshot(dir);
    let before_files = files(dir);
    let log = dir.join("dispatcher.log");
    let mut args: Vec<String> = vec!["dispatcher".into()];
    args.extend(config_args(dir));
    args.extend(
        [
            "--data-dir",
            &dir.join("data").display().to_string(),
            "--listen",
            "127.0.0.1:0",
        ]
        .map(String::from),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let port = common::logged_port(&mut child, &log, deadline);
    let server = Dispatcher { child, port };
    while common::request(server.port, "GET", "/readyz", None, None).0 != 200 {
        assert!(
            Instant::now() < deadline,
            "no plan:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, body) = common::request(server.port, "GET", "/plan", None, None);
    assert_eq!(status, 200, "{body}");
    let plan: serde_json::Value = serde_json::from_str(&body).unwrap();
    let plan: BTreeMap<String, String> = plan["assignments"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();

    let url = format!("http://127.0.0.1:{}", server.port);
    let (ok, out) = write_back(dir, &["--server", &url]);
    assert!(ok, "{out}");
    let after_files = files(dir);
    for (name, old) in &before_files {
        let new = &after_files[name];
        if old != new {
            only_cluster_lines_changed(
                name,
                std::str::from_utf8(old).unwrap(),
                std::str::from_utf8(new).unwrap(),
            );
        }
    }
    let after = snapshot(dir);
    same_jobs_but_clusters(&before, &after);
    // Every job the plan moves off the blocked cluster now says where the
    // dispatcher sends it, but for those whose value is shared or in-repo.
    let shared = [
        "wb-anchored",
        "wb-aliased",
        "wb-template",
        "wb-merged",
        "wb-in-repo",
    ];
    let (old, new) = (clusters(&before), clusters(&after));
    let mut moved = 0;
    for (job, (was, written)) in &old {
        let Some(planned) = plan.get(job) else {
            assert_eq!(&new[job].0, was, "{job}: not in the plan");
            continue;
        };
        let relocatable = !written || RELOCATABLE.contains(&was.as_str());
        let expected = if was != planned
            && relocatable
            && RELOCATABLE.contains(&planned.as_str())
            && !shared.contains(&job.as_str())
        {
            moved += 1;
            planned
        } else {
            was
        };
        assert_eq!(&new[job].0, expected, "{job}\n{out}");
        if was == "eks-prow-build-cluster" && !shared.contains(&job.as_str()) {
            assert_eq!(
                expected, "k8s-infra-prow-build",
                "{job}: off the blocked cluster"
            );
        }
    }
    assert!(moved >= 5, "{moved} moved\n{out}");
    // The fallback now agrees with the dispatcher: nothing more to write.
    let (ok, again) = write_back(dir, &["--server", &url]);
    assert!(ok, "{again}");
    assert!(again.contains("0 job(s) in 0 file(s)"), "{again}");
}

// --- OpenShift.

fn openshift_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bosun-dispatch/tests/fixtures/openshift")
}

/// OpenShift's layout: job files by org/repo, each job writing a cluster.
const OS_JOBS: &[(&str, &str, &str, &str)] = &[
    // (file, job, written cluster, labels)
    (
        "openshift/installer/openshift-installer-main-presubmits.yaml",
        "pull-ci-openshift-installer-main-unit",
        "build01",
        "",
    ),
    (
        "openshift/console/openshift-console-main-presubmits.yaml",
        "pull-ci-openshift-console-main-unit",
        "build03",
        "",
    ),
    (
        "openshift/console/openshift-console-main-presubmits.yaml",
        "pull-ci-openshift-console-main-pinned",
        "build06",
        "ci-operator.openshift.io/cluster: build06",
    ),
    (
        "acme/widget/acme-widget-main-presubmits.yaml",
        "pull-ci-acme-widget-main-unit",
        "build09",
        "",
    ),
    (
        "acme/widget/acme-widget-main-presubmits.yaml",
        "pull-ci-acme-widget-main-lint",
        "build09",
        "",
    ),
    (
        "openshift/hive/openshift-hive-main-periodics.yaml",
        "periodic-ci-openshift-hive-main-manual",
        "hive-manual",
        "",
    ),
];

#[test]
fn openshift_build_farm_lists_are_regenerated_and_nothing_else() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let mut texts: BTreeMap<&str, String> = BTreeMap::new();
    for (file, job, cluster, label) in OS_JOBS {
        let labels = if label.is_empty() {
            String::new()
        } else {
            format!("    labels:\n      {label}\n")
        };
        let (head, kind) = if file.ends_with("periodics.yaml") {
            ("periodics:\n", "  interval: 1h\n")
        } else {
            ("presubmits:\n  openshift/x:\n", "    always_run: true\n")
        };
        let item = if file.ends_with("periodics.yaml") {
            format!("- name: {job} # {cluster} today\n  cluster: {cluster}\n{kind}  spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n")
        } else {
            format!("  - name: {job} # {cluster} today\n    cluster: {cluster}\n{kind}{labels}    spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n")
        };
        texts
            .entry(file)
            .or_insert_with(|| head.to_string())
            .push_str(&item);
    }
    for (file, text) in &texts {
        let path = dir.join("jobs").join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let clusters = [
        "build01",
        "build02",
        "build03",
        "build04",
        "build06",
        "build09",
        "hive-manual",
    ];
    std::fs::write(
        dir.join("config.yaml"),
        std::iter::once("build_clusters:\n".to_string())
            .chain(clusters.iter().map(|c| format!("  {c}: {{kind: local}}\n")))
            .collect::<String>(),
    )
    .unwrap();
    std::fs::copy(
        openshift_fixtures().join("_config.yaml"),
        dir.join("_config.yaml"),
    )
    .unwrap();
    let plan = serde_json::json!({
        // Rule 12 (listed under build01): to build04, whose entry is `{}`.
        "pull-ci-openshift-installer-main-unit": "build04",
        // Rule 12 (build03) to build01.
        "pull-ci-openshift-console-main-unit": "build01",
        // Rule 5: pinned, as it is.
        "pull-ci-openshift-console-main-pinned": "build06",
        // Rule 13: the file goes to build03's list.
        "pull-ci-acme-widget-main-unit": "build03",
        // A manual cluster would pin it (rule 2).
        "pull-ci-acme-widget-main-lint": "hive-manual",
        "periodic-ci-openshift-hive-main-manual": "hive-manual",
    });
    std::fs::write(dir.join("plan.json"), plan.to_string()).unwrap();
    let old_config = std::fs::read_to_string(dir.join("_config.yaml")).unwrap();
    let before_files = files(&dir.join("jobs"));
    let run = |dry: bool| {
        let mut args: Vec<String> = [
            "dispatch",
            "write-back",
            "--config",
            &dir.join("config.yaml").display().to_string(),
            "--job-config",
            &dir.join("jobs").display().to_string(),
            "--openshift-config",
            &dir.join("_config.yaml").display().to_string(),
            "--openshift-clusters",
            &openshift_fixtures()
                .join("_clusters.yaml")
                .display()
                .to_string(),
            "--plan",
            &dir.join("plan.json").display().to_string(),
        ]
        .map(String::from)
        .to_vec();
        if dry {
            args.push("--dry-run".into());
        }
        let out = bosun(&args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .replace(&dir.display().to_string(), "DIR");
        assert!(out.status.success(), "{text}");
        text
    };
    let dry = run(true);
    assert_eq!(
        std::fs::read_to_string(dir.join("_config.yaml")).unwrap(),
        old_config
    );
    expect![[r#"
        acme/widget/acme-widget-main-presubmits.yaml: pull-ci-acme-widget-main-unit: build09 -> build03
        openshift/console/openshift-console-main-presubmits.yaml: pull-ci-openshift-console-main-unit: build03 -> build01
        openshift/installer/openshift-installer-main-presubmits.yaml: pull-ci-openshift-installer-main-unit: build01 -> build04
        left alone:
          acme/widget/acme-widget-main-presubmits.yaml: pull-ci-acme-widget-main-lint: build09 -> hive-manual: hive-manual is in manualClusters: writing it would pin the job (openshift rule 2)
        DIR/_config.yaml: buildFarm.aws.build01.filenames: 1 file(s), +1 -3
          + openshift-console-main-presubmits.yaml
          - duplicated-file-presubmits.yaml
          - openshift-installer-main-presubmits.yaml
          - openshift-origin-main-periodics.yaml
        DIR/_config.yaml: buildFarm.aws.build03.filenames: 1 file(s), +1 -2
          + acme-widget-main-presubmits.yaml
          - infra-image-mirroring.yaml
          - openshift-console-main-presubmits.yaml
        DIR/_config.yaml: buildFarm.aws.build05.filenames: 0 file(s), +0 -1
          - openshift-blocked-main-presubmits.yaml
        DIR/_config.yaml: buildFarm.gcp.build02.filenames: 0 file(s), +0 -2
          - duplicated-file-presubmits.yaml
          - openshift-release-master-periodics.yaml
        DIR/_config.yaml: buildFarm.gcp.build04.filenames: 1 file(s), +1 -0
          + openshift-installer-main-presubmits.yaml
        3 job(s) in 3 file(s), 5 buildFarm list(s), 1 left alone (dry run: nothing written)
    "#]]
    .assert_eq(&dry);
    let wet = run(false);
    assert_eq!(
        wet.replace("; 4 file(s) written", " (dry run: nothing written)"),
        dry
    );

    // The job files: only cluster lines.
    let after_files = files(&dir.join("jobs"));
    for (name, old) in &before_files {
        only_cluster_lines_changed(
            name,
            std::str::from_utf8(old).unwrap(),
            std::str::from_utf8(&after_files[name]).unwrap(),
        );
    }

    // `_config.yaml`: outside `buildFarm`, byte for byte the same; inside,
    // only the lists (and `build04: {}` became a block holding one).
    let new_config = std::fs::read_to_string(dir.join("_config.yaml")).unwrap();
    let cut = |t: &str| -> (String, String, String) {
        let start = t.find("buildFarm:\n").unwrap();
        let end = t.find("\ncloudMapping:").unwrap();
        (
            t[..start].to_string(),
            t[start..end].to_string(),
            t[end..].to_string(),
        )
    };
    let (head_a, farm_a, tail_a) = cut(&old_config);
    let (head_b, farm_b, tail_b) = cut(&new_config);
    assert_eq!(head_a, head_b);
    assert_eq!(tail_a, tail_b);
    let keys = |farm: &str| -> Vec<String> {
        farm.lines()
            .filter(|l| {
                !l.trim_start().starts_with("- ") && !l.trim_start().starts_with("filenames")
            })
            .map(|l| l.trim_end_matches(" {}").to_string())
            .collect()
    };
    assert_eq!(keys(&farm_a), keys(&farm_b), "{farm_b}");
    let old = OsConfig::parse("_config.yaml", old_config.as_bytes()).unwrap();
    let new = OsConfig::parse("_config.yaml", new_config.as_bytes()).unwrap();
    assert_eq!(old.default, new.default);
    assert_eq!(old.determine_e2e_by_job, new.determine_e2e_by_job);
    assert_eq!(old.cloud_mapping, new.cloud_mapping);
    assert_eq!(old.ssh_bastion, new.ssh_bastion);
    assert_eq!(old.kvm, new.kvm);
    assert_eq!(old.no_builds, new.no_builds);
    assert_eq!(old.manual_clusters, new.manual_clusters);
    assert_eq!(
        old.groups.keys().collect::<Vec<_>>(),
        new.groups.keys().collect::<Vec<_>>()
    );
    let set = |v: &[&str]| {
        v.iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<String>>()
    };
    let farm = |cloud: &str, cluster: &str| new.build_farm[cloud][cluster].clone();
    assert_eq!(
        farm("aws", "build01"),
        set(&["openshift-console-main-presubmits.yaml"])
    );
    assert_eq!(
        farm("aws", "build03"),
        set(&["acme-widget-main-presubmits.yaml"])
    );
    assert_eq!(farm("aws", "build05"), set(&[]));
    assert_eq!(farm("gcp", "build02"), set(&[]));
    assert_eq!(
        farm("gcp", "build04"),
        set(&["openshift-installer-main-presubmits.yaml"])
    );

    // Once more: the lists are as the plan says; nothing changes.
    let again = run(false);
    assert!(
        again.contains("0 job(s) in 0 file(s), 1 left alone; 0 file(s) written"),
        "{again}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("_config.yaml")).unwrap(),
        new_config
    );
}

/// The whole test-infra corpus: every relocatable job moved to the other
/// relocatable cluster. Every changed line is a `cluster:` line, and the
/// corpus reloads with the same jobs, on the plan's clusters.
#[test]
fn the_whole_corpus_changes_only_cluster_lines() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let corpus = corpus_jobs();
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let (src, dst) = (e.path(), to.join(e.file_name()));
            if src.is_dir() {
                copy(&src, &dst);
            } else {
                std::fs::copy(&src, &dst).unwrap();
            }
        }
    }
    copy(&corpus.join("jobs"), &dir.join("jobs"));
    let config = std::fs::read_to_string(corpus.join("prow/config.yaml")).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "{config}dispatcher:\n  relocatable_clusters: [{}]\n",
            RELOCATABLE.join(", ")
        ),
    )
    .unwrap();
    let options = LoadOptions {
        config: Some(dir.join("config.yaml")),
        job_config: vec![dir.join("jobs")],
        ..LoadOptions::default()
    };
    let before = load(&options, &OsFiles).snapshot.expect("the corpus loads");
    let before_files = files(&dir.join("jobs"));
    let other = |c: &str| match c {
        "k8s-infra-prow-build" => "eks-prow-build-cluster".to_string(),
        "eks-prow-build-cluster" => "k8s-infra-prow-build".to_string(),
        c => c.to_string(),
    };
    let plan: BTreeMap<String, String> = clusters(&before)
        .into_iter()
        .map(|(job, (cluster, _))| (job, other(&cluster)))
        .collect();
    let report = bosun_dispatcher::writeback::write_back(
        &before,
        &[dir.join("jobs")],
        None,
        &plan,
        false,
        &indicatif::ProgressBar::hidden(),
    );
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.left.is_empty(), "{}", report.to_text());
    assert!(report.changes.len() > 3000, "{}", report.changes.len());
    let after_files = files(&dir.join("jobs"));
    let mut lines = 0;
    for (name, old) in &before_files {
        let new = &after_files[name];
        if old != new {
            lines += only_cluster_lines_changed(
                name,
                std::str::from_utf8(old).unwrap(),
                std::str::from_utf8(new).unwrap(),
            );
        }
    }
    assert_eq!(lines, report.changes.len());
    let after = load(&options, &OsFiles)
        .snapshot
        .expect("the corpus reloads");
    same_jobs_but_clusters(&before, &after);
    // Each job of a rewritten name is on the plan's cluster.
    let rewritten: BTreeSet<&str> = report.changes.iter().map(|c| c.job.as_str()).collect();
    let check = |name: &str, cluster: &str, was: &str| {
        if rewritten.contains(name) && RELOCATABLE.contains(&was) {
            assert_eq!(cluster, plan[name], "{name}");
        } else if !rewritten.contains(name) {
            assert_eq!(cluster, was, "{name}");
        }
    };
    for (x, y) in before.periodics.iter().zip(&after.periodics) {
        check(&y.base.name, &y.base.cluster, &x.base.cluster);
    }
    for (repo, jobs) in &before.presubmits {
        for (x, y) in jobs.iter().zip(&after.presubmits[repo]) {
            check(&y.base.name, &y.base.cluster, &x.base.cluster);
        }
    }
    for (repo, jobs) in &before.postsubmits {
        for (x, y) in jobs.iter().zip(&after.postsubmits[repo]) {
            check(&y.base.name, &y.base.cluster, &x.base.cluster);
        }
    }
}

/// On a terminal, write-back shows how far it is (the job files read or
/// written, `N/M files`); through a pipe (every other test here) it prints
/// its report alone.
#[test]
fn write_back_shows_progress_on_a_terminal_only() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    tree(dir, "");
    let plan: BTreeMap<&str, &str> = PLAN.iter().copied().collect();
    std::fs::write(
        dir.join("plan.json"),
        serde_json::to_string(&serde_json::json!({ "assignments": plan })).unwrap(),
    )
    .unwrap();
    let plan = dir.join("plan.json").display().to_string();
    let (ok, piped) = write_back(dir, &["--plan", &plan, "--dry-run"]);
    assert!(ok, "{piped}");
    assert!(!piped.contains("job files"), "{piped}");
    assert!(!piped.contains('\r'), "{piped:?}");
    // The same command on a pseudo-terminal (util-linux `script`).
    let mut args: Vec<String> = vec!["dispatch".into(), "write-back".into()];
    args.extend(config_args(dir));
    args.extend(["--plan".to_string(), plan, "--dry-run".into()]);
    let quoted: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_bosun").to_string())
        .chain(args)
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let out = Command::new("script")
        .args(["-qec", &quoted.join(" "), "/dev/null"])
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("util-linux's script");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    let files = shown
        .split("reading job files")
        .nth(1)
        .unwrap_or_else(|| panic!("no progress on a terminal: {shown:?}"));
    assert!(files.contains(" files"), "{shown:?}");
}
