//! OpenShift's prowjob-dispatcher files, drop-in: `_config.yaml` (the dispatch
//! rules, `--openshift-config`) and `_clusters.yaml` (the inventory), with
//! OpenShift's per-job rule precedence reproduced exactly.
//!
//! Source of truth: openshift/ci-tools `pkg/dispatcher/config.go`
//! (`DetermineClusterForJob`), `helpers.go` (`loadClusterConfigFromBytes`,
//! `DetermineTargetCluster`), `ephemeralcluster.go`, and the dispatcher's
//! `blockedClusterRelocationJobExceptions`; the rule numbers are those of
//! bosun's dispatcher reference, §4:
//!
//! | # | condition | [`OsDecision`] |
//! |---|---|---|
//! | 1 | agent not `kubernetes` and not empty | `NotDispatched` |
//! | 2 | the written `cluster:` is in `manualClusters` | `Fixed` |
//! | 3 | name contains `vsphere`, not an applyconfig job, profile ≠ `vsphere-elastic-poc` | `Fixed` (`vsphere02`) |
//! | 4 | label `dptp.openshift.io/ssh-bastion` and `sshBastion` set | `Fixed` |
//! | 5 | label `ci-operator.openshift.io/cluster` | `Fixed` |
//! | 6 | `capability/<x>: <x>` labels | `Candidates` (or `Fixed` if one; `Error` if none) |
//! | 7 | label `devices.kubevirt.io/kvm` and `kvm` non-empty | `Candidates` / `Fixed` |
//! | 8 | `determineE2EByJob` and the job's (mapped) cloud has build-farm clusters | `Candidates` / `Fixed` |
//! | 9 | label `ci.openshift.io/no-builds` and `noBuilds` non-empty | `Candidates` / `Fixed` |
//! | 10 | name in `groups.<c>.jobs` | `Fixed` |
//! | 11 | a `groups.<c>.paths` regex matches the full job-file path | `Fixed` |
//! | 12 | basename in `buildFarm.<cloud>.<c>.filenames` | `Relocatable` (previous `c`) |
//! | 13 | nothing | `Relocatable` (previous: the written `cluster:`) |
//!
//! Where OpenShift picks one of several candidates by `len(basename) % n`
//! (rules 6-9), bosun balances among the same candidates instead: the
//! decision lists them all ([`OsDecision::Candidates`]) and says which one
//! OpenShift would have taken ([`OsDecision::openshift_pick`]). Where a rule
//! leaves exactly one candidate, bosun gives the same cluster as OpenShift.
//!
//! A job file's written `cluster:` is the previous assignment, not a pin
//! (every OpenShift job file writes one), and so are the `buildFarm`
//! filename lists: switching to bosun moves nothing on day one.
//!
//! A pin onto a blocked cluster goes to `_config.yaml`'s `default`, as
//! `DetermineTargetCluster` sends it, except for `periodic-buildNN-upgrade`
//! jobs, which keep their blocked cluster ([`pin_target`]).
//!
//! Both files may be gzipped (detected by the magic bytes, as
//! `gzip.ReadFileMaybeGZIP` does). Parsing never reads the file system: the
//! caller passes the bytes and the file name used in messages.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::io::Read;
use std::time::{Duration, SystemTime};

use bosun_config::yaml::{self, Mark, Node, UnknownField};
use regex::Regex;
use serde::Deserialize;

use crate::model::ClusterSpec;

/// Label: the job's hard pin (rule 5).
pub const CLUSTER_LABEL: &str = "ci-operator.openshift.io/cluster";
/// Label: the job's cloud, set by prowgen (rules 6 and 8).
pub const CLOUD_LABEL: &str = "ci-operator.openshift.io/cloud";
/// Label: the job's cluster profile (rule 3's `vsphere-elastic-poc` exception).
pub const CLUSTER_PROFILE_LABEL: &str = "ci-operator.openshift.io/cloud-cluster-profile";
/// Label: the job needs KVM (rule 7).
pub const KVM_LABEL: &str = "devices.kubevirt.io/kvm";
/// Label: the job does no builds (rule 9).
pub const NO_BUILDS_LABEL: &str = "ci.openshift.io/no-builds";
/// Label: the job needs the SSH bastion (rule 4).
pub const SSH_BASTION_LABEL: &str = "dptp.openshift.io/ssh-bastion";
/// Prefix of required-capability labels, `capability/<x>: <x>` (rule 6).
pub const CAPABILITY_PREFIX: &str = "capability/";
/// Rule 3's hard-coded target (`api.ClusterVSphere02`).
pub const VSPHERE_CLUSTER: &str = "vsphere02";
/// Rule 3 does not apply to jobs with this cluster profile.
pub const VSPHERE_ELASTIC_POC_PROFILE: &str = "vsphere-elastic-poc";
/// Names starting with this are round-robined ([`EphemeralPicker`]).
pub const EPHEMERAL_PREFIX: &str = "ephemeralcluster-";
/// How long an ephemeral-cluster answer is kept (`cacheTTL`).
pub const EPHEMERAL_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// The clouds `_clusters.yaml` accepts, and the `CLUSTER_TYPE` values that
/// name a job's cloud.
pub const KNOWN_PROVIDERS: [&str; 2] = ["aws", "gcp"];

// ---------------------------------------------------------------------------
// errors

/// A file that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsLoadError {
    /// The file, as the caller named it.
    pub file: String,
    /// Where in the file, when known.
    pub mark: Option<Mark>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for OsLoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mark {
            Some(mark) => write!(f, "{}:{}: {}", self.file, mark, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for OsLoadError {}

fn load_error(file: &str, mark: Option<Mark>, message: impl Into<String>) -> OsLoadError {
    OsLoadError {
        file: file.to_string(),
        mark,
        message: message.into(),
    }
}

/// The bytes of a file that may be gzipped (gzip magic `1f 8b`), as text.
fn maybe_gunzip(file: &str, bytes: &[u8]) -> Result<String, OsLoadError> {
    let raw: Vec<u8>;
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes)
            .read_to_end(&mut out)
            .map_err(|e| load_error(file, None, format!("cannot decompress gzip data: {e}")))?;
        raw = out;
        &raw[..]
    } else {
        bytes
    };
    String::from_utf8(bytes.to_vec())
        .map_err(|e| load_error(file, None, format!("not UTF-8 text: {e}")))
}

fn unknown_warnings(file: &str, unknown: RefCell<Vec<UnknownField>>) -> Vec<String> {
    unknown
        .into_inner()
        .into_iter()
        .map(|u| {
            format!(
                "{file}:{}: unknown key {:?} (OpenShift ignores it; known: {})",
                u.mark,
                u.key,
                u.expected.join(", ")
            )
        })
        .collect()
}

fn de_error(file: &str, e: yaml::DeError) -> OsLoadError {
    load_error(file, e.mark, e.message)
}

/// The first document of `text`, or `None` for an empty stream.
fn first_document<'a>(file: &str, text: &'a str) -> Result<Option<Node<'a>>, OsLoadError> {
    let docs =
        yaml::parse_documents(text).map_err(|e| load_error(file, Some(e.mark), e.message))?;
    Ok(docs.into_iter().next().filter(|d| !d.is_null()))
}

// ---------------------------------------------------------------------------
// _config.yaml

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawConfig {
    default: Option<String>,
    #[serde(rename = "determineE2EByJob")]
    determine_e2e_by_job: Option<bool>,
    cloud_mapping: Option<BTreeMap<String, String>>,
    ssh_bastion: Option<String>,
    kvm: Option<Vec<String>>,
    no_builds: Option<Vec<String>>,
    manual_clusters: Option<Vec<String>>,
    groups: Option<BTreeMap<String, Option<RawGroup>>>,
    build_farm: Option<BTreeMap<String, Option<RawCloudFarm>>>,
}

/// `buildFarm.<cloud>`: cluster to its files.
type RawCloudFarm = BTreeMap<String, Option<RawBuildFarm>>;

#[derive(Deserialize, Default)]
struct RawGroup {
    jobs: Option<Vec<String>>,
    paths: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
struct RawBuildFarm {
    filenames: Option<Vec<String>>,
}

/// A group of `_config.yaml`: jobs pinned to one cluster by name (rule 10)
/// or by the path of their job file (rule 11).
#[derive(Debug, Clone)]
pub struct OsGroup {
    /// Exact job names.
    pub jobs: Vec<String>,
    /// Go regexps on the full job-file path (unanchored, like `MatchString`).
    pub paths: Vec<Regex>,
}

/// OpenShift's `_config.yaml`, parsed and validated.
#[derive(Debug, Clone)]
pub struct OsConfig {
    /// The fallback cluster (rule 13, and where blocked targets go).
    pub default: String,
    /// Rule 8 (and rule 6's provider restriction) apply.
    pub determine_e2e_by_job: bool,
    /// A job's cloud is replaced by its mapping (`equinix-ocp-metal: aws`).
    pub cloud_mapping: BTreeMap<String, String>,
    /// Rule 4's target; `None` when unset or empty.
    pub ssh_bastion: Option<String>,
    /// Rule 7's targets, in file order (OpenShift indexes this order).
    pub kvm: Vec<String>,
    /// Rule 9's targets, in file order.
    pub no_builds: Vec<String>,
    /// Rule 2: a job written onto one of these stays there.
    pub manual_clusters: Vec<String>,
    /// Rules 10 and 11, by target cluster.
    pub groups: BTreeMap<String, OsGroup>,
    /// `buildFarm.<cloud>.<cluster>.filenames`: the basenames of the job
    /// files placed on each cluster by the last dispatch (rule 12), and the
    /// build farm per cloud (rule 8: its clusters in name order).
    pub build_farm: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    /// Keys OpenShift would ignore, with their positions.
    pub warnings: Vec<String>,
    group_jobs: HashMap<String, String>,
}

impl OsConfig {
    /// Parses `_config.yaml` (possibly gzipped); `file` names it in errors.
    pub fn parse(file: &str, bytes: &[u8]) -> Result<OsConfig, OsLoadError> {
        let text = maybe_gunzip(file, bytes)?;
        let doc = first_document(file, &text)?;
        let unknown = RefCell::new(Vec::new());
        let raw: RawConfig = match &doc {
            Some(node) => yaml::from_node(node, &unknown).map_err(|e| de_error(file, e))?,
            None => RawConfig::default(),
        };
        let warnings = unknown_warnings(file, unknown);
        let mark_of = |path: &[&str]| -> Option<Mark> {
            let mut node = doc.as_ref()?;
            for key in path {
                node = node.get(key)?;
            }
            Some(node.mark)
        };

        let default = raw.default.unwrap_or_default();
        if default.is_empty() {
            return Err(load_error(
                file,
                mark_of(&["default"]),
                "the default cluster must be set in the config",
            ));
        }

        let mut groups = BTreeMap::new();
        let mut group_jobs: HashMap<String, String> = HashMap::new();
        let mut repeated = BTreeSet::new();
        for (cluster, group) in raw.groups.unwrap_or_default() {
            let group = group.unwrap_or_default();
            let jobs = group.jobs.unwrap_or_default();
            for job in &jobs {
                // OpenShift's Validate only fails when two or more distinct
                // names repeat (`len(matches) > 1`); one is enough here.
                if group_jobs.insert(job.clone(), cluster.clone()).is_some() {
                    repeated.insert(job.clone());
                }
            }
            let mut paths = Vec::new();
            for (i, p) in group.paths.unwrap_or_default().iter().enumerate() {
                let re = Regex::new(p).map_err(|e| {
                    let mark = doc
                        .as_ref()
                        .and_then(|d| d.get("groups"))
                        .and_then(|g| g.get(&cluster))
                        .and_then(|g| g.get("paths"))
                        .and_then(|ps| ps.items().get(i))
                        .map(|n| n.mark);
                    load_error(
                        file,
                        mark,
                        format!(
                            "failed to compile regex groups[{cluster}].paths[{i}] from {p:?}: {e}"
                        ),
                    )
                })?;
                paths.push(re);
            }
            groups.insert(cluster, OsGroup { jobs, paths });
        }
        if !repeated.is_empty() {
            let names: Vec<String> = repeated.into_iter().collect();
            return Err(load_error(
                file,
                mark_of(&["groups"]),
                format!(
                    "there are job names occurring more than once: [{}]",
                    names.join(" ")
                ),
            ));
        }

        let build_farm = raw
            .build_farm
            .unwrap_or_default()
            .into_iter()
            .map(|(cloud, clusters)| {
                let clusters = clusters
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(cluster, farm)| {
                        let names = farm.unwrap_or_default().filenames.unwrap_or_default();
                        (cluster, names.into_iter().collect::<BTreeSet<_>>())
                    })
                    .collect();
                (cloud, clusters)
            })
            .collect();

        Ok(OsConfig {
            default,
            determine_e2e_by_job: raw.determine_e2e_by_job.unwrap_or(false),
            cloud_mapping: raw.cloud_mapping.unwrap_or_default(),
            ssh_bastion: raw.ssh_bastion.filter(|s| !s.is_empty()),
            kvm: raw.kvm.unwrap_or_default(),
            no_builds: raw.no_builds.unwrap_or_default(),
            manual_clusters: raw.manual_clusters.unwrap_or_default(),
            groups,
            build_farm,
            warnings,
            group_jobs,
        })
    }

    /// `BuildFarmCloud[cloud]`: the build-farm clusters of a cloud, in name
    /// order (empty for an unknown cloud).
    pub fn build_farm_cloud(&self, cloud: &str) -> Vec<String> {
        self.build_farm
            .get(cloud)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// `IsInBuildFarm`: the cloud whose build farm holds `cluster`.
    pub fn is_in_build_farm(&self, cluster: &str) -> Option<&str> {
        self.build_farm
            .iter()
            .find(|(_, m)| m.contains_key(cluster))
            .map(|(cloud, _)| cloud.as_str())
    }

    /// `MatchingPathRegEx`: a group path regex matches `path` (OpenShift
    /// leaves such files out of the `filenames` lists it writes).
    pub fn matching_path_regex(&self, path: &str) -> bool {
        self.groups
            .values()
            .any(|g| g.paths.iter().any(|re| re.is_match(path)))
    }

    /// The group a job name is pinned to by `groups.<c>.jobs` (rule 10).
    pub fn group_of_job(&self, name: &str) -> Option<&str> {
        self.group_jobs.get(name).map(String::as_str)
    }

    /// What the daemon does before each full dispatch
    /// (`removeDisabledClusters` + `addEnabledClusters`): clusters that are
    /// blocked or absent from the inventory leave the build farm (their
    /// files fall to rule 13), and schedulable inventory clusters missing from
    /// it join their provider's build farm with no files. `sanitize-prow-jobs`
    /// does not do this; call it only to model the daemon.
    pub fn synchronize_build_farm(&mut self, clusters: &OsClusters) {
        for farm in self.build_farm.values_mut() {
            farm.retain(|name, _| clusters.get(name).is_some_and(|c| !c.blocked));
        }
        for c in clusters.clusters.values().filter(|c| !c.blocked) {
            if self.is_in_build_farm(&c.name).is_none() {
                self.build_farm
                    .entry(c.provider.clone())
                    .or_default()
                    .insert(c.name.clone(), BTreeSet::new());
            }
        }
    }
}

// ---------------------------------------------------------------------------
// _clusters.yaml

#[derive(Deserialize, Default)]
struct RawCluster {
    name: Option<String>,
    capacity: Option<i64>,
    capabilities: Option<Vec<String>>,
    blocked: Option<bool>,
}

/// One cluster of `_clusters.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsCluster {
    /// Its name.
    pub name: String,
    /// Its provider: the key it is listed under (`aws` or `gcp`).
    pub provider: String,
    /// 1..=100 (0 or over 100 read as 100); 0 when a negative capacity
    /// blocked it.
    pub capacity: u32,
    /// What it offers, sorted and unique.
    pub capabilities: Vec<String>,
    /// Blocked (`blocked: true` or a negative capacity): OpenShift drops it
    /// from its `ClusterMap` entirely.
    pub blocked: bool,
}

/// OpenShift's `_clusters.yaml`, parsed and validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsClusters {
    /// By name, blocked ones included.
    pub clusters: BTreeMap<String, OsCluster>,
    /// Keys OpenShift would ignore, with their positions.
    pub warnings: Vec<String>,
}

impl OsClusters {
    /// Parses `_clusters.yaml` (possibly gzipped); `file` names it in errors.
    pub fn parse(file: &str, bytes: &[u8]) -> Result<OsClusters, OsLoadError> {
        let text = maybe_gunzip(file, bytes)?;
        let Some(doc) = first_document(file, &text)? else {
            return Ok(OsClusters::default());
        };
        let yaml::Value::Map(entries) = &doc.value else {
            return Err(load_error(
                file,
                Some(doc.mark),
                format!(
                    "expected a mapping of provider to clusters, found {}",
                    doc.kind()
                ),
            ));
        };
        let unknown = RefCell::new(Vec::new());
        let mut clusters: BTreeMap<String, OsCluster> = BTreeMap::new();
        for (key, list) in entries {
            let provider = key.as_str().unwrap_or_default();
            if !KNOWN_PROVIDERS.contains(&provider) {
                return Err(load_error(
                    file,
                    Some(key.mark),
                    format!("unsupported cloud provider {provider:?} (supported: aws, gcp)"),
                ));
            }
            let raws: Vec<RawCluster> =
                yaml::from_node(list, &unknown).map_err(|e| de_error(file, e))?;
            for (raw, node) in raws.into_iter().zip(list.items()) {
                let name = raw.name.unwrap_or_default();
                if name.is_empty() {
                    return Err(load_error(
                        file,
                        Some(node.mark),
                        format!("a cluster of provider {provider} has an empty name"),
                    ));
                }
                if let Some(other) = clusters.get(&name) {
                    return Err(load_error(
                        file,
                        Some(node.mark),
                        format!(
                            "cluster {name} is listed more than once (under {} and {provider})",
                            other.provider
                        ),
                    ));
                }
                let capacity = raw.capacity.unwrap_or(0);
                let (capacity, blocked_by_capacity) = match capacity {
                    c if c < 0 => (0, true),
                    0 => (100, false),
                    c if c > 100 => (100, false),
                    c => (c as u32, false),
                };
                let capabilities: BTreeSet<String> =
                    raw.capabilities.unwrap_or_default().into_iter().collect();
                clusters.insert(
                    name.clone(),
                    OsCluster {
                        name,
                        provider: provider.to_string(),
                        capacity,
                        capabilities: capabilities.into_iter().collect(),
                        blocked: raw.blocked.unwrap_or(false) || blocked_by_capacity,
                    },
                );
            }
        }
        Ok(OsClusters {
            clusters,
            warnings: unknown_warnings(file, unknown),
        })
    }

    /// A cluster by name.
    pub fn get(&self, name: &str) -> Option<&OsCluster> {
        self.clusters.get(name)
    }

    /// The blocked set.
    pub fn blocked(&self) -> BTreeSet<String> {
        self.clusters
            .values()
            .filter(|c| c.blocked)
            .map(|c| c.name.clone())
            .collect()
    }

    /// OpenShift's `ClusterMap`: the schedulable (non-blocked) clusters, in
    /// name order.
    pub fn schedulable(&self) -> impl Iterator<Item = &OsCluster> {
        self.clusters.values().filter(|c| !c.blocked)
    }

    /// The inventory in the planner's vocabulary (provider = the key the
    /// cluster is listed under), in name order.
    pub fn to_cluster_specs(&self) -> Vec<ClusterSpec> {
        self.clusters
            .values()
            .map(|c| ClusterSpec {
                name: c.name.clone(),
                capacity: c.capacity,
                blocked: c.blocked,
                provider: Some(c.provider.clone()),
                capabilities: c.capabilities.iter().cloned().collect(),
            })
            .collect()
    }
}

impl From<&OsClusters> for Vec<ClusterSpec> {
    fn from(clusters: &OsClusters) -> Self {
        clusters.to_cluster_specs()
    }
}

// ---------------------------------------------------------------------------
// the decision for one job

/// What the rules read of one job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsJob {
    /// Its name.
    pub name: String,
    /// The full path of its job file (rule 11's regexes match this).
    pub path: String,
    /// `filepath.Base(path)`: rules 6-9 pick by its length in bytes, rule 12
    /// looks it up. [`OsJob::new`] fills it in.
    pub basename: String,
    /// Its `agent` (`""` or `kubernetes` are dispatched).
    pub agent: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The `CLUSTER_TYPE` env of its containers (the first container that
    /// sets it to `aws` or `gcp`, or any value: only those two count), used
    /// for its cloud when the cloud label is absent or empty.
    pub cluster_type_env: Option<String>,
    /// Exactly one container whose image contains `applyconfig` (rule 3
    /// does not apply to it).
    pub applyconfig: bool,
    /// The `cluster:` its job file writes: the previous assignment (rules 2
    /// and 13), not a pin.
    pub written_cluster: Option<String>,
}

impl OsJob {
    /// A kubernetes-agent job with no labels; `basename` from `path`.
    pub fn new(name: impl Into<String>, path: impl Into<String>) -> OsJob {
        let path = path.into();
        OsJob {
            name: name.into(),
            basename: go_base(&path).to_string(),
            path,
            ..OsJob::default()
        }
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> OsJob {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// `isApplyConfigJob` from the job's container images: exactly one
    /// container, whose image contains `applyconfig`.
    pub fn applyconfig_images<S: AsRef<str>>(images: &[S]) -> bool {
        images.len() == 1 && images[0].as_ref().contains("applyconfig")
    }

    /// Its cluster profile label.
    pub fn cluster_profile(&self) -> Option<&str> {
        self.labels.get(CLUSTER_PROFILE_LABEL).map(String::as_str)
    }

    /// The capabilities it requires: `capability/<x>: <x>` labels (a value
    /// other than the key's suffix does not count), sorted.
    pub fn required_capabilities(&self) -> Vec<String> {
        self.labels
            .iter()
            .filter(|(k, v)| k.strip_prefix(CAPABILITY_PREFIX) == Some(v.as_str()))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// `DetermineCloud`: the cloud label if non-empty, else `CLUSTER_TYPE`
    /// if it is `aws` or `gcp`.
    pub fn cloud(&self) -> Option<&str> {
        if let Some(v) = self.labels.get(CLOUD_LABEL).filter(|v| !v.is_empty()) {
            return Some(v);
        }
        self.cluster_type_env
            .as_deref()
            .filter(|v| KNOWN_PROVIDERS.contains(v))
    }

    /// `DetermineCloudMapping`: its cloud after `cloudMapping`.
    pub fn mapped_cloud<'a>(&'a self, config: &'a OsConfig) -> Option<&'a str> {
        let cloud = self.cloud().unwrap_or("");
        let mapped = config
            .cloud_mapping
            .get(cloud)
            .map(String::as_str)
            .unwrap_or(cloud);
        Some(mapped).filter(|c| !c.is_empty())
    }
}

/// Go's `filepath.Base` on a Unix path.
fn go_base(path: &str) -> &str {
    if path.is_empty() {
        return ".";
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/";
    }
    match trimmed.rfind('/') {
        Some(i) => &trimmed[i + 1..],
        None => trimmed,
    }
}

/// Where OpenShift's rules put one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OsDecision {
    /// Rule 1: not a kubernetes job; no cluster.
    NotDispatched,
    /// A pin: rules 2-5, 10, 11, and 6-9 when they leave one candidate.
    Fixed {
        /// The cluster.
        cluster: String,
        /// The rule (§4 numbering).
        rule: u8,
    },
    /// Rules 6-9 with several candidates: OpenShift takes
    /// `list[len(basename) % n]`; bosun balances among `clusters`.
    Candidates {
        /// The candidates, sorted, unique.
        clusters: Vec<String>,
        /// The rule.
        rule: u8,
        /// OpenShift's pick (indexing its own list order: sorted for rules
        /// 6 and 8, file order for `kvm` and `noBuilds`).
        openshift: String,
    },
    /// Rules 12-13: balancing may move it anywhere.
    Relocatable {
        /// Where it was: rule 12's `buildFarm` cluster, or (rule 13) the
        /// `cluster:` its job file writes.
        previous: Option<String>,
        /// 12 or 13.
        rule: u8,
        /// `default` (OpenShift's answer for rule 13).
        default: String,
    },
    /// OpenShift fails this job (rule 6: no capable cluster; rule 12: the
    /// path matches more than one group regex or `filenames` list).
    Error(String),
}

impl OsDecision {
    /// `DetermineClusterForJob`'s `(cluster, mayBeRelocated)`; `None` for
    /// `NotDispatched` (OpenShift's `""`) and `Error`.
    pub fn openshift_pick(&self) -> Option<(&str, bool)> {
        match self {
            OsDecision::NotDispatched | OsDecision::Error(_) => None,
            OsDecision::Fixed { cluster, .. } => Some((cluster, false)),
            OsDecision::Candidates { openshift, .. } => Some((openshift, false)),
            OsDecision::Relocatable {
                previous, rule: 12, ..
            } => Some((previous.as_deref().unwrap_or_default(), true)),
            OsDecision::Relocatable { default, .. } => Some((default, true)),
        }
    }

    /// The rule that decided (1 for `NotDispatched`; `None` for `Error`).
    pub fn rule(&self) -> Option<u8> {
        match self {
            OsDecision::NotDispatched => Some(1),
            OsDecision::Fixed { rule, .. }
            | OsDecision::Candidates { rule, .. }
            | OsDecision::Relocatable { rule, .. } => Some(*rule),
            OsDecision::Error(_) => None,
        }
    }

    /// The clusters bosun may place the job on: the pin, the candidates, or
    /// (relocatable) any, as `None`.
    pub fn eligible(&self) -> Option<Vec<String>> {
        match self {
            OsDecision::NotDispatched | OsDecision::Error(_) => Some(Vec::new()),
            OsDecision::Fixed { cluster, .. } => Some(vec![cluster.clone()]),
            OsDecision::Candidates { clusters, .. } => Some(clusters.clone()),
            OsDecision::Relocatable { .. } => None,
        }
    }
}

/// A short description of a rule, for explanations (`openshift rule 6: ...`).
pub fn rule_description(rule: u8) -> &'static str {
    match rule {
        1 => "not a kubernetes job",
        2 => "written onto a manual cluster (manualClusters)",
        3 => "vsphere job (vsphere02)",
        4 => "ssh-bastion label (sshBastion)",
        5 => "ci-operator.openshift.io/cluster label",
        6 => "capability/* labels",
        7 => "kvm label (kvm)",
        8 => "e2e cloud (determineE2EByJob)",
        9 => "no-builds label (noBuilds)",
        10 => "groups.<cluster>.jobs",
        11 => "groups.<cluster>.paths",
        12 => "buildFarm filenames (previous dispatch)",
        13 => "default",
        _ => "unknown rule",
    }
}

/// OpenShift's `list[len(basename) % len(list)]`, and the candidate set.
fn pick_among(list: &[String], basename: &str, rule: u8) -> OsDecision {
    let openshift = list[basename.len() % list.len()].clone();
    let set: BTreeSet<&String> = list.iter().collect();
    if set.len() == 1 {
        return OsDecision::Fixed {
            cluster: openshift,
            rule,
        };
    }
    OsDecision::Candidates {
        clusters: set.into_iter().cloned().collect(),
        rule,
        openshift,
    }
}

/// `DetermineClusterForJob`: OpenShift's rule precedence for one job.
pub fn decide(job: &OsJob, config: &OsConfig, clusters: &OsClusters) -> OsDecision {
    // 1
    if !job.agent.is_empty() && job.agent != "kubernetes" {
        return OsDecision::NotDispatched;
    }
    // 2
    if let Some(written) = &job.written_cluster {
        if config.manual_clusters.iter().any(|m| m == written) {
            return OsDecision::Fixed {
                cluster: written.clone(),
                rule: 2,
            };
        }
    }
    // 3
    if job.name.contains("vsphere")
        && !job.applyconfig
        && job.cluster_profile() != Some(VSPHERE_ELASTIC_POC_PROFILE)
    {
        return OsDecision::Fixed {
            cluster: VSPHERE_CLUSTER.to_string(),
            rule: 3,
        };
    }
    // 4
    if job.labels.contains_key(SSH_BASTION_LABEL) {
        if let Some(bastion) = &config.ssh_bastion {
            return OsDecision::Fixed {
                cluster: bastion.clone(),
                rule: 4,
            };
        }
    }
    // 5
    if let Some(cluster) = job.labels.get(CLUSTER_LABEL) {
        if cluster.is_empty() {
            return OsDecision::Error(format!(
                "job {} has an empty {CLUSTER_LABEL} label",
                job.name
            ));
        }
        return OsDecision::Fixed {
            cluster: cluster.clone(),
            rule: 5,
        };
    }
    let cloud = if config.determine_e2e_by_job {
        job.mapped_cloud(config)
    } else {
        None
    };
    // 6
    let required = job.required_capabilities();
    if !required.is_empty() {
        let matching: Vec<&OsCluster> = clusters
            .schedulable()
            .filter(|c| {
                required
                    .iter()
                    .all(|r| c.capabilities.binary_search(r).is_ok())
            })
            .collect();
        if let Some(cloud) = cloud {
            let on_cloud: Vec<String> = matching
                .iter()
                .filter(|c| c.provider == cloud)
                .map(|c| c.name.clone())
                .collect();
            if !on_cloud.is_empty() {
                return pick_among(&on_cloud, &job.basename, 6);
            }
        }
        if matching.is_empty() {
            return OsDecision::Error(format!(
                "job {} can't be matched with any cluster using provided capabilities: {}",
                job.name,
                required.join(",")
            ));
        }
        let names: Vec<String> = matching.iter().map(|c| c.name.clone()).collect();
        return pick_among(&names, &job.basename, 6);
    }
    // 7
    if job.labels.contains_key(KVM_LABEL) && !config.kvm.is_empty() {
        return pick_among(&config.kvm, &job.basename, 7);
    }
    // 8
    if let Some(cloud) = cloud {
        let farm = config.build_farm_cloud(cloud);
        if !farm.is_empty() {
            return pick_among(&farm, &job.basename, 8);
        }
    }
    // 9
    if job.labels.contains_key(NO_BUILDS_LABEL) && !config.no_builds.is_empty() {
        return pick_among(&config.no_builds, &job.basename, 9);
    }
    // 10-12: OpenShift collects every group-path and filename match, and any
    // two of them are an error even when a job name already decided.
    let mut cluster = config.group_of_job(&job.name).map(|c| (c.to_string(), 10));
    let mut matches: Vec<String> = Vec::new();
    for (name, group) in &config.groups {
        for re in &group.paths {
            if re.is_match(&job.path) {
                cluster.get_or_insert_with(|| (name.clone(), 11));
                matches.push(re.as_str().to_string());
            }
        }
    }
    for farm in config.build_farm.values() {
        for (name, files) in farm {
            if files.contains(&job.basename) {
                cluster.get_or_insert_with(|| (name.clone(), 12));
                matches.push(job.basename.clone());
            }
        }
    }
    if matches.len() > 1 {
        matches.sort();
        return OsDecision::Error(format!(
            "path {} matches more than 1 regex: [{}]",
            job.path,
            matches.join(" ")
        ));
    }
    match cluster {
        Some((cluster, 12)) => OsDecision::Relocatable {
            previous: Some(cluster),
            rule: 12,
            default: config.default.clone(),
        },
        Some((cluster, rule)) => OsDecision::Fixed { cluster, rule },
        // 13
        None => OsDecision::Relocatable {
            previous: job.written_cluster.clone().filter(|c| !c.is_empty()),
            rule: 13,
            default: config.default.clone(),
        },
    }
}

// ---------------------------------------------------------------------------
// blocked targets

/// `DetermineTargetCluster`, exactly: `file_cluster` is the file's cluster
/// (its most used `cluster:`, or the one balancing chose for the file; `""`
/// for none), `determined` and `can_be_relocated` come from [`decide`]
/// ([`OsDecision::openshift_pick`]). A blocked target falls back to
/// `default`.
pub fn determine_target_cluster(
    file_cluster: &str,
    determined: &str,
    default: &str,
    can_be_relocated: bool,
    blocked: &BTreeSet<String>,
) -> String {
    let cluster = if file_cluster.is_empty() {
        determined
    } else {
        file_cluster
    };
    let target = if cluster == determined || can_be_relocated {
        cluster
    } else if !blocked.contains(determined) {
        determined
    } else {
        cluster
    };
    if blocked.contains(target) {
        default.to_string()
    } else {
        target.to_string()
    }
}

/// `blockedClusterRelocationJobExceptions`: `^periodic-build[0-9]{2}-upgrade$`
/// jobs stay on their own blocked cluster.
pub fn is_blocked_relocation_exception(job_name: &str) -> bool {
    let Some(rest) = job_name.strip_prefix("periodic-build") else {
        return false;
    };
    let b = rest.as_bytes();
    b.len() == 2 + "-upgrade".len()
        && b[0].is_ascii_digit()
        && b[1].is_ascii_digit()
        && &rest[2..] == "-upgrade"
}

/// The dispatcher's per-job target: [`determine_target_cluster`] with the
/// exception of [`is_blocked_relocation_exception`] jobs, whose determined
/// cluster does not count as blocked (`blockedClustersForJob`).
pub fn target_cluster(
    job_name: &str,
    file_cluster: &str,
    determined: &str,
    default: &str,
    can_be_relocated: bool,
    blocked: &BTreeSet<String>,
) -> String {
    if blocked.contains(determined) && is_blocked_relocation_exception(job_name) {
        let mut blocked = blocked.clone();
        blocked.remove(determined);
        return determine_target_cluster(
            file_cluster,
            determined,
            default,
            can_be_relocated,
            &blocked,
        );
    }
    determine_target_cluster(file_cluster, determined, default, can_be_relocated, blocked)
}

/// Where bosun pins a job that OpenShift's rules pin ([`OsDecision::Fixed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsPin {
    /// The cluster the job is pinned to.
    pub cluster: String,
    /// `cluster` is blocked and the job stays there all the same
    /// ([`is_blocked_relocation_exception`]).
    pub keeps_blocked: bool,
    /// The explanation (a unit's `rule`): `openshift rule N: pinned`, saying
    /// where a blocked pin went.
    pub rule: String,
}

/// The pin of a job whose rule `rule` pins it to `pin`: [`target_cluster`]
/// with no file cluster (a pinned job is a unit of its own, not placed with
/// its file) and not relocatable. So a pin onto a blocked cluster goes to
/// `default` (`_config.yaml`'s), except for `periodic-buildNN-upgrade` jobs,
/// which keep their blocked cluster. `blocked` is the blocked set.
pub fn pin_target(
    job_name: &str,
    pin: &str,
    rule: u8,
    default: &str,
    blocked: &BTreeSet<String>,
) -> OsPin {
    let cluster = target_cluster(job_name, "", pin, default, false, blocked);
    let keeps_blocked = blocked.contains(pin) && is_blocked_relocation_exception(job_name);
    let rule = if !blocked.contains(pin) {
        format!("openshift rule {rule}: pinned")
    } else if keeps_blocked {
        format!(
            "openshift rule {rule}: pinned to {pin}, which is blocked: kept there \
             (a periodic-buildNN-upgrade job keeps its blocked cluster)"
        )
    } else {
        format!(
            "openshift rule {rule}: pinned to {pin}, which is blocked: \
             sent to _config.yaml's default {cluster}"
        )
    };
    OsPin {
        cluster,
        keeps_blocked,
        rule,
    }
}

// ---------------------------------------------------------------------------
// lookups: rehearsals and ephemeral clusters

/// The job name a lookup uses: `^rehearse-\d+-` stripped (the lookup's).
pub use crate::lookup::strip_rehearse;

/// Whether a lookup is an ephemeral-cluster request (`ephemeralcluster-*`).
pub fn is_ephemeral(name: &str) -> bool {
    name.starts_with(EPHEMERAL_PREFIX)
}

/// OpenShift's ephemeral-cluster scheduler: round robin over the
/// schedulable clusters in name order, each name's answer kept for 24 h
/// (an entry exactly 24 h old still holds). Time is an argument.
#[derive(Debug, Clone, Default)]
pub struct EphemeralPicker {
    clusters: Vec<String>,
    last: Option<usize>,
    cache: HashMap<String, (String, SystemTime)>,
}

impl EphemeralPicker {
    /// Over the non-blocked clusters of `inventory`, in name order.
    pub fn new(inventory: &OsClusters) -> EphemeralPicker {
        EphemeralPicker::with_clusters(inventory.schedulable().map(|c| c.name.clone()).collect())
    }

    /// Over `clusters`, in the order given.
    pub fn with_clusters(clusters: Vec<String>) -> EphemeralPicker {
        EphemeralPicker {
            clusters,
            ..EphemeralPicker::default()
        }
    }

    /// `Reset` (each full dispatch): a new cluster list, the round robin
    /// restarted, the cache emptied.
    pub fn reset(&mut self, inventory: &OsClusters) {
        *self = EphemeralPicker::new(inventory);
    }

    /// The cluster for `name` at `now`; `None` when there is no cluster
    /// (OpenShift answers 500 `Failed to get the cluster`).
    pub fn pick(&mut self, name: &str, now: SystemTime) -> Option<String> {
        if self.clusters.is_empty() {
            return None;
        }
        if let Some((cluster, at)) = self.cache.get(name) {
            // A negative age (clock stepped back) counts as fresh, as Go's.
            let fresh = now
                .duration_since(*at)
                .map_or(true, |age| age <= EPHEMERAL_TTL);
            if fresh {
                return Some(cluster.clone());
            }
            self.cache.remove(name);
        }
        let next = self.last.map_or(0, |i| (i + 1) % self.clusters.len());
        self.last = Some(next);
        let cluster = self.clusters[next].clone();
        self.cache.insert(name.to_string(), (cluster.clone(), now));
        Some(cluster)
    }

    /// Drops expired entries (OpenShift only drops them when asked again).
    pub fn prune(&mut self, now: SystemTime) {
        self.cache.retain(|_, (_, at)| {
            now.duration_since(*at)
                .map_or(true, |age| age <= EPHEMERAL_TTL)
        });
    }

    /// The cached entries.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// No cached entries.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_base_matches_filepath_base() {
        assert_eq!(go_base("/a/b/c.yaml"), "c.yaml");
        assert_eq!(go_base("c.yaml"), "c.yaml");
        assert_eq!(go_base("/a/b/"), "b");
        assert_eq!(go_base(""), ".");
        assert_eq!(go_base("/"), "/");
    }

    #[test]
    fn rehearse_prefix() {
        assert_eq!(strip_rehearse("rehearse-123-pull-ci-a"), "pull-ci-a");
        assert_eq!(strip_rehearse("rehearse-x-pull"), "rehearse-x-pull");
        assert_eq!(strip_rehearse("rehearse--pull"), "rehearse--pull");
        assert_eq!(strip_rehearse("rehearse-12"), "rehearse-12");
        assert_eq!(strip_rehearse("pull-rehearse-1-x"), "pull-rehearse-1-x");
    }

    #[test]
    fn exception_regex() {
        assert!(is_blocked_relocation_exception("periodic-build05-upgrade"));
        assert!(!is_blocked_relocation_exception("periodic-build5-upgrade"));
        assert!(!is_blocked_relocation_exception(
            "periodic-build05-upgrade-x"
        ));
        assert!(!is_blocked_relocation_exception(
            "periodic-build123-upgrade"
        ));
        assert!(!is_blocked_relocation_exception(
            "xperiodic-build05-upgrade"
        ));
    }
}
