//! Golden PipelineRuns: the PipelineRun `pipeline_run` makes for Lighthouse's
//! own controller test cases (jenkins-x/lighthouse
//! `pkg/engines/tekton/test_data/controller/CASE/observed-lhjob.yml`, the
//! LighthouseJob, to `expected-pr.yml`, the PipelineRun its controller
//! created), following `makePipelineRun` at [`LIGHTHOUSE_COMMIT`].
//!
//! Each case makes the run bosun would make of the LighthouseJob (its job,
//! type, refs and context; its id and build id injected to be the
//! LighthouseJob's name and Lighthouse's build id), and is checked twice:
//! - field by field against Lighthouse's expected PipelineRun, transcribed
//!   below from `expected-pr.yml` (in `tekton.dev/v1` where the file still
//!   writes `v1beta1`'s field names, as Tekton converts them; without what
//!   the fake API server and the controller add: `name`, `resourceVersion`,
//!   `creationTimestamp`, `ownerReferences`, `status`): every field must be
//!   equal, except under the paths each case lists with the reason, and
//!   bosun's own additions ([`BOSUN_ADDITIONS`]);
//! - against `tests/golden/pipelinerun/CASE.json`, bosun's whole output.
//!   `BOSUN_BLESS=1 cargo test -p bosun-cluster --test it
//!   pipelinerun_golden::` rewrites those; read the diff against Lighthouse's files before
//!   committing it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bosun_config::types::{JobBase, JobType, Refs};
use bosun_store::template::{new_run, SpecSnapshot};
use bosun_store::Run;
use bosun_tekton::convert;
use bosun_tekton::pipelinerun::{pipeline_run_with, unresolved_references};
use serde_json::{json, Value};

/// The Lighthouse commit whose `makePipelineRun` (`pkg/engines/tekton/utils.go`)
/// and `jobutil` (`GenerateName`, `LabelsAndAnnotationsForJob`) bosun follows.
const LIGHTHOUSE_COMMIT: &str = "d3178ddc31d3442258db20eb32bc3c0e7c97f232";

/// Lighthouse's LighthouseJob name and build id in every case.
const JOB_ID: &str = "f46327af-b47e-11ea-b797-9256b7b8d9b0";
const BUILD_ID: i64 = 7_828_158_075_477_027_098;

/// What bosun adds to Lighthouse's PipelineRun (`tekton::pipelinerun`'s
/// module doc says why): the object's type, the run's own Prow labels and
/// annotations, and the parameters of bosun's job environment that
/// Lighthouse's lacks.
const BOSUN_ADDITIONS: &[&str] = &[
    "/apiVersion",
    "/kind",
    "/metadata/labels/created-by-prow",
    "/metadata/labels/prow.k8s.io/",
    "/metadata/annotations/prow.k8s.io/",
    "/spec/params[CI]",
    "/spec/params[BUILD_NUMBER]",
    "/spec/params[PROW_JOB_ID]",
];

/// Why the parameter `JOB_SPEC` differs everywhere.
const JOB_SPEC_DIFFERS: (&str, &str) = (
    "/spec/params[JOB_SPEC]",
    "bosun's JOB_SPEC is Prow's JSON (as on bosun's pods); Lighthouse's is `type:KIND`",
);

/// Why an empty `podTemplate` differs.
const POD_TEMPLATE_DIFFERS: (&str, &str) = (
    "/spec/taskRunTemplate/podTemplate",
    "the observed podTemplate is {schedulerName: \"\"}: bosun keeps it as written, Go leaves the empty field out",
);

struct Case {
    name: &'static str,
    /// Lighthouse's files read, with their commits.
    files: &'static str,
    job: Value,
    job_type: JobType,
    refs: Value,
    context: &'static str,
    /// The Pipeline a `pipelineRef` names (observed-pipeline.yml), as
    /// Lighthouse reads it from the cluster.
    pipeline: Option<Value>,
    /// `expected-pr.yml`, transcribed.
    lighthouse: Value,
    /// Paths where bosun's value differs from Lighthouse's, and why.
    differs: Vec<(&'static str, &'static str)>,
}

fn pr_refs() -> Value {
    json!({
        "base_link": "https://github.com/jenkins-x/lighthouse/commit/e8d56b5ee9671599c75644af574a251dd3b94a5c",
        "base_ref": "master",
        "base_sha": "e8d56b5ee9671599c75644af574a251dd3b94a5c",
        "clone_uri": "https://github.com/jenkins-x/lighthouse.git",
        "org": "jenkins-x",
        "pulls": [{
            "author": "abayer",
            "author_link": "https://github.com/abayer",
            "commit_link": "https://github.com/jenkins-x/lighthouse/pull/813/commits/dd64c739442d505cf5381e2a14b60968e8a0d86e",
            "link": "https://github.com/jenkins-x/lighthouse/pull/813.diff",
            "number": 813,
            "sha": "dd64c739442d505cf5381e2a14b60968e8a0d86e",
        }],
        "repo": "lighthouse",
        "repo_link": "https://github.com/jenkins-x/lighthouse",
    })
}

/// The observed jobs' `pipeline_run_spec` naming a Pipeline.
fn pipeline_ref_spec(api_version: &str) -> Value {
    json!({
        "pipelineRef": {"apiVersion": api_version, "name": "jenkins-x-charts-jx-build-templ-wbbx6-7"},
        "podTemplate": {"schedulerName": ""},
        "serviceAccountName": "tekton-bot",
    })
}

/// Lighthouse's labels and annotations of a pull request's PipelineRun.
fn pr_metadata(job_type: &str) -> Value {
    json!({
        "annotations": {
            "lighthouse.jenkins-x.io/cloneURI": "https://github.com/jenkins-x/lighthouse.git",
            "lighthouse.jenkins-x.io/job": "github",
        },
        "generateName": "nkins-x-lighthouse-pr-813-github-",
        "labels": {
            "created-by-lighthouse": "true",
            "lighthouse.jenkins-x.io/baseSHA": "e8d56b5ee9671599c75644af574a251dd3b94a5c",
            "lighthouse.jenkins-x.io/branch": "PR-813",
            "lighthouse.jenkins-x.io/buildNum": "7828158075477027098",
            "lighthouse.jenkins-x.io/context": "github",
            "lighthouse.jenkins-x.io/id": JOB_ID,
            "lighthouse.jenkins-x.io/job": "github",
            "lighthouse.jenkins-x.io/lastCommitSHA": "dd64c739442d505cf5381e2a14b60968e8a0d86e",
            "lighthouse.jenkins-x.io/refs.org": "jenkins-x",
            "lighthouse.jenkins-x.io/refs.pull": "813",
            "lighthouse.jenkins-x.io/refs.repo": "lighthouse",
            "lighthouse.jenkins-x.io/type": job_type,
        },
        "namespace": "jx",
    })
}

fn params(pairs: &[(&str, &str)]) -> Value {
    Value::Array(
        pairs
            .iter()
            .map(|(n, v)| json!({"name": n, "value": v}))
            .collect(),
    )
}

/// Lighthouse's parameters of the pull request 813.
const PR_PARAMS: &[(&str, &str)] = &[
    ("BUILD_ID", "7828158075477027098"),
    ("JOB_NAME", "github"),
    ("JOB_SPEC", "type:presubmit"),
    ("JOB_TYPE", "presubmit"),
    ("PULL_BASE_REF", "master"),
    ("PULL_BASE_SHA", "e8d56b5ee9671599c75644af574a251dd3b94a5c"),
    ("PULL_NUMBER", "813"),
];

fn start_pullrequest() -> Case {
    let mut p = PR_PARAMS.to_vec();
    p.extend([
        ("PULL_PULL_SHA", "dd64c739442d505cf5381e2a14b60968e8a0d86e"),
        ("PULL_REFS", "master:e8d56b5ee9671599c75644af574a251dd3b94a5c,813:dd64c739442d505cf5381e2a14b60968e8a0d86e"),
        ("REPO_NAME", "lighthouse"),
        ("REPO_OWNER", "jenkins-x"),
        ("REPO_URL", "https://github.com/jenkins-x/lighthouse.git"),
        ("branch-name", "dd64c739442d505cf5381e2a14b60968e8a0d86e"),
        ("foo-param", "bar-value"),
        ("repo-url", "https://github.com/jenkins-x/lighthouse.git"),
    ]);
    Case {
        name: "start-pullrequest",
        files: "observed-lhjob.yml and expected-pr.yml at 1ed098236c4634294af69400c03c214e4d3e533b",
        job: json!({
            "name": "github",
            "agent": "tekton-pipeline",
            "pipeline_run_spec": pipeline_ref_spec("tekton.dev/v1"),
            "pipeline_run_params": [
                {"name": "branch-name", "value_template": "{{ range $i, $v := .Refs.Pulls }}{{if $i}} {{end}}{{ $v.SHA }}{{ end }}"},
                {"name": "repo-url", "value_template": "{{ .Refs.CloneURI }}"},
                {"name": "foo-param", "value_template": "bar-value"},
            ],
        }),
        job_type: JobType::Presubmit,
        refs: pr_refs(),
        context: "github",
        pipeline: None,
        lighthouse: json!({
            "metadata": pr_metadata("presubmit"),
            "spec": {
                "params": params(&p),
                "pipelineRef": {"apiVersion": "tekton.dev/v1", "name": "jenkins-x-charts-jx-build-templ-wbbx6-7"},
                // The file writes podTemplate, serviceAccountName and
                // timeout (v1beta1's names) at the top.
                "taskRunTemplate": {"podTemplate": {}, "serviceAccountName": "tekton-bot"},
                "timeouts": {"pipeline": "24h0m0s"},
            },
        }),
        differs: vec![JOB_SPEC_DIFFERS, POD_TEMPLATE_DIFFERS],
    }
}

fn start_batch_pullrequest() -> Case {
    let mut refs = pr_refs();
    refs["pulls"][0]["ref"] = json!("refs/pull/813/head");
    refs["pulls"].as_array_mut().unwrap().push(json!({
        "author": "abayer",
        "author_link": "https://github.com/abayer",
        "commit_link": "https://github.com/jenkins-x/lighthouse/pull/814/commits/abcdefg",
        "link": "https://github.com/jenkins-x/lighthouse/pull/814.diff",
        "number": 814,
        "sha": "abcdefg",
        "ref": "refs/pull/814/head",
    }));
    let mut p = PR_PARAMS.to_vec();
    p.extend([
        ("PULL_PULL_REF", "refs/pull/813/head refs/pull/814/head"),
        ("PULL_PULL_SHA", "dd64c739442d505cf5381e2a14b60968e8a0d86e"),
        ("PULL_REFS", "master:e8d56b5ee9671599c75644af574a251dd3b94a5c,813:dd64c739442d505cf5381e2a14b60968e8a0d86e:refs/pull/813/head,814:abcdefg:refs/pull/814/head"),
        ("REPO_NAME", "lighthouse"),
        ("REPO_OWNER", "jenkins-x"),
        ("REPO_URL", "https://github.com/jenkins-x/lighthouse.git"),
        ("batch-refs", "refs/pull/813/head refs/pull/814/head"),
        ("branch-name", "master"),
        ("repo-url", "https://github.com/jenkins-x/lighthouse.git"),
    ]);
    Case {
        name: "start-batch-pullrequest",
        files: "observed-lhjob.yml at 1ed098236c4634294af69400c03c214e4d3e533b, expected-pr.yml at 57c78e8addd6f70dc6c3db5fa551e2eb88c975f0",
        job: json!({
            "name": "github",
            "agent": "tekton-pipeline",
            "pipeline_run_spec": pipeline_ref_spec("tekton.dev/v1"),
            "pipeline_run_params": [
                {"name": "batch-refs", "value_template": "{{ range $i, $v := .Refs.Pulls }}{{if $i}} {{end}}{{ $v.Ref }}{{ end }}"},
                {"name": "branch-name", "value_template": "{{ .Refs.BaseRef }}"},
                {"name": "repo-url", "value_template": "{{ .Refs.CloneURI }}"},
            ],
        }),
        // The LighthouseJob of this case is a presubmit over two pulls.
        job_type: JobType::Presubmit,
        refs,
        context: "github",
        pipeline: None,
        lighthouse: json!({
            "metadata": pr_metadata("presubmit"),
            "spec": {
                "params": params(&p),
                "pipelineRef": {"apiVersion": "tekton.dev/v1", "name": "jenkins-x-charts-jx-build-templ-wbbx6-7"},
                "taskRunTemplate": {"podTemplate": {}, "serviceAccountName": "tekton-bot"},
                "timeouts": {"pipeline": "24h0m0s"},
            },
        }),
        differs: vec![JOB_SPEC_DIFFERS, POD_TEMPLATE_DIFFERS],
    }
}

fn start_push() -> Case {
    let refs = json!({
        "base_link": "https://github.com/jenkins-x/lighthouse/commit/e8d56b5ee9671599c75644af574a251dd3b94a5c",
        "base_ref": "main",
        "base_sha": "e8d56b5ee9671599c75644af574a251dd3b94a5c",
        "clone_uri": "https://github.com/jenkins-x/lighthouse.git",
        "org": "jenkins-x",
        "repo": "lighthouse",
        "repo_link": "https://github.com/jenkins-x/lighthouse",
    });
    // observed-pipeline.yml: a v1beta1 Pipeline with a git-clone task.
    let pipeline = json!({
        "params": [
            {"name": "repo-url", "type": "string", "description": "The git repository URL to clone from."},
            {"name": "branch-name", "type": "string", "description": "The git branch to clone."},
        ],
        "workspaces": [{"name": "shared-data", "description": "This workspace will receive the cloned git repo and be passed\nto the next Task for the repo's README.md file to be read.\n"}],
        "tasks": [
            {
                "name": "fetch-repo",
                "taskRef": {"name": "git-clone"},
                "workspaces": [{"name": "output", "workspace": "shared-data"}],
                "params": [
                    {"name": "url", "value": "$(params.repo-url)"},
                    {"name": "revision", "value": "$(params.branch-name)"},
                ],
            },
            {
                "name": "cat-readme",
                "runAfter": ["fetch-repo"],
                "workspaces": [{"name": "source", "workspace": "shared-data"}],
                "taskSpec": {
                    "workspaces": [{"name": "source"}],
                    "steps": [{"image": "zshusers/zsh:4.3.15", "script": "#!/usr/bin/env zsh\ncat $(workspaces.source.path)/README.md\n"}],
                },
            },
        ],
    });
    let pipeline = convert::pipeline_spec(&pipeline, "spec").expect("a v1 Pipeline spec");
    Case {
        name: "start-push",
        files: "observed-lhjob.yml and observed-pipeline.yml at 13d32bcf3e7f08298e6351abbc5965ac230b8fff, expected-pr.yml at 1c6af4b3885f75a5053db9db9765f6959ebb4357",
        job: json!({
            "name": "github",
            "agent": "tekton-pipeline",
            "pipeline_run_spec": pipeline_ref_spec("tekton.dev/v1beta1"),
        }),
        job_type: JobType::Postsubmit,
        refs,
        context: "github",
        pipeline: Some(pipeline),
        lighthouse: json!({
            "metadata": {
                "annotations": {
                    "lighthouse.jenkins-x.io/cloneURI": "https://github.com/jenkins-x/lighthouse.git",
                    "lighthouse.jenkins-x.io/job": "github",
                },
                "generateName": "jenkins-x-lighthouse-main-github-",
                "labels": {
                    "created-by-lighthouse": "true",
                    "lighthouse.jenkins-x.io/baseSHA": "e8d56b5ee9671599c75644af574a251dd3b94a5c",
                    "lighthouse.jenkins-x.io/branch": "main",
                    "lighthouse.jenkins-x.io/buildNum": "7828158075477027098",
                    "lighthouse.jenkins-x.io/context": "github",
                    "lighthouse.jenkins-x.io/id": JOB_ID,
                    "lighthouse.jenkins-x.io/job": "github",
                    "lighthouse.jenkins-x.io/lastCommitSHA": "e8d56b5ee9671599c75644af574a251dd3b94a5c",
                    "lighthouse.jenkins-x.io/refs.org": "jenkins-x",
                    "lighthouse.jenkins-x.io/refs.repo": "lighthouse",
                    "lighthouse.jenkins-x.io/type": "postsubmit",
                },
                "namespace": "jx",
            },
            "spec": {
                "params": params(&[
                    ("BUILD_ID", "7828158075477027098"),
                    ("JOB_NAME", "github"),
                    ("JOB_SPEC", "type:postsubmit"),
                    ("JOB_TYPE", "postsubmit"),
                    ("PULL_BASE_REF", "main"),
                    ("PULL_BASE_SHA", "e8d56b5ee9671599c75644af574a251dd3b94a5c"),
                    ("PULL_REFS", "main:e8d56b5ee9671599c75644af574a251dd3b94a5c"),
                    ("REPO_NAME", "lighthouse"),
                    ("REPO_OWNER", "jenkins-x"),
                    ("REPO_URL", "https://github.com/jenkins-x/lighthouse.git"),
                    ("branch-name", "main"),
                    ("repo-url", "https://github.com/jenkins-x/lighthouse.git"),
                ]),
                "pipelineRef": {"apiVersion": "tekton.dev/v1", "name": "jenkins-x-charts-jx-build-templ-wbbx6-7"},
                "taskRunTemplate": {"podTemplate": {}, "serviceAccountName": "tekton-bot"},
                "timeouts": {"pipeline": "24h0m0s"},
            },
        }),
        differs: vec![
            JOB_SPEC_DIFFERS,
            POD_TEMPLATE_DIFFERS,
            (
                "/spec/pipelineRef/apiVersion",
                "the stored observed-lhjob.yml (older than expected-pr.yml) names tekton.dev/v1beta1; nothing rewrites it",
            ),
        ],
    }
}

/// The 13 parameters Lighthouse's loader gives an embedded pipeline's
/// tasks (`$(params.NAME)`).
const DEFAULT_NAMES: &[&str] = &[
    "BUILD_ID",
    "JOB_NAME",
    "JOB_SPEC",
    "JOB_TYPE",
    "PULL_BASE_REF",
    "PULL_BASE_SHA",
    "PULL_NUMBER",
    "PULL_PULL_REF",
    "PULL_PULL_SHA",
    "PULL_REFS",
    "REPO_NAME",
    "REPO_OWNER",
    "REPO_URL",
];

/// debug-pr-no-taskRunSpecs' pipeline, as its observed LighthouseJob holds
/// it (and its expected PipelineRun repeats it): the skaffold example with
/// Lighthouse's parameters.
fn skaffold_pipeline() -> Value {
    let task =
        |name: &str, own: &[(&str, &str)], run_after: Option<&str>, task_ref: &str, ws: &str| {
            let mut p: Vec<Value> = own
                .iter()
                .map(|(n, v)| json!({"name": n, "value": v}))
                .collect();
            p.extend(
                DEFAULT_NAMES
                    .iter()
                    .map(|n| json!({"name": n, "value": format!("$(params.{n})")})),
            );
            let mut t = json!({
                "name": name,
                "params": p,
                "taskRef": {"name": task_ref},
                "workspaces": [{"name": ws, "workspace": "git-source"}],
            });
            if let Some(r) = run_after {
                t["runAfter"] = json!([r]);
            }
            t
        };
    let spec = |name: &str, description: &str, empty_default: bool| {
        let mut s = json!({"description": description, "name": name, "type": "string"});
        if empty_default {
            s["default"] = json!("");
        }
        s
    };
    json!({
        "params": [
            {"default": "gcr.io/christiewilson-catfactory", "name": "image-registry"},
            spec("BUILD_ID", "the unique build number", false),
            spec("JOB_NAME", "the name of the job which is the trigger context name", false),
            spec("JOB_SPEC", "the specification of the job", false),
            spec("JOB_TYPE", "'the kind of job: postsubmit or presubmit'", false),
            spec("PULL_BASE_REF", "the base git reference of the pull request", false),
            spec("PULL_BASE_SHA", "the git sha of the base of the pull request", false),
            spec("PULL_NUMBER", "git pull request number", true),
            spec("PULL_PULL_REF", "git pull request ref in the form 'refs/pull/$PULL_NUMBER/head'", true),
            spec("PULL_PULL_SHA", "git revision to checkout (branch, tag, sha, ref…)", true),
            spec("PULL_REFS", "git pull reference strings of base and latest in the form 'master:$PULL_BASE_SHA,$PULL_NUMBER:$PULL_PULL_SHA:refs/pull/$PULL_NUMBER/head'", false),
            spec("REPO_NAME", "git repository name", false),
            spec("REPO_OWNER", "git repository owner (user or organisation)", false),
            spec("REPO_URL", "git url to clone", false),
        ],
        "tasks": [
            task("fetch-from-git", &[("url", "https://github.com/GoogleContainerTools/skaffold"), ("revision", "v0.32.0")], None, "git-clone", "output"),
            task("skaffold-unit-tests", &[], Some("fetch-from-git"), "unit-tests", "source"),
            task("build-skaffold-web", &[
                ("IMAGE", "$(params.image-registry)/leeroy-web"),
                ("CONTEXT", "examples/microservices/leeroy-web"),
                ("DOCKERFILE", "$(workspaces.source.path)/examples/microservices/leeroy-web/Dockerfile"),
            ], Some("skaffold-unit-tests"), "kaniko", "source"),
            task("build-skaffold-app", &[
                ("IMAGE", "$(params.image-registry)/leeroy-app"),
                ("CONTEXT", "examples/microservices/leeroy-app"),
                ("DOCKERFILE", "$(workspaces.source.path)/examples/microservices/leeroy-app/Dockerfile"),
            ], Some("skaffold-unit-tests"), "kaniko", "source"),
            task("deploy-app", &[
                ("imageURL", "$(params.image-registry)/leeroy-app@$(tasks.build-skaffold-app.results.IMAGE_DIGEST)"),
                ("path", "$(workspaces.source.path)/examples/microservices/leeroy-app/kubernetes/deployment.yaml"),
                ("yqArg", "-d1"),
                ("yamlPathToImage", "spec.template.spec.containers[0].image"),
            ], None, "demo-deploy-kubectl", "source"),
            task("deploy-web", &[
                ("imageURL", "$(params.image-registry)/leeroy-web@$(tasks.build-skaffold-web.results.IMAGE_DIGEST)"),
                ("path", "$(workspaces.source.path)/examples/microservices/leeroy-web/kubernetes/deployment.yaml"),
                ("yqArg", "-d1"),
                ("yamlPathToImage", "spec.template.spec.containers[0].image"),
            ], None, "demo-deploy-kubectl", "source"),
        ],
        "workspaces": [{"name": "git-source"}],
    })
}

/// The observed spec of debug-pr-no-taskRunSpecs, with its PipelineResource
/// (`resources`) when `with_resources`.
fn skaffold_spec(with_resources: bool) -> Value {
    let mut spec = json!({
        "pipelineSpec": skaffold_pipeline(),
        "podTemplate": {"schedulerName": ""},
        "serviceAccountName": "tekton-bot",
        "timeout": "240h0m0s",
    });
    if with_resources {
        spec["resources"] = json!([{
            "name": "jenkins-x-charts-jx-build-templ-wbbx6",
            "resourceRef": {"apiVersion": "tekton.dev/v1beta1", "name": "jenkins-x-charts-jx-build-templ-wbbx6"},
        }]);
    }
    spec
}

fn debug_pr_no_task_run_specs() -> Case {
    let mut p = PR_PARAMS.to_vec();
    p.extend([
        ("PULL_PULL_SHA", "dd64c739442d505cf5381e2a14b60968e8a0d86e"),
        ("PULL_REFS", "master:e8d56b5ee9671599c75644af574a251dd3b94a5c,813:dd64c739442d505cf5381e2a14b60968e8a0d86e"),
        ("REPO_NAME", "lighthouse"),
        ("REPO_OWNER", "jenkins-x"),
        ("REPO_URL", "https://github.com/jenkins-x/lighthouse.git"),
    ]);
    let mut task_run_specs = Vec::new();
    for t in [
        "fetch-from-git",
        "skaffold-unit-tests",
        "build-skaffold-web",
        "build-skaffold-app",
        "deploy-app",
        "deploy-web",
    ] {
        task_run_specs.push(json!({"debug": {"breakpoint": ["onFailure"]}, "pipelineTaskName": t}));
    }
    Case {
        name: "debug-pr-no-taskRunSpecs",
        files: "observed-lhjob.yml at 99ee5ae86212b1474e5299e411973122009a0465 (without its `resources`, which v1 cannot express: see `a_pipeline_resource_is_refused`), expected-pr.yml at f03d997068e086eb49835cfcabaccb0fe38b1b80",
        job: json!({
            "name": "github",
            "agent": "tekton-pipeline",
            "pipeline_run_spec": skaffold_spec(false),
        }),
        job_type: JobType::Presubmit,
        refs: pr_refs(),
        context: "github",
        pipeline: None,
        lighthouse: json!({
            "metadata": pr_metadata("presubmit"),
            "spec": {
                "params": params(&p),
                "pipelineSpec": skaffold_pipeline(),
                "taskRunTemplate": {"podTemplate": {}, "serviceAccountName": "tekton-bot"},
                "taskRunSpecs": task_run_specs,
                "timeouts": {"pipeline": "240h0m0s"},
            },
        }),
        differs: vec![
            JOB_SPEC_DIFFERS,
            POD_TEMPLATE_DIFFERS,
            (
                "/spec/taskRunSpecs",
                "Lighthouse's breakpoints (a debug breakpoint on every task, from its LighthouseBreakpoint objects) are not bosun's",
            ),
        ],
    }
}

/// The run bosun makes of `case`'s LighthouseJob, and its spec snapshot.
fn run_of(case: &Case) -> (Run, SpecSnapshot) {
    let base: JobBase = serde_json::from_value(case.job.clone()).expect("a job");
    let refs: Refs = serde_json::from_value(case.refs.clone()).expect("refs");
    let new = new_run(&base, case.job_type, None, None, None, Some(refs));
    let spec: SpecSnapshot = serde_json::from_str(new.spec.json()).expect("a spec snapshot");
    let at = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let mut run = new.into_run(JOB_ID.into(), BUILD_ID, "hash".into(), at);
    // A run records its job's status context as a ProwJob does.
    std::sync::Arc::make_mut(&mut run.annotations)
        .insert("prow.k8s.io/context".into(), case.context.into());
    (run, spec)
}

/// Every leaf of `v` by path; lists of named objects (parameters, tasks)
/// by `[NAME]`, other lists by index.
fn leaves(v: &Value, path: String, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves(x, format!("{path}/{k}"), out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let named = items
                .iter()
                .all(|i| i.get("name").and_then(Value::as_str).is_some());
            for (i, x) in items.iter().enumerate() {
                let key = if named {
                    format!("[{}]", x["name"].as_str().unwrap())
                } else {
                    format!("/{i}")
                };
                leaves(x, format!("{path}{key}"), out);
            }
        }
        _ => {
            out.insert(path, v.clone());
        }
    }
}

/// Compares bosun's PipelineRun with Lighthouse's, field by field: the
/// differences not accounted for.
fn compare_with_lighthouse(case: &Case, got: &Value) -> Vec<String> {
    let (mut ours, mut theirs) = (BTreeMap::new(), BTreeMap::new());
    leaves(got, String::new(), &mut ours);
    leaves(&case.lighthouse, String::new(), &mut theirs);
    let exempt = |p: &str| case.differs.iter().any(|(d, _)| p.starts_with(d));
    let mut problems = Vec::new();
    for (path, want) in &theirs {
        if exempt(path) {
            continue;
        }
        match ours.get(path) {
            Some(v) if v == want => {}
            Some(v) => problems.push(format!("{path}: bosun {v}, Lighthouse {want}")),
            None => problems.push(format!("{path}: missing (Lighthouse {want})")),
        }
    }
    for (path, v) in &ours {
        if !theirs.contains_key(path)
            && !exempt(path)
            && !BOSUN_ADDITIONS.iter().any(|a| path.starts_with(a))
        {
            problems.push(format!("{path}: {v} is not in Lighthouse's PipelineRun"));
        }
    }
    // Each listed difference is one: the list cannot go stale.
    for (d, why) in &case.differs {
        let mine: Vec<_> = ours.iter().filter(|(p, _)| p.starts_with(d)).collect();
        let lh: Vec<_> = theirs.iter().filter(|(p, _)| p.starts_with(d)).collect();
        if mine == lh {
            problems.push(format!("{d} is listed as differing ({why}) but is equal"));
        }
    }
    problems
}

/// Compares with (or rewrites) `tests/golden/pipelinerun/NAME.json`.
fn compare_with_golden(name: &str, got: &Value) {
    let text = serde_json::to_string_pretty(got).unwrap() + "\n";
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/pipelinerun")
        .join(format!("{name}.json"));
    if std::env::var("BOSUN_BLESS").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; BOSUN_BLESS=1 writes it, then check it against Lighthouse's",
            path.display()
        )
    });
    assert_eq!(
        text,
        want,
        "the PipelineRun differs from {} (BOSUN_BLESS=1 rewrites it)",
        path.display()
    );
}

fn check(case: Case) {
    let (run, spec) = run_of(&case);
    let got = pipeline_run_with(&run, &spec, "jx", case.pipeline.as_ref())
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let problems = compare_with_lighthouse(&case, &got);
    assert!(
        problems.is_empty(),
        "{}: the PipelineRun differs from Lighthouse's ({}; makePipelineRun at {LIGHTHOUSE_COMMIT}):\n{}",
        case.name,
        case.files,
        problems.join("\n")
    );
    compare_with_golden(case.name, &got);
}

#[test]
fn start_pullrequest_params_from_templates() {
    check(start_pullrequest());
}

#[test]
fn start_batch_pullrequest_pull_refs_and_templates() {
    check(start_batch_pullrequest());
}

#[test]
fn start_push_git_clone_parameters_of_the_referenced_pipeline() {
    check(start_push());
}

#[test]
fn debug_pr_embedded_pipeline() {
    check(debug_pr_no_task_run_specs());
}

/// The observed LighthouseJob as written holds a PipelineResource, which
/// Tekton removed: bosun refuses it, naming the field.
#[test]
fn a_pipeline_resource_is_refused() {
    let mut case = debug_pr_no_task_run_specs();
    case.job["pipeline_run_spec"] = skaffold_spec(true);
    let (run, spec) = run_of(&case);
    let e = pipeline_run_with(&run, &spec, "jx", None).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("job github: spec.resources: PipelineResources were removed from Tekton"),
        "{e}"
    );
}

/// The references the controller must resolve before creating the
/// PipelineRun (or refuse, locally).
#[test]
fn references_of_the_cases() {
    let (run, spec) = run_of(&start_push());
    let pr = pipeline_run_with(&run, &spec, "jx", None).unwrap();
    assert_eq!(
        unresolved_references(&pr["spec"]),
        vec!["pipelineRef \"jenkins-x-charts-jx-build-templ-wbbx6-7\""]
    );
    let (run, spec) = run_of(&debug_pr_no_task_run_specs());
    let pr = pipeline_run_with(&run, &spec, "jx", None).unwrap();
    assert_eq!(
        unresolved_references(&pr["spec"]),
        vec![
            "taskRef \"git-clone\" (pipeline task \"fetch-from-git\")",
            "taskRef \"unit-tests\" (pipeline task \"skaffold-unit-tests\")",
            "taskRef \"kaniko\" (pipeline task \"build-skaffold-web\")",
            "taskRef \"kaniko\" (pipeline task \"build-skaffold-app\")",
            "taskRef \"demo-deploy-kubectl\" (pipeline task \"deploy-app\")",
            "taskRef \"demo-deploy-kubectl\" (pipeline task \"deploy-web\")",
        ]
    );
}

/// The comparison sees a changed value, a missing field, an unexplained
/// addition, and a listed difference that is none.
#[test]
fn the_comparison_finds_differences() {
    let mut case = start_pullrequest();
    let (run, spec) = run_of(&case);
    let mut got = pipeline_run_with(&run, &spec, "jx", None).unwrap();
    assert_eq!(compare_with_lighthouse(&case, &got), Vec::<String>::new());
    got["spec"]["timeouts"]["pipeline"] = json!("1h0m0s");
    got["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("lighthouse.jenkins-x.io/branch");
    got["spec"]["status"] = json!("Cancelled");
    case.differs.push(("/metadata/namespace", "not really"));
    assert_eq!(
        compare_with_lighthouse(&case, &got),
        vec![
            "/metadata/labels/lighthouse.jenkins-x.io/branch: missing (Lighthouse \"PR-813\")",
            "/spec/timeouts/pipeline: bosun \"1h0m0s\", Lighthouse \"24h0m0s\"",
            "/spec/status: \"Cancelled\" is not in Lighthouse's PipelineRun",
            "/metadata/namespace is listed as differing (not really) but is equal",
        ]
    );
}

/// From a checkout to the PipelineRun: a Lighthouse periodic's `source:`
/// (a `v1beta1` PipelineRun cloning with the `git-clone` task) is loaded by
/// the configuration, carried by the run's spec snapshot, converted to `v1`
/// and given Lighthouse's parameters, the clone URL of its repository and
/// the `git-clone` task's.
#[test]
fn a_loaded_source_makes_its_pipeline_run() {
    const TRIGGERS: &str = "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  periodics:\n  - name: nightly\n    cron: '0 4 * * *'\n    source: nightly.yaml\n";
    const NIGHTLY: &str = r#"apiVersion: tekton.dev/v1beta1
kind: PipelineRun
metadata:
  name: nightly
spec:
  serviceAccountName: tekton-bot
  timeout: 2h
  pipelineSpec:
    params:
    - name: url
    - name: revision
    workspaces:
    - name: source
    tasks:
    - name: fetch
      taskRef:
        name: git-clone
      params:
      - name: url
        value: $(params.url)
      - name: revision
        value: $(params.revision)
      workspaces:
      - name: output
        workspace: source
    - name: test
      runAfter: [fetch]
      workspaces:
      - name: source
        workspace: source
      taskSpec:
        workspaces:
        - name: source
        steps:
        - name: test
          image: golang
          resources:
            requests:
              cpu: "1"
          script: |
            cd $(workspaces.source.path) && go test ./... && echo "$REPO_OWNER/$REPO_NAME"
  workspaces:
  - name: source
    emptyDir: {}
"#;
    let pr = loaded_pipeline_run(
        &[("triggers.yaml", TRIGGERS), ("nightly.yaml", NIGHTLY)],
        "nightly",
    );

    let param = |name: &str| {
        pr["spec"]["params"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["value"].clone())
    };
    // The repository's clone URL, and the git-clone task's parameters: the
    // base ref, as for a push.
    assert_eq!(
        param("REPO_URL"),
        Some(json!("https://github.com/acme/app.git"))
    );
    assert_eq!(param("url"), Some(json!("https://github.com/acme/app.git")));
    assert_eq!(param("revision"), Some(json!("main")));
    assert_eq!(param("REPO_OWNER"), Some(json!("acme")));
    assert_eq!(param("JOB_TYPE"), Some(json!("periodic")));
    assert_eq!(pr["metadata"]["generateName"], "acme-app-main-nightly-");
    // Converted to v1.
    let s = &pr["spec"];
    assert_eq!(s["timeouts"], json!({"pipeline": "2h"}));
    assert_eq!(
        s["taskRunTemplate"],
        json!({"serviceAccountName": "tekton-bot"})
    );
    assert!(s.get("serviceAccountName").is_none() && s.get("timeout").is_none());
    let test = &s["pipelineSpec"]["tasks"][1];
    assert_eq!(
        test["taskSpec"]["steps"][0]["computeResources"],
        json!({"requests": {"cpu": "1"}})
    );
    // Lighthouse's parameters reach the steps' environment.
    let env = test["taskSpec"]["stepTemplate"]["env"].as_array().unwrap();
    assert!(env.contains(&json!({"name": "REPO_OWNER", "value": "$(params.REPO_OWNER)"})));
    assert_eq!(s["workspaces"], json!([{"name": "source", "emptyDir": {}}]));
    assert_eq!(
        unresolved_references(s),
        vec!["taskRef \"git-clone\" (pipeline task \"fetch\")"]
    );
}

/// Every golden PipelineRun, as bosun creates it on a cluster (named from
/// its `generateName` by `kube::pipelines::prepare`, as the API server
/// would name it), is one Tekton takes: its own defaulting and validation
/// (`tools/tekton`'s `tekton-validate`, as its admission webhook) accept
/// each.
#[test]
fn tekton_takes_every_golden_pipeline_run() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/pipelinerun");
    let mut names = Vec::new();
    let mut created = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let golden: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let pr = bosun_cluster::kube::pipelines::prepare(JOB_ID, &golden, "jx")
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        names.push(path.file_name().unwrap().to_string_lossy().into_owned());
        created.push(serde_json::to_value(pr).unwrap());
    }
    names.sort();
    assert_eq!(
        names,
        [
            "debug-pr-no-taskRunSpecs.json",
            "start-batch-pullrequest.json",
            "start-pullrequest.json",
            "start-push.json",
        ]
    );
    let answers = bosun_kubetest::tekton::validate(&created);
    let refused: Vec<String> = answers
        .iter()
        .zip(&created)
        .filter_map(|(a, pr)| {
            a.as_ref()
                .err()
                .map(|e| format!("{}: {e}", pr["metadata"]["name"]))
        })
        .collect();
    assert!(refused.is_empty(), "Tekton refuses: {refused:#?}");
    // The check is Tekton's: the embedded pipeline gaining a task whose
    // step has both a script and a command is refused.
    let mut broken = created
        .iter()
        .find(|pr| pr["spec"]["pipelineSpec"].is_object())
        .expect("a golden PipelineRun with an embedded pipeline")
        .clone();
    broken["spec"]["pipelineSpec"]["tasks"]
        .as_array_mut()
        .unwrap()
        .push(json!({
            "name": "both",
            "taskSpec": {"steps": [{"name": "s", "image": "alpine", "script": "echo x", "command": ["echo"]}]},
        }));
    let answer = bosun_kubetest::tekton::validate(&[broken]).remove(0);
    assert!(
        answer
            .as_ref()
            .is_err_and(|e| e.contains("script cannot be used with command")),
        "{answer:?}"
    );
}

/// Loads the periodic `name` of a Lighthouse repository `acme/app` whose
/// `.lighthouse/jenkins-x` holds `files` (the triggers name each periodic's
/// source), and makes the PipelineRun of one run of it (`pipeline_run_with`).
fn loaded_pipeline_run(files: &[(&str, &str)], name: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("app");
    let lh = root.join(".lighthouse/jenkins-x");
    std::fs::create_dir_all(&lh).unwrap();
    for (file, text) in files {
        std::fs::write(lh.join(file), text).unwrap();
    }
    let opts = bosun_config::LoadOptions {
        in_repo: vec![bosun_config::types::InRepoSource {
            repo: "acme/app".into(),
            path: root.to_string_lossy().into_owned(),
            branch: Some("main".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let loaded = bosun_config::load(&opts, &bosun_config::OsFiles);
    let errors: Vec<String> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let snapshot = loaded.snapshot.expect("a snapshot");
    let periodic = snapshot
        .periodic(&format!("acme/app:{name}"))
        .expect("the periodic");
    let new = bosun_store::template::RunTemplate::periodic(periodic, None, None).run(None);
    let spec: SpecSnapshot = serde_json::from_str(new.spec.json()).unwrap();
    let at = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let run = new.into_run(JOB_ID.into(), 42, "hash".into(), at);
    pipeline_run_with(&run, &spec, "ci", None).unwrap()
}

/// [`loaded_pipeline_run`]'s PipelineRun as created on a cluster
/// (`kube::pipelines::prepare`).
fn pipeline_run_of_source(files: &[(&str, &str)], name: &str) -> Value {
    let pr = loaded_pipeline_run(files, name);
    serde_json::to_value(bosun_cluster::kube::pipelines::prepare(JOB_ID, &pr, "jx").unwrap())
        .unwrap()
}

/// The names in a list of `{name: ...}`.
fn names_of(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|l| {
            l.iter()
                .map(|p| p["name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A Task, a TaskRun and a Pipeline checked in as `source:` are wrapped as
/// Lighthouse's `LoadTektonResourceAsPipelineRun` wraps them
/// (`pkg/triggerconfig/inrepo/load_pipelinerun.go` at
/// 13f6a6eef79b9a0e010eb43dfc845dc5b27a439a; its cases
/// `test_data/load_pipelinerun/taskrun` and `task`, whose expected
/// PipelineRuns are checked here by what they hold: the task named after the
/// object, the task's params declared by the pipeline and passed on, then
/// Lighthouse's parameters), and Tekton takes each PipelineRun. Where
/// Lighthouse's wrapping would be refused by Tekton (a Task's workspaces
/// bound to no volume), bosun's differs, and the refusal is shown.
#[test]
fn task_taskrun_and_pipeline_sources_are_wrapped_and_tekton_takes_them() {
    const TRIGGERS: &str = "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  periodics:\n  - {name: taskrun, cron: '0 4 * * *', source: taskrun.yaml}\n  - {name: task, cron: '0 4 * * *', source: task.yaml}\n  - {name: pipeline, cron: '0 4 * * *', source: pipeline.yaml}\n";
    // Lighthouse's `taskrun` case, shortened to three of its steps; named
    // `cheese` as its test names every source.
    const TASKRUN: &str = r#"apiVersion: tekton.dev/v1beta1
kind: TaskRun
metadata:
  name: cheese
spec:
  taskSpec:
    params:
    - name: PARAM
      default: param-value
    steps:
    - name: noshebang
      image: ubuntu
      script: echo "no shebang"
    - name: params-applied
      image: python
      script: |
        #!/usr/bin/env python3
        v = '$(params.PARAM)'
        if v != 'param-value':
          exit(1)
    - name: args-allowed
      image: ubuntu
      args: ['hello', 'world']
      script: |
        #!/usr/bin/env bash
        [[ $# == 2 ]]
"#;
    const TASK: &str = r#"apiVersion: tekton.dev/v1
kind: Task
metadata:
  name: build
spec:
  params:
  - name: target
    default: all
  - name: flags
    type: array
    default: ["-v"]
  workspaces:
  - name: source
  steps:
  - name: make
    image: golang
    command: [make, "$(params.target)"]
    args: ["$(params.flags[*])"]
    workingDir: $(workspaces.source.path)
"#;
    const PIPELINE: &str = r#"apiVersion: tekton.dev/v1
kind: Pipeline
metadata:
  name: ignored
spec:
  tasks:
  - name: hello
    taskSpec:
      steps:
      - name: hi
        image: alpine
        script: echo hi
"#;
    let files = [
        ("triggers.yaml", TRIGGERS),
        ("taskrun.yaml", TASKRUN),
        ("task.yaml", TASK),
        ("pipeline.yaml", PIPELINE),
    ];
    let lighthouse_params = [
        "BUILD_ID",
        "JOB_NAME",
        "JOB_SPEC",
        "JOB_TYPE",
        "PULL_BASE_REF",
        "PULL_BASE_SHA",
        "PULL_NUMBER",
        "PULL_PULL_REF",
        "PULL_PULL_SHA",
        "PULL_REFS",
        "REPO_NAME",
        "REPO_OWNER",
        "REPO_URL",
    ];
    let with_lighthouse = |first: &[&str]| -> Vec<String> {
        first
            .iter()
            .chain(lighthouse_params.iter())
            .map(|s| s.to_string())
            .collect()
    };

    // The TaskRun: as Lighthouse's expected PipelineRun (converted to v1).
    let taskrun = pipeline_run_of_source(&files, "taskrun");
    let ps = &taskrun["spec"]["pipelineSpec"];
    let task = &ps["tasks"][0];
    assert_eq!(task["name"], "cheese");
    assert_eq!(names_of(&ps["params"]), with_lighthouse(&["PARAM"]));
    assert_eq!(
        ps["params"][0],
        json!({"name": "PARAM", "default": "param-value"})
    );
    assert_eq!(names_of(&task["params"]), with_lighthouse(&["PARAM"]));
    assert_eq!(
        task["params"][0],
        json!({"name": "PARAM", "value": "$(params.PARAM)"})
    );
    assert_eq!(
        names_of(&task["taskSpec"]["params"]),
        with_lighthouse(&["PARAM"])
    );
    assert_eq!(
        names_of(&task["taskSpec"]["stepTemplate"]["env"]),
        with_lighthouse(&[])
    );
    assert_eq!(
        names_of(&task["taskSpec"]["steps"]),
        ["noshebang", "params-applied", "args-allowed"]
    );
    assert_eq!(
        task["taskSpec"]["steps"][2]["args"],
        json!(["hello", "world"])
    );

    // The Task: its params declared and passed on (an array as `[*]`), its
    // workspace declared, bound to the task and to an emptyDir.
    let task_run = pipeline_run_of_source(&files, "task");
    let ps = &task_run["spec"]["pipelineSpec"];
    let task = &ps["tasks"][0];
    assert_eq!(task["name"], "build");
    assert_eq!(
        names_of(&ps["params"]),
        with_lighthouse(&["target", "flags"])
    );
    assert_eq!(
        task["params"].as_array().unwrap()[..2],
        [
            json!({"name": "target", "value": "$(params.target)"}),
            json!({"name": "flags", "value": ["$(params.flags[*])"]}),
        ]
    );
    assert_eq!(ps["workspaces"], json!([{"name": "source"}]));
    assert_eq!(
        task["workspaces"],
        json!([{"name": "source", "workspace": "source"}])
    );
    assert_eq!(
        task_run["spec"]["workspaces"],
        json!([{"name": "source", "emptyDir": {}}])
    );

    // The Pipeline: its spec, Lighthouse's parameters added.
    let pipeline = pipeline_run_of_source(&files, "pipeline");
    let ps = &pipeline["spec"]["pipelineSpec"];
    assert_eq!(names_of(&ps["tasks"]), ["hello"]);
    assert_eq!(names_of(&ps["params"]), with_lighthouse(&[]));

    // Tekton takes all three.
    let created = vec![taskrun, task_run.clone(), pipeline];
    let answers = bosun_kubetest::tekton::validate(&created);
    for (answer, pr) in answers.iter().zip(&created) {
        assert!(
            answer.is_ok(),
            "{}: {answer:?}",
            pr["spec"]["pipelineSpec"]["tasks"][0]["name"]
        );
    }
    // Lighthouse's own wrapping of the Task binds its workspace to no
    // volume: Tekton refuses that PipelineRun.
    let mut lighthouse = task_run;
    lighthouse["spec"]["workspaces"] = json!([{"name": "source"}]);
    let answer = bosun_kubetest::tekton::validate(&[lighthouse]).remove(0);
    assert!(
        answer
            .as_ref()
            .is_err_and(|e| e.contains("expected exactly one, got neither")),
        "{answer:?}"
    );
}
