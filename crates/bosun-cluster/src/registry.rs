//! Which build clusters exist: `build_clusters` from the config, every context
//! of the kubeconfig files (as in Prow, each context name is an alias), plus an
//! implicit local `default` when nothing defines `default` (DESIGN.md). An
//! alias defined in both places is a configuration error, reported by the
//! loader; here `build_clusters` wins.
//!
//! It only names and describes clusters ([`ClusterDef`]); it starts no
//! executor and knows nothing of runs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::kube::DEFAULT_CREATIONS_IN_FLIGHT;
use bosun_config::types::{ClusterKind, ProwConfig};

/// How a cluster runs jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterDef {
    /// Processes on this machine, at most `slots` at once (0: unlimited).
    Local {
        /// Concurrent runs.
        slots: usize,
    },
    /// A Kubernetes cluster (its executor comes with the Kubernetes work).
    Kubernetes {
        /// The kubeconfig context.
        context: String,
        /// The kubeconfig file that defines it (none: the default one).
        kubeconfig: Option<PathBuf>,
        /// Runs at once (`max_concurrency`; 0: unlimited).
        slots: usize,
        /// Creations in flight at once (`creations_in_flight`; 0:
        /// unlimited).
        creations: usize,
    },
}

/// A context of a kubeconfig file: a cluster alias.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeContext {
    /// The context's name, which is the alias.
    pub name: String,
    /// The file.
    pub file: PathBuf,
}

/// The clusters of a configuration and its kubeconfig contexts, by alias.
/// `cpus` is the default slot count of a local cluster.
pub fn clusters(
    config: &ProwConfig,
    kube: &[KubeContext],
    cpus: usize,
) -> BTreeMap<String, ClusterDef> {
    let mut out: BTreeMap<String, ClusterDef> = config
        .build_clusters
        .iter()
        .map(|(alias, c)| {
            let def = match c.kind {
                ClusterKind::Local => ClusterDef::Local {
                    slots: c.max_concurrency.map_or(cpus, |m| m.max(0) as usize),
                },
                ClusterKind::Kubernetes => ClusterDef::Kubernetes {
                    context: c.context.clone().unwrap_or_else(|| alias.clone()),
                    kubeconfig: c.kubeconfig.as_ref().map(PathBuf::from),
                    slots: c.max_concurrency.map_or(0, |m| m.max(0) as usize),
                    creations: c
                        .creations_in_flight
                        .map_or(DEFAULT_CREATIONS_IN_FLIGHT, |m| m.max(0) as usize),
                },
            };
            (alias.clone(), def)
        })
        .collect();
    for k in kube {
        out.entry(k.name.clone())
            .or_insert_with(|| ClusterDef::Kubernetes {
                context: k.name.clone(),
                kubeconfig: Some(k.file.clone()),
                slots: 0,
                creations: DEFAULT_CREATIONS_IN_FLIGHT,
            });
    }
    out.entry("default".into())
        .or_insert(ClusterDef::Local { slots: cpus });
    out
}

/// Prow's message for a run whose cluster alias is unknown (the run ends in
/// `error`).
pub fn unknown_cluster(alias: &str) -> String {
    format!("no build client found for cluster {alias:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> ProwConfig {
        let docs = bosun_config::yaml::parse_documents(yaml).unwrap();
        bosun_config::yaml::from_node(&docs[0], &Default::default()).unwrap()
    }

    #[test]
    fn implicit_default_and_slots() {
        let c = clusters(&bosun_config::load::default_config(), &[], 4);
        assert_eq!(
            c.into_iter().collect::<Vec<_>>(),
            vec![("default".to_string(), ClusterDef::Local { slots: 4 })]
        );
        let c = clusters(
            &config("build_clusters:\n  big: {max_concurrency: 8}\n  k: {kind: kubernetes}\n"),
            &[KubeContext {
                name: "build02".into(),
                file: "/etc/kube/a".into(),
            }],
            2,
        );
        assert_eq!(c["big"], ClusterDef::Local { slots: 8 });
        assert_eq!(
            c["k"],
            ClusterDef::Kubernetes {
                context: "k".into(),
                kubeconfig: None,
                slots: 0,
                creations: DEFAULT_CREATIONS_IN_FLIGHT,
            }
        );
        assert_eq!(
            c["build02"],
            ClusterDef::Kubernetes {
                context: "build02".into(),
                kubeconfig: Some("/etc/kube/a".into()),
                slots: 0,
                creations: DEFAULT_CREATIONS_IN_FLIGHT,
            }
        );
        assert_eq!(c["default"], ClusterDef::Local { slots: 2 });
        // A configured default replaces the implicit one.
        let c = clusters(
            &config("build_clusters:\n  default: {kind: kubernetes, context: prod, creations_in_flight: 4}\n"),
            &[],
            2,
        );
        assert_eq!(
            c["default"],
            ClusterDef::Kubernetes {
                context: "prod".into(),
                kubeconfig: None,
                slots: 0,
                creations: 4,
            }
        );
        // A kubeconfig context named default replaces the implicit one too.
        let c = clusters(
            &bosun_config::load::default_config(),
            &[KubeContext {
                name: "default".into(),
                file: "/k".into(),
            }],
            2,
        );
        assert!(matches!(c["default"], ClusterDef::Kubernetes { .. }));
        assert_eq!(
            unknown_cluster("nope"),
            "no build client found for cluster \"nope\""
        );
    }
}
