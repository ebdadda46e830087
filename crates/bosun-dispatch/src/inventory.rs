//! The cluster inventory: which build clusters the dispatcher may place jobs
//! on, with their capacity (relative weight, default 100), capabilities,
//! provider and whether they are blocked.
//!
//! It comes from `build_clusters` plus the kubeconfig contexts bosun knows
//! (a context without a `build_clusters` entry is a cluster with every
//! default). The implicit local `default` (which exists only when nothing
//! defines `default`) takes part only when no cluster is defined at all:
//! define `default` in `build_clusters` to balance onto it.
//!
//! OpenShift's `_clusters.yaml` (converted to [`ClusterSpec`]s by
//! `crate::openshift`) is the whole inventory when nothing is defined (a
//! standalone dispatcher without `build_clusters`); otherwise it annotates the
//! defined clusters: its capacity, capabilities and provider win, and either
//! side may block a cluster. The names it lists that bosun does not know are
//! returned to be reported; they never fail a load.

use std::collections::BTreeMap;

use bosun_config::types::ProwConfig;

use crate::model::ClusterSpec;

/// The clusters the dispatcher knows, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inventory {
    clusters: BTreeMap<String, ClusterSpec>,
    /// True when the clusters were defined (`build_clusters`, kubeconfig
    /// contexts), false when the inventory is the implicit `default` alone
    /// or came from `_clusters.yaml` alone.
    defined: bool,
}

impl Inventory {
    /// The inventory of `build_clusters` and the kubeconfig contexts (the
    /// implicit local `default` when there are neither).
    pub fn from_config(config: &ProwConfig, kube_contexts: &[String]) -> Inventory {
        let mut clusters = BTreeMap::new();
        for (name, c) in &config.build_clusters {
            let mut capabilities: std::collections::BTreeSet<String> =
                c.capabilities.iter().cloned().collect();
            capabilities.retain(|c| !c.is_empty());
            clusters.insert(
                name.clone(),
                ClusterSpec {
                    name: name.clone(),
                    capacity: c
                        .capacity
                        .map_or(100, |n| n.clamp(0, i64::from(u32::MAX)) as u32),
                    blocked: c.blocked,
                    provider: c.provider.clone().filter(|p| !p.is_empty()),
                    capabilities,
                },
            );
        }
        for name in kube_contexts {
            clusters.entry(name.clone()).or_insert_with(|| ClusterSpec {
                name: name.clone(),
                ..ClusterSpec::default()
            });
        }
        let defined = !clusters.is_empty();
        if !defined {
            clusters.insert(
                "default".to_string(),
                ClusterSpec {
                    name: "default".to_string(),
                    ..ClusterSpec::default()
                },
            );
        }
        Inventory { clusters, defined }
    }

    /// An inventory of exactly these clusters (a later duplicate replaces
    /// an earlier one).
    pub fn from_specs(specs: impl IntoIterator<Item = ClusterSpec>) -> Inventory {
        Inventory {
            clusters: specs.into_iter().map(|c| (c.name.clone(), c)).collect(),
            defined: true,
        }
    }

    /// Applies OpenShift's inventory (`_clusters.yaml`): the whole inventory
    /// when no cluster is defined, else annotations of the defined ones
    /// (capacity, capabilities and provider from `openshift`; blocked when
    /// either says so). Returns the names `openshift` lists that are not
    /// defined, sorted, to be reported.
    pub fn annotate(self, openshift: Vec<ClusterSpec>) -> (Inventory, Vec<String>) {
        if !self.defined {
            if openshift.is_empty() {
                return (self, Vec::new());
            }
            return (Inventory::from_specs(openshift), Vec::new());
        }
        let mut inv = self;
        let mut unknown = Vec::new();
        for o in openshift {
            match inv.clusters.get_mut(&o.name) {
                Some(c) => {
                    c.capacity = o.capacity;
                    c.capabilities = o.capabilities;
                    if o.provider.is_some() {
                        c.provider = o.provider;
                    }
                    c.blocked |= o.blocked;
                }
                None => unknown.push(o.name),
            }
        }
        unknown.sort();
        unknown.dedup();
        (inv, unknown)
    }

    /// The cluster named `name`.
    pub fn get(&self, name: &str) -> Option<&ClusterSpec> {
        self.clusters.get(name)
    }

    /// Every cluster, in name order.
    pub fn clusters(&self) -> impl Iterator<Item = &ClusterSpec> {
        self.clusters.values()
    }

    /// The names of the clusters that are not blocked, sorted.
    pub fn schedulable(&self) -> impl Iterator<Item = &str> {
        self.clusters
            .values()
            .filter(|c| !c.blocked)
            .map(|c| c.name.as_str())
    }

    /// How many clusters there are (blocked ones too).
    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    /// Whether there is no cluster at all.
    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// The planner's view: every cluster (blocked ones too), in name order.
    pub fn to_cluster_specs(&self) -> Vec<ClusterSpec> {
        self.clusters.values().cloned().collect()
    }
}
