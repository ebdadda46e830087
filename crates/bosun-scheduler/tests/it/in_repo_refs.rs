//! An in-repo periodic runs on its repository: its runs carry refs
//! `{org, repo, base_ref: branch}` (the branch its source is checked out on,
//! `main` by default) and the job gets the environment Prow derives from them.
//! A central periodic's runs have no refs.

use bosun_config::types::InRepoSource;
use bosun_config::{load, LoadOptions, OsFiles};
use bosun_store::memory::MemoryStore;
use bosun_store::Store;

const TRIGGERS: &str = "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1
kind: TriggerConfig
spec:
  periodics:
  - name: nightly
    cron: 0 4 * * *
    spec:
      containers:
      - image: alpine
        command: [env]
";

const CENTRAL: &str = "periodics:
- name: central
  interval: 1h
  extra_refs: [{org: acme, repo: tools, base_ref: main}]
  spec: {containers: [{image: alpine, command: [env]}]}
";

/// The scheduler's periodics of a checkout of `acme/widget` on `branch`
/// (none: the default) and one central periodic, each with the environment
/// of a run created from its template.
fn periodics(branch: Option<&str>) -> Vec<Periodic> {
    let dir = tempfile::tempdir().unwrap();
    let checkout = dir.path().join("widget");
    std::fs::create_dir_all(checkout.join(".lighthouse/jobs")).unwrap();
    std::fs::write(checkout.join(".lighthouse/jobs/triggers.yaml"), TRIGGERS).unwrap();
    std::fs::write(dir.path().join("jobs.yaml"), CENTRAL).unwrap();
    let opts = LoadOptions {
        job_config: vec![dir.path().join("jobs.yaml")],
        in_repo: vec![InRepoSource {
            repo: "acme/widget".into(),
            path: checkout.display().to_string(),
            branch: branch.map(String::from),
            ..InRepoSource::default()
        }],
        ..LoadOptions::default()
    };
    let loaded = load(&opts, &OsFiles);
    let snapshot = loaded
        .snapshot
        .unwrap_or_else(|| panic!("{:?}", loaded.diagnostics));
    let store = MemoryStore::default();
    let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
    let mut out: Vec<_> = bosun_scheduler::config::jobs(&snapshot)
        .into_iter()
        .map(|j| {
            let run = store
                .create_run(j.template.clone(), now)
                .unwrap()
                .run()
                .clone();
            (
                j.identity.to_string(),
                run.refs.as_deref().cloned(),
                bosun_job::env::job_env(&run),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

type Periodic = (
    String,
    Option<bosun_config::types::Refs>,
    Vec<(String, String)>,
);

/// The periodic `identity` of `jobs`.
fn find<'a>(jobs: &'a [Periodic], identity: &str) -> &'a Periodic {
    jobs.iter()
        .find(|j| j.0 == identity)
        .unwrap_or_else(|| panic!("no periodic {identity}"))
}

fn var<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

#[test]
fn an_in_repo_periodic_runs_on_its_repository_and_branch() {
    let jobs = periodics(Some("release-1.2"));
    let (_, refs, env) = find(&jobs, "acme/widget:nightly");
    let refs = refs.as_ref().expect("an in-repo periodic's run has refs");
    assert_eq!(
        (
            refs.org.as_str(),
            refs.repo.as_str(),
            refs.base_ref.as_deref()
        ),
        ("acme", "widget", Some("release-1.2"))
    );
    assert_eq!(var(env, "REPO_OWNER"), Some("acme"));
    assert_eq!(var(env, "REPO_NAME"), Some("widget"));
    assert_eq!(var(env, "PULL_BASE_REF"), Some("release-1.2"));
    assert_eq!(var(env, "JOB_NAME"), Some("nightly"));
    assert!(var(env, "JOB_SPEC")
        .unwrap()
        .contains("\"base_ref\":\"release-1.2\""));
}

#[test]
fn an_in_repo_periodic_defaults_to_main() {
    let jobs = periodics(None);
    let (_, refs, env) = find(&jobs, "acme/widget:nightly");
    assert_eq!(refs.as_ref().unwrap().base_ref.as_deref(), Some("main"));
    assert_eq!(var(env, "PULL_BASE_REF"), Some("main"));
}

#[test]
fn a_central_periodic_has_no_refs_and_no_refs_environment() {
    let jobs = periodics(None);
    let (_, refs, env) = find(&jobs, "central");
    assert!(refs.is_none());
    assert_eq!(var(env, "REPO_OWNER"), None);
    assert_eq!(var(env, "PULL_BASE_REF"), None);
}
