//! One repository's in-repo configuration loaded against a snapshot in force
//! (`load_repo`), and snapshots taking repositories' jobs in and letting them
//! go (`Snapshot::repo_jobs`, `Snapshot::with_repos`): the jobs, presets,
//! pod specs and diagnostics must be those `load` gives for the central
//! configuration plus that repository's checkout.
//!
//! The files are in memory; a repository's files are under `org/app@c0ffee`,
//! as the forge's loader names a commit's tree.

use bosun_config::model::{LoadStats, PresetDef, Snapshot};
use bosun_config::source::MemFiles;
use bosun_config::types::{InRepoSource, JobSource, JobType};
use bosun_config::{
    load, load_repo, Job, LoadOptions, Loaded, RepoJobs, RepoLoadOptions, RepoLoaded,
};
use k8s_openapi::api::core::v1::PodSpec;

use crate::common::y;

const CONFIG: &str = "/c/config.yaml";
const JOBS: &str = "/c/jobs/jobs.yaml";
const APP: &str = "org/app";
const APP_ROOT: &str = "org/app@c0ffee";
const LIB: &str = "org/lib";
const LIB_ROOT: &str = "org/lib@1eaf";

const CENTRAL_CONFIG: &str = "
    build_clusters:
      default: {kind: local}
      build: {kind: local}
      trusted: {kind: local}
    in_repo_config:
      allowed_clusters:
        org/app: [build, kube-a]
";

/// Central presets (one the repositories' jobs use, one they do not), a
/// central periodic, and central presubmits of org/app and of another
/// repository.
const CENTRAL_JOBS: &str = "
    presets:
    - labels: {preset-cache: 'true'}
      env: [{name: CACHE, value: /central}]
    - labels: {preset-unused: 'true'}
      env: [{name: UNUSED, value: x}]
    periodics:
    - name: nightly
      cron: 0 3 * * *
      spec: {containers: [{image: alpine}]}
    presubmits:
      org/app:
      - name: central-unit
        spec: {containers: [{image: alpine}]}
      org/other:
      - name: other-unit
        spec: {containers: [{image: alpine}]}
";

/// `.prow.yaml` with a preset of its own, presubmits using it and the central
/// one, and a postsubmit on another allowed cluster.
const PROW_YAML: &str = "
    presets:
    - labels: {preset-repo: 'true'}
      env: [{name: REPO, value: own}]
    presubmits:
    - name: unit
      labels: {preset-cache: 'true', preset-repo: 'true'}
      spec: {containers: [{image: golang}]}
    - name: lint
      cluster: build
      spec: {containers: [{image: golangci}]}
    postsubmits:
    - name: publish
      labels: {preset-cache: 'true'}
      branches: [main]
      spec: {containers: [{image: golang}]}
";

/// Lighthouse triggers: a pipeline presubmit and a periodic with a `source:`.
const TRIGGERS: &str = "
    apiVersion: config.lighthouse.jenkins-x.io/v1alpha1
    kind: TriggerConfig
    spec:
      presubmits:
      - name: pr
        source: pullrequest.yaml
      periodics:
      - name: daily
        cron: 0 4 * * *
        source: daily.yaml
";

const PIPELINE_RUN: &str = "
    apiVersion: tekton.dev/v1
    kind: PipelineRun
    spec:
      pipelineSpec:
        tasks:
        - name: greet
          taskSpec:
            steps:
            - name: hello
              image: alpine
";

/// The central files, and the repositories' `files` under their roots.
fn files(repos: &[(&str, &[(&str, &str)])]) -> MemFiles {
    let mut fs = MemFiles::new();
    fs.file(CONFIG, y(CENTRAL_CONFIG))
        .file(JOBS, y(CENTRAL_JOBS));
    for (root, files) in repos {
        for (path, text) in *files {
            fs.file(format!("{root}/{path}"), y(text));
        }
    }
    fs
}

/// The central configuration, plus checkouts `(repo, root)`.
fn load_with(fs: &MemFiles, checkouts: &[(&str, &str)]) -> Loaded {
    let opts = LoadOptions {
        config: Some(CONFIG.into()),
        job_config: vec!["/c/jobs".into()],
        in_repo: checkouts
            .iter()
            .map(|(repo, root)| InRepoSource {
                repo: repo.to_string(),
                path: root.to_string(),
                ..InRepoSource::default()
            })
            .collect(),
        ..LoadOptions::default()
    };
    load(&opts, fs)
}

#[track_caller]
fn snapshot(loaded: Loaded) -> Snapshot {
    let lines: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
    loaded
        .snapshot
        .unwrap_or_else(|| panic!("a snapshot; diagnostics: {lines:#?}"))
}

fn options(repo: &str, root: &str) -> RepoLoadOptions {
    RepoLoadOptions {
        repo: repo.into(),
        branch: "main".into(),
        root: root.into(),
        kubeconfig_clusters: Vec::new(),
        schedule_check: None,
    }
}

fn lines(loaded: &RepoLoaded) -> Vec<String> {
    loaded.diagnostics.iter().map(ToString::to_string).collect()
}

#[track_caller]
fn jobs(loaded: RepoLoaded) -> RepoJobs {
    let lines = lines(&loaded);
    loaded
        .jobs
        .unwrap_or_else(|| panic!("jobs; diagnostics: {lines:#?}"))
}

/// A job as a run sees it: the job without its preset indexes, the presets
/// they name and the pod spec they make.
type Seen<K> = (Job<K>, Vec<PresetDef>, Option<PodSpec>);

fn seen<K: Clone>(s: &Snapshot, job: &Job<K>) -> Seen<K> {
    let presets = job.presets.iter().map(|&i| s.presets[i].clone()).collect();
    let spec = s.pod_spec(job);
    let job = Job {
        presets: Vec::new(),
        ..job.clone()
    };
    (job, presets, spec)
}

/// Every in-repo job of `repo` in `s`, as runs see them.
#[allow(clippy::type_complexity)]
fn seen_repo(
    s: &Snapshot,
    repo: &str,
) -> (
    Vec<Seen<bosun_config::types::PeriodicFields>>,
    Vec<Seen<bosun_config::types::PresubmitFields>>,
    Vec<Seen<bosun_config::types::PostsubmitFields>>,
) {
    let own = |src: &JobSource| matches!(src, JobSource::InRepo { repo: r, .. } if r == repo);
    let periodics = s.periodics.iter().filter(|j| own(&j.source));
    let pre = s.presubmits.get(repo).into_iter().flatten();
    let post = s.postsubmits.get(repo).into_iter().flatten();
    (
        periodics.map(|j| seen(s, j)).collect(),
        pre.filter(|j| own(&j.source)).map(|j| seen(s, j)).collect(),
        post.filter(|j| own(&j.source))
            .map(|j| seen(s, j))
            .collect(),
    )
}

/// The environment of the first container of `job`'s pod in `s`.
fn env<K>(s: &Snapshot, job: &Job<K>) -> Vec<(String, String)> {
    let spec = s.pod_spec(job).expect("a spec");
    let env = spec.containers[0].env.clone().unwrap_or_default();
    env.into_iter()
        .map(|e| (e.name, e.value.unwrap_or_default()))
        .collect()
}

fn pair(name: &str, value: &str) -> (String, String) {
    (name.to_string(), value.to_string())
}

/// `load_repo` over the central snapshot gives what `load` gives for the
/// central configuration plus the checkout: the same jobs with the same
/// presets (`repo_jobs` of the combined snapshot is equal to it), the same
/// diagnostics, and in a snapshot (`with_repos`) the same pod specs; a
/// central preset applies to the repository's jobs.
#[test]
fn load_repo_gives_the_jobs_load_gives_for_the_checkout() {
    let prow_yaml_and_lighthouse: &[(&str, &str)] = &[
        (".prow.yaml", PROW_YAML),
        (".lighthouse/jx/triggers.yaml", TRIGGERS),
        (".lighthouse/jx/pullrequest.yaml", PIPELINE_RUN),
        (".lighthouse/jx/daily.yaml", PIPELINE_RUN),
    ];
    // `.prow/` wins over `.prow.yaml`, which is not read then.
    let prow_dir: &[(&str, &str)] = &[
        (".prow/presubmits.yaml", PROW_YAML),
        (
            ".prow/more/post.yaml",
            "
            postsubmits:
            - name: deploy
              labels: {preset-cache: 'true'}
              spec: {containers: [{image: golang}]}
            ",
        ),
        (".prow.yaml", "presubmits: [{name: ignored}]"),
    ];
    for (tree, want_names, want_files) in [
        (
            prow_yaml_and_lighthouse,
            vec![
                (JobType::Periodic, "daily"),
                (JobType::Presubmit, "lint"),
                (JobType::Presubmit, "pr"),
                (JobType::Presubmit, "unit"),
                (JobType::Postsubmit, "publish"),
            ],
            4,
        ),
        (
            prow_dir,
            vec![
                (JobType::Presubmit, "lint"),
                (JobType::Presubmit, "unit"),
                (JobType::Postsubmit, "deploy"),
                (JobType::Postsubmit, "publish"),
            ],
            2,
        ),
    ] {
        let fs = files(&[(APP_ROOT, tree)]);
        let base = snapshot(load_with(&fs, &[]));
        let combined = load_with(&fs, &[(APP, APP_ROOT)]);
        let combined_lines: Vec<String> = combined
            .diagnostics
            .iter()
            .map(ToString::to_string)
            .collect();
        let combined = snapshot(combined);

        let loaded = load_repo(&base, &options(APP, APP_ROOT), &fs);
        assert_eq!(lines(&loaded), combined_lines, "the same diagnostics");
        assert_eq!(loaded.stats.files, want_files);
        let jobs = jobs(loaded);
        assert_eq!(jobs.names(), want_names);
        let presubmits = want_names.iter().filter(|(k, _)| *k == JobType::Presubmit);
        assert_eq!(jobs.counts().presubmits, presubmits.count());
        assert_eq!(combined.repo_jobs(APP).as_ref(), Some(&jobs));
        assert!(jobs
            .periodics
            .iter()
            .all(|p| p.identity() == "org/app:daily"));
        assert!(jobs
            .presubmits
            .iter()
            .all(|j| j.origin.file.starts_with(APP_ROOT)));
        // The central preset the jobs use is copied in; the unused one is not.
        let preset_env: Vec<&str> = jobs
            .presets
            .iter()
            .map(|p| p.preset.env[0].name.as_str())
            .collect();
        assert_eq!(preset_env, ["CACHE", "REPO"]);

        let with = base.with_repos([(APP.to_string(), Some(jobs))]);
        assert!(with.version > base.version);
        assert_eq!(seen_repo(&with, APP), seen_repo(&combined, APP));
        assert_eq!(with.counts(), combined.counts());
        assert_eq!(with.stats, combined.stats);
        let unit = &with.presubmits[APP]
            .iter()
            .find(|j| j.name() == "unit")
            .expect("unit");
        assert_eq!(
            env(&with, unit),
            [pair("CACHE", "/central"), pair("REPO", "own")],
            "the central preset, then the repository's"
        );
        // The central jobs are the snapshot's, untouched.
        assert_eq!(with.periodic("nightly"), base.periodic("nightly"));
        assert_eq!(with.presubmits["org/other"], base.presubmits["org/other"]);
    }
}

/// A file with problems gives its diagnostics (at the file and line under
/// the repository's root, as `load` gives them) and no jobs.
#[test]
fn a_bad_file_gives_its_diagnostics_and_no_jobs() {
    let fs = files(&[(
        APP_ROOT,
        &[(
            ".prow.yaml",
            "
            presubmits:
            - name: unit
              spec: {containers: [{image: golang}]}
            periodics:
            - name: nope
            ",
        )],
    )]);
    let base = snapshot(load_with(&fs, &[]));
    let loaded = load_repo(&base, &options(APP, APP_ROOT), &fs);
    let want = [
        "org/app@c0ffee/.prow.yaml:4:1: error: periodics are not allowed in in-repo Prow config\n  hint: define periodics in the central job config, or in .lighthouse/*/triggers.yaml",
    ];
    assert_eq!(lines(&loaded), want);
    assert!(loaded.jobs.is_none());
    assert_eq!(loaded.errors(), 1);
    assert_eq!(loaded.stats.files, 1, "what was read, also on errors");
    let combined = load_with(&fs, &[(APP, APP_ROOT)]);
    let combined: Vec<String> = combined
        .diagnostics
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(combined, want);

    // Not a repository, a bad branch, no checkout: said, no jobs.
    for (opts, want) in [
        (
            RepoLoadOptions {
                repo: "app".into(),
                ..options(APP, APP_ROOT)
            },
            "org/app@c0ffee: error: repository \"app\" must be ORG/REPO",
        ),
        (
            RepoLoadOptions {
                branch: "a..b".into(),
                ..options(APP, APP_ROOT)
            },
            "org/app@c0ffee: error: \"a..b\" is not a valid branch name for org/app",
        ),
        (
            options(APP, "org/app@gone"),
            "org/app@gone: error: cannot read in-repo checkout of org/app: No such file or directory (os error 2)",
        ),
    ] {
        let loaded = load_repo(&base, &opts, &fs);
        assert_eq!(lines(&loaded), [want]);
        assert!(loaded.jobs.is_none());
    }
}

/// A repository's pre- or postsubmit may not share a name (on intersecting
/// branches) with a central job of the same repository, as in `load`; a
/// central job of another repository, and the repository's own jobs of the
/// snapshot (its previous version), do not count.
#[test]
fn a_repo_job_duplicating_a_central_job_of_its_repository_is_an_error() {
    let tree: &[(&str, &str)] = &[(
        ".prow.yaml",
        "
        presubmits:
        - name: central-unit
          spec: {containers: [{image: golang}]}
        - name: other-unit
          spec: {containers: [{image: golang}]}
        ",
    )];
    let fs = files(&[(APP_ROOT, tree)]);
    let base = snapshot(load_with(&fs, &[]));
    let loaded = load_repo(&base, &options(APP, APP_ROOT), &fs);
    let want = [
        "org/app@c0ffee/.prow.yaml:2:3: error: job central-unit: duplicated presubmit jobs (consider both inrepo and central config): [central-unit]\n  hint: also defined at /c/jobs/jobs.yaml:12:5 for intersecting branches",
    ];
    assert_eq!(lines(&loaded), want);
    assert!(loaded.jobs.is_none());
    let combined = load_with(&fs, &[(APP, APP_ROOT)]);
    let combined: Vec<String> = combined
        .diagnostics
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(combined, want, "as load says it");

    // The snapshot holds the repository's previous version: its jobs do
    // not clash with the new one's.
    let fs = files(&[(APP_ROOT, &[(".prow.yaml", PROW_YAML)])]);
    let base = snapshot(load_with(&fs, &[(APP, APP_ROOT)]));
    assert!(base.repo_jobs(APP).is_some());
    let loaded = load_repo(&base, &options(APP, APP_ROOT), &fs);
    assert_eq!(lines(&loaded), Vec::<String>::new());
    assert_eq!(jobs(loaded).counts().presubmits, 2);
}

/// The repository's jobs may use only the clusters
/// `in_repo_config.allowed_clusters` allows it, among the snapshot's
/// `build_clusters` and the kubeconfig contexts given.
#[test]
fn a_repo_job_on_a_cluster_in_repo_config_refuses_is_an_error() {
    let tree: &[(&str, &str)] = &[(
        ".prow.yaml",
        "
        presubmits:
        - name: on-trusted
          cluster: trusted
          spec: {containers: [{image: golang}]}
        - name: on-kube
          cluster: kube-a
          spec: {containers: [{image: golang}]}
        ",
    )];
    let fs = files(&[(APP_ROOT, tree)]);
    let base = snapshot(load_with(&fs, &[]));
    let loaded = load_repo(&base, &options(APP, APP_ROOT), &fs);
    assert_eq!(
        lines(&loaded),
        [
            "org/app@c0ffee/.prow.yaml:3:3: error: job on-trusted: cluster \"trusted\" is not allowed for repository \"org/app\"\n  hint: list it in in_repo_config.allowed_clusters",
            "org/app@c0ffee/.prow.yaml:6:3: error: job on-kube: job configuration for \"on-kube\" specifies unknown 'cluster' value \"kube-a\"\n  hint: known clusters: default, build, trusted",
        ]
    );
    assert!(loaded.jobs.is_none());

    // A kubeconfig context is a cluster too.
    let opts = RepoLoadOptions {
        kubeconfig_clusters: vec!["kube-a".into()],
        ..options(APP, APP_ROOT)
    };
    let loaded = load_repo(&base, &opts, &fs);
    assert_eq!(
        lines(&loaded),
        ["org/app@c0ffee/.prow.yaml:3:3: error: job on-trusted: cluster \"trusted\" is not allowed for repository \"org/app\"\n  hint: list it in in_repo_config.allowed_clusters"]
    );
}

/// `repo_jobs` then `with_repos` gives the same jobs and pod specs back;
/// `with_repos(repo, None)` lets the repository's jobs and presets go and
/// keeps everything else, pod specs included.
#[test]
fn repo_jobs_and_with_repos_round_trip() {
    let lib: &[(&str, &str)] = &[(
        ".prow.yaml",
        "
        presets:
        - labels: {preset-lib: 'true'}
          env: [{name: LIB, value: lib}]
        presubmits:
        - name: lib-unit
          labels: {preset-cache: 'true', preset-lib: 'true'}
          spec: {containers: [{image: golang}]}
        ",
    )];
    let app: &[(&str, &str)] = &[
        (".prow.yaml", PROW_YAML),
        (".lighthouse/jx/triggers.yaml", TRIGGERS),
        (".lighthouse/jx/pullrequest.yaml", PIPELINE_RUN),
        (".lighthouse/jx/daily.yaml", PIPELINE_RUN),
    ];
    let fs = files(&[(APP_ROOT, app), (LIB_ROOT, lib)]);
    let both = snapshot(load_with(&fs, &[(APP, APP_ROOT), (LIB, LIB_ROOT)]));
    assert_eq!(both.repo_jobs("org/none"), None);

    let app_jobs = both.repo_jobs(APP).expect("org/app's jobs");
    assert_eq!(app_jobs.counts().periodics, 1);
    let again = both.with_repos([(APP.to_string(), Some(app_jobs.clone()))]);
    assert!(again.version > both.version);
    assert_eq!(seen_repo(&again, APP), seen_repo(&both, APP));
    assert_eq!(seen_repo(&again, LIB), seen_repo(&both, LIB));
    assert_eq!(again.repo_jobs(APP), Some(app_jobs));
    assert_eq!(again.presets.len(), both.presets.len());
    assert_eq!(again.stats, both.stats);

    let without = both.with_repos([(APP.to_string(), None)]);
    assert_eq!(without.repo_jobs(APP), None);
    assert_eq!(seen_repo(&without, LIB), seen_repo(&both, LIB));
    let own_presets = |s: &Snapshot, repo: &str| {
        s.presets
            .iter()
            .filter(|p| matches!(&p.source, JobSource::InRepo { repo: r, .. } if r == repo))
            .count()
    };
    assert_eq!(own_presets(&both, APP), 1);
    assert_eq!(own_presets(&without, APP), 0);
    assert_eq!(own_presets(&without, LIB), 1);
    assert_eq!(without.periodics.len(), 1, "the central periodic");
    assert_eq!(without.presubmits[APP].len(), 1, "the central presubmit");
    assert_eq!(without.presubmits[APP][0].name(), "central-unit");
    assert!(!without.postsubmits.contains_key(APP));
    assert_eq!(without.repo_stats.get(APP), None);
    let lib_stats = both.repo_stats[LIB].clone();
    assert_eq!(
        without.stats,
        LoadStats {
            files: 2 + lib_stats.files,
            bytes: fs_bytes(&[CONFIG, JOBS]) + lib_stats.bytes,
            ignored_files: 0,
        }
    );
    // And back: the same jobs and pod specs as before.
    let back = without.with_repos([(APP.to_string(), both.repo_jobs(APP))]);
    assert_eq!(seen_repo(&back, APP), seen_repo(&both, APP));
    assert_eq!(seen_repo(&back, LIB), seen_repo(&both, LIB));
    assert_eq!(back.stats, both.stats);
}

fn fs_bytes(paths: &[&str]) -> u64 {
    let fs = files(&[]);
    paths
        .iter()
        .map(|p| {
            bosun_config::FileSource::read(&fs, p.as_ref())
                .unwrap()
                .len() as u64
        })
        .sum()
}

/// Jobs validated against an older central configuration keep the central
/// preset they were validated with: it goes into the new snapshot as the
/// repository's own, applying to no other job, and leaves with the
/// repository.
#[test]
fn a_central_preset_the_snapshot_no_longer_has_stays_with_the_repository() {
    let fs = files(&[(APP_ROOT, &[(".prow.yaml", PROW_YAML)])]);
    let old_base = snapshot(load_with(&fs, &[]));
    let app = jobs(load_repo(&old_base, &options(APP, APP_ROOT), &fs));

    let mut changed = files(&[(APP_ROOT, &[(".prow.yaml", PROW_YAML)])]);
    changed.file(JOBS, y(&CENTRAL_JOBS.replace("/central", "/central-2")));
    let new_base = snapshot(load_with(&changed, &[]));
    let with = new_base.with_repos([(APP.to_string(), Some(app))]);
    let unit = with.presubmits[APP]
        .iter()
        .find(|j| j.name() == "unit")
        .expect("unit");
    assert_eq!(
        env(&with, unit),
        [pair("CACHE", "/central"), pair("REPO", "own")]
    );
    let central: Vec<&str> = with
        .presets
        .iter()
        .filter(|p| p.source == JobSource::Central)
        .map(|p| p.preset.env[0].value.as_deref().unwrap_or_default())
        .collect();
    assert_eq!(central, ["/central-2", "x"], "the new central presets only");
    let without = with.with_repos([(APP.to_string(), None)]);
    assert_eq!(without.presets, new_base.presets);
}

/// With a dispatcher, jobs sharing a name on different clusters are warned
/// about as `load` warns: against the central jobs, in `load`'s order, on
/// the repository's jobs only.
#[test]
fn jobs_sharing_a_name_with_central_ones_on_another_cluster_warn() {
    let tree: &[(&str, &str)] = &[(
        ".prow.yaml",
        "
        presubmits:
        - name: nightly
          cluster: build
          spec: {containers: [{image: golang}]}
        postsubmits:
        - name: other-unit
          cluster: build
          spec: {containers: [{image: golang}]}
        ",
    )];
    let mut fs = files(&[(APP_ROOT, tree)]);
    fs.file(CONFIG, y(CENTRAL_CONFIG) + "dispatcher: {}\n");
    let base = snapshot(load_with(&fs, &[]));
    let loaded = load_repo(&base, &options(APP, APP_ROOT), &fs);
    let hint = "the dispatcher places all jobs of one name together\n  hint: give the jobs of one name the same cluster, or rename one";
    let want = [
        format!("org/app@c0ffee/.prow.yaml:3:3: warning: job nightly: jobs named nightly use different clusters (\"build\" here, \"default\" at /c/jobs/jobs.yaml:7:3): {hint}"),
        format!("org/app@c0ffee/.prow.yaml:7:3: warning: job other-unit: jobs named other-unit use different clusters (\"build\" here, \"default\" at /c/jobs/jobs.yaml:15:5): {hint}"),
    ];
    assert_eq!(lines(&loaded), want);
    assert_eq!(
        jobs(loaded).counts().postsubmits,
        1,
        "warnings keep the jobs"
    );
    let combined = load_with(&fs, &[(APP, APP_ROOT)]);
    let combined: Vec<String> = combined
        .diagnostics
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(combined, want, "as load says it");
}
