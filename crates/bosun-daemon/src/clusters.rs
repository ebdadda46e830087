//! The build clusters in force: their definitions, their executors, the
//! users local clusters run jobs as, and their health as the probes last
//! found it. Local clusters are always `Reachable`; clusters in
//! `disabled_clusters` are `Disabled`. This module knows nothing of the
//! daemon around it (the probing task is `health`).

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use bosun_cluster::executor::Executor;
use bosun_cluster::kube::{Health, PodSettings, Tracker};
use bosun_cluster::registry::ClusterDef;
use bosun_cluster::shim::{RunAs, RunAsError};
use bosun_config::types::ProwConfig;
use bosun_config::Snapshot;

/// Makes the executor of a cluster, given its alias, definition, user (local
/// clusters) and pod settings (Kubernetes clusters); none when it cannot.
pub type ExecutorFactory = Box<
    dyn Fn(&str, &ClusterDef, Option<RunAs>, &PodSettings) -> Option<Arc<dyn Executor>>
        + Send
        + Sync,
>;

/// The build clusters in force and their executors.
pub struct Clusters {
    /// Clusters by alias.
    pub defs: BTreeMap<String, ClusterDef>,
    /// The users local clusters run jobs as.
    pub users: HashMap<String, RunAs>,
    /// Where Kubernetes clusters create pods, and their timeouts.
    pub pods: PodSettings,
    /// Executors by alias.
    pub executors: HashMap<String, Arc<dyn Executor>>,
}

impl Clusters {
    /// The clusters `defs`, each with its executor: the one of `previous`
    /// when the cluster is unchanged (its runs go on), else a new one.
    pub fn build(
        defs: BTreeMap<String, ClusterDef>,
        users: HashMap<String, RunAs>,
        pods: PodSettings,
        make: &ExecutorFactory,
        previous: Option<&Clusters>,
    ) -> Clusters {
        let executors = defs
            .iter()
            .filter_map(|(alias, def)| {
                let user = users.get(alias).copied();
                let kept = previous
                    .filter(|p| match def {
                        ClusterDef::Local { .. } => p.users.get(alias).copied() == user,
                        ClusterDef::Kubernetes { .. } => {
                            p.defs.get(alias) == Some(def) && p.pods == pods
                        }
                    })
                    .and_then(|p| p.executors.get(alias).cloned());
                let exec = kept.or_else(|| make(alias, def, user, &pods))?;
                Some((alias.clone(), exec))
            })
            .collect();
        Clusters {
            defs,
            users,
            pods,
            executors,
        }
    }
}

/// The health trackers of the Kubernetes clusters in force.
#[derive(Default)]
pub struct HealthBook {
    /// By alias.
    pub trackers: HashMap<String, Tracker>,
}

/// A cluster's health now, in the configuration `snapshot`.
pub fn health_of(book: &HealthBook, snapshot: &Snapshot, alias: &str, def: &ClusterDef) -> Health {
    if snapshot.config.disabled_clusters.iter().any(|c| c == alias) {
        return Health::Disabled;
    }
    match def {
        ClusterDef::Local { .. } => Health::Reachable,
        ClusterDef::Kubernetes { .. } => book.trackers.get(alias).map_or_else(
            || Tracker::default().health().clone(),
            |t| t.health().clone(),
        ),
    }
}

/// Why the local clusters cannot run jobs as configured.
#[derive(Debug, thiserror::Error)]
pub enum LocalUsersError {
    /// A `run_as` that does not resolve.
    #[error("build_clusters.{alias}.{source}")]
    RunAs {
        /// The cluster.
        alias: String,
        /// Why.
        source: RunAsError,
    },
    /// Trusted clusters, a root daemon, and local clusters without `run_as`.
    #[error("trusted clusters are configured and bosun runs as root, so local jobs could read its credentials: set build_clusters.<alias>.run_as (a user, or `unprivileged`: nobody) for the local cluster(s) {} (an implicit default cluster must be defined to set it)", .0.join(", "))]
    Unprotected(Vec<String>),
    /// A `run_as` naming another user, and bosun not root (it cannot switch
    /// users).
    #[error("build_clusters.{alias}.run_as: {spec:?} is another user, and bosun runs as uid {euid}, not root, so it cannot run jobs as that user: run bosun as root, or set run_as: unprivileged (jobs then run as bosun's own user), or remove run_as")]
    NotRoot {
        /// The cluster.
        alias: String,
        /// Its `run_as`.
        spec: String,
        /// The user bosun runs as.
        euid: u32,
    },
    /// A `run_as` user that cannot reach its cluster's run directory.
    #[error("build_clusters.{alias}.run_as: user {spec:?} (uid {uid}, gid {gid}) cannot reach the run directory {dir}: {blocked} (mode {mode:o}, owner {owner}:{group}) is not searchable by it, so every job of cluster {alias} would fail to start; give it search permission (e.g. chmod o+x {blocked}) or choose a --data-dir it can reach")]
    Unreachable {
        /// The cluster.
        alias: String,
        /// Its `run_as`.
        spec: String,
        /// The user's uid.
        uid: u32,
        /// The user's gid.
        gid: u32,
        /// The cluster's run directory.
        dir: String,
        /// The directory above it the user cannot search.
        blocked: String,
        /// That directory's permission bits.
        mode: u32,
        /// Its owner.
        owner: u32,
        /// Its group.
        group: u32,
    },
    /// The run directory's path cannot be made absolute.
    #[error("{path}: {source}")]
    Path {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// The `run_as` word for "never as root": as [`NOBODY`] when bosun runs as
/// root, as bosun's own user otherwise.
pub const UNPRIVILEGED: &str = "unprivileged";

/// The user `run_as: unprivileged` names when bosun runs as root: `nobody`,
/// which every Debian and most systems have (65534 when `/etc/passwd` lacks
/// it).
pub const NOBODY: &str = "nobody";

/// The user each local cluster runs its jobs as (`build_clusters.<alias>.run_as`).
/// Local jobs could read the daemon's kubeconfigs, so when trusted clusters are
/// configured and bosun runs as root, every local cluster must set one.
pub fn local_users(
    config: &ProwConfig,
    clusters: &BTreeMap<String, ClusterDef>,
) -> Result<HashMap<String, RunAs>, LocalUsersError> {
    local_users_as(config, clusters, rustix::process::geteuid().as_raw())
}

/// [`local_users`] for a daemon running as `euid`.
fn local_users_as(
    config: &ProwConfig,
    clusters: &BTreeMap<String, ClusterDef>,
    euid: u32,
) -> Result<HashMap<String, RunAs>, LocalUsersError> {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let root = euid == 0;
    let mut users = HashMap::new();
    let mut protected = Vec::new();
    for (alias, c) in &config.build_clusters {
        let Some(spec) = &c.run_as else { continue };
        protected.push(alias.clone());
        let user = if spec == UNPRIVILEGED {
            if !root {
                // Already unprivileged: jobs run as bosun's own user.
                continue;
            }
            RunAs::resolve(NOBODY, &passwd).unwrap_or(RunAs {
                uid: 65534,
                gid: 65534,
            })
        } else {
            RunAs::resolve(spec, &passwd).map_err(|source| LocalUsersError::RunAs {
                alias: alias.clone(),
                source,
            })?
        };
        if !root && user.uid != euid {
            return Err(LocalUsersError::NotRoot {
                alias: alias.clone(),
                spec: spec.clone(),
                euid,
            });
        }
        users.insert(alias.clone(), user);
    }
    let trusted = config.build_clusters.values().any(|c| c.trusted.is_some());
    if trusted && root {
        let missing: Vec<String> = clusters
            .iter()
            .filter(|(a, c)| matches!(c, ClusterDef::Local { .. }) && !protected.contains(*a))
            .map(|(a, _)| a.clone())
            .collect();
        if !missing.is_empty() {
            return Err(LocalUsersError::Unprotected(missing));
        }
    }
    Ok(users)
}

/// Checks that each local cluster's `run_as` user can reach its run
/// directory, `runs/<alias>`: every directory above it that exists must be
/// searchable by the user's uid and gid (a job runs with those alone, no
/// supplementary groups). Otherwise every job of the cluster would fail to
/// start ("Permission denied"); the error names the directory, its mode
/// and owner, the cluster and the user.
pub fn check_run_dirs(
    runs: &Path,
    config: &ProwConfig,
    users: &HashMap<String, RunAs>,
) -> Result<(), LocalUsersError> {
    let runs = std::path::absolute(runs).map_err(|source| LocalUsersError::Path {
        path: runs.display().to_string(),
        source,
    })?;
    for (alias, user) in users {
        if user.uid == 0 {
            continue;
        }
        let dir = runs.join(alias);
        let mut above: Vec<&Path> = dir.ancestors().skip(1).collect();
        above.reverse();
        for d in above {
            let Ok(meta) = std::fs::metadata(d) else {
                continue;
            };
            let mode = meta.mode();
            if !permits(&meta, *user, 0o1) {
                let spec = config
                    .build_clusters
                    .get(alias)
                    .and_then(|c| c.run_as.as_deref())
                    .unwrap_or_default();
                return Err(LocalUsersError::Unreachable {
                    alias: alias.clone(),
                    spec: spec.to_string(),
                    uid: user.uid,
                    gid: user.gid,
                    dir: dir.display().to_string(),
                    blocked: d.display().to_string(),
                    mode: mode & 0o7777,
                    owner: meta.uid(),
                    group: meta.gid(),
                });
            }
        }
    }
    Ok(())
}

/// Whether `meta`'s mode gives `user` the permission `bits` (`0o1` search
/// or execute, `0o4` read) as owner, group or other (a job runs with its
/// uid and gid alone, no supplementary groups).
fn permits(meta: &std::fs::Metadata, user: RunAs, bits: u32) -> bool {
    let mode = meta.mode();
    let shift = if meta.uid() == user.uid {
        6
    } else if meta.gid() == user.gid {
        3
    } else {
        0
    };
    (mode >> shift) & bits == bits
}

/// Why each local cluster's `run_as` user cannot execute `program` (bosun's
/// own binary, which its decorated and pipeline runs start as that user):
/// a directory above it it cannot search, or the file it cannot execute.
/// Its plain jobs still run, so this is a warning, not a refusal.
pub fn unreachable_program(users: &HashMap<String, RunAs>, program: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut aliases: Vec<&String> = users.keys().collect();
    aliases.sort();
    for alias in aliases {
        let user = users[alias];
        if user.uid == 0 {
            continue;
        }
        let mut steps: Vec<(&Path, u32)> = program.ancestors().skip(1).map(|d| (d, 0o1)).collect();
        steps.reverse();
        steps.push((program, 0o1));
        for (p, bits) in steps {
            let Ok(meta) = std::fs::metadata(p) else {
                continue;
            };
            if !permits(&meta, user, bits) {
                out.push(format!(
                    "build_clusters.{alias}.run_as: user uid {} cannot run {} ({} has mode {:o}, owner {}:{}), so the decorated and pipeline jobs of cluster {alias} will fail to start; install bosun where every user can run it (e.g. /usr/local/bin) or give it that permission",
                    user.uid,
                    program.display(),
                    p.display(),
                    meta.mode() & 0o7777,
                    meta.uid(),
                    meta.gid(),
                ));
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> ProwConfig {
        let docs = bosun_config::yaml::parse_documents(yaml).unwrap();
        bosun_config::yaml::from_node(&docs[0], &Default::default()).unwrap()
    }

    fn local(aliases: &[&str]) -> BTreeMap<String, ClusterDef> {
        aliases
            .iter()
            .map(|a| (a.to_string(), ClusterDef::Local { slots: 1 }))
            .collect()
    }

    #[test]
    fn unprivileged_is_nobody_as_root_and_bosuns_own_user_otherwise() {
        let c = config(
            "build_clusters:\n  a: {kind: local, run_as: unprivileged}\n  t: {kind: local, run_as: unprivileged, trusted: [{jobs: [x]}]}\n",
        );
        let defs = local(&["a", "t"]);
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let nobody = RunAs::resolve(NOBODY, &passwd).unwrap_or(RunAs {
            uid: 65534,
            gid: 65534,
        });
        let as_root = local_users_as(&c, &defs, 0).unwrap();
        assert_eq!(as_root.get("a"), Some(&nobody));
        assert_eq!(as_root.get("t"), Some(&nobody));
        // Not root: no user to switch to, and the trusted rule is met.
        assert!(local_users_as(&c, &defs, 1000).unwrap().is_empty());
    }

    #[test]
    fn another_user_needs_root_and_trusted_clusters_need_every_local_one_protected() {
        let c = config("build_clusters:\n  a: {kind: local, run_as: \"2000:2000\"}\n");
        let defs = local(&["a"]);
        let e = local_users_as(&c, &defs, 1000).unwrap_err().to_string();
        assert!(
            e.contains("build_clusters.a.run_as") && e.contains("unprivileged"),
            "{e}"
        );
        // As itself, it is no switch.
        let own = local_users_as(&c, &defs, 2000).unwrap();
        assert_eq!(
            own.get("a"),
            Some(&RunAs {
                uid: 2000,
                gid: 2000
            })
        );
        let c = config(
            "build_clusters:\n  a: {kind: local, run_as: unprivileged}\n  b: {kind: local}\n  t: {kind: local, run_as: unprivileged, trusted: [{jobs: [x]}]}\n",
        );
        let defs = local(&["a", "b", "t"]);
        let e = local_users_as(&c, &defs, 0).unwrap_err().to_string();
        assert!(e.contains("local cluster(s) b"), "{e}");
        assert!(local_users_as(&c, &defs, 1000).is_ok());
    }

    #[test]
    fn a_program_the_user_cannot_reach_is_named_with_the_directory_in_the_way() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("private");
        std::fs::create_dir(&dir).unwrap();
        let program = dir.join("bosun");
        std::fs::write(&program, "").unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let stranger = RunAs {
            uid: 4242,
            gid: 4242,
        };
        let users: HashMap<String, RunAs> = [("a".to_string(), stranger)].into();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let why = unreachable_program(&users, &program);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(
            why[0].contains(&format!("{} has mode 700", dir.display())),
            "{why:?}"
        );
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(unreachable_program(&users, &program).is_empty());
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o700)).unwrap();
        let why = unreachable_program(&users, &program);
        assert!(
            why[0].contains(&format!("{} has mode 700", program.display())),
            "{why:?}"
        );
    }
}
