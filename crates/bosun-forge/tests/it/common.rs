//! What more than one module uses: a served repository with a work
//! repository pushing to it ([`Served`]), the configuration files the
//! tests commit, and ways to look at a load.

use std::path::PathBuf;

use bosun_config::Loaded;
use bosun_forge::repos::{Credentials, Remote};
use bosun_git::testing::{GitServer, WorkRepo};

/// The repository the tests follow.
pub const REPO: &str = "acme/widgets";

/// Strips the first newline and the common indentation.
pub fn y(s: &str) -> String {
    let s = s.strip_prefix('\n').unwrap_or(s).trim_end_matches(' ');
    let indent = s
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    s.lines()
        .map(|l| l.get(indent..).unwrap_or("").to_string() + "\n")
        .collect()
}

/// Prow's `.prow.yaml`: a presubmit and a postsubmit.
pub fn prow_yaml() -> String {
    y("
        presubmits:
        - name: unit
          always_run: true
          spec:
            containers:
            - image: alpine
              command: [make, test]
        postsubmits:
        - name: publish
          branches: [main]
          spec:
            containers:
            - image: alpine
              command: [make, publish]
    ")
}

/// Lighthouse's triggers: a periodic at `cron` whose pipeline is in
/// `nightly.yaml` beside it.
pub fn triggers(cron: &str) -> String {
    y(&format!(
        "
        apiVersion: config.lighthouse.jenkins-x.io/v1alpha1
        kind: TriggerConfig
        spec:
          periodics:
          - name: nightly
            cron: \"{cron}\"
            source: nightly.yaml
        "
    ))
}

/// The periodic's PipelineRun.
pub fn nightly() -> String {
    y("
        apiVersion: tekton.dev/v1
        kind: PipelineRun
        metadata:
          name: nightly
        spec:
          pipelineSpec:
            tasks:
            - name: build
              taskSpec:
                steps:
                - name: make
                  image: alpine
                  script: make nightly
    ")
}

/// A bare repository served over HTTP, a work repository that pushes to
/// it, and a root for mirrors, all in one temporary directory.
pub struct Served {
    pub tmp: tempfile::TempDir,
    pub server: GitServer,
    pub work: WorkRepo,
    pub bare: PathBuf,
    pub mirrors: PathBuf,
}

impl Served {
    /// `acme/widgets` served with its `HEAD` on `head`, the work repository
    /// on `head` too.
    pub fn new(head: &str) -> Served {
        let tmp = tempfile::tempdir().expect("tempdir");
        let server = GitServer::start(tmp.path().join("served"));
        let bare = server.create(REPO, head);
        let work = WorkRepo::init(tmp.path().join("work"), head);
        let mirrors = tmp.path().join("mirrors");
        Served {
            tmp,
            server,
            work,
            bare,
            mirrors,
        }
    }

    /// Commits the configuration of the end-to-end tests (the triggers with
    /// `cron`, their pipeline, `.prow.yaml`) and pushes `branch`; the commit.
    pub fn push_config(&self, branch: &str, cron: &str) -> String {
        self.work
            .write(".prow.yaml", &prow_yaml())
            .write(".lighthouse/jobs/triggers.yaml", &triggers(cron))
            .write(".lighthouse/jobs/nightly.yaml", &nightly())
            .write("README.md", "widgets\n");
        let sha = self.work.commit(&format!("jobs at {cron}"));
        self.push(branch);
        sha
    }

    /// Pushes the work repository's `branch`.
    pub fn push(&self, branch: &str) {
        self.work
            .push(&self.bare, &format!("{branch}:refs/heads/{branch}"), false);
    }

    /// Force-pushes the work repository's `branch`.
    pub fn force_push(&self, branch: &str) {
        self.work
            .push(&self.bare, &format!("{branch}:refs/heads/{branch}"), true);
    }

    /// The remote of `acme/widgets`.
    pub fn remote(&self, branch: Option<&str>, credentials: Credentials) -> Remote {
        Remote {
            repo: REPO.into(),
            clone_uri: self.server.url(REPO),
            branch: branch.map(str::to_string),
            credentials,
        }
    }

    /// Where the mirror of `acme/widgets` is.
    pub fn mirror_dir(&self) -> PathBuf {
        self.mirrors.join("acme/widgets.git")
    }

    /// The refs of the mirror (`git for-each-ref`), one per line.
    pub fn mirror_refs(&self) -> Vec<String> {
        let out =
            bosun_git::testing::git(&self.mirror_dir(), &["for-each-ref", "--format=%(refname)"]);
        out.lines().map(str::to_string).collect()
    }
}

/// The diagnostics of a load as printed, without the warnings about the
/// Tekton agent itself (not this crate's business).
pub fn lines(loaded: &Loaded) -> Vec<String> {
    loaded
        .diagnostics
        .iter()
        .map(ToString::to_string)
        .filter(|l| !l.contains(": agent tekton-pipeline "))
        .collect()
}
