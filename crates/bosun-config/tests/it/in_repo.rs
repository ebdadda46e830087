//! In-repo configuration on the real file system: Prow's `.prow.yaml` and `.prow/`,
//! Lighthouse's `.lighthouse/<name>/triggers.yaml`, how in-repo jobs meet the
//! central ones (duplicates, clusters, presets), and the two ways to name a
//! checkout (`LoadOptions::in_repo` and `in_repo:` in `config.yaml`).
//!
//! YAML is written indented in the tests; [`y`] strips the indentation, so line 1
//! is the line right after the opening quote. Paths in diagnostics are shown with
//! the temporary directory as `$TMP`.

use std::path::PathBuf;

use bosun_config::model::Snapshot;
use bosun_config::types::{InRepoSource, JobSource, PipelineRunParam};
use bosun_config::{LoadOptions, Loaded};
use serde_json::json;

use crate::common::{y, Tmp};

const SPEC: &str = "
    spec:
      containers:
      - image: alpine
";

/// [`SPEC`] indented by `n` spaces, to follow a job's `name:` line.
fn spec(n: usize) -> String {
    y(SPEC)
        .lines()
        .map(|l| format!("{}{l}\n", " ".repeat(n)))
        .collect()
}

/// [`Tmp`] is in `common`; the checkouts these tests load.
impl Tmp {
    fn source(&self, repo: &str, rel: &str, branch: Option<&str>) -> InRepoSource {
        InRepoSource {
            repo: repo.into(),
            path: self.dir(rel),
            branch: branch.map(str::to_string),
            ..InRepoSource::default()
        }
    }

    /// Loads the in-repo config of these checkouts, with `config.yaml` and `jobs/`
    /// when they exist.
    fn load_repos(&self, sources: Vec<InRepoSource>) -> (Loaded, Vec<String>) {
        let opts = LoadOptions {
            config: Some(self.path("config.yaml")).filter(|p| p.exists()),
            job_config: Some(self.path("jobs"))
                .filter(|p| p.exists())
                .into_iter()
                .collect(),
            in_repo: sources,
            ..LoadOptions::default()
        };
        self.load(opts)
    }
}

fn no_lines() -> Vec<String> {
    Vec::new()
}

fn snapshot(loaded: Loaded, lines: &[String]) -> Snapshot {
    loaded
        .snapshot
        .unwrap_or_else(|| panic!("a snapshot; diagnostics: {lines:#?}"))
}

fn in_repo(repo: &str, branch: &str) -> JobSource {
    JobSource::InRepo {
        repo: repo.into(),
        branch: branch.into(),
    }
}

/// (repo, name, source) of every presubmit.
fn presubmits(s: &Snapshot) -> Vec<(&str, &str, &JobSource)> {
    s.presubmits
        .iter()
        .flat_map(|(repo, jobs)| {
            jobs.iter()
                .map(move |j| (repo.as_str(), j.name(), &j.source))
        })
        .collect()
}

fn postsubmits(s: &Snapshot) -> Vec<(&str, &str, &JobSource)> {
    s.postsubmits
        .iter()
        .flat_map(|(repo, jobs)| {
            jobs.iter()
                .map(move |j| (repo.as_str(), j.name(), &j.source))
        })
        .collect()
}

// --- Prow: .prow.yaml and .prow/

#[test]
fn prow_yaml_presets_presubmits_and_postsubmits_as_lists() {
    let tmp = Tmp::new();
    tmp.write(
        "src/repo/.prow.yaml",
        &(y(r#"
            presets:
            - labels:
                preset-cache: "true"
              env:
              - name: CACHE
                value: /cache
            presubmits:
            - name: unit
              always_run: true
              labels:
                preset-cache: "true"
        "#) + &spec(2)
            + &y("
            - name: lint
              branches: [main]
        ") + &spec(2)
            + "postsubmits:\n- name: publish\n"
            + &spec(2)),
    );
    let (loaded, lines) = tmp.load_repos(vec![tmp.source("org/repo", "src/repo", None)]);
    assert_eq!(lines, no_lines());
    assert_eq!(loaded.stats.files, 1);
    let s = snapshot(loaded, &lines);
    let main = in_repo("org/repo", "main");
    // The repository comes from the checkout, the branch defaults to main.
    assert_eq!(
        presubmits(&s),
        vec![("org/repo", "unit", &main), ("org/repo", "lint", &main)]
    );
    assert_eq!(postsubmits(&s), vec![("org/repo", "publish", &main)]);
    assert!(s.periodics.is_empty());
    assert_eq!(s.presets.len(), 1);
    assert_eq!(s.presets[0].source, main);
    assert_eq!(s.presets[0].preset.env[0].name, "CACHE");
    // Positions are those of the in-repo file.
    let unit = &s.presubmits["org/repo"][0];
    assert_eq!(
        PathBuf::from(&*unit.origin.file),
        tmp.path("src/repo/.prow.yaml")
    );
    assert_eq!((unit.origin.mark.line, unit.origin.mark.col), (8, 3));
    // Prow's defaults apply to in-repo jobs as to central ones.
    assert_eq!(unit.kind.context, "unit");
    assert_eq!(unit.base.cluster, "default");
    assert_eq!(unit.base.agent, "kubernetes");
}

#[test]
fn prow_directory_wins_over_prow_yaml() {
    let tmp = Tmp::new();
    // .prow.yaml is broken: it must not even be read.
    tmp.write("src/repo/.prow.yaml", "presubmits: [unclosed\n")
        .write(
            "src/repo/.prow/unit.yaml",
            &(String::from("presubmits:\n- name: unit\n") + &spec(2)),
        )
        .write(
            "src/repo/.prow/release/publish.yml",
            &(String::from("postsubmits:\n- name: publish\n") + &spec(2)),
        )
        .write("src/repo/.prow/README.md", "not yaml");
    let (loaded, lines) =
        tmp.load_repos(vec![tmp.source("org/repo", "src/repo", Some("release-1"))]);
    assert_eq!(lines, no_lines());
    assert_eq!(loaded.stats.files, 2);
    let s = snapshot(loaded, &lines);
    let src = in_repo("org/repo", "release-1");
    assert_eq!(presubmits(&s), vec![("org/repo", "unit", &src)]);
    assert_eq!(postsubmits(&s), vec![("org/repo", "publish", &src)]);
}

#[test]
fn periodics_in_prow_yaml_are_an_error_naming_the_file() {
    let tmp = Tmp::new();
    tmp.write(
        "src/repo/.prow.yaml",
        &(String::from("presubmits:\n- name: unit\n")
            + &spec(2)
            + "periodics:\n- name: nightly\n  interval: 24h\n"
            + &spec(2)),
    );
    let (loaded, lines) = tmp.load_repos(vec![tmp.source("org/repo", "src/repo", None)]);
    assert_eq!(
        lines,
        vec![
            "$TMP/src/repo/.prow.yaml:6:1: error: periodics are not allowed in in-repo Prow config\n  hint: define periodics in the central job config, or in .lighthouse/*/triggers.yaml"
        ]
    );
    assert!(loaded.snapshot.is_none());
}

#[test]
fn in_repo_keys_matching_a_field_up_to_case_are_read_as_it() {
    // Prow and Lighthouse read these files with Go's encoding/json rules too.
    let tmp = Tmp::new();
    tmp.write(
        "src/repo/.prow.yaml",
        &(String::from("Presubmits:\n- Name: unit\n") + &spec(2)),
    )
    .write(
        "src/app/.lighthouse/ci/triggers.yaml",
        &(String::from(
            "Kind: TriggerConfig\nSpec:\n  Periodics:\n  - name: nightly\n    cron: '0 1 * * *'\n",
        ) + &spec(4)),
    );
    let (loaded, lines) = tmp.load_repos(vec![
        tmp.source("org/repo", "src/repo", None),
        tmp.source("org/app", "src/app", None),
    ]);
    let folded = |at: &str, job: &str, key: &str, field: &str| {
        format!("$TMP/src/{at}: warning: {job}field `{key}` read as `{field}` (Prow matches field names case-insensitively)\n  hint: write `{field}`")
    };
    assert_eq!(
        lines,
        vec![
            folded("app/.lighthouse/ci/triggers.yaml:1:1", "", "Kind", "kind"),
            folded("app/.lighthouse/ci/triggers.yaml:2:1", "", "Spec", "spec"),
            folded(
                "app/.lighthouse/ci/triggers.yaml:3:3",
                "",
                "Periodics",
                "periodics"
            ),
            folded("repo/.prow.yaml:1:1", "", "Presubmits", "presubmits"),
            folded("repo/.prow.yaml:2:3", "job unit: ", "Name", "name"),
        ]
    );
    let s = snapshot(loaded, &lines);
    assert_eq!(
        presubmits(&s),
        vec![("org/repo", "unit", &in_repo("org/repo", "main"))]
    );
    assert_eq!(s.periodics[0].identity(), "org/app:nightly");
    // `periodics` is refused in `.prow.yaml` whatever its case.
    tmp.write("src/repo/.prow.yaml", "PERIODICS: []\n");
    let (_, lines) = tmp.load_repos(vec![tmp.source("org/repo", "src/repo", None)]);
    assert_eq!(
        lines,
        vec![
            "$TMP/src/repo/.prow.yaml:1:1: error: periodics are not allowed in in-repo Prow config\n  hint: define periodics in the central job config, or in .lighthouse/*/triggers.yaml".to_string(),
            folded("repo/.prow.yaml:1:1", "", "PERIODICS", "periodics"),
        ]
    );
}

#[test]
fn central_format_in_prow_yaml_is_an_error() {
    // `presubmits` keyed by repository, as in central config: a clear error.
    let tmp = Tmp::new();
    tmp.write(
        "src/repo/.prow.yaml",
        &(String::from("presubmits:\n  org/repo:\n  - name: unit\n") + &spec(4)),
    );
    let (_, lines) = tmp.load_repos(vec![tmp.source("org/repo", "src/repo", None)]);
    assert_eq!(
        lines,
        vec!["$TMP/src/repo/.prow.yaml:2:3: error: `presubmits` must be a list, found a mapping"]
    );
}

#[test]
fn bad_checkouts() {
    let tmp = Tmp::new();
    tmp.write("file", "");
    let (_, lines) = tmp.load_repos(vec![
        tmp.source("org/missing", "nowhere", None),
        tmp.source("org/file", "file", None),
        tmp.source("just-a-repo", "src", None),
    ]);
    assert_eq!(
        lines,
        vec![
            "--in-repo: error: in-repo source \"just-a-repo\"=\"$TMP/src\" must be ORG/REPO=DIR\n  hint: use --in-repo ORG/REPO=DIR[@BRANCH]",
            "$TMP/file: error: in-repo checkout is not a directory",
            "$TMP/nowhere: error: cannot read in-repo checkout of org/missing: No such file or directory (os error 2)",
        ]
    );
    // A checkout without any in-repo config is fine: no jobs.
    std::fs::create_dir_all(tmp.path("src/empty")).expect("mkdir");
    let (loaded, lines) = tmp.load_repos(vec![tmp.source("org/empty", "src/empty", None)]);
    assert_eq!(lines, no_lines());
    assert_eq!(snapshot(loaded, &lines).counts().presubmits, 0);
}

// --- Lighthouse: .lighthouse/<name>/triggers.yaml

const TRIGGERS: &str = "
    apiVersion: config.lighthouse.jenkins-x.io/v1alpha1
    kind: TriggerConfig
    spec:
      presubmits:
      - name: lint
        context: lint
        spec:
          containers:
          - image: golangci/golangci-lint
      - name: pr
        source: pullrequest.yaml
      postsubmits:
      - name: release
        source: release.yaml
        branches: [main]
      periodics:
      - name: dailyjob
        cron: 0 4 * * MON-FRI
        source: dailyjob.yaml
        pipeline_run_params:
        - name: GREETINGS
          value_template: 'Howdy!'
";

/// The `source:` files of [`TRIGGERS`]: a v1beta1 PipelineRun with an
/// embedded pipeline and a jx `uses:` step, a v1 one naming a Pipeline, and a
/// v1 one without Lighthouse's default parameters.
const PULLREQUEST: &str = "
    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata:
      name: pullrequest
    spec:
      serviceAccountName: tekton-bot
      timeout: 1h
      pipelineSpec:
        tasks:
        - name: from-build-pack
          taskSpec:
            stepTemplate:
              image: uses:jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream
            steps:
            - name: build-make-linux
              resources: {}
";

const RELEASE: &str = "
    apiVersion: tekton.dev/v1
    kind: PipelineRun
    spec:
      pipelineRef:
        name: release
";

const DAILYJOB: &str = "
    apiVersion: tekton.dev/v1
    kind: PipelineRun
    metadata:
      annotations:
        lighthouse.jenkins-x.io/defaultParameters: 'false'
    spec:
      pipelineSpec:
        tasks:
        - name: greet
          taskSpec:
            steps:
            - name: hello
              image: alpine
              script: echo $(params.GREETINGS)
";

/// A checkout at `dir` with [`TRIGGERS`] in `.lighthouse/<name>/` and its
/// source files beside it.
fn lighthouse_checkout(tmp: &Tmp, dir: &str, name: &str) {
    let at = |f: &str| format!("{dir}/.lighthouse/{name}/{f}");
    tmp.write(&at("triggers.yaml"), &y(TRIGGERS))
        .write(&at("pullrequest.yaml"), &y(PULLREQUEST))
        .write(&at("release.yaml"), &y(RELEASE))
        .write(&at("dailyjob.yaml"), &y(DAILYJOB));
}

/// The lines without the warnings about the Tekton agent itself (whose
/// support is not this file's business).
fn without_agent_warnings(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| !l.contains("warning: job") || !l.contains(": agent tekton-pipeline "))
        .cloned()
        .collect()
}

#[test]
fn lighthouse_trigger_config() {
    let tmp = Tmp::new();
    lighthouse_checkout(&tmp, "src/app", "jenkins-x");
    tmp.write("src/app/.lighthouse/README.md", "docs");
    let (loaded, lines) = tmp.load_repos(vec![tmp.source("org/app", "src/app", None)]);
    assert_eq!(without_agent_warnings(&lines), no_lines());
    assert_eq!(
        loaded.stats.files, 4,
        "triggers.yaml and the three source files"
    );
    let s = snapshot(loaded, &lines);
    let src = in_repo("org/app", "main");
    assert_eq!(
        presubmits(&s),
        vec![("org/app", "lint", &src), ("org/app", "pr", &src)]
    );
    assert_eq!(postsubmits(&s), vec![("org/app", "release", &src)]);
    let agents: Vec<(&str, &str)> = s
        .presubmits
        .values()
        .flatten()
        .map(|j| (j.name(), j.base.agent.as_str()))
        .collect();
    assert_eq!(
        agents,
        vec![("lint", "kubernetes"), ("pr", "tekton-pipeline")]
    );
    assert_eq!(
        s.postsubmits["org/app"][0].base.source.as_deref(),
        Some("release.yaml")
    );

    // The periodic belongs to the repository: its identity is ORG/REPO:name.
    assert_eq!(s.periodics.len(), 1);
    let p = &s.periodics[0];
    assert_eq!(p.identity(), "org/app:dailyjob");
    assert_eq!(p.name(), "dailyjob");
    assert_eq!(p.source, src);
    assert_eq!(p.base.agent, "tekton-pipeline");
    assert_eq!(p.kind.cron.as_deref(), Some("0 4 * * MON-FRI"));
    assert!(s.periodic("org/app:dailyjob").is_some());
    assert!(s.periodic("dailyjob").is_none());
    for other in [
        "org/app:daily",
        "org/ap:dailyjob",
        "org/app/dailyjob",
        "org/appdailyjob",
        "org/app:dailyjob2",
        ":dailyjob",
    ] {
        assert!(!p.has_identity(other), "{other}");
    }
    assert!(p.has_identity(&p.identity()));
    assert_eq!(
        p.base.pipeline_run_params,
        Some(vec![PipelineRunParam {
            name: "GREETINGS".into(),
            value_template: "Howdy!".into()
        }])
    );
}

/// Each job's `source:` PipelineRun is read and its spec kept under its API
/// version; Lighthouse's parameters are added to an embedded pipeline unless
/// the source says not to; jx `uses:` images stay as written.
#[test]
fn lighthouse_sources_are_loaded_into_the_jobs() {
    let tmp = Tmp::new();
    lighthouse_checkout(&tmp, "src/app", "jenkins-x");
    let (loaded, lines) = tmp.load_repos(vec![tmp.source("org/app", "src/app", None)]);
    let s = snapshot(loaded, &lines);
    let pr = &s.presubmits["org/app"][1].base;
    let spec = pr
        .tekton_pipeline_run_spec
        .as_ref()
        .expect("the source's spec");
    let v1beta1 = &spec["v1beta1"];
    assert_eq!(spec.as_object().unwrap().len(), 1, "{spec:#}");
    assert_eq!(v1beta1["serviceAccountName"], "tekton-bot");
    assert_eq!(v1beta1["timeout"], "1h");
    let task = &v1beta1["pipelineSpec"]["tasks"][0];
    assert_eq!(
        task["taskSpec"]["stepTemplate"]["image"],
        "uses:jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream"
    );
    assert_eq!(
        task["taskSpec"]["steps"],
        json!([{"name": "build-make-linux", "resources": {}}])
    );
    // Lighthouse's parameters: declared by the pipeline and the task, passed
    // to the task, in the step template's environment.
    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    let lighthouse = [
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
    assert_eq!(names(&v1beta1["pipelineSpec"]["params"]), lighthouse);
    assert_eq!(names(&task["params"]), lighthouse);
    assert_eq!(names(&task["taskSpec"]["params"]), lighthouse);
    assert_eq!(names(&task["taskSpec"]["stepTemplate"]["env"]), lighthouse);
    assert_eq!(
        task["params"][12],
        json!({"name": "REPO_URL", "value": "$(params.REPO_URL)"})
    );
    assert_eq!(
        v1beta1["pipelineSpec"]["params"][6],
        json!({"name": "PULL_NUMBER", "description": "git pull request number", "type": "string", "default": ""})
    );

    // A Pipeline by reference: nothing to add to.
    let release = &s.postsubmits["org/app"][0].base;
    assert_eq!(
        release.tekton_pipeline_run_spec,
        Some(json!({"v1": {"pipelineRef": {"name": "release"}}}))
    );
    // `defaultParameters: "false"`: the spec as written.
    let daily = &s.periodics[0].base;
    assert_eq!(
        daily.tekton_pipeline_run_spec,
        Some(
            json!({"v1": {"pipelineSpec": {"tasks": [{"name": "greet", "taskSpec": {"steps": [
                {"name": "hello", "image": "alpine", "script": "echo $(params.GREETINGS)"}
            ]}}]}}})
        )
    );
    // The source's name stays on the job, which is a Tekton job.
    assert_eq!(daily.source.as_deref(), Some("dailyjob.yaml"));
    assert_eq!(daily.agent, "tekton-pipeline");
    assert!(daily.pipeline_run_spec.is_none());
}

/// Every problem with a `source:` file is an error at the file and line
/// concerned, naming the job; the configuration does not load (so a daemon
/// keeps its last good one).
#[test]
fn lighthouse_source_problems() {
    let tmp = Tmp::new();
    let dir = "src/app/.lighthouse/ci";
    let at = |f: &str| format!("{dir}/{f}");
    let jobs = [
        ("missing", "nowhere.yaml"),
        ("url", "https://example.com/pr.yaml"),
        ("outside", "../../../../elsewhere.yaml"),
        ("directory", "subdir"),
        ("not-yaml", "broken.yaml"),
        ("empty-file", "empty.yaml"),
        ("two-docs", "two.yaml"),
        ("a-list", "list.yaml"),
        ("no-api-version", "noversion.yaml"),
        ("old-api-version", "alpha.yaml"),
        ("a-pipeline", "pipeline.yaml"),
        ("no-spec", "nospec.yaml"),
        ("spec-a-list", "speclist.yaml"),
        ("fetches-steps", "prepend.yaml"),
        ("bad-pattern", "badpattern.yaml"),
        ("missing-ref", "missingref.yaml"),
        ("resources", "resources.yaml"),
    ];
    let mut triggers =
        String::from("apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  presubmits:\n");
    for (name, source) in jobs {
        triggers += &format!("  - name: {name}\n    source: {source}\n");
    }
    triggers += "  - name: empty-source\n    source: ''\n";
    triggers += "  - name: both\n    source: release.yaml\n    pipeline_run_spec: {pipelineRef: {name: x}}\n";
    let head = "apiVersion: tekton.dev/v1\nkind: PipelineRun\n";
    tmp.write(&at("triggers.yaml"), &triggers)
        .write(&at("subdir/x"), "")
        .write(&at("broken.yaml"), "spec: [\n")
        .write(&at("empty.yaml"), "# nothing\n")
        .write(&at("two.yaml"), &format!("{head}spec: {{}}\n---\n{head}spec: {{}}\n"))
        .write(&at("list.yaml"), "- a\n")
        .write(&at("noversion.yaml"), "kind: PipelineRun\nspec: {}\n")
        .write(&at("alpha.yaml"), "apiVersion: tekton.dev/v1alpha1\nkind: PipelineRun\nspec: {}\n")
        .write(&at("pipeline.yaml"), "apiVersion: tekton.dev/v1\nkind: ClusterTask\nspec: {steps: []}\n")
        .write(&at("nospec.yaml"), &format!("{head}metadata: {{name: x}}\n"))
        .write(&at("speclist.yaml"), &format!("{head}spec: []\n"))
        .write(
            &at("prepend.yaml"),
            &format!("{head}metadata:\n  annotations:\n    lighthouse.jenkins-x.io/prependStepsURL: https://x/steps.yaml\nspec: {{pipelineRef: {{name: x}}}}\n"),
        )
        .write(
            &at("badpattern.yaml"),
            &format!("{head}metadata:\n  annotations:\n    lighthouse.jenkins-x.io/loadFileRefs: '(.*'\nspec: {{pipelineRef: {{name: x}}}}\n"),
        )
        .write(
            &at("missingref.yaml"),
            &format!("{head}metadata:\n  annotations:\n    lighthouse.jenkins-x.io/loadFileRefs: '.*'\nspec: {{pipelineRef: {{name: gone}}}}\n"),
        )
        .write(
            &at("resources.yaml"),
            &y("
                apiVersion: tekton.dev/v1beta1
                kind: PipelineRun
                spec:
                  resources:
                  - name: git
                    resourceRef: {name: PROW_IMPLICIT_GIT_REF}
                  pipelineSpec:
                    tasks:
                    - name: build
                      conditions: []
                      taskSpec:
                        resources: {inputs: []}
                        steps: []
            "),
        )
        .write(&at("release.yaml"), &y(RELEASE));
    let (loaded, lines) = tmp.load_repos(vec![tmp.source("org/app", "src/app", None)]);
    assert!(loaded.snapshot.is_none(), "a bad source never loads");
    let t = "$TMP/src/app/.lighthouse/ci";
    const GONE: &str = "PipelineResources were removed from Tekton and tekton.dev/v1 has none: clone with a task (the git-clone catalog task, which Lighthouse fills with REPO_URL and the revision) and share files through workspaces";
    assert_eq!(
        without_agent_warnings(&lines),
        vec![
            format!("{t}/alpha.yaml:1:13: error: job old-api-version: apiVersion must be tekton.dev/v1 or tekton.dev/v1beta1, found \"tekton.dev/v1alpha1\""),
            format!("{t}/badpattern.yaml:5:5: error: job bad-pattern: annotation lighthouse.jenkins-x.io/loadFileRefs: \"(.*\" is not a regular expression: regex parse error:\n    (.*\n    ^\nerror: unclosed group"),
            format!("{t}/broken.yaml:2:1: error: job not-yaml: invalid YAML: while parsing a node, did not find expected node content"),
            format!("{t}/empty.yaml:1:1: error: job empty-file: the file is empty: expected a Tekton PipelineRun, Pipeline, Task or TaskRun"),
            format!("{t}/gone.yaml: error: job missing-ref: cannot read: No such file or directory (os error 2)"),
            format!("{t}/list.yaml:1:1: error: job a-list: expected a Tekton PipelineRun, Pipeline, Task or TaskRun (a mapping), found a sequence"),
            format!("{t}/nospec.yaml:1:1: error: job no-spec: the PipelineRun has no spec"),
            format!("{t}/noversion.yaml:1:1: error: job no-api-version: apiVersion is missing: expected a Tekton PipelineRun, Pipeline, Task or TaskRun\n  hint: write apiVersion: tekton.dev/v1"),
            format!("{t}/pipeline.yaml:2:7: error: job a-pipeline: kind must be PipelineRun, Pipeline, Task or TaskRun, found \"ClusterTask\""),
            format!("{t}/prepend.yaml:5:5: error: job fetches-steps: annotation lighthouse.jenkins-x.io/prependStepsURL: bosun does not fetch steps over the network\n  hint: copy the steps into the pipeline's tasks"),
            format!("{t}/resources.yaml:4:3: error: job resources: spec.resources: {GONE}"),
            format!("{t}/resources.yaml:10:7: error: job resources: spec.pipelineSpec.tasks[0].conditions: Conditions were removed from Tekton: use when expressions"),
            format!("{t}/resources.yaml:12:9: error: job resources: spec.pipelineSpec.tasks[0].taskSpec.resources: {GONE}"),
            format!("{t}/speclist.yaml:3:7: error: job spec-a-list: spec must be a mapping, found a sequence"),
            format!("{t}/triggers.yaml:6:5: error: job missing: source \"nowhere.yaml\": cannot read {t}/nowhere.yaml: No such file or directory (os error 2)"),
            format!("{t}/triggers.yaml:8:5: error: job url: source \"https://example.com/pr.yaml\" is a URL: bosun does not fetch pipelines over the network\n  hint: check the PipelineRun into the repository and name the file"),
            format!("{t}/triggers.yaml:10:5: error: job outside: source \"../../../../elsewhere.yaml\" is outside the repository ($TMP/elsewhere.yaml)"),
            format!("{t}/triggers.yaml:12:5: error: job directory: source \"subdir\": {t}/subdir is not a regular file"),
            format!("{t}/triggers.yaml:40:5: error: job empty-source: source is empty\n  hint: name the PipelineRun file, relative to this triggers.yaml"),
            format!("{t}/triggers.yaml:42:5: error: job both: source and pipeline_run_spec (or tekton_pipeline_run_spec) are both set: a job has one pipeline"),
            format!("{t}/two.yaml:5:1: error: job two-docs: the file holds 2 YAML documents: expected one Tekton PipelineRun, Pipeline, Task or TaskRun"),
        ]
    );
}

/// `lighthouse.jenkins-x.io/loadFileRefs` embeds the Pipeline and Tasks
/// named by matching references from files beside the source; one read in
/// `v1beta1` makes the whole spec `v1beta1` (converted when a run starts).
#[test]
fn lighthouse_load_file_refs() {
    let tmp = Tmp::new();
    let dir = "src/app/.lighthouse/ci";
    let at = |f: &str| format!("{dir}/{f}");
    tmp.write(
        &at("triggers.yaml"),
        "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  postsubmits:\n  - name: release\n    source: release.yaml\n",
    )
    .write(
        &at("local-build.yaml"),
        &y("
            apiVersion: tekton.dev/v1beta1
            kind: Task
            spec:
              steps:
              - name: build
                image: golang
                script: make
        "),
    );
    tmp.write(
        &at("release.yaml"),
        &y("
            apiVersion: tekton.dev/v1
            kind: PipelineRun
            metadata:
              annotations:
                lighthouse.jenkins-x.io/loadFileRefs: ^(release-|local-)
                lighthouse.jenkins-x.io/defaultParameters: 'false'
            spec:
              pipelineRef:
                name: release-pipeline
        "),
    )
    .write(
        &at("release-pipeline.yaml"),
        &y("
            apiVersion: tekton.dev/v1
            kind: Pipeline
            spec:
              tasks:
              - name: build
                taskRef:
                  name: local-build
              - name: publish
                taskRef:
                  name: catalog-publish
        "),
    );
    let (loaded, lines) = tmp.load_repos(vec![tmp.source("org/app", "src/app", None)]);
    let s = snapshot(loaded, &lines);
    assert_eq!(
        s.postsubmits["org/app"][0].base.tekton_pipeline_run_spec,
        Some(json!({"v1beta1": {"pipelineSpec": {"tasks": [
            {"name": "build", "taskSpec": {"steps": [{"name": "build", "image": "golang", "script": "make"}]}},
            {"name": "publish", "taskRef": {"name": "catalog-publish"}},
        ]}}}))
    );
}

/// A `pipeline_run_params` entry read as Lighthouse reads it: `value_template`
/// (a `valueTemplate` key is not Lighthouse's, and is left unread).
#[test]
fn lighthouse_pipeline_run_params_keys() {
    let tmp = Tmp::new();
    let dir = "src/app/.lighthouse/ci";
    tmp.write(
        &format!("{dir}/triggers.yaml"),
        "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  postsubmits:\n  - name: release\n    source: release.yaml\n    pipeline_run_params:\n    - name: A\n      valueTemplate: x\n",
    )
    .write(&format!("{dir}/release.yaml"), &y(RELEASE));
    let (_, lines) = tmp.load_repos(vec![tmp.source("org/app", "src/app", None)]);
    assert_eq!(
        without_agent_warnings(&lines),
        vec!["$TMP/src/app/.lighthouse/ci/triggers.yaml:9:7: warning: job release: unknown field `valueTemplate`\n  hint: did you mean `value_template`?"]
    );
}

#[test]
fn lighthouse_periodics_of_two_repos_and_a_central_one_share_a_name() {
    let tmp = Tmp::new();
    lighthouse_checkout(&tmp, "src/app", "jenkins-x");
    lighthouse_checkout(&tmp, "src/other", "ci");
    tmp.write(
        "jobs/central.yaml",
        &(String::from("periodics:\n- name: dailyjob\n  interval: 24h\n") + &spec(2)),
    );
    let (loaded, lines) = tmp.load_repos(vec![
        tmp.source("org/app", "src/app", None),
        tmp.source("org/other", "src/other", Some("master")),
    ]);
    assert_eq!(loaded.errors(), 0, "{lines:#?}");
    let s = snapshot(loaded, &lines);
    let mut ids: Vec<String> = s.periodics.iter().map(|p| p.identity()).collect();
    ids.sort();
    assert_eq!(
        ids,
        vec!["dailyjob", "org/app:dailyjob", "org/other:dailyjob"]
    );
    assert_eq!(
        s.periodic("org/other:dailyjob").map(|p| &p.source),
        Some(&in_repo("org/other", "master"))
    );
    // Pre- and postsubmits of different repositories never clash either.
    assert_eq!(s.counts().presubmits, 4);
    assert_eq!(s.counts().postsubmits, 2);
}

#[test]
fn lighthouse_duplicate_periodic_in_one_repository() {
    let tmp = Tmp::new();
    let periodic = "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  periodics:\n  - name: nightly\n    cron: '0 1 * * *'\n";
    tmp.write(
        "src/app/.lighthouse/a/triggers.yaml",
        &(periodic.to_string() + &spec(4)),
    )
    .write(
        "src/app/.lighthouse/b/triggers.yaml",
        &(periodic.to_string() + &spec(4)),
    );
    let (_, lines) = tmp.load_repos(vec![tmp.source("org/app", "src/app", None)]);
    assert_eq!(
        lines,
        vec![
            "$TMP/src/app/.lighthouse/b/triggers.yaml:5:5: error: job nightly: duplicated periodic job: org/app:nightly\n  hint: first defined at $TMP/src/app/.lighthouse/a/triggers.yaml:5:5"
        ]
    );
}

#[test]
fn lighthouse_wrong_kind_and_unknown_spec_keys() {
    let tmp = Tmp::new();
    tmp.write(
        "src/app/.lighthouse/a/triggers.yaml",
        "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: Pipeline\nspec:\n  presubmits: []\n",
    )
    .write(
        "src/app/.lighthouse/b/triggers.yaml",
        "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  presubmit: []\n",
    );
    let (_, lines) = tmp.load_repos(vec![tmp.source("org/app", "src/app", None)]);
    assert_eq!(
        lines,
        vec![
            "$TMP/src/app/.lighthouse/a/triggers.yaml:2:7: error: kind must be TriggerConfig, found \"Pipeline\"",
            "$TMP/src/app/.lighthouse/b/triggers.yaml:4:3: warning: unknown field `presubmit`\n  hint: did you mean `presubmits`?",
        ]
    );
}

// --- In-repo jobs and the central config.

#[test]
fn in_repo_clusters_default_to_default_only() {
    let tmp = Tmp::new();
    tmp.write(
        "config.yaml",
        "build_clusters:\n  default: {}\n  build01: {}\n",
    )
    .write(
        "src/repo/.prow.yaml",
        &(String::from("presubmits:\n- name: unit\n  cluster: build01\n")
            + &spec(2)
            + "- name: lint\n  cluster: default\n"
            + &spec(2)
            + "postsubmits:\n- name: publish\n  cluster: build01\n"
            + &spec(2)),
    )
    .write(
        "src/app/.lighthouse/ci/triggers.yaml",
        &(String::from("kind: TriggerConfig\nspec:\n  periodics:\n  - name: nightly\n    cron: '0 1 * * *'\n    cluster: build01\n")
            + &spec(4)),
    )
    // The same cluster is fine for central jobs.
    .write(
        "jobs/central.yaml",
        &(String::from("presubmits:\n  org/repo:\n  - name: central\n    cluster: build01\n")
            + &spec(4)),
    );
    let sources = vec![
        tmp.source("org/repo", "src/repo", None),
        tmp.source("org/app", "src/app", None),
    ];
    let (loaded, lines) = tmp.load_repos(sources.clone());
    let hint = "\n  hint: list it in in_repo_config.allowed_clusters";
    assert_eq!(
        lines,
        vec![
            format!("$TMP/src/app/.lighthouse/ci/triggers.yaml:6:5: error: job nightly: cluster \"build01\" is not allowed for repository \"org/app\"{hint}"),
            format!("$TMP/src/repo/.prow.yaml:3:3: error: job unit: cluster \"build01\" is not allowed for repository \"org/repo\"{hint}"),
            format!("$TMP/src/repo/.prow.yaml:14:3: error: job publish: cluster \"build01\" is not allowed for repository \"org/repo\"{hint}"),
        ]
    );
    assert!(loaded.snapshot.is_none());

    // Allowed for one repository (and by org for the other): no errors.
    tmp.write(
        "config.yaml",
        "build_clusters:\n  default: {}\n  build01: {}\nin_repo_config:\n  allowed_clusters:\n    org/repo: [build01]\n    org: [build01]\n",
    );
    let (loaded, lines) = tmp.load_repos(sources.clone());
    assert_eq!(lines, no_lines());
    assert_eq!(snapshot(loaded, &lines).counts().presubmits, 3);

    // `*` applies to every repository (an empty list for org/app takes nothing
    // away), and once `*` is written, `default` is no longer implied.
    tmp.write(
        "config.yaml",
        "build_clusters:\n  default: {}\n  build01: {}\nin_repo_config:\n  allowed_clusters:\n    '*': [build01]\n    org/app: []\n",
    );
    let (loaded, lines) = tmp.load_repos(sources);
    assert_eq!(
        lines,
        vec![format!("$TMP/src/repo/.prow.yaml:8:3: error: job lint: cluster \"default\" is not allowed for repository \"org/repo\"{hint}")]
    );
    assert!(loaded.snapshot.is_none());
}

#[test]
fn in_repo_presubmit_with_the_name_of_a_central_one() {
    let tmp = Tmp::new();
    tmp.write(
        "jobs/central.yaml",
        &(String::from("presubmits:\n  org/repo:\n  - name: unit\n    branches: [main]\n")
            + &spec(4)
            + "  - name: e2e\n    branches: [release-1.0]\n"
            + &spec(4)
            + "postsubmits:\n  org/repo:\n  - name: publish\n"
            + &spec(4)),
    )
    .write(
        "src/repo/.prow.yaml",
        // unit: every branch, so also main. e2e: main only, never release-1.0.
        &(String::from("presubmits:\n- name: unit\n")
            + &spec(2)
            + "- name: e2e\n  branches: [main]\n  context: e2e-in-repo\n"
            + &spec(2)
            + "postsubmits:\n- name: publish\n  branches: [main]\n"
            + &spec(2)),
    );
    let (loaded, lines) = tmp.load_repos(vec![tmp.source("org/repo", "src/repo", None)]);
    assert_eq!(
        lines,
        vec![
            "$TMP/src/repo/.prow.yaml:2:3: error: job unit: duplicated presubmit jobs (consider both inrepo and central config): [unit]\n  hint: also defined at $TMP/jobs/central.yaml:3:5 for intersecting branches",
            "$TMP/src/repo/.prow.yaml:13:3: error: job publish: duplicated postsubmit jobs (consider both inrepo and central config): [publish]\n  hint: also defined at $TMP/jobs/central.yaml:15:5 for intersecting branches",
        ]
    );
    assert!(loaded.snapshot.is_none());
}

#[test]
fn two_repositories_may_have_jobs_with_the_same_name() {
    let tmp = Tmp::new();
    let prow_yaml = String::from("presubmits:\n- name: unit\n")
        + &spec(2)
        + "postsubmits:\n- name: publish\n"
        + &spec(2);
    tmp.write("src/a/.prow.yaml", &prow_yaml)
        .write("src/b/.prow.yaml", &prow_yaml)
        .write(
            "jobs/central.yaml",
            &(String::from("presubmits:\n  org/c:\n  - name: unit\n") + &spec(4)),
        );
    let (loaded, lines) = tmp.load_repos(vec![
        tmp.source("org/a", "src/a", None),
        tmp.source("org/b", "src/b", None),
    ]);
    assert_eq!(lines, no_lines());
    let s = snapshot(loaded, &lines);
    let names: Vec<(&str, &str)> = presubmits(&s)
        .into_iter()
        .map(|(repo, name, _)| (repo, name))
        .collect();
    assert_eq!(
        names,
        vec![("org/a", "unit"), ("org/b", "unit"), ("org/c", "unit")]
    );
    assert_eq!(s.counts().postsubmits, 2);
}

#[test]
fn in_repo_presets_apply_to_their_own_repository_only() {
    // The preset of org/a adds FOO; org/a's job sets FOO too, so merging fails.
    // org/b's job also sets FOO, but org/a's preset does not apply to it.
    let tmp = Tmp::new();
    let job = "  labels:\n    preset-foo: \"true\"\n  spec:\n    containers:\n    - image: alpine\n      env:\n      - name: FOO\n        value: mine\n";
    tmp.write(
        "src/a/.prow.yaml",
        &(String::from("presets:\n- labels:\n    preset-foo: \"true\"\n  env:\n  - name: FOO\n    value: preset\npresubmits:\n- name: unit\n")
            + job),
    )
    .write(
        "src/b/.prow.yaml",
        &(String::from("presubmits:\n- name: unit\n") + job),
    );
    let (loaded, lines) = tmp.load_repos(vec![
        tmp.source("org/a", "src/a", None),
        tmp.source("org/b", "src/b", None),
    ]);
    assert_eq!(loaded.errors(), 1, "{lines:#?}");
    let d = &loaded.diagnostics[0];
    assert_eq!(
        d.file.as_deref().map(PathBuf::from),
        Some(tmp.path("src/a/.prow.yaml"))
    );
    assert_eq!(d.job.as_deref(), Some("unit"));
    assert_eq!(
        d.message,
        "failed to merge presets for podspec: env var duplicated in pod spec: FOO"
    );
}

// --- Naming checkouts in config.yaml.

#[test]
fn in_repo_list_in_config_yaml() {
    let tmp = Tmp::new();
    tmp.write(
        "src/repo/.prow.yaml",
        &(String::from("presubmits:\n- name: unit\n") + &spec(2)),
    )
    .write(
        "config.yaml",
        &format!(
            "in_repo:\n- repo: org/repo\n  path: {}\n  branch: develop\n- repo: org/app\n  path: {}\n",
            tmp.dir("src/repo"),
            tmp.dir("src/app")
        ),
    );
    lighthouse_checkout(&tmp, "src/app", "ci");
    // config.yaml alone names both checkouts; --in-repo adds a third.
    tmp.write(
        "src/cli/.prow.yaml",
        &(String::from("postsubmits:\n- name: publish\n") + &spec(2)),
    );
    let (loaded, lines) = tmp.load_repos(vec![tmp.source("org/cli", "src/cli", None)]);
    assert_eq!(loaded.errors(), 0, "{lines:#?}");
    assert_eq!(
        loaded.stats.files, 7,
        "config.yaml, three in-repo files and three pipeline sources"
    );
    let s = snapshot(loaded, &lines);
    assert_eq!(
        presubmits(&s),
        vec![
            ("org/app", "lint", &in_repo("org/app", "main")),
            ("org/app", "pr", &in_repo("org/app", "main")),
            ("org/repo", "unit", &in_repo("org/repo", "develop")),
        ]
    );
    assert_eq!(
        postsubmits(&s),
        vec![
            ("org/app", "release", &in_repo("org/app", "main")),
            ("org/cli", "publish", &in_repo("org/cli", "main")),
        ]
    );
    assert_eq!(s.periodics[0].identity(), "org/app:dailyjob");
}

#[test]
fn in_repo_entry_without_a_path_is_one_error() {
    let tmp = Tmp::new();
    tmp.write("config.yaml", "in_repo:\n- repo: org/repo\n");
    let (_, lines) = tmp.load_repos(Vec::new());
    // One error, at the entry that lacks its path; nothing is read from "".
    assert_eq!(
        lines,
        vec!["$TMP/config.yaml:2:3: error: in_repo[0].path or in_repo[0].clone_uri must be set\n  hint: path: a local checkout; clone_uri: a git remote bosun serve follows"]
    );
}

/// The `.prow.yaml` of a checkout with one postsubmit, `name`.
fn prow_checkout(tmp: &Tmp, dir: &str, name: &str) {
    tmp.write(
        &format!("{dir}/.prow.yaml"),
        &(format!("postsubmits:\n- name: {name}\n") + &spec(2)),
    );
}

/// (repo, name, file defining it) of every postsubmit.
fn postsubmit_files(s: &Snapshot) -> Vec<(&str, &str, &str)> {
    s.postsubmits
        .iter()
        .flat_map(|(repo, jobs)| {
            jobs.iter()
                .map(move |j| (repo.as_str(), j.name(), &*j.origin.file))
        })
        .collect()
}

#[test]
fn relative_in_repo_paths_in_config_yaml_are_beside_the_file() {
    let tmp = Tmp::new();
    lighthouse_checkout(&tmp, "conf/app", "ci");
    prow_checkout(&tmp, "src/repo", "unit");
    prow_checkout(&tmp, "abs", "publish");
    tmp.write(
        "conf/config.yaml",
        &format!(
            "in_repo:\n- repo: org/app\n  path: app\n- repo: org/repo\n  path: ./../src/repo\n- repo: org/abs\n  path: {}\n",
            tmp.dir("abs")
        ),
    );
    let (loaded, lines) = tmp.load(LoadOptions {
        config: Some(tmp.path("conf/config.yaml")),
        ..LoadOptions::default()
    });
    assert_eq!(loaded.errors(), 0, "{lines:#?}");
    let s = snapshot(loaded, &lines);
    // `app` and `./../src/repo` are joined to the file's directory; the
    // absolute path is kept. The snapshot holds the joined paths.
    let paths: Vec<&str> = s.config.in_repo.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            tmp.dir("conf/app"),
            tmp.dir("conf/../src/repo"),
            tmp.dir("abs")
        ]
    );
    let root = tmp.dir("");
    let files: Vec<(&str, &str, String)> = postsubmit_files(&s)
        .into_iter()
        .map(|(repo, name, file)| (repo, name, file.replace(&root, "$TMP/")))
        .collect();
    assert_eq!(
        files,
        [
            ("org/abs", "publish", "$TMP/abs/.prow.yaml".to_string()),
            (
                "org/app",
                "release",
                "$TMP/conf/app/.lighthouse/ci/triggers.yaml".to_string()
            ),
            (
                "org/repo",
                "unit",
                "$TMP/conf/../src/repo/.prow.yaml".to_string()
            ),
        ]
    );
    assert_eq!(s.periodics[0].identity(), "org/app:dailyjob");
}

/// `path` from the current directory (the test's, which stays as it is) to
/// `to`, written with `..`.
fn relative_to_cwd(to: &std::path::Path) -> String {
    let cwd = std::env::current_dir()
        .expect("cwd")
        .canonicalize()
        .expect("canonical cwd");
    let up = cwd.components().skip(1).map(|_| "..");
    let down = to
        .components()
        .skip(1)
        .map(|c| c.as_os_str().to_str().expect("utf-8"));
    up.chain(down).collect::<Vec<_>>().join("/")
}

#[test]
fn a_relative_config_keeps_its_in_repo_paths_relative_and_in_repo_options_are_from_the_cwd() {
    let tmp = Tmp::new();
    // Prow checkouts: a Lighthouse source file beside a triggers.yaml whose
    // path starts with `../..` is not found (the loader's lexical clean of
    // Lighthouse paths drops leading `..`s).
    prow_checkout(&tmp, "conf/app", "release");
    prow_checkout(&tmp, "cli", "publish");
    tmp.write(
        "conf/config.yaml",
        "in_repo:\n- repo: org/app\n  path: app\n",
    );
    let rel = relative_to_cwd(&tmp.root);
    // The same as `--config REL/conf/config.yaml --in-repo org/cli=REL/cli`:
    // the option's path is the process's, not the config file's.
    let (loaded, lines) = tmp.load(LoadOptions {
        config: Some(PathBuf::from(format!("{rel}/conf/config.yaml"))),
        in_repo: vec![InRepoSource {
            repo: "org/cli".into(),
            path: format!("{rel}/cli"),
            ..InRepoSource::default()
        }],
        ..LoadOptions::default()
    });
    assert_eq!(loaded.errors(), 0, "{lines:#?}");
    let s = snapshot(loaded, &lines);
    assert_eq!(s.config.in_repo[0].path, format!("{rel}/conf/app"));
    assert_eq!(
        postsubmit_files(&s),
        [
            ("org/app", "release", &*format!("{rel}/conf/app/.prow.yaml")),
            ("org/cli", "publish", &*format!("{rel}/cli/.prow.yaml")),
        ]
    );
}
