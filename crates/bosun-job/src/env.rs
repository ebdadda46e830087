//! Prow's run environment, for every kind of run: the variables Prow gives
//! every container of a pod (`prow_env`, Prow's `EnvForSpec`: `JOB_NAME`,
//! `BUILD_ID`, the refs' `PULL_*`, `SRC_HOST`, ...) with `JOB_SPEC`, the
//! downward API's `JobSpec` as Go writes it (`job_spec_json`); and the
//! smaller set a local process and a PipelineRun's steps get (`job_env`,
//! with the run as `job_spec` shows it).

use std::collections::BTreeMap;

use bosun_config::types::{JobType, Refs};
use bosun_store::template::SpecSnapshot;
use bosun_store::Run;
use serde::Serialize;

use crate::gojson::{empty_str, go_json, RefsJson};

/// The environment Prow gives every container of a run's pod
/// (`EnvForSpec`), by name (the order of the pod's variables); `JOB_SPEC`
/// carries `decoration`, the run's decoration config if it is decorated.
/// A decorated pod's containers also get `ARTIFACTS` and `GOPATH`
/// (added by the decorated pod's builder).
pub fn prow_env<D: Serialize>(
    run: &Run,
    spec: &SpecSnapshot,
    decoration: Option<&D>,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let mut set = |k: &str, v: &str| {
        env.insert(k.to_string(), v.to_string());
    };
    set("CI", "true");
    set("JOB_NAME", &run.job);
    set("BUILD_ID", &run.build_id);
    set("PROW_JOB_ID", &run.id);
    set("JOB_TYPE", run.job_type.as_str());
    if spec.job.agent == "kubernetes" {
        set("BUILD_NUMBER", &run.build_id);
    }
    set("JOB_SPEC", &job_spec_json(run, decoration));
    // Prow's periodics have no refs and stop here; an in-repo periodic's run
    // has its repository's and goes on. A pre/postsubmit without refs (which
    // Prow cannot have) stops here too.
    let Some(refs) = &run.refs else {
        return env;
    };
    set("REPO_OWNER", &refs.org);
    set("REPO_NAME", &refs.repo);
    let (host, base) = source_host_and_base(refs);
    set("SRC_HOST", &host);
    set("SRC_BASE", &base);
    set("PULL_BASE_REF", refs.base_ref.as_deref().unwrap_or(""));
    set("PULL_BASE_SHA", refs.base_sha.as_deref().unwrap_or(""));
    set("PULL_REFS", &crate::refs::refs_string(refs));
    if run.job_type != JobType::Presubmit {
        return env;
    }
    let Some(pull) = refs.pulls.first() else {
        return env;
    };
    set("PULL_NUMBER", &pull.number.to_string());
    set("PULL_PULL_SHA", &pull.sha);
    // bosun's pulls have no head ref.
    set("PULL_HEAD_REF", "");
    set("PULL_TITLE", pull.title.as_deref().unwrap_or(""));
    env
}

/// `SRC_HOST` and `SRC_BASE`: the host and path of the repository, from its
/// `path_alias` (split at the first `/`; without one, it is the host and the
/// path stays `org/repo`), else from its `repo_link` (without the scheme),
/// else `github.com` and `org/repo`.
fn source_host_and_base(refs: &Refs) -> (String, String) {
    let mut host = "github.com".to_string();
    let mut base = format!("{}/{}", refs.org, refs.repo);
    let alias = refs.path_alias.as_deref().unwrap_or("");
    let link = refs.repo_link.as_deref().unwrap_or("");
    let from = if !alias.is_empty() {
        alias
    } else if !link.is_empty() {
        link.rsplit("://").next().unwrap_or(link)
    } else {
        return (host, base);
    };
    match from.split_once('/') {
        Some((h, b)) => (host, base) = (h.to_string(), b.to_string()),
        None => host = from.to_string(),
    }
    (host, base)
}

/// Prow's `JOB_SPEC` of a run: the JSON of its downward-API `JobSpec` as
/// Go writes it (its fields in order, empty ones left out, `<`, `>`, `&`,
/// U+2028 and U+2029 escaped), with the run's decoration config when it is
/// decorated.
pub fn job_spec_json<D: Serialize>(run: &Run, decoration: Option<&D>) -> String {
    let spec = JobSpecJson {
        job_type: run.job_type.as_str(),
        job: &run.job,
        buildid: &run.build_id,
        prowjobid: &run.id,
        refs: run.refs.as_deref().map(RefsJson::from),
        extra_refs: run.extra_refs.iter().map(RefsJson::from).collect(),
        decoration_config: decoration,
    };
    go_json(&spec)
}

/// The downward API's `JobSpec`, in Go's field order.
#[derive(Serialize)]
struct JobSpecJson<'a, D> {
    #[serde(rename = "type", skip_serializing_if = "empty_str")]
    job_type: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    job: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    buildid: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    prowjobid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    refs: Option<RefsJson<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    extra_refs: Vec<RefsJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decoration_config: Option<&'a D>,
}

/// Prow's `JOB_SPEC` as a local process and a PipelineRun see it: the
/// run's type, job, build id and id, with its refs and extra refs.
pub fn job_spec(run: &Run) -> serde_json::Value {
    let mut spec = serde_json::json!({
        "type": run.job_type.as_str(),
        "job": run.job,
        "buildid": run.build_id,
        "prowjobid": run.id,
    });
    if let Some(r) = &run.refs {
        spec["refs"] = serde_json::to_value(r).expect("serializable");
    }
    if !run.extra_refs.is_empty() {
        spec["extra_refs"] = serde_json::to_value(&run.extra_refs).expect("serializable");
    }
    spec
}

/// The environment a local process and a PipelineRun's steps get (`CI`,
/// `JOB_NAME`, `JOB_TYPE`, `JOB_SPEC`, `BUILD_ID`, `BUILD_NUMBER`,
/// `PROW_JOB_ID`; and with refs `REPO_OWNER`, `REPO_NAME`, `PULL_BASE_REF`,
/// `PULL_BASE_SHA`, `PULL_REFS`; and for presubmits `PULL_NUMBER`,
/// `PULL_PULL_SHA`).
pub fn job_env(run: &Run) -> Vec<(String, String)> {
    let mut env = vec![
        ("CI".to_string(), "true".to_string()),
        ("JOB_NAME".into(), run.job.clone()),
        ("JOB_TYPE".into(), run.job_type.as_str().into()),
        ("JOB_SPEC".into(), job_spec(run).to_string()),
        ("BUILD_ID".into(), run.build_id.clone()),
        ("BUILD_NUMBER".into(), run.build_id.clone()),
        ("PROW_JOB_ID".into(), run.id.clone()),
    ];
    // A central periodic has no refs (only `extra_refs`, which Prow keeps
    // out of the environment); an in-repo periodic has its repository's,
    // and gets their variables.
    if let Some(r) = &run.refs {
        env.push(("REPO_OWNER".into(), r.org.clone()));
        env.push(("REPO_NAME".into(), r.repo.clone()));
        env.push((
            "PULL_BASE_REF".into(),
            r.base_ref.clone().unwrap_or_default(),
        ));
        env.push((
            "PULL_BASE_SHA".into(),
            r.base_sha.clone().unwrap_or_default(),
        ));
        env.push(("PULL_REFS".into(), crate::refs::refs_string(r)));
        if matches!(run.job_type, JobType::Presubmit) {
            if let Some(p) = r.pulls.first() {
                env.push(("PULL_NUMBER".into(), p.number.to_string()));
                env.push(("PULL_PULL_SHA".into(), p.sha.clone()));
            }
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_config::types::Pull;
    use bosun_store::{NewRun, RunState};

    fn run(job: &str) -> Run {
        NewRun {
            job: job.into(),
            job_type: JobType::Periodic,
            periodic: Some(job.into()),
            configured_cluster: "build01".into(),
            state: RunState::Triggered,
            refs: None,
            extra_refs: vec![],
            labels: BTreeMap::new().into(),
            annotations: BTreeMap::from([("prow.k8s.io/job".into(), job.into())]).into(),
            spec: serde_json::json!({}).into(),
            scheduled_at: None,
            attempt: 0,
            description: String::new(),
        }
        .into_run(
            "8f8b1e4c-2f4e-4f7b-9a55-0d6c1e1f2a3b".into(),
            1_800_000_000_000_001,
            "h".into(),
            jiff::Timestamp::UNIX_EPOCH,
        )
    }

    #[test]
    fn a_presubmits_process_environment_is_prows() {
        let mut r = run("pull-x-unit");
        r.job_type = JobType::Presubmit;
        r.refs = Some(Box::new(Refs {
            org: "o".into(),
            repo: "r".into(),
            base_ref: Some("main".into()),
            base_sha: Some("abc".into()),
            pulls: vec![Pull {
                number: 42,
                author: "a".into(),
                sha: "def".into(),
                ..Pull::default()
            }],
            ..Refs::default()
        }));
        let env: BTreeMap<String, String> = job_env(&r).into_iter().collect();
        assert_eq!(env["PULL_REFS"], "main:abc,42:def");
        assert_eq!(env["PULL_NUMBER"], "42");
        assert_eq!(env["PULL_PULL_SHA"], "def");
        assert_eq!(env["REPO_OWNER"], "o");
        assert_eq!(env["JOB_TYPE"], "presubmit");
        assert_eq!(env["BUILD_ID"], "1800000000000001");
        let spec: serde_json::Value = serde_json::from_str(&env["JOB_SPEC"]).unwrap();
        assert_eq!(spec["refs"]["pulls"][0]["number"], 42);
        assert_eq!(spec["prowjobid"], "8f8b1e4c-2f4e-4f7b-9a55-0d6c1e1f2a3b");
    }

    #[test]
    fn a_periodics_process_environment_has_no_refs() {
        let env: BTreeMap<String, String> = job_env(&run("p")).into_iter().collect();
        assert_eq!(
            env.keys().cloned().collect::<Vec<_>>(),
            [
                "BUILD_ID",
                "BUILD_NUMBER",
                "CI",
                "JOB_NAME",
                "JOB_SPEC",
                "JOB_TYPE",
                "PROW_JOB_ID"
            ]
        );
    }

    #[test]
    fn source_host_and_base_follow_path_alias_then_repo_link() {
        let refs = |alias: Option<&str>, link: Option<&str>| Refs {
            org: "o".into(),
            repo: "r".into(),
            path_alias: alias.map(String::from),
            repo_link: link.map(String::from),
            ..Refs::default()
        };
        let hb = |r: Refs| source_host_and_base(&r);
        assert_eq!(hb(refs(None, None)), ("github.com".into(), "o/r".into()));
        assert_eq!(
            hb(refs(Some("k8s.io/kubernetes"), Some("https://x/y/z"))),
            ("k8s.io".into(), "kubernetes".into())
        );
        assert_eq!(
            hb(refs(Some("sigs.k8s.io"), None)),
            ("sigs.k8s.io".into(), "o/r".into())
        );
        assert_eq!(
            hb(refs(None, Some("https://gitlab.example.com/g/sub/r"))),
            ("gitlab.example.com".into(), "g/sub/r".into())
        );
        assert_eq!(
            hb(refs(None, Some("gerrit.example.com"))),
            ("gerrit.example.com".into(), "o/r".into())
        );
    }

    #[test]
    fn job_spec_is_go_json() {
        let mut r = run("x");
        r.job_type = JobType::Presubmit;
        r.refs = Some(Box::new(Refs {
            org: "o".into(),
            repo: "r".into(),
            base_ref: Some("main".into()),
            blobless_fetch: Some(false),
            pulls: vec![Pull {
                number: 1,
                author: "a".into(),
                sha: "s".into(),
                title: Some("<Fix> & \u{2028}\"done\"".into()),
                ..Pull::default()
            }],
            ..Refs::default()
        }));
        assert_eq!(
            job_spec_json(&r, None::<&()>),
            concat!(
                r#"{"type":"presubmit","job":"x","buildid":"1800000000000001","#,
                r#""prowjobid":"8f8b1e4c-2f4e-4f7b-9a55-0d6c1e1f2a3b","#,
                r#""refs":{"org":"o","repo":"r","base_ref":"main","pulls":[{"number":1,"#,
                r#""author":"a","sha":"s","title":"\u003cFix\u003e \u0026 \u2028\"done\""}],"#,
                r#""blobless_fetch":false}}"#
            )
        );
    }
}
