//! From a configuration to the planner's input: the inventory (build
//! clusters and kubeconfig contexts, annotated or replaced by OpenShift's
//! `_clusters.yaml`), the units of jobs with their constraints, demand per
//! unit, and each unit's previous cluster.
//!
//! Without OpenShift's `_config.yaml`, bosun's own placement rules decide
//! (`bosun_dispatch::rules`). With it, OpenShift's rule precedence decides
//! what is pinned and what is relocatable, and a job file's written
//! `cluster:` (or its `buildFarm` entry) is the previous assignment, not a
//! pin; where OpenShift would pick `len(filename) % n` among several
//! candidates, bosun balances among the same candidates. A pin onto a
//! blocked cluster goes to `_config.yaml`'s `default` (a
//! `periodic-buildNN-upgrade` job keeps its blocked cluster).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use bosun_config::Snapshot;
use bosun_dispatch::demand::{fill, Demand};
use bosun_dispatch::inventory::Inventory;
use bosun_dispatch::jobs::{facts, JobFacts};
use bosun_dispatch::lookup::JobRepo;
use bosun_dispatch::model::{Options, PlanInput, UnitSpec};
use bosun_dispatch::openshift::{
    decide, pin_target, OsCluster, OsClusters, OsConfig, OsDecision, OsJob,
};

/// Where the dispatcher's input comes from.
#[derive(clap::Args, Debug, Clone)]
pub struct Sources {
    #[command(flatten)]
    pub config: bosun_host::args::ConfigArgs,
    /// OpenShift's `_config.yaml` (may be gzipped): its rules decide.
    #[arg(long, value_name = "FILE")]
    pub openshift_config: Option<PathBuf>,
    /// OpenShift's `_clusters.yaml` (may be gzipped): the inventory, or
    /// annotations of the build clusters.
    #[arg(long, value_name = "FILE")]
    pub openshift_clusters: Option<PathBuf>,
}

/// OpenShift's files, when the dispatcher reads them.
#[derive(Default)]
pub struct OpenShift {
    /// `_config.yaml`: its rules decide.
    pub config: Option<OsConfig>,
    /// `_clusters.yaml`: the inventory, or annotations of bosun's.
    pub clusters: Option<OsClusters>,
}

/// The planner's input and what the service needs beside it.
pub struct Inputs {
    /// The planner's input.
    pub input: PlanInput,
    /// Each job's repository, type, branches and demand (lookups by
    /// repository).
    pub repos: Vec<JobRepo>,
    /// What could not be taken as it is (never fatal).
    pub warnings: Vec<String>,
    /// Each job's job-config file (relative to its directory), for
    /// overrides by file.
    pub files: BTreeMap<String, String>,
}

/// The planner's input for `snapshot`. `job_config_dirs` make job files'
/// paths relative; `kube_aliases` are the kubeconfig contexts that are
/// build clusters; `demand` is per job (jobs without: the median of their
/// type); `previous` is the last plan's assignment (job -> cluster).
pub fn inputs(
    snapshot: &Snapshot,
    job_config_dirs: &[PathBuf],
    kube_aliases: &[String],
    openshift: &OpenShift,
    demand: &BTreeMap<String, f64>,
    previous: &BTreeMap<String, String>,
) -> Inputs {
    let config = &snapshot.config;
    let mut warnings = Vec::new();
    let mut inventory = Inventory::from_config(config, kube_aliases);
    if let Some(os) = &openshift.clusters {
        let (annotated, unknown) = inventory.annotate(os.to_cluster_specs());
        inventory = annotated;
        if !unknown.is_empty() {
            warnings.push(format!(
                "_clusters.yaml names clusters bosun does not know (ignored): {}",
                unknown.join(", ")
            ));
        }
    }
    let facts = facts(snapshot, job_config_dirs);
    let per_job = fill(&Demand::from_map(demand.clone()), &facts);
    let mut units = match &openshift.config {
        None => bosun_dispatch::rules::unit_specs(config, &inventory, &facts, &per_job),
        Some(os) => {
            let clusters = openshift
                .clusters
                .clone()
                .unwrap_or_else(|| os_clusters(&inventory));
            openshift_units(&facts, os, &clusters, &inventory, &per_job, &mut warnings)
        }
    };
    bosun_dispatch::format::apply_previous(&mut units, previous);
    let repos = facts
        .iter()
        .filter_map(|f| {
            let (org, repo) = f.repo.as_deref()?.split_once('/')?;
            Some(JobRepo {
                job: f.name.clone(),
                organization: org.to_string(),
                repository: repo.to_string(),
                job_type: f.ty.as_str().to_string(),
                branches: f.branches.clone(),
                demand: per_job.get(&f.name).copied().unwrap_or(0.0),
            })
        })
        .collect();
    let options = config
        .dispatcher
        .as_ref()
        .map(Options::from_config)
        .unwrap_or_default();
    Inputs {
        input: PlanInput {
            clusters: inventory.to_cluster_specs(),
            units,
            options,
        },
        repos,
        warnings,
        files: facts
            .iter()
            .map(|f| (f.name.clone(), f.file.clone()))
            .collect(),
    }
}

/// Units under OpenShift's rules: a job's decision makes it pinned (rules
/// 2-5, 10, 11 and candidate rules with one candidate; a pin onto a blocked
/// cluster is a pin onto `default`, see `pin_target`), balanced among
/// candidates (rules 6-9), or relocatable anywhere in the build farm (rules
/// 12-13); relocatable jobs of one file are one unit, and so are all jobs
/// sharing a name. A job OpenShift fails (rules 6 and 12) is unplaceable,
/// with OpenShift's message.
fn openshift_units(
    facts: &[JobFacts],
    config: &OsConfig,
    clusters: &OsClusters,
    inventory: &Inventory,
    per_job: &BTreeMap<String, f64>,
    warnings: &mut Vec<String>,
) -> Vec<UnitSpec> {
    // Where relocatable jobs may go: the build farm's clusters in the
    // inventory, else every schedulable cluster.
    let schedulable: BTreeSet<String> = inventory.schedulable().map(String::from).collect();
    let farm: BTreeSet<String> = config
        .build_farm
        .values()
        .flat_map(|c| c.keys().cloned())
        .filter(|c| schedulable.contains(c))
        .collect();
    let relocatable_to: Vec<String> = if farm.is_empty() {
        schedulable.iter().cloned().collect()
    } else {
        farm.into_iter().collect()
    };
    // Blocked in `_clusters.yaml` or in bosun's inventory.
    let blocked: BTreeSet<String> = clusters
        .blocked()
        .into_iter()
        .chain(
            inventory
                .clusters()
                .filter(|c| c.blocked)
                .map(|c| c.name.clone()),
        )
        .collect();
    // Each job's class: what it may go to, and why; jobs of one file and
    // class are one unit.
    struct Class {
        key: String,
        eligible: Vec<String>,
        pinned: Option<String>,
        keeps_blocked_pin: bool,
        previous: Option<String>,
        rule: String,
    }
    let mut classes: Vec<(usize, Class)> = Vec::new();
    for (i, f) in facts.iter().enumerate() {
        let mut job = OsJob::new(f.name.clone(), f.file.clone());
        job.agent = f.agent.clone();
        job.labels = f.labels.clone();
        job.cluster_type_env = f.cluster_type.clone();
        job.written_cluster = f.cluster_written.then(|| f.cluster.clone());
        let class = match decide(&job, config, clusters) {
            OsDecision::NotDispatched => continue,
            OsDecision::Fixed { cluster, rule } => {
                let pin = pin_target(&f.name, &cluster, rule, &config.default, &blocked);
                Class {
                    key: format!("job:{}", f.name),
                    eligible: vec![pin.cluster.clone()],
                    pinned: Some(pin.cluster),
                    keeps_blocked_pin: pin.keeps_blocked,
                    // Where OpenShift's rule pins it (moved from there when
                    // that is blocked).
                    previous: Some(cluster),
                    rule: pin.rule,
                }
            }
            OsDecision::Candidates {
                clusters: candidates,
                rule,
                openshift,
            } => {
                let eligible: Vec<String> = candidates
                    .into_iter()
                    .filter(|c| schedulable.contains(c))
                    .collect();
                Class {
                    key: format!("{}#{}", f.file, eligible.join(",")),
                    previous: job.written_cluster.clone(),
                    rule: format!(
                        "openshift rule {rule}: balanced among {} (OpenShift would pick {openshift})",
                        eligible.join(", ")
                    ),
                    eligible,
                    pinned: None,
                    keeps_blocked_pin: false,
                }
            }
            OsDecision::Relocatable { previous, rule, .. } => Class {
                key: f.file.clone(),
                eligible: relocatable_to.clone(),
                pinned: None,
                keeps_blocked_pin: false,
                previous: previous.or_else(|| job.written_cluster.clone()),
                rule: format!("openshift rule {rule}: relocatable"),
            },
            OsDecision::Error(message) => {
                warnings.push(format!("job {}: {message}", f.name));
                Class {
                    key: format!("job:{}", f.name),
                    eligible: Vec::new(),
                    pinned: None,
                    keeps_blocked_pin: false,
                    previous: job.written_cluster.clone(),
                    rule: format!("openshift: {message}"),
                }
            }
        };
        classes.push((i, class));
    }
    // Union by class key and by job name: jobs sharing a name are one unit.
    let mut parent: Vec<usize> = (0..classes.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut first: HashMap<String, usize> = HashMap::new();
    for (n, (i, class)) in classes.iter().enumerate() {
        for key in [class.key.clone(), format!("name:{}", facts[*i].name)] {
            match first.get(&key) {
                Some(&m) => {
                    let (a, b) = (root(&mut parent, n), root(&mut parent, m));
                    parent[a.max(b)] = a.min(b);
                }
                None => {
                    first.insert(key, n);
                }
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for n in 0..classes.len() {
        let r = root(&mut parent, n);
        groups.entry(r).or_default().push(n);
    }
    let mut units: Vec<UnitSpec> = groups
        .into_values()
        .map(|members| {
            let lead = &classes[members[0]].1;
            // A unit's constraints are its members' together: the
            // intersection of what they may go to; a pin wins.
            let mut eligible: BTreeSet<String> = lead.eligible.iter().cloned().collect();
            let mut pinned: Option<String> = None;
            let mut keeps_blocked_pin = false;
            let mut rules = BTreeSet::new();
            let mut previous: BTreeMap<String, usize> = BTreeMap::new();
            let mut jobs = BTreeSet::new();
            for &n in &members {
                let c = &classes[n].1;
                let set: BTreeSet<String> = c.eligible.iter().cloned().collect();
                eligible = eligible.intersection(&set).cloned().collect();
                if pinned.is_none() && c.pinned.is_some() {
                    pinned = c.pinned.clone();
                    keeps_blocked_pin = c.keeps_blocked_pin;
                }
                rules.insert(c.rule.clone());
                if let Some(p) = &c.previous {
                    *previous.entry(p.clone()).or_default() += 1;
                }
                jobs.insert(facts[classes[n].0].name.clone());
            }
            let jobs: Vec<String> = jobs.into_iter().collect();
            let demand = jobs
                .iter()
                .map(|j| per_job.get(j).copied().unwrap_or(0.0))
                .sum();
            let previous = previous
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                .map(|(c, _)| c);
            UnitSpec {
                id: lead.key.clone(),
                jobs,
                demand,
                eligible: eligible.into_iter().collect(),
                pinned,
                keeps_blocked_pin,
                previous,
                rule: rules.into_iter().collect::<Vec<_>>().join("; "),
            }
        })
        .collect();
    units.sort_by(|a, b| a.id.cmp(&b.id));
    units
}

/// bosun's inventory in the shape OpenShift's rules read (when no
/// `_clusters.yaml` is given).
fn os_clusters(inventory: &Inventory) -> OsClusters {
    OsClusters {
        clusters: inventory
            .clusters()
            .map(|c| {
                let os = OsCluster {
                    name: c.name.clone(),
                    provider: c.provider.clone().unwrap_or_default(),
                    capacity: c.capacity,
                    capabilities: c.capabilities.iter().cloned().collect(),
                    blocked: c.blocked,
                };
                (c.name.clone(), os)
            })
            .collect(),
        warnings: Vec::new(),
    }
}
