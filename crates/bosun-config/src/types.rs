//! Configuration types: Prow's `config.yaml` and job configuration, Lighthouse's
//! in-repo `TriggerConfig`, and the fields bosun adds.
//!
//! Field names are Prow's, so existing configuration loads unchanged; keys are
//! matched to them as Prow matches them, up to case (see
//! [`crate::yaml::from_node_as_go`]), bosun's own fields included. The doc comment
//! on each field is its user documentation. Fields marked **bosun** are bosun's own
//! additions (Prow's `checkconfig` would call them unknown); fields marked
//! **Lighthouse** come from Lighthouse's in-repo format.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EnvVar, PodSpec, ResourceRequirements, Toleration, Volume, VolumeMount,
};
use serde::{Deserialize, Serialize};

use crate::duration::GoDuration;

/// A section bosun accepts and ignores: Prow components bosun does not replace
/// (`deck`, `tide`, ...) and free-form fields such as `prow_ignored`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Ignored;

impl<'de> Deserialize<'de> for Ignored {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Ignored)
    }
}

/// Free-form YAML kept as JSON (Tekton specs and other schemaless fields).
pub type FreeForm = serde_json::Value;

fn default_namespace() -> String {
    "default".to_string()
}

/// Prow's central `config.yaml` plus bosun's additions.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct ProwConfig {
    /// Namespace where runs (ProwJobs) live. Default `default`.
    #[serde(default = "default_namespace")]
    pub prowjob_namespace: String,
    /// Namespace where test pods run on Kubernetes build clusters. Default `default`.
    #[serde(default = "default_namespace")]
    pub pod_namespace: String,
    /// Prow's default job timeout (parsed; Prow itself reads it nowhere). Default 24h.
    pub default_job_timeout: Option<GoDuration>,
    /// Run controller settings.
    pub plank: Plank,
    /// Garbage collection of finished runs and pods.
    pub sinker: Sinker,
    /// The `scheduling` state: failover mappings and an external scheduler.
    pub scheduler: Scheduler,
    /// Limits on in-repo configuration.
    pub in_repo_config: InRepoConfig,
    /// Build-cluster aliases that are known but disabled: their runs fail at once.
    pub disabled_clusters: Vec<String>,
    /// Presets: environment and volumes merged into jobs whose labels match
    /// (read by the loader, from this file and from job-config files).
    #[serde(skip_serializing)]
    pub presets: Ignored,
    /// Default of every job's `decorate`.
    pub decorate_all_jobs: bool,
    /// Periodic jobs defined inline in `config.yaml` (read by the loader).
    #[serde(skip_serializing)]
    pub periodics: Ignored,
    /// Presubmits defined inline, keyed by `org/repo` (read by the loader).
    #[serde(skip_serializing)]
    pub presubmits: Ignored,
    /// Postsubmits defined inline, keyed by `org/repo` (read by the loader).
    #[serde(skip_serializing)]
    pub postsubmits: Ignored,
    /// **bosun**: build clusters by alias.
    pub build_clusters: BTreeMap<String, BuildCluster>,
    /// **bosun**: the dispatcher that assigns relocatable jobs to build clusters.
    pub dispatcher: Option<DispatcherConfig>,
    /// **bosun**: repositories whose in-repo configuration is loaded: local
    /// checkouts, and git remotes the daemon follows.
    pub in_repo: Vec<InRepoSource>,
    /// **bosun**: how the daemon follows repositories from their git remotes
    /// (`in_repo` entries with a `clone_uri`, and the repositories
    /// `in_repo_config.enabled` turns on).
    pub repos: ReposConfig,

    // Prow sections bosun accepts and ignores.
    /// Prow's `tide` (merge automation): ignored by bosun.
    #[serde(skip_serializing)]
    pub tide: Ignored,
    /// Prow's `deck` (web UI): ignored by bosun.
    #[serde(skip_serializing)]
    pub deck: Ignored,
    /// Prow's `branch-protection`: ignored by bosun.
    #[serde(rename = "branch-protection", skip_serializing)]
    pub branch_protection: Ignored,
    /// Prow's `gerrit`: ignored by bosun.
    #[serde(skip_serializing)]
    pub gerrit: Ignored,
    /// How runs are reported to GitHub (and Gitea): commit statuses and the
    /// failed-tests comment, as Prow's crier reports them.
    pub github_reporter: GitHubReporter,
    /// Prow's `horologium` (`tick_interval`): ignored; bosun's scheduler does not tick.
    #[serde(skip_serializing)]
    pub horologium: Ignored,
    /// Prow's `slack_reporter_configs`: ignored by bosun.
    #[serde(skip_serializing)]
    pub slack_reporter_configs: Ignored,
    /// Prow's `push_gateway`: ignored by bosun.
    #[serde(skip_serializing)]
    pub push_gateway: Ignored,
    /// Prow's `owners_dir_denylist`: ignored by bosun.
    #[serde(skip_serializing)]
    pub owners_dir_denylist: Ignored,
    /// Prow's `pubsub_subscriptions`: ignored by bosun.
    #[serde(skip_serializing)]
    pub pubsub_subscriptions: Ignored,
    /// Prow's `gcs_credentials_file`: ignored by bosun.
    #[serde(skip_serializing)]
    pub gcs_credentials_file: Ignored,
    /// Prow's `managed_webhooks`: ignored by bosun.
    #[serde(skip_serializing)]
    pub managed_webhooks: Ignored,
    /// Prow's `prowjob_default_entries`: ignored by bosun.
    #[serde(skip_serializing)]
    pub prowjob_default_entries: Ignored,
    /// Prow's `status_error_link`: ignored by bosun.
    #[serde(skip_serializing)]
    pub status_error_link: Ignored,
    /// Prow's `log_level`: ignored (bosun's log level is set with the
    /// `RUST_LOG` environment variable, default `info`).
    #[serde(skip_serializing)]
    pub log_level: Ignored,
    /// Prow's `moonraker`: ignored by bosun.
    #[serde(skip_serializing)]
    pub moonraker: Ignored,
    /// Prow's `gangway`: ignored by bosun.
    #[serde(skip_serializing)]
    pub gangway: Ignored,
    /// Free-form data Prow ignores by design.
    #[serde(skip_serializing)]
    pub prow_ignored: Ignored,
}

/// Prow's `plank`: run controller settings.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Plank {
    /// Most runs `pending` at once across all clusters; 0 = unlimited.
    pub max_concurrency: i64,
    /// Capacity of each named job queue (`job_queue_name`); 0 blocks the queue, a
    /// negative capacity is unlimited.
    pub job_queue_capacities: BTreeMap<String, i64>,
    /// Longest a pod may stay Pending after it started. Default 10m.
    pub pod_pending_timeout: Option<GoDuration>,
    /// Longest a pod may run. Default 48h.
    pub pod_running_timeout: Option<GoDuration>,
    /// Longest a pod may wait to be scheduled. Default 5m.
    pub pod_unscheduled_timeout: Option<GoDuration>,
    /// How many times an evicted or lost pod is recreated. Default 3.
    pub max_revivals: Option<i64>,
    /// Decoration defaults, matched by repo and cluster; every matching entry
    /// applies, in order, a later one's fields over an earlier one's.
    pub default_decoration_config_entries: Vec<DefaultDecorationConfigEntry>,
    /// Prow's older form of the decoration defaults: `*`, `org` or `org/repo`
    /// to a config. It reads as entries (cluster empty) ordered `*`, then the
    /// orgs, then the repos; it may not be set together with
    /// `default_decoration_config_entries`.
    pub default_decoration_configs: BTreeMap<String, DecorationConfig>,
    /// Prow's URL template for runs (a Go template); kept for the dashboard.
    pub job_url_template: Option<String>,
    /// Prow's per-repo URL prefixes (ignored by bosun).
    #[serde(skip_serializing)]
    pub job_url_prefix_config: Ignored,
    /// Go templates whose text is added to the failed-tests comment on a
    /// pull request, below the table, keyed by `org/repo`, `org` or `*`
    /// (the first of these present applies, as Prow's
    /// `ReportTemplateForRepo` picks it; see [`Plank::report_template_for`]).
    /// The template is executed over the first reported run as a ProwJob
    /// (`{{.Spec.Job}}`, `{{.Status.URL}}`, ...).
    pub report_templates: BTreeMap<String, String>,
    /// Prow's deprecated single report template: the same as
    /// `report_templates: {"*": ...}`; it may not be set together with
    /// `report_templates`.
    pub report_template: Option<String>,
    /// Prow's worker count (ignored: bosun sizes its own tasks).
    #[serde(skip_serializing)]
    pub max_goroutines: Ignored,
    /// Prow's cluster status file location (ignored: bosun serves cluster status).
    #[serde(skip_serializing)]
    pub build_cluster_status_file: Ignored,
}

impl Plank {
    /// The report template text for `org/repo`, as Prow's
    /// `ReportTemplateForRepo` chooses it: the `org/repo` entry, else the
    /// `org` entry, else `*` (the deprecated `report_template` is `*` when
    /// `report_templates` has no `*`); `None` when none applies.
    pub fn report_template_for(&self, org: &str, repo: &str) -> Option<&str> {
        let by_key = |k: &str| self.report_templates.get(k).map(String::as_str);
        by_key(&format!("{org}/{repo}"))
            .or_else(|| by_key(org))
            .or_else(|| by_key("*"))
            .or(self.report_template.as_deref().filter(|t| !t.is_empty()))
    }
}

/// Prow's `github_reporter`: which runs crier reports to the forge, and
/// where it keeps the failed-tests comment.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct GitHubReporter {
    /// The job types whose runs are reported (commit statuses and the
    /// comment): `presubmit` and `postsubmit`, the only types allowed.
    /// Default (unset or empty): both, as Prow defaults it.
    #[serde(deserialize_with = "job_types_or_default")]
    pub job_types_to_report: Vec<JobType>,
    /// `org` or `org/repo` entries whose pull requests get no failed-tests
    /// comment (their commit statuses are still set).
    pub no_comment_repos: Vec<String>,
    /// `org` or `org/repo` entries whose pull requests get one summary
    /// comment once every run on the head has ended, also when all passed
    /// ("all tests **passed!**").
    pub summary_comment_repos: Vec<String>,
}

impl Default for GitHubReporter {
    fn default() -> Self {
        GitHubReporter {
            job_types_to_report: GitHubReporter::DEFAULT_JOB_TYPES.to_vec(),
            no_comment_repos: Vec::new(),
            summary_comment_repos: Vec::new(),
        }
    }
}

impl GitHubReporter {
    /// Prow's default of `job_types_to_report`.
    pub const DEFAULT_JOB_TYPES: [JobType; 2] = [JobType::Presubmit, JobType::Postsubmit];

    /// Whether `org/repo` is listed (by its org or itself) in `entries`, as
    /// Prow matches `no_comment_repos` and `summary_comment_repos`.
    pub fn lists(entries: &[String], org: &str, repo: &str) -> bool {
        entries
            .iter()
            .any(|e| e == org || e.split_once('/') == Some((org, repo)))
    }
}

/// `job_types_to_report`, Prow's default when written empty.
fn job_types_or_default<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<JobType>, D::Error> {
    let v = Option::<Vec<JobType>>::deserialize(d)?.unwrap_or_default();
    Ok(if v.is_empty() {
        GitHubReporter::DEFAULT_JOB_TYPES.to_vec()
    } else {
        v
    })
}

/// One entry of `plank.default_decoration_config_entries`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct DefaultDecorationConfigEntry {
    /// `org` or `org/repo` this entry applies to; empty or `*` for all.
    pub repo: String,
    /// Build-cluster alias this entry applies to; empty for all.
    pub cluster: String,
    /// The decoration defaults.
    pub config: DecorationConfig,
}

/// Prow's `sinker`: garbage collection.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Sinker {
    /// How often sinker runs. Default 1h.
    pub resync_period: Option<GoDuration>,
    /// Finished runs older than this are deleted (but the latest of each periodic). Default 7 days.
    pub max_prowjob_age: Option<GoDuration>,
    /// Default 24h. bosun uses it only as the default of
    /// `terminated_pod_ttl`: a pod is deleted once its run has ended, never
    /// for its age while the run runs (the run's own timeout ends that).
    pub max_pod_age: Option<GoDuration>,
    /// Pods of finished runs are deleted this long after the run ended. Default `max_pod_age`.
    pub terminated_pod_ttl: Option<GoDuration>,
    /// Clusters whose pods sinker never deletes.
    pub exclude_clusters: Vec<String>,
}

/// Prow's `scheduler`: the `scheduling` state.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Scheduler {
    /// When true, runs start in `scheduling` and get their cluster from a strategy.
    pub enabled: bool,
    /// Unconditional cluster remapping (Prow's failover strategy).
    pub failover: Failover,
    /// An external scheduler answering `POST {"job": NAME}` with `{"cluster": ALIAS}`.
    pub external: Option<ExternalScheduler>,
}

/// `scheduler.failover`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Failover {
    /// `from-alias: to-alias`: runs configured for `from` go to `to`.
    pub mappings: BTreeMap<String, String>,
}

/// `scheduler.external`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct ExternalScheduler {
    /// URL of the scheduling service.
    pub url: String,
    /// Answer cache.
    pub cache: ExternalCache,
}

/// `scheduler.external.cache`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct ExternalCache {
    /// How long an answer is reused.
    pub entry_timeout_interval: Option<GoDuration>,
    /// How often expired answers are dropped.
    pub cleanup_interval: Option<GoDuration>,
}

/// Prow's `in_repo_config`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct InRepoConfig {
    /// Per `*`, `org` or `org/repo`: whether in-repo config is enabled, the
    /// most specific key winning (Prow's switch; default off). The daemon
    /// follows an `org/repo` key set to true at once, from
    /// `repos.clone_base`; under a `*` or `org` key, a repository is followed
    /// from the first signed webhook bosun accepts for it. The checkouts
    /// listed in `in_repo` / `--in-repo` are loaded whatever this says.
    pub enabled: BTreeMap<String, bool>,
    /// Per `*`, `org` or `org/repo`: the clusters in-repo jobs may use.
    /// Default `{"*": ["default"]}`.
    pub allowed_clusters: BTreeMap<String, Vec<String>>,
}

/// **bosun**: following repositories from their git remotes.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct ReposConfig {
    /// Where the repositories `in_repo_config.enabled` names are cloned
    /// from: `org/repo` from `{clone_base}/org/repo.git`. Default
    /// `https://github.com`.
    pub clone_base: Option<String>,
    /// How often each followed repository's branch head is asked for (`git
    /// ls-remote`), a Go duration. Default `5m`.
    pub resync: Option<String>,
    /// How long a followed repository must have been missing at every
    /// resync (deleted, renamed, or its branch gone) before its jobs are
    /// retired, a Go duration. Default `1h`.
    pub gone_after: Option<String>,
    /// A file holding a token for the HTTPS remotes of the repositories
    /// followed through `in_repo_config.enabled` (an `in_repo` entry gives
    /// its own), sent in a header. A relative path is relative to the
    /// directory of the config file.
    pub token_file: Option<String>,
    /// A private key file for their SSH remotes. A relative path is relative
    /// to the directory of the config file. Not with `token_file`.
    pub ssh_key_file: Option<String>,
}

/// `repos.clone_base`'s default.
pub const DEFAULT_CLONE_BASE: &str = "https://github.com";
/// `repos.resync`'s default.
pub const DEFAULT_REPOS_RESYNC: GoDuration = GoDuration::from_secs(5 * 60);
/// `repos.gone_after`'s default.
pub const DEFAULT_REPOS_GONE_AFTER: GoDuration = GoDuration::from_secs(3600);

impl ReposConfig {
    /// `resync`, defaulted (a value the validator refuses reads as the default).
    pub fn resync_interval(&self) -> std::time::Duration {
        positive_or(self.resync.as_deref(), DEFAULT_REPOS_RESYNC)
    }

    /// `gone_after`, defaulted (a value the validator refuses reads as the default).
    pub fn gone_after(&self) -> std::time::Duration {
        positive_or(self.gone_after.as_deref(), DEFAULT_REPOS_GONE_AFTER)
    }

    /// `clone_base`, defaulted, without a trailing `/`.
    pub fn clone_base(&self) -> &str {
        self.clone_base
            .as_deref()
            .unwrap_or(DEFAULT_CLONE_BASE)
            .trim_end_matches('/')
    }

    /// The clone URI of `org_repo` (`org/repo`) followed through
    /// `in_repo_config.enabled`: `{clone_base}/org/repo.git`.
    pub fn clone_uri_for(&self, org_repo: &str) -> String {
        format!("{}/{org_repo}.git", self.clone_base())
    }
}

/// A Go duration written in the config, or `default` when it is absent, not a
/// duration or not positive.
fn positive_or(written: Option<&str>, default: GoDuration) -> std::time::Duration {
    written
        .and_then(|w| GoDuration::parse(w).ok())
        .filter(|d| d.as_nanos() > 0)
        .unwrap_or(default)
        .to_std()
}

/// A preset: environment and volumes for jobs whose labels match.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Preset {
    /// Labels a job must carry (all of them, with these values); empty matches every job.
    pub labels: BTreeMap<String, String>,
    /// Environment added to every container.
    pub env: Vec<EnvVar>,
    /// Volumes added to the pod.
    pub volumes: Vec<Volume>,
    /// Volume mounts added to every container.
    #[serde(rename = "volumeMounts")]
    pub volume_mounts: Vec<VolumeMount>,
    /// Tolerations added to the pod.
    pub tolerations: Vec<Toleration>,
}

/// **bosun**: one build cluster.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct BuildCluster {
    /// `local` (processes on this machine) or `kubernetes`. Default `local`.
    pub kind: ClusterKind,
    /// Kubernetes: the kubeconfig context. Default: the alias.
    pub context: Option<String>,
    /// Kubernetes: the kubeconfig file. Default: `--kubeconfig` / `$KUBECONFIG`.
    pub kubeconfig: Option<String>,
    /// Most runs in flight on this cluster (local: process slots, default the CPU
    /// count); 0 = unlimited.
    pub max_concurrency: Option<i64>,
    /// Kubernetes: most pod (and PipelineRun) creations in flight at once on
    /// this cluster's API server, taken in turn across jobs. Default 16; 0 =
    /// unlimited.
    pub creations_in_flight: Option<i64>,
    /// Dispatcher: relative capacity of this cluster for balancing. Default 100.
    pub capacity: Option<i64>,
    /// Dispatcher: capabilities this cluster offers (`arm64`, `gpu`, ...).
    pub capabilities: Vec<String>,
    /// Dispatcher: the cloud provider (`aws`, `gcp`, ...), for provider rules.
    pub provider: Option<String>,
    /// Dispatcher: a blocked cluster gets no new assignments.
    pub blocked: bool,
    /// Makes the cluster trusted: only jobs matching one of these rules may run on it.
    pub trusted: Option<Vec<TrustRule>>,
    /// Where `triggered` runs go while this cluster is not Reachable.
    pub failover_to: Option<String>,
    /// Local: the user jobs run as, `UID`, `UID:GID` or a name from
    /// `/etc/passwd`, or `unprivileged` (`nobody` when the daemon runs as
    /// root, the daemon's own user otherwise); required when the daemon runs
    /// as root and trusted clusters are configured.
    pub run_as: Option<String>,
}

/// **bosun**: the kind of a build cluster.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ClusterKind {
    /// Jobs run as processes on this machine.
    #[default]
    Local,
    /// Jobs run as pods on a Kubernetes cluster.
    Kubernetes,
}

/// **bosun**: an allow rule of a trusted cluster; it matches when every given field matches.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct TrustRule {
    /// Job names or regular expressions (anchored) the rule admits.
    pub jobs: Vec<String>,
    /// `org/repo` (or `org`) of the job's definition: in-repo source, or `extra_refs[0]`.
    pub repos: Vec<String>,
    /// Job types: `periodic`, `postsubmit`, `presubmit`.
    pub types: Vec<JobType>,
}

/// **bosun**: the dispatcher: assigns relocatable jobs to build clusters, in
/// units, by the placement rules (in this order: eligibility, pins, required
/// capabilities, `groups`, provider affinity, then balancing by demand; see
/// `docs/config.md`), and re-plans on `replan`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct DispatcherConfig {
    /// Cluster aliases whose jobs may be moved (plus jobs that omit `cluster:`).
    /// A job whose written `cluster:` is not listed is pinned there.
    pub relocatable_clusters: Vec<String>,
    /// Where job volume comes from: `history` (bosun's store) or `prometheus`.
    /// (`bosun dispatcher` also takes a demand file, OpenShift's `job_volume.json`.)
    pub demand: DemandSource,
    /// Prometheus URL when `demand: prometheus`.
    pub prometheus_url: Option<String>,
    /// A file holding the bearer token sent to Prometheus (read at each query).
    pub bearer_token_file: Option<String>,
    /// The user for HTTP basic auth to Prometheus, with
    /// `prometheus_password_file` (OpenShift's `--prometheus-username`); not
    /// with `bearer_token_file`.
    pub prometheus_username: Option<String>,
    /// A file holding the basic-auth password (read at each query;
    /// OpenShift's `--prometheus-password-path`).
    pub prometheus_password_file: Option<String>,
    /// For an `https://` `prometheus_url`: a PEM file of the CA certificates
    /// its serving certificate is verified against, instead of the system's
    /// trust store (e.g. a cluster's service CA). Read when the daemon
    /// loads the config.
    pub prometheus_ca_file: Option<String>,
    /// The query giving each job's volume over the window, one series per
    /// `job_name`; `$window` is replaced by the window (`168h`). Default
    /// OpenShift's:
    /// `sum(increase(prowjob_state_transitions{state="pending"}[$window])) by (job_name)`.
    pub prometheus_query: Option<String>,
    /// Measurement window. Default 168h (a week).
    pub window: Option<GoDuration>,
    /// The share of total demand one re-plan may move (moves forced by a blocked,
    /// removed or no longer eligible cluster do not count): `10%`, or a number
    /// 0-100 meaning percent. Default 10%.
    pub budget: Option<Percent>,
    /// No move at all while every cluster's load is within this many percent
    /// of its target. Default 3.
    pub hysteresis_percent: Option<f64>,
    /// When to re-plan (cron, UTC). Default `0 7 * * 0` (Sundays 07:00, weekly
    /// as OpenShift).
    pub replan: Option<String>,
    /// Where assignments are persisted. Default: under the data directory.
    pub assignments_file: Option<String>,
    /// The unit of placement for relocatable jobs: `file` (all relocatable jobs
    /// of one job-config file together, as OpenShift) or `job`. Jobs sharing a
    /// name are always one unit. Default `file`.
    pub unit: DispatchUnit,
    /// Group rules: jobs whose name or job-config file matches go to the
    /// group's cluster. The first matching group whose cluster is eligible wins.
    pub groups: Vec<DispatchGroup>,
    /// Job labels naming the provider (cloud) a job prefers, the first present
    /// wins. Default `[dispatcher.bosun.dev/provider, ci-operator.openshift.io/cloud]`.
    pub provider_labels: Option<Vec<String>>,
    /// Provider names mapped before matching clusters' `provider`
    /// (OpenShift's `cloudMapping`, e.g. `equinix-ocp-metal: aws`).
    pub provider_mapping: BTreeMap<String, String>,
    /// How long a cluster must have been not Reachable before its relocatable
    /// units are served from other clusters (the health overlay, outside the
    /// movement budget; the plan itself is unchanged). Default 5m.
    pub unhealthy_after: Option<GoDuration>,
    /// How long a cluster in the health overlay must have been Reachable again
    /// before its units come back. Default 10m.
    pub recover_after: Option<GoDuration>,
}

/// The label a job names its provider with, bosun's own.
pub const PROVIDER_LABEL: &str = "dispatcher.bosun.dev/provider";
/// OpenShift's cloud label, set by prowgen.
pub const OPENSHIFT_CLOUD_LABEL: &str = "ci-operator.openshift.io/cloud";
/// The prefix of required-capability labels (`capability/arm64: arm64`).
pub const CAPABILITY_LABEL_PREFIX: &str = "capability/";
/// `dispatcher.budget`'s default, in percent.
pub const DEFAULT_BUDGET_PERCENT: f64 = 10.0;
/// `dispatcher.hysteresis_percent`'s default.
pub const DEFAULT_HYSTERESIS_PERCENT: f64 = 3.0;
/// `dispatcher.replan`'s default: Sundays at 07:00 UTC.
pub const DEFAULT_REPLAN: &str = "0 7 * * 0";
/// `dispatcher.window`'s default: a week.
pub const DEFAULT_WINDOW: GoDuration = GoDuration::from_secs(7 * 24 * 3600);
/// `dispatcher.prometheus_query`'s default (OpenShift's), `$window` to be replaced.
pub const DEFAULT_PROMETHEUS_QUERY: &str =
    r#"sum(increase(prowjob_state_transitions{state="pending"}[$window])) by (job_name)"#;

/// `dispatcher.unhealthy_after`'s default.
pub const DEFAULT_UNHEALTHY_AFTER: GoDuration = GoDuration::from_secs(5 * 60);
/// `dispatcher.recover_after`'s default.
pub const DEFAULT_RECOVER_AFTER: GoDuration = GoDuration::from_secs(10 * 60);

impl DispatcherConfig {
    /// `unhealthy_after`, defaulted.
    pub fn unhealthy_after(&self) -> GoDuration {
        self.unhealthy_after.unwrap_or(DEFAULT_UNHEALTHY_AFTER)
    }

    /// `recover_after`, defaulted.
    pub fn recover_after(&self) -> GoDuration {
        self.recover_after.unwrap_or(DEFAULT_RECOVER_AFTER)
    }

    /// `budget` as a share of demand (0.0-1.0).
    pub fn budget_share(&self) -> f64 {
        self.budget.map_or(DEFAULT_BUDGET_PERCENT, |p| p.0) / 100.0
    }

    /// `hysteresis_percent`, defaulted.
    pub fn hysteresis_percent(&self) -> f64 {
        self.hysteresis_percent
            .unwrap_or(DEFAULT_HYSTERESIS_PERCENT)
    }

    /// `replan`, defaulted.
    pub fn replan(&self) -> &str {
        self.replan.as_deref().unwrap_or(DEFAULT_REPLAN)
    }

    /// `window`, defaulted.
    pub fn window(&self) -> GoDuration {
        self.window.unwrap_or(DEFAULT_WINDOW)
    }

    /// `prometheus_query` (defaulted) with `$window` replaced by the window as
    /// Prometheus writes durations (`168h`, `90m`, `45s`).
    pub fn prometheus_query(&self) -> String {
        let q = self
            .prometheus_query
            .as_deref()
            .unwrap_or(DEFAULT_PROMETHEUS_QUERY);
        q.replace("$window", &prometheus_duration(self.window()))
    }

    /// `provider_labels`, defaulted.
    pub fn provider_labels(&self) -> Vec<&str> {
        match &self.provider_labels {
            Some(l) => l.iter().map(String::as_str).collect(),
            None => vec![PROVIDER_LABEL, OPENSHIFT_CLOUD_LABEL],
        }
    }

    /// Whether a job on `cluster` may be moved: it omits `cluster:`
    /// (`written` false) or names a cluster of `relocatable_clusters`.
    pub fn relocatable(&self, cluster: &str, written: bool) -> bool {
        !written || self.relocatable_clusters.iter().any(|c| c == cluster)
    }
}

/// A duration as Prometheus writes one: the largest whole unit among `h`,
/// `m`, `s` (`ms` below a second).
fn prometheus_duration(d: GoDuration) -> String {
    let ms = d.as_nanos().max(0) / 1_000_000;
    match ms {
        0 => "0s".to_string(),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1_000 == 0 => format!("{}s", ms / 1_000),
        ms => format!("{ms}ms"),
    }
}

/// **bosun**: a percentage, written `10%` or as a number (`10`, `2.5`).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Percent(pub f64);

impl<'de> Deserialize<'de> for Percent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Percent;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a percentage such as 10% or 10")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Percent, E> {
                Ok(Percent(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Percent, E> {
                Ok(Percent(v as f64))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Percent, E> {
                Ok(Percent(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Percent, E> {
                v.trim()
                    .strip_suffix('%')
                    .and_then(|n| n.trim().parse::<f64>().ok())
                    .filter(|n| n.is_finite())
                    .map(Percent)
                    .ok_or_else(|| {
                        E::custom(format!(
                            "invalid percentage {v:?}: write a number such as 10% or 10"
                        ))
                    })
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Percent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

/// **bosun**: the dispatcher's unit of placement for relocatable jobs.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DispatchUnit {
    /// All relocatable jobs of one job-config file go together (OpenShift's way).
    #[default]
    File,
    /// Each job (all jobs of one name) is placed on its own.
    Job,
}

/// **bosun**: a dispatcher group rule.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct DispatchGroup {
    /// The cluster the group's jobs go to.
    pub cluster: String,
    /// Job names or regular expressions (anchored).
    pub jobs: Vec<String>,
    /// Regular expressions (unanchored, as OpenShift's) over the job-config
    /// file's path relative to its job-config directory (`org/repo/file.yaml`;
    /// in-repo files: `ORG/REPO:.prow.yaml`).
    pub paths: Vec<String>,
}

/// **bosun**: source of the dispatcher's job volume.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DemandSource {
    /// bosun's own run history.
    #[default]
    History,
    /// `sum(increase(prowjob_state_transitions{state="pending"}[window])) by (job_name)`.
    Prometheus,
}

/// **bosun**: a repository whose in-repo configuration is loaded: a local
/// checkout (`path`), or a git remote the daemon follows (`clone_uri`).
/// Exactly one of `path` and `clone_uri` is set; no two entries name the
/// same `repo`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct InRepoSource {
    /// `org/repo`.
    pub repo: String,
    /// Directory of a local checkout: a relative path is relative to the
    /// directory of the config file that names it (to the current directory
    /// for `--in-repo`). Empty for a `clone_uri` entry.
    pub path: String,
    /// A git remote the daemon follows: `https://`, `http://`, `ssh://`,
    /// `file://`, or scp-like `git@host:org/repo.git`. Its branch's head is
    /// fetched on every `repos.resync`, and the configuration at each new
    /// head is loaded against the central configuration in force; a bad
    /// commit keeps the repository's last good jobs. `bosun check` does not
    /// fetch it (name a checkout with `--in-repo` to check one).
    pub clone_uri: Option<String>,
    /// The branch: for a `path`, the branch the checkout is on (periodics'
    /// base ref), default `main`; for a `clone_uri`, the branch followed,
    /// default the remote's HEAD.
    pub branch: Option<String>,
    /// With a `clone_uri` over HTTP(S): a file holding a token, sent in a
    /// header (never in the URL). A relative path is relative to the
    /// directory of the config file, as `path`.
    pub token_file: Option<String>,
    /// With a `clone_uri` over SSH: a private key file. A relative path is
    /// relative to the directory of the config file, as `path`. Not with
    /// `token_file`.
    pub ssh_key_file: Option<String>,
}

/// The kind of a job.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum JobType {
    /// Runs on a schedule.
    Periodic,
    /// Runs on a pull request.
    Presubmit,
    /// Runs after a merge.
    Postsubmit,
    /// A presubmit run over several pull requests (Prow's tide batches).
    Batch,
}

impl JobType {
    /// Prow's name.
    pub fn as_str(self) -> &'static str {
        match self {
            JobType::Periodic => "periodic",
            JobType::Presubmit => "presubmit",
            JobType::Postsubmit => "postsubmit",
            JobType::Batch => "batch",
        }
    }
}

/// Fields every job has (Prow's `JobBase` with its inlined `UtilityConfig`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct JobBase {
    /// Job name: `^[A-Za-z0-9-._]+$`, at most 63 characters for Kubernetes jobs.
    pub name: String,
    /// Labels copied to the run and its pod.
    pub labels: BTreeMap<String, String>,
    /// Most runs of this job at once; 0 = unlimited.
    pub max_concurrency: i64,
    /// Who runs the job: `kubernetes` (default), `tekton-pipeline` (Lighthouse's
    /// pipeline jobs, implied by `source:`); `jenkins` loads with a warning and
    /// cannot run on bosun.
    pub agent: String,
    /// Build-cluster alias. Default `default`.
    pub cluster: String,
    /// Pod namespace; must equal `pod_namespace` (the default) unless Tekton.
    pub namespace: Option<String>,
    /// End the run in `error` when its pod is evicted, instead of recreating it.
    pub error_on_eviction: bool,
    /// The pod to run (required for the `kubernetes` agent).
    pub spec: Option<PodSpec>,
    /// Tekton PipelineRun spec (Tekton agent only). Lighthouse's field: bosun
    /// reads it as a `tekton.dev/v1beta1` spec and converts it to `v1` (a spec
    /// written with v1's fields comes out unchanged).
    pub pipeline_run_spec: Option<FreeForm>,
    /// Tekton PipelineRun spec by API version (Tekton agent only): Prow's
    /// `{v1beta1: SPEC}`, and bosun's `{v1: SPEC}`. A Lighthouse job's
    /// `source:` (a PipelineRun, or a Pipeline, Task or TaskRun wrapped in
    /// one) is loaded here, under its own version.
    pub tekton_pipeline_run_spec: Option<FreeForm>,
    /// Annotations copied to the run and its pod.
    pub annotations: BTreeMap<String, String>,
    /// Reporting settings (Slack).
    pub reporter_config: Option<FreeForm>,
    /// Who may rerun the job.
    pub rerun_auth_config: Option<RerunAuthConfig>,
    /// Defaults for the run object (`resultstore_config`, `tenant_id`).
    pub prowjob_defaults: Option<FreeForm>,
    /// Job queue (a key of `plank.job_queue_capacities`).
    pub job_queue_name: Option<String>,
    /// Hide the job from the dashboard's public views.
    pub hidden: bool,
    /// Decorate the job with Prow's pod utilities. Default `decorate_all_jobs`.
    pub decorate: Option<bool>,
    /// Where the code is cloned (`GOPATH`-style alias).
    pub path_alias: Option<String>,
    /// Clone URI override.
    pub clone_uri: Option<String>,
    /// Skip submodules when cloning.
    pub skip_submodules: bool,
    /// Shallow clone depth.
    pub clone_depth: i64,
    /// Skip fetching `FETCH_HEAD`.
    pub skip_fetch_head: bool,
    /// Extra repositories cloned for the job; `extra_refs[0]` gives a periodic its repo.
    pub extra_refs: Vec<Refs>,
    /// Decoration settings, merged over `plank.default_decoration_config_entries`.
    pub decoration_config: Option<DecorationConfig>,
    /// **Lighthouse**: the Tekton `PipelineRun` file of the job, relative to
    /// its `triggers.yaml` (implies `agent: tekton-pipeline`). It is read when
    /// the configuration loads and its spec kept in `tekton_pipeline_run_spec`.
    pub source: Option<String>,
    /// **Lighthouse**: parameters given to the pipeline run, each a Go
    /// template over the run's refs. When a job has any, Lighthouse does not
    /// look for the `git-clone` task's parameters.
    pub pipeline_run_params: Option<Vec<PipelineRunParam>>,
}

/// **Lighthouse**: a parameter of a job's pipeline run (`pipeline_run_params`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct PipelineRunParam {
    /// The parameter's name.
    pub name: String,
    /// Its value: a Go template over `{"Refs": REFS}` (`{{ .Refs.BaseRef }}`,
    /// `{{ (index .Refs.Pulls 0).SHA }}`); plain text is its own value.
    pub value_template: String,
}

/// Prow's `rerun_auth_config`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct RerunAuthConfig {
    /// Anyone may rerun.
    pub allow_anyone: bool,
    /// GitHub team ids allowed to rerun.
    pub github_team_ids: Vec<i64>,
    /// GitHub team slugs (`{slug, org}`) allowed to rerun.
    pub github_team_slugs: Vec<TeamSlug>,
    /// GitHub users allowed to rerun.
    pub github_users: Vec<String>,
    /// GitHub orgs whose members may rerun.
    pub github_orgs: Vec<String>,
}

/// A GitHub team.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct TeamSlug {
    /// Team slug.
    pub slug: String,
    /// Organisation.
    pub org: String,
}

/// Prow's `Refs`: a repository and what to check out.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Refs {
    /// Organisation (required).
    pub org: String,
    /// Repository (required).
    pub repo: String,
    /// Web link of the repository.
    pub repo_link: Option<String>,
    /// Base branch.
    pub base_ref: Option<String>,
    /// Base commit.
    pub base_sha: Option<String>,
    /// Web link of the base commit.
    pub base_link: Option<String>,
    /// Pull requests merged over the base.
    pub pulls: Vec<Pull>,
    /// Clone path alias.
    pub path_alias: Option<String>,
    /// Make this repository the working directory.
    pub workdir: bool,
    /// Auxiliary (not under test).
    pub auxiliary: bool,
    /// Clone URI override.
    pub clone_uri: Option<String>,
    /// Skip submodules.
    pub skip_submodules: bool,
    /// Shallow clone depth.
    pub clone_depth: i64,
    /// Skip fetching `FETCH_HEAD`.
    pub skip_fetch_head: bool,
    /// Blobless fetch.
    pub blobless_fetch: Option<bool>,
    /// Sparse checkout file list.
    pub sparse_checkout_files: Vec<String>,
}

/// A pull request in `Refs.pulls`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Pull {
    /// Pull request number.
    pub number: i64,
    /// Author login.
    pub author: String,
    /// Head commit.
    pub sha: String,
    /// Title.
    pub title: Option<String>,
    /// Ref to fetch instead of the PR head.
    #[serde(rename = "ref")]
    pub ref_: Option<String>,
    /// Web link.
    pub link: Option<String>,
    /// Commit link.
    pub commit_link: Option<String>,
    /// Author link.
    pub author_link: Option<String>,
}

/// Prow's `decoration_config` (pod utilities). A job's effective config is its
/// own over the matching `plank.default_decoration_config_entries`, merged
/// field by field as Prow's `ApplyDefault` does (see
/// [`DecorationConfig::apply_default`]); runs carry the result.
///
/// `Option` fields are Prow's pointers: `None` is unset, and an explicit empty
/// or zero value (`gcs_credentials_secret: ""`, `timeout: 0s`,
/// `blobless_fetch: false`) is set and wins over a default. Lists are unset
/// when empty. The free-form fields hold Prow's structs as JSON objects with
/// Prow's keys.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct DecorationConfig {
    /// Test process timeout, enforced by the entrypoint (unset or 0: 2h).
    pub timeout: Option<GoDuration>,
    /// Time between SIGINT and SIGKILL at the timeout (unset or 0: 15s).
    pub grace_period: Option<GoDuration>,
    /// Images of the pod utilities, by utility: `clonerefs`, `initupload`,
    /// `entrypoint`, `sidecar` (an empty image is unset).
    pub utility_images: Option<BTreeMap<String, String>>,
    /// Resources of the utility containers, by container: `clonerefs`,
    /// `initupload`, `place_entrypoint`, `sidecar`.
    pub resources: Option<BTreeMap<String, ResourceRequirements>>,
    /// Artifact upload settings (Prow's `GCSConfiguration`): `bucket`,
    /// `path_prefix`, `path_strategy` (`legacy`, `single` or `explicit`),
    /// `default_org`, `default_repo`, `mediaTypes`, `job_url_prefix`,
    /// `local_output_dir`, `compress_file_types`.
    pub gcs_configuration: Option<FreeForm>,
    /// Secret with GCS credentials (`service-account.json`); empty: none
    /// (workload identity).
    pub gcs_credentials_secret: Option<String>,
    /// Secret with S3 credentials (`service-account.json`); empty: none.
    pub s3_credentials_secret: Option<String>,
    /// Service account of the pod when the spec names none.
    pub default_service_account_name: Option<String>,
    /// Secrets with SSH keys for cloning.
    pub ssh_key_secrets: Vec<String>,
    /// SSH host fingerprints.
    pub ssh_host_fingerprints: Vec<String>,
    /// Do not clone refs.
    pub skip_cloning: Option<bool>,
    /// Secret with a git cookie file (`name` or `name/key`).
    pub cookiefile_secret: Option<String>,
    /// Secret with an OAuth token for cloning: `{name, key}`.
    pub oauth_token_secret: Option<FreeForm>,
    /// GitHub API endpoints (unset: `https://api.github.com`).
    pub github_api_endpoints: Vec<String>,
    /// GitHub App id (an empty id is unset).
    pub github_app_id: Option<String>,
    /// Secret with the GitHub App private key: `{name, key}`.
    pub github_app_private_key_secret: Option<FreeForm>,
    /// Censor the values of mounted secrets in logs and artifacts.
    pub censor_secrets: Option<bool>,
    /// Censoring options: `censoring_concurrency`, `censoring_buffer_size`,
    /// `include_directories`, `exclude_directories`, `minimum_secret_length`.
    pub censoring_options: Option<FreeForm>,
    /// The sidecar ignores interrupts and uploads once the test has ended.
    pub upload_ignores_interrupts: Option<bool>,
    /// Pod security context `fsGroup`, when the spec sets none.
    pub fs_group: Option<i64>,
    /// Pod security context `runAsUser`, when the spec sets none.
    pub run_as_user: Option<i64>,
    /// Pod security context `runAsGroup`, when the spec sets none.
    pub run_as_group: Option<i64>,
    /// Set each test container's memory limit to its memory request.
    pub set_limit_equals_memory_request: Option<bool>,
    /// Memory request of test containers that have none (a quantity).
    pub default_memory_request: Option<String>,
    /// Clone with `--filter=blob:none` (the default of every ref's `blobless_fetch`).
    pub blobless_fetch: Option<bool>,
    /// Sparse checkout of the primary ref: the files to check out.
    pub sparse_checkout_files: Vec<String>,
    /// Affinity and tolerations for the pod, applied when its spec has none.
    pub scheduling_options: Option<SchedulingOptions>,
    /// Per-job `plank.pod_pending_timeout`.
    pub pod_pending_timeout: Option<GoDuration>,
    /// Per-job `plank.pod_running_timeout`.
    pub pod_running_timeout: Option<GoDuration>,
    /// Per-job `plank.pod_unscheduled_timeout`.
    pub pod_unscheduled_timeout: Option<GoDuration>,
}

/// Prow's `scheduling_options`: pod scheduling fields a decorated pod gets when
/// its spec has none of its own.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct SchedulingOptions {
    /// The pod's affinity.
    pub affinity: Option<Affinity>,
    /// The pod's tolerations (an empty list is set, as in Prow).
    pub tolerations: Option<Vec<Toleration>>,
}

/// Why a (merged) decoration config cannot decorate a pod: Prow's
/// `DecorationConfig.Validate` texts. See [`DecorationConfig::validate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecorationError {
    /// No `utility_images` at all.
    #[error("utility image config is not specified")]
    NoUtilityImages,
    /// Some of the four images are missing (listed as Go prints a `[]string`
    /// with `%q`).
    #[error("the following utility images are not specified: [{}]", go_quoted(.0))]
    MissingUtilityImages(Vec<&'static str>),
    /// No `gcs_configuration`.
    #[error("GCS upload configuration is not specified")]
    NoGcsConfiguration,
    /// `gcs_configuration` is present but invalid.
    #[error("GCS configuration is invalid: {0}")]
    InvalidGcs(String),
    /// `oauth_token_secret` and `ssh_key_secrets` together.
    #[error("both OAuth token and SSH key secrets are specified")]
    OAuthAndSshKey,
}

/// Go's `%q` of each name, separated by spaces (as Go prints a `[]string`).
fn go_quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|k| format!("{k:?}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Fields only periodics have, plus bosun's scheduling fields.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct PeriodicFields {
    /// Cron schedule (robfig/cron v3 syntax; bosun adds `H` and time zones).
    pub cron: Option<String>,
    /// Run this long after the previous run was created (Go duration).
    pub interval: Option<String>,
    /// Run this long after the previous run completed (Go duration).
    pub minimum_interval: Option<String>,
    /// Free-form tags.
    pub tags: Vec<String>,
    /// Re-runs of failed ticks.
    pub retry: Option<Retry>,
    /// **Lighthouse**: branch to run against (default: the checkout's branch).
    pub branch: Option<String>,
    /// **bosun**: IANA time zone of `cron`. Default UTC.
    pub timezone: Option<String>,
    /// **bosun**: what to do when a tick comes while a previous run is active.
    pub concurrency_policy: Option<ConcurrencyPolicy>,
    /// **bosun**: what to do with ticks missed while bosun was down.
    pub catch_up: Option<CatchUp>,
    /// **bosun**: a missed tick older than this is not run (Go duration; unset = no limit).
    pub starting_deadline: Option<String>,
    /// **bosun**: delay each run by a stable pseudo-random part of this (Go duration).
    pub jitter: Option<String>,
}

/// Prow's `retry` block for periodics.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Retry {
    /// Re-run even successful runs.
    pub run_all: bool,
    /// Most re-runs per tick (capped at 10).
    pub attempts: i64,
    /// Wait between re-runs (Go duration).
    pub interval: Option<String>,
}

/// **bosun**: concurrency policy of a periodic.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ConcurrencyPolicy {
    /// Never overlap the previous run (Prow's behaviour); the tick is skipped.
    #[default]
    Forbid,
    /// Start regardless.
    Allow,
    /// Abort the running run, then start.
    Replace,
    /// Hold the newest waiting tick until the previous run ends.
    QueueOne,
}

/// **bosun**: catch-up policy of a periodic.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Run the most recent missed tick; record the others as skipped.
    #[default]
    Latest,
    /// Record every missed tick as skipped (Prow's behaviour).
    Skip,
}

/// Fields only presubmits have.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct PresubmitFields {
    /// Run on every pull request.
    pub always_run: bool,
    /// A failure does not block merging.
    pub optional: bool,
    /// Comment regex that triggers the job. Default `(?m)^/test( | .* )NAME,?($|\s.*)`.
    pub trigger: String,
    /// Comment that reruns the job. Default `/test NAME`.
    pub rerun_command: String,
    /// Run only right before merging (tide).
    pub run_before_merge: bool,
    /// Jenkins branch-source settings.
    pub jenkins_spec: Option<FreeForm>,
    /// Branch regexes the job runs on.
    pub branches: Vec<String>,
    /// Branch regexes the job never runs on.
    pub skip_branches: Vec<String>,
    /// Run when a changed file matches this regex.
    pub run_if_changed: Option<String>,
    /// Skip when every changed file matches this regex.
    pub skip_if_only_changed: Option<String>,
    /// Status context. Default the job name.
    pub context: String,
    /// Do not report status.
    pub skip_report: bool,
}

/// Fields only postsubmits have.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct PostsubmitFields {
    /// Run on every merge. Default true (unless `run_if_changed` or
    /// `skip_if_only_changed` is set).
    pub always_run: Option<bool>,
    /// Run when a changed file matches this regex.
    pub run_if_changed: Option<String>,
    /// Skip when every changed file matches this regex.
    pub skip_if_only_changed: Option<String>,
    /// Branch regexes the job runs on.
    pub branches: Vec<String>,
    /// Branch regexes the job never runs on.
    pub skip_branches: Vec<String>,
    /// Status context. Default the job name.
    pub context: String,
    /// Do not report status.
    pub skip_report: bool,
    /// Jenkins branch-source settings.
    pub jenkins_spec: Option<FreeForm>,
}

/// Lighthouse's in-repo `.lighthouse/*/triggers.yaml`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct TriggerConfigFile {
    /// `config.lighthouse.jenkins-x.io/v1alpha1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// `TriggerConfig`.
    pub kind: String,
    /// The triggers (typed per job by the loader).
    pub spec: Ignored,
}

/// Where a job was defined.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum JobSource {
    /// Central job configuration (`--config` / `--job-config`).
    Central,
    /// In-repo configuration of `org/repo`.
    InRepo {
        /// `org/repo`.
        repo: String,
        /// Branch of the checkout.
        branch: String,
    },
}
