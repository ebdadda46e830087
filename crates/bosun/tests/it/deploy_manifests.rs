//! `deploy/`, checked against the real thing where there is one:
//!
//! - every document under `deploy/kubernetes/` parses into its k8s-openapi
//!   type with no key left unread, and a real kube-apiserver
//!   (`bosun-kubetest`) accepts it (`dryRun=All`; namespaces are created);
//! - the HA variant (`bosun-ha.yaml`) runs three replicas on PostgreSQL:
//!   rolled one at a time, a PodDisruptionBudget over its pods, the store's
//!   URL and password from a Secret, no PersistentVolumeClaim;
//! - the build-cluster Roles grant exactly what bosun's health probe asks for
//!   (its own constants: a change there fails here), and bosun's probe, as
//!   the service account those manifests make, finds every verb;
//! - `bosun serve` started with the Deployment's arguments (and, for the HA
//!   variant, its environment, on a real PostgreSQL), on its ConfigMaps and
//!   Secrets laid out as the kubelet mounts them, answers the Deployment's
//!   probes, reaches the build cluster through the RBAC of
//!   `build-cluster-rbac.yaml` and runs the example job there to success;
//! - the Dockerfile's and the systemd unit's command lines are `bosun
//!   serve`'s, and what the Dockerfile copies from the context exists and is
//!   not left out of it. (No container engine runs in bosun's CI, so the
//!   image itself is not built here: see docs/install.md.)

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bosun_cluster::kube::pipelines::PIPELINE_RUN_VERBS;
use bosun_cluster::kube::{Probe, POD_VERBS};
use bosun_config::yaml::{from_node, parse_documents, Node};
use bosun_kubetest::postgres::Postgres;
use bosun_kubetest::ControlPlane;
use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, PersistentVolumeClaim, PodSpec, Secret, Service,
    ServiceAccount, Volume,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::Client;

use crate::common::request;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn deploy(path: &str) -> PathBuf {
    repo().join("deploy").join(path)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `node` as `K`, with every key read (`at` names it in failures).
fn typed<K: serde::de::DeserializeOwned>(node: &Node<'_>, at: &str) -> K {
    let unknown = RefCell::new(Vec::new());
    let object: K = from_node(node, &unknown).unwrap_or_else(|e| {
        panic!(
            "{at}:{}: {e}",
            e.mark.map(|m| m.to_string()).unwrap_or_default()
        )
    });
    let unknown = unknown.into_inner();
    assert!(
        unknown.is_empty(),
        "{at}: keys no field of the type reads: {:?}",
        unknown
            .iter()
            .map(|u| format!("{}:{} {} (in {})", u.mark.line, u.mark.col, u.key, u.owner))
            .collect::<Vec<_>>()
    );
    object
}

/// Creates `object` (a dry run when `pp.dry_run`), as the JSON its type
/// serializes to.
async fn create<K>(client: Client, object: &K, pp: &PostParams) -> Result<(), kube::Error>
where
    K: kube::Resource<DynamicType = ()> + serde::Serialize,
{
    let resource = ApiResource::erase::<K>(&());
    let dynamic: DynamicObject =
        serde_json::from_value(serde_json::to_value(object).unwrap()).unwrap();
    let api: Api<DynamicObject> = match object.meta().namespace.as_deref() {
        Some(ns) => Api::namespaced_with(client, ns, &resource),
        None => Api::all_with(client, &resource),
    };
    api.create(pp, &dynamic).await.map(|_| ())
}

macro_rules! objects {
    ($($kind:ident),* $(,)?) => {
        /// A document of the manifests, as its k8s-openapi type.
        #[derive(Debug, Clone)]
        #[allow(clippy::large_enum_variant)]
        enum Object {
            $($kind($kind)),*
        }

        impl Object {
            fn parse(node: &Node<'_>, at: &str) -> Object {
                let kind = node
                    .get("kind")
                    .and_then(|k| k.as_str())
                    .unwrap_or_else(|| panic!("{at}: a document without kind"));
                match kind {
                    $(stringify!($kind) => Object::$kind(typed(node, at)),)*
                    other => panic!("{at}: kind {other} is not one this test knows: add it"),
                }
            }

            fn meta(&self) -> &ObjectMeta {
                match self {
                    $(Object::$kind(o) => &o.metadata),*
                }
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                match self {
                    $(Object::$kind(o) => &mut o.metadata),*
                }
            }

            fn kind(&self) -> &'static str {
                match self {
                    $(Object::$kind(_) => stringify!($kind)),*
                }
            }

            async fn create(&self, client: Client, dry_run: bool) -> Result<(), kube::Error> {
                let pp = PostParams {
                    dry_run,
                    ..PostParams::default()
                };
                match self {
                    $(Object::$kind(o) => create(client, o, &pp).await),*
                }
            }
        }
    };
}

objects!(
    Namespace,
    ServiceAccount,
    Secret,
    ConfigMap,
    PersistentVolumeClaim,
    Deployment,
    PodDisruptionBudget,
    Service,
    Role,
    RoleBinding,
);

impl Object {
    fn name(&self) -> String {
        self.meta().name.clone().unwrap_or_default()
    }
}

/// The documents of `deploy/kubernetes/FILE`.
fn manifest(file: &str) -> Vec<Object> {
    let path = deploy("kubernetes").join(file);
    let text = read(&path);
    let docs = parse_documents(&text).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
    docs.iter()
        .enumerate()
        .filter(|(_, d)| !d.is_null())
        .map(|(i, d)| Object::parse(d, &format!("{file} (document {})", i + 1)))
        .collect()
}

fn manifest_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(deploy("kubernetes"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
        .collect();
    files.sort();
    files
}

fn find<'a, T>(objects: &'a [Object], pick: impl Fn(&'a Object) -> Option<&'a T>) -> Vec<&'a T> {
    objects.iter().filter_map(pick).collect()
}

fn the_deployment(objects: &[Object]) -> &Deployment {
    let d = find(objects, |o| match o {
        Object::Deployment(d) => Some(d),
        _ => None,
    });
    assert_eq!(d.len(), 1, "one Deployment");
    d[0]
}

fn bosun_container(d: &Deployment) -> &Container {
    let pod = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(pod.containers.len(), 1);
    &pod.containers[0]
}

/// A data key of the ConfigMap `name`.
fn config_map_data<'a>(objects: &'a [Object], name: &str) -> &'a BTreeMap<String, String> {
    objects
        .iter()
        .find_map(|o| match o {
            Object::ConfigMap(c) if c.metadata.name.as_deref() == Some(name) => c.data.as_ref(),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no ConfigMap {name} with data"))
}

fn pod_spec(d: &Deployment) -> &PodSpec {
    d.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

/// The labels of the Deployment's pods.
fn pod_labels(d: &Deployment) -> &BTreeMap<String, String> {
    let template = &d.spec.as_ref().unwrap().template;
    template.metadata.as_ref().unwrap().labels.as_ref().unwrap()
}

/// What every variant's Deployment and Service keep: every document but the
/// Namespace in it, probes on /healthz and /readyz, a non-root pod as the
/// manifest's service account, every volume mounted and defined (but the
/// Secrets `secrets`, made by hand), and the Service on the pods' port.
fn check_deployment_and_service(objects: &[Object], secrets: &[&str]) {
    for o in &objects[1..] {
        assert_eq!(o.meta().namespace.as_deref(), Some("bosun"), "{}", o.name());
    }
    let d = the_deployment(objects);
    let spec = d.spec.as_ref().unwrap();
    let pod = pod_spec(d);
    let c = bosun_container(d);
    let path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
        p.as_ref()
            .and_then(|p| p.http_get.as_ref())
            .and_then(|h| h.path.clone())
    };
    assert_eq!(path(&c.startup_probe).as_deref(), Some("/healthz"));
    assert_eq!(path(&c.liveness_probe).as_deref(), Some("/healthz"));
    assert_eq!(path(&c.readiness_probe).as_deref(), Some("/readyz"));
    let security = pod.security_context.as_ref().unwrap();
    assert_eq!(security.run_as_non_root, Some(true));
    assert!(security.run_as_user.is_some_and(|u| u != 0));
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some(objects[1].name().as_str())
    );
    // The Deployment selects its own pods.
    let selector = spec.selector.match_labels.as_ref().unwrap();
    assert!(
        selector
            .iter()
            .all(|(k, v)| pod_labels(d).get(k) == Some(v)),
        "{selector:?}"
    );
    // Every volume is mounted, every mount has its volume, and what they
    // name is in the manifests (but the Secrets made by hand).
    let volumes = pod.volumes.as_ref().unwrap();
    let mounts = c.volume_mounts.as_ref().unwrap();
    let names: BTreeSet<&str> = volumes.iter().map(|v| v.name.as_str()).collect();
    let mounted: BTreeSet<&str> = mounts.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, mounted);
    let defined =
        |kind: &str, name: &str| objects.iter().any(|o| o.kind() == kind && o.name() == name);
    let mut found = BTreeSet::new();
    for v in volumes {
        if let Some(cm) = &v.config_map {
            assert!(defined("ConfigMap", &cm.name), "{}", cm.name);
        }
        if let Some(pvc) = &v.persistent_volume_claim {
            assert!(defined("PersistentVolumeClaim", &pvc.claim_name));
        }
        if let Some(s) = &v.secret {
            found.insert(s.secret_name.clone().unwrap());
        }
    }
    for e in c.env.iter().flatten() {
        let from = e
            .value_from
            .as_ref()
            .and_then(|f| f.secret_key_ref.as_ref());
        if let Some(s) = from {
            found.insert(s.name.clone());
        }
    }
    assert_eq!(
        found.iter().map(String::as_str).collect::<Vec<_>>(),
        secrets
    );
    // The Service reaches the pods' named port.
    let service = find(objects, |o| match o {
        Object::Service(s) => Some(s),
        _ => None,
    });
    assert_eq!(service.len(), 1, "one Service");
    let service = service[0].spec.as_ref().unwrap();
    assert_eq!(service.selector.as_ref(), Some(pod_labels(d)));
    let target = match &service.ports.as_ref().unwrap()[0].target_port {
        Some(IntOrString::String(s)) => s.clone(),
        other => panic!("{other:?}"),
    };
    assert!(c
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .any(|p| p.name.as_deref() == Some(target.as_str())));
}

#[test]
fn every_manifest_parses_into_its_kubernetes_type() {
    let files = manifest_files();
    assert_eq!(
        files,
        ["bosun-ha.yaml", "bosun.yaml", "build-cluster-rbac.yaml"]
    );
    let bosun = manifest("bosun.yaml");
    let kinds: Vec<&str> = bosun.iter().map(Object::kind).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "PersistentVolumeClaim",
            "ConfigMap",
            "ConfigMap",
            "Deployment",
            "Service"
        ]
    );
    check_deployment_and_service(&bosun, &["bosun-api-token", "bosun-kubeconfigs"]);

    // The Deployment: one replica, replaced (never two writers of the
    // store), its store on the claim.
    let d = the_deployment(&bosun);
    let spec = d.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(
        spec.strategy.as_ref().and_then(|s| s.type_.as_deref()),
        Some("Recreate")
    );
    let data = serve_args(bosun_container(d).args.as_ref().unwrap()).data_dir;
    let volume = data_volume(d, &data);
    assert!(volume.persistent_volume_claim.is_some(), "{volume:?}");

    // The ConfigMaps load without a problem, as `bosun check` loads them.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        &config_map_data(&bosun, "bosun-config")["config.yaml"],
    )
    .unwrap();
    let jobs = dir.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    for (key, text) in config_map_data(&bosun, "bosun-job-config") {
        std::fs::write(jobs.join(key), text).unwrap();
    }
    let loaded = bosun_config::load(
        &bosun_config::LoadOptions {
            config: Some(config),
            job_config: vec![jobs],
            ..bosun_config::LoadOptions::default()
        },
        &bosun_config::OsFiles,
    );
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    let snapshot = loaded.snapshot.unwrap();
    // Test pods go to the namespace the build clusters grant bosun.
    let rbac = manifest("build-cluster-rbac.yaml");
    for o in rbac.iter().filter(|o| o.kind() != "Namespace") {
        assert_eq!(
            o.meta().namespace.as_deref(),
            Some(snapshot.config.pod_namespace.as_str()),
            "{} {}",
            o.kind(),
            o.name()
        );
    }
}

/// The volume the container mounts where `path` is (the mount nearest to
/// it), and the path inside that volume.
fn mounted_at<'a>(d: &'a Deployment, path: &Path) -> (&'a Volume, PathBuf) {
    let mount = bosun_container(d)
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| path.starts_with(&m.mount_path))
        .max_by_key(|m| m.mount_path.len())
        .unwrap_or_else(|| panic!("nothing is mounted at {}", path.display()));
    let volume = pod_spec(d)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .unwrap();
    let inside = path.strip_prefix(&mount.mount_path).unwrap().to_path_buf();
    (volume, inside)
}

/// The volume of the data directory `path` (mounted right there).
fn data_volume<'a>(d: &'a Deployment, path: &Path) -> &'a Volume {
    let (volume, inside) = mounted_at(d, path);
    assert_eq!(inside, Path::new(""), "{} is not a mount", path.display());
    volume
}

/// The environment variable `serve`'s flag `--FLAG` is read from.
fn serve_env(flag: &str) -> String {
    use clap::CommandFactory;
    let cli = Cli::command();
    let serve = cli.find_subcommand("serve").unwrap();
    let arg = serve
        .get_arguments()
        .find(|a| a.get_long() == Some(flag))
        .unwrap_or_else(|| panic!("serve has no --{flag}"));
    arg.get_env()
        .unwrap_or_else(|| panic!("--{flag} is read from no environment variable"))
        .to_string_lossy()
        .into_owned()
}

#[test]
fn the_ha_manifest_runs_three_replicas_on_postgresql() {
    let ha = manifest("bosun-ha.yaml");
    let kinds: Vec<&str> = ha.iter().map(Object::kind).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "ConfigMap",
            "ConfigMap",
            "Role",
            "RoleBinding",
            "Deployment",
            "PodDisruptionBudget",
            "Service"
        ]
    );
    check_deployment_and_service(
        &ha,
        &["bosun-api-token", "bosun-kubeconfigs", "bosun-store"],
    );
    // The same namespace, identity and configuration as bosun.yaml (it
    // replaces it): the same documents, word for word.
    let single = manifest("bosun.yaml");
    let shared = ["Namespace", "ServiceAccount", "ConfigMap"];
    for o in ha.iter().filter(|o| shared.contains(&o.kind())) {
        let same = single
            .iter()
            .find(|s| s.kind() == o.kind() && s.name() == o.name())
            .unwrap_or_else(|| panic!("bosun.yaml has no {} {}", o.kind(), o.name()));
        let json = |o: &Object| {
            match o {
                Object::Namespace(x) => serde_json::to_value(x),
                Object::ServiceAccount(x) => serde_json::to_value(x),
                Object::ConfigMap(x) => serde_json::to_value(x),
                _ => Ok(serde_json::Value::Null),
            }
            .unwrap()
        };
        assert_eq!(json(o), json(same), "{} {}", o.kind(), o.name());
    }

    let d = the_deployment(&ha);
    let spec = d.spec.as_ref().unwrap();
    let pod = pod_spec(d);
    let c = bosun_container(d);
    // Three replicas, rolled one at a time, a new pod ready before the old
    // one goes, with time for the leader to resign.
    assert_eq!(spec.replicas, Some(3));
    let strategy = spec.strategy.as_ref().unwrap();
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
    let rolling = strategy.rolling_update.as_ref().unwrap();
    assert_eq!(rolling.max_surge, Some(IntOrString::Int(1)));
    assert!(
        matches!(rolling.max_unavailable, Some(IntOrString::Int(0 | 1))),
        "{:?}",
        rolling.max_unavailable
    );
    assert!(
        pod.termination_grace_period_seconds
            .is_some_and(|s| s >= 30),
        "{:?}",
        pod.termination_grace_period_seconds
    );
    // Replicas preferably on different nodes.
    let anti = pod
        .affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .expect("a preferred pod anti-affinity");
    assert!(anti.iter().any(|t| {
        t.pod_affinity_term.topology_key == "kubernetes.io/hostname"
            && t.pod_affinity_term
                .label_selector
                .as_ref()
                .and_then(|s| s.match_labels.as_ref())
                .is_some_and(|l| l.iter().all(|(k, v)| pod_labels(d).get(k) == Some(v)))
    }));
    // A PodDisruptionBudget over the Deployment's pods keeps two of three.
    let pdbs = find(&ha, |o| match o {
        Object::PodDisruptionBudget(p) => Some(p),
        _ => None,
    });
    assert_eq!(pdbs.len(), 1);
    let pdb = pdbs[0].spec.as_ref().unwrap();
    let selects = pdb
        .selector
        .as_ref()
        .and_then(|s| s.match_labels.as_ref())
        .expect("the budget selects by labels");
    assert!(!selects.is_empty());
    assert!(
        selects.iter().all(|(k, v)| pod_labels(d).get(k) == Some(v)),
        "{selects:?} does not select {:?}",
        pod_labels(d)
    );
    assert!(
        matches!(
            (&pdb.min_available, &pdb.max_unavailable),
            (Some(IntOrString::Int(2)), None) | (None, Some(IntOrString::Int(1)))
        ),
        "{pdb:?}"
    );
    // The store: its URL in BOSUN_STORE (what --store reads) from a
    // Secret's key, its password a file of a Secret volume, passed with
    // --store-password-file.
    let args = c.args.as_ref().unwrap();
    let serve = serve_args(args);
    assert_eq!(serve.store, None, "the URL is not in the arguments");
    let env = c.env.as_ref().expect("an environment");
    let store = env
        .iter()
        .find(|e| e.name == serve_env("store"))
        .expect("the store's URL in the environment");
    assert_eq!(store.value, None);
    let url = store
        .value_from
        .as_ref()
        .and_then(|f| f.secret_key_ref.as_ref())
        .expect("the store's URL from a Secret");
    assert_eq!(url.optional, None, "the Secret is required");
    let password = serve
        .store_password_file
        .as_deref()
        .expect("--store-password-file");
    let (volume, inside) = mounted_at(d, password);
    let secret = volume.secret.as_ref().expect("the password from a Secret");
    assert_eq!(secret.optional, None, "the Secret is required");
    let key = match &secret.items {
        Some(items) => {
            let item = items
                .iter()
                .find(|i| Path::new(&i.path) == inside)
                .unwrap_or_else(|| panic!("no item of the Secret is {}", inside.display()));
            item.key.clone()
        }
        None => inside.display().to_string(),
    };
    assert_eq!(secret.secret_name.as_deref(), Some(url.name.as_str()));
    assert_ne!(key, url.key, "the password is not the URL");
    // No PersistentVolumeClaim: the data directory is each pod's own.
    assert!(
        !ha.iter().any(|o| o.kind() == "PersistentVolumeClaim"),
        "a PersistentVolumeClaim"
    );
    for v in pod.volumes.iter().flatten() {
        assert!(v.persistent_volume_claim.is_none(), "{v:?}");
        assert!(v.ephemeral.is_none(), "{v:?}");
    }
    let data = data_volume(d, &serve.data_dir);
    assert!(data.empty_dir.is_some(), "{data:?}");
    // The leadership label: the pod's own name and namespace from the
    // downward API, a token, and patch on pods (nothing more) granted to
    // the pods' service account.
    let field = |name: &str| {
        env.iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value_from.as_ref()?.field_ref.as_ref())
            .map(|f| f.field_path.clone())
    };
    assert_eq!(field("POD_NAME").as_deref(), Some("metadata.name"));
    assert_eq!(
        field("POD_NAMESPACE").as_deref(),
        Some("metadata.namespace")
    );
    assert_eq!(pod.automount_service_account_token, Some(true));
    let role = find(&ha, |o| match o {
        Object::Role(r) => Some(r),
        _ => None,
    });
    assert_eq!(role.len(), 1);
    assert_eq!(grants(role[0]), triples("", "pods", &["patch"]));
    let binding = find(&ha, |o| match o {
        Object::RoleBinding(b) => Some(b),
        _ => None,
    });
    assert_eq!(binding.len(), 1);
    assert_eq!(binding[0].role_ref.kind, "Role");
    assert_eq!(
        Some(&binding[0].role_ref.name),
        role[0].metadata.name.as_ref()
    );
    let subjects = binding[0].subjects.as_ref().unwrap();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].kind, "ServiceAccount");
    assert_eq!(Some(&subjects[0].name), pod.service_account_name.as_ref());
    assert_eq!(subjects[0].namespace.as_deref(), Some("bosun"));
}

/// `(api group, resource, verb)` of every rule of `role`.
fn grants(role: &Role) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for rule in role.rules.iter().flatten() {
        assert!(rule.resource_names.is_none(), "{rule:?}");
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    out.insert((group.clone(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    out
}

fn triples(group: &str, resource: &str, verbs: &[&str]) -> BTreeSet<(String, String, String)> {
    verbs
        .iter()
        .map(|v| (group.to_string(), resource.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_build_cluster_roles_grant_exactly_what_the_health_probe_asks_for() {
    let rbac = manifest("build-cluster-rbac.yaml");
    let roles: BTreeMap<String, &Role> = rbac
        .iter()
        .filter_map(|o| match o {
            Object::Role(r) => Some((o.name(), r)),
            _ => None,
        })
        .collect();
    let pods = &triples("", "pods", &POD_VERBS) | &triples("", "pods/log", &["get"]);
    let pipelines = triples("tekton.dev", "pipelineruns", &PIPELINE_RUN_VERBS);
    assert_eq!(
        roles.keys().map(String::as_str).collect::<Vec<_>>(),
        ["bosun", "bosun-pipelines"]
    );
    assert_eq!(grants(roles["bosun"]), pods);
    assert_eq!(grants(roles["bosun-pipelines"]), pipelines);
    // Each Role is bound to the service account the manifests make.
    let account = rbac
        .iter()
        .find(|o| o.kind() == "ServiceAccount")
        .unwrap()
        .name();
    let bound: BTreeSet<String> = rbac
        .iter()
        .filter_map(|o| match o {
            Object::RoleBinding(b) => Some(b),
            _ => None,
        })
        .map(|b| {
            assert_eq!(b.role_ref.kind, "Role");
            let subjects = b.subjects.as_ref().unwrap();
            assert_eq!(subjects.len(), 1);
            assert_eq!(subjects[0].kind, "ServiceAccount");
            assert_eq!(subjects[0].name, account);
            assert_eq!(subjects[0].namespace, b.metadata.namespace);
            b.role_ref.name.clone()
        })
        .collect();
    assert_eq!(bound, roles.keys().cloned().collect());
}

/// One runtime for the binary's API calls: the admin client is shared by
/// the tests, and a connection it opens lives on the runtime that opened
/// it (a runtime dropped after one call would take the connection along).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    })
}

/// Creates the namespace `name` for real (an existing one is fine).
async fn ensure_namespace(client: Client, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    match create(client, &ns, &PostParams::default()).await {
        Ok(()) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("namespace {name}: {e}"),
    }
}

#[test]
fn the_api_server_accepts_every_manifest() {
    let plane = ControlPlane::shared();
    let rt = runtime();
    let mut refused = Vec::new();
    for file in manifest_files() {
        let objects = manifest(&file);
        rt.block_on(async {
            for o in &objects {
                if o.kind() == "Namespace" {
                    ensure_namespace(plane.admin(), &o.name()).await;
                    continue;
                }
                if let Err(e) = o.create(plane.admin(), true).await {
                    refused.push(format!("{file}: {} {}: {e}", o.kind(), o.name()));
                }
            }
        });
    }
    assert!(refused.is_empty(), "{refused:#?}");
}

/// Applies `build-cluster-rbac.yaml` for real in `namespace` (its own
/// namespace, the pod namespace, replaced); returns a kubeconfig whose
/// context `context` is its service account (a token from TokenRequest: no
/// token controller runs to fill the Secret in).
fn build_cluster(plane: &ControlPlane, namespace: &str, context: &str, dir: &Path) -> PathBuf {
    as_the_service_account(
        plane,
        manifest("build-cluster-rbac.yaml"),
        namespace,
        context,
        dir,
    )
}

/// Applies `objects` (one ServiceAccount and what it is granted) for real
/// in `namespace` (theirs replaced); a kubeconfig whose context `context`
/// is that service account.
fn as_the_service_account(
    plane: &ControlPlane,
    mut objects: Vec<Object>,
    namespace: &str,
    context: &str,
    dir: &Path,
) -> PathBuf {
    let account = objects
        .iter()
        .find(|o| o.kind() == "ServiceAccount")
        .unwrap()
        .name();
    for o in &mut objects {
        if o.meta().namespace.is_some() {
            o.meta_mut().namespace = Some(namespace.into());
        }
        if let Object::RoleBinding(b) = o {
            for s in b.subjects.iter_mut().flatten() {
                s.namespace = Some(namespace.into());
            }
        }
    }
    let token = runtime().block_on(async {
        ensure_namespace(plane.admin(), namespace).await;
        // The namespace's `default` service account, which pods get (the
        // service-account controller would make it; none runs here).
        let default = ServiceAccount {
            metadata: ObjectMeta {
                name: Some("default".into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            ..ServiceAccount::default()
        };
        match create(plane.admin(), &default, &PostParams::default()).await {
            Ok(()) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("service account {namespace}/default: {e}"),
        }
        for o in objects.iter().filter(|o| o.kind() != "Namespace") {
            match o.create(plane.admin(), false).await {
                Ok(()) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => panic!("{} {}: {e}", o.kind(), o.name()),
            }
        }
        let accounts: Api<ServiceAccount> = Api::namespaced(plane.admin(), namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![],
                expiration_seconds: Some(3600),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let answer: TokenRequest = accounts
            .create_subresource("token", &account, &PostParams::default(), &request)
            .await
            .unwrap();
        answer.status.unwrap().token
    });
    let path = dir.join(format!("{context}.kubeconfig"));
    std::fs::write(
        &path,
        bosun_kubetest::kubeconfig::kubeconfig(
            context,
            &plane.url(),
            plane.ca_pem(),
            serde_json::json!({ "token": token }),
            namespace,
        ),
    )
    .unwrap();
    path
}

fn probe(kubeconfig: &Path, context: &str, namespace: &str, pipelines: bool) -> Probe {
    runtime().block_on(async {
        let client = bosun_cluster::kube::client(Some(kubeconfig), context)
            .await
            .unwrap();
        bosun_cluster::kube::probe_with_pipelines(&client, namespace, pipelines).await
    })
}

/// Waits (RBAC's cache follows deletions within moments) for the probe's
/// answer to be `want`.
fn wait_probe(kubeconfig: &Path, ns: &str, pipelines: bool, want: &Probe) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = probe(kubeconfig, "build01", ns, pipelines);
        if &got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{got:?}, not {want:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn bosuns_health_probe_finds_every_verb_it_needs_as_the_manifests_service_account() {
    let plane = ControlPlane::shared();
    let dir = tempfile::tempdir().unwrap();
    let ns = "rbac-probe";
    let kubeconfig = build_cluster(plane, ns, "build01", dir.path());
    assert_eq!(probe(&kubeconfig, "build01", ns, true), Probe::Allowed);
    // The pipeline verbs come from their own Role alone.
    let delete = |name: &str| {
        runtime().block_on(async {
            let api: Api<RoleBinding> = Api::namespaced(plane.admin(), ns);
            api.delete(name, &DeleteParams::default()).await.unwrap();
        })
    };
    delete("bosun-pipelines");
    let pipeline_verbs: Vec<String> = PIPELINE_RUN_VERBS
        .iter()
        .map(|v| format!("{v} pipelineruns.tekton.dev"))
        .collect();
    wait_probe(&kubeconfig, ns, true, &Probe::Denied(pipeline_verbs));
    assert_eq!(probe(&kubeconfig, "build01", ns, false), Probe::Allowed);
    // And the pod verbs from the other.
    delete("bosun");
    let pod_verbs: Vec<String> = POD_VERBS
        .iter()
        .map(|v| format!("{v} pods"))
        .chain(["get pods/log".to_string()])
        .collect();
    wait_probe(&kubeconfig, ns, false, &Probe::Denied(pod_verbs));
}

/// A `bosun serve` of a test, killed when dropped (its log shown if the
/// test failed).
struct Daemon {
    child: std::process::Child,
    log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- bosun serve's log ---\n{}", read(&self.log));
        }
    }
}

/// The port of a daemon logging JSON, from its `bosun serving` line.
fn json_logged_port(daemon: &mut Daemon) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = std::fs::read_to_string(&daemon.log).unwrap_or_default();
        // Whole lines only: the daemon may be writing the last one.
        for line in log.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                panic!("a log line that is not JSON: {line}");
            };
            if v["fields"]["message"] == "bosun serving" {
                let listen = v["fields"]["listen"].as_str().unwrap();
                return listen.rsplit(':').next().unwrap().parse().unwrap();
            }
        }
        if let Some(status) = daemon.child.try_wait().unwrap() {
            panic!("bosun serve exited ({status}) before serving");
        }
        assert!(Instant::now() < deadline, "bosun serve did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes `data` under `dir` as the kubelet lays out a ConfigMap or Secret
/// volume: the files in a timestamped directory, `..data` a link to it, and
/// each key a link through `..data`.
fn kubelet_volume(dir: &Path, data: &BTreeMap<String, String>) {
    let stamp = "..2026_01_01_00_00_00.000000000";
    std::fs::create_dir_all(dir.join(stamp)).unwrap();
    for (key, text) in data {
        std::fs::write(dir.join(stamp).join(key), text).unwrap();
        std::os::unix::fs::symlink(format!("..data/{key}"), dir.join(key)).unwrap();
    }
    std::os::unix::fs::symlink(stamp, dir.join("..data")).unwrap();
}

#[test]
fn bosun_serve_runs_jobs_with_the_deployments_arguments_and_volumes() {
    serve_as_the_deployment("bosun.yaml", "serve-pods", None);
}

#[test]
fn bosun_serve_runs_jobs_with_the_ha_deployments_arguments_environment_and_volumes() {
    // The operator's database: a real PostgreSQL, its URL and password put
    // in the Secret bosun-store as the manifest's comment says.
    let pg = Postgres::shared();
    let with_password = pg.database();
    let db = with_password.rsplit('/').next().unwrap();
    let store = BTreeMap::from([
        ("url".to_string(), pg.url(db)),
        ("password".to_string(), pg.password().to_string()),
    ]);
    serve_as_the_deployment("bosun-ha.yaml", "serve-ha-pods", Some(store));
}

/// The namespace the HA test's `bosun serve` runs in, as if in a pod
/// `SELF_POD` of it.
const SELF_NAMESPACE: &str = "serve-ha-self";
const SELF_POD: &str = "bosun-0";

/// The `bosun.dev/leader` label of the pod `SELF_POD`.
fn self_label(plane: &ControlPlane) -> Option<String> {
    plane
        .kubelet()
        .pod(SELF_NAMESPACE, SELF_POD)?
        .metadata
        .labels?
        .get(bosun_daemon::leader::LEADER_LABEL)
        .cloned()
}

/// `bosun serve` run as the Deployment of `file` runs it: its arguments and
/// environment, its volumes laid out as the kubelet lays them out, the
/// Secrets filled by the test (`store`: the keys of bosun-store). It answers
/// the probes, reaches the build cluster through the RBAC of
/// build-cluster-rbac.yaml (applied in `pod_namespace`, the test's own) and
/// runs the example job's pod to success there.
fn serve_as_the_deployment(
    file: &str,
    pod_namespace: &str,
    store: Option<BTreeMap<String, String>>,
) {
    let plane = ControlPlane::shared();
    let bosun = manifest(file);
    let d = the_deployment(&bosun);
    let c = bosun_container(d);
    let pod = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let root = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();

    // The build cluster: build-cluster-rbac.yaml applied in a pod namespace
    // of this test's own (the manifests' is the other tests' too), which
    // the ConfigMap's config names instead of its own.
    let mut config_maps: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for o in &bosun {
        if let Object::ConfigMap(cm) = o {
            config_maps.insert(o.name(), cm.data.clone().unwrap());
        }
    }
    let config = config_maps
        .get_mut("bosun-config")
        .and_then(|d| d.get_mut("config.yaml"))
        .unwrap();
    let written = "pod_namespace: test-pods\n";
    assert!(config.contains(written), "{config}");
    *config = config.replace(written, &format!("pod_namespace: {pod_namespace}\n"));
    let kubeconfig = build_cluster(plane, pod_namespace, "build01", work.path());
    let token = "a-token-for-the-test";
    // The Secrets made by hand, by name.
    let mut secrets: BTreeMap<&str, BTreeMap<String, String>> = BTreeMap::from([
        ("bosun-api-token", [("token".into(), token.into())].into()),
        (
            "bosun-kubeconfigs",
            [("build01".into(), read(&kubeconfig))].into(),
        ),
    ]);
    let replicated = store.is_some();
    if let Some(store) = store {
        secrets.insert("bosun-store", store);
    }
    // Where a replica runs: its pod, made here (no ReplicaSet runs), and
    // the manifest's service account with its grants applied in that pod's
    // namespace, its token in a kubeconfig (standing in for the mounted
    // token and in-cluster address).
    let mut self_env: Vec<(String, String)> = Vec::new();
    if replicated {
        let granted: Vec<Object> = bosun
            .iter()
            .filter(|o| ["ServiceAccount", "Role", "RoleBinding"].contains(&o.kind()))
            .cloned()
            .collect();
        let kubeconfig =
            as_the_service_account(plane, granted, SELF_NAMESPACE, "self", work.path());
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": SELF_POD, "namespace": SELF_NAMESPACE},
            "spec": {"containers": [{"name": "bosun", "image": "bosun"}]}
        }))
        .unwrap();
        runtime().block_on(async {
            let api: Api<k8s_openapi::api::core::v1::Pod> =
                Api::namespaced(plane.admin(), SELF_NAMESPACE);
            let _ = api
                .delete(SELF_POD, &DeleteParams::default().grace_period(0))
                .await;
            let deadline = Instant::now() + Duration::from_secs(20);
            while let Err(e) = api.create(&PostParams::default(), &pod).await {
                assert!(Instant::now() < deadline, "pod {SELF_POD}: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        assert_eq!(self_label(plane), None);
        self_env.push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
    }
    let field = |path: &str| -> String {
        match path {
            "metadata.name" => SELF_POD.into(),
            "metadata.namespace" => SELF_NAMESPACE.into(),
            other => panic!("a field this test cannot fill: {other}"),
        }
    };
    let secret = |name: Option<&str>| -> &BTreeMap<String, String> {
        name.and_then(|n| secrets.get(n))
            .unwrap_or_else(|| panic!("a Secret this test cannot fill: {name:?}"))
    };

    // Each volume where the container mounts it (under `root`), filled as
    // the kubelet fills it.
    let mut mounts: Vec<(String, PathBuf)> = Vec::new();
    for m in c.volume_mounts.as_ref().unwrap() {
        let local = root.path().join(m.mount_path.trim_start_matches('/'));
        std::fs::create_dir_all(&local).unwrap();
        let v = pod
            .volumes
            .as_ref()
            .unwrap()
            .iter()
            .find(|v| v.name == m.name)
            .unwrap();
        if let Some(cm) = &v.config_map {
            kubelet_volume(&local, &config_maps[&cm.name]);
        } else if let Some(s) = &v.secret {
            let data = secret(s.secret_name.as_deref());
            // `items`: only those keys, each at its path.
            let data: BTreeMap<String, String> = match &s.items {
                None => data.clone(),
                Some(items) => items
                    .iter()
                    .map(|i| (i.path.clone(), data[&i.key].clone()))
                    .collect(),
            };
            kubelet_volume(&local, &data);
        }
        mounts.push((m.mount_path.clone(), local));
    }
    // The container's arguments, with paths under a mount moved to its
    // directory here, and a port of its own (the Deployment's listens on
    // every address at its container port).
    let port = c.ports.as_ref().unwrap()[0].container_port;
    let mut listened = false;
    let args: Vec<String> = c
        .args
        .as_ref()
        .unwrap()
        .iter()
        .map(|a| {
            if a.starts_with("--listen") {
                assert_eq!(a, &format!("--listen=0.0.0.0:{port}"));
                listened = true;
                return "--listen=127.0.0.1:0".to_string();
            }
            for (mount, local) in &mounts {
                if let Some((flag, value)) = a.split_once('=') {
                    if let Some(rest) = value.strip_prefix(mount.as_str()) {
                        return format!("{flag}={}{rest}", local.display());
                    }
                }
            }
            a.clone()
        })
        .collect();
    assert!(listened);
    assert!(c.command.is_none(), "the image's entrypoint runs bosun");
    // The container's environment, its Secrets' keys filled in.
    let env: Vec<(String, String)> = c
        .env
        .iter()
        .flatten()
        .map(|e| {
            let value = match (&e.value, &e.value_from) {
                (Some(v), None) => v.clone(),
                (None, Some(from)) => match (&from.secret_key_ref, &from.field_ref) {
                    (Some(r), None) => secret(Some(&r.name))[&r.key].clone(),
                    (None, Some(f)) => field(&f.field_path),
                    other => panic!("{}: {other:?}", e.name),
                },
                other => panic!("{}: {other:?}", e.name),
            };
            (e.name.clone(), value)
        })
        .collect();
    let log = work.path().join("bosun.log");
    let mut daemon = Daemon {
        child: std::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
            .args(&args)
            .env_remove("KUBECONFIG")
            .env_remove("BOSUN_STORE")
            .env_remove("BOSUN_STORE_PASSWORD_FILE")
            .envs(env)
            .envs(self_env)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
        log,
    };
    let port = json_logged_port(&mut daemon);

    // The probes' paths answer 200 (readiness once every periodic has been
    // evaluated).
    let deadline = Instant::now() + Duration::from_secs(30);
    for probe in [&c.startup_probe, &c.liveness_probe, &c.readiness_probe] {
        let path = probe
            .as_ref()
            .unwrap()
            .http_get
            .as_ref()
            .unwrap()
            .path
            .clone();
        let path = path.unwrap();
        while request(port, "GET", &path, None, None).0 != 200 {
            assert!(Instant::now() < deadline, "{path} never answered 200");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // The build cluster is Reachable with exactly the manifests' verbs; the
    // implicit local cluster is disabled.
    loop {
        let (_, body) = request(port, "GET", "/api/v1/clusters", None, None);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let status = |alias: &str| {
            v["clusters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["alias"] == alias)
                .map(|c| c["status"].clone())
        };
        assert_eq!(status("default"), Some("Disabled".into()), "{v}");
        if status("build01") == Some("Reachable".into()) {
            break;
        }
        assert!(Instant::now() < deadline, "build01 never Reachable: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The API token comes from its Secret.
    let body = r#"{"job": "hello-kubernetes"}"#;
    assert_eq!(
        request(port, "POST", "/api/v1/runs", Some(body), None).0,
        401
    );
    let (status, run) = request(port, "POST", "/api/v1/runs", Some(body), Some(token));
    assert_eq!(status, 201, "{run}");
    let run: serde_json::Value = serde_json::from_str(&run).unwrap();
    let id = run["id"].as_str().unwrap().to_string();
    // Its pod, in the pod namespace of the build cluster, run to success
    // (the test plays the kubelet).
    let kubelet = plane.kubelet();
    let deadline = Instant::now() + Duration::from_secs(30);
    while kubelet.pod(pod_namespace, &id).is_none() {
        assert!(
            Instant::now() < deadline,
            "no pod for run {id}: {}",
            request(port, "GET", &format!("/api/v1/runs/{id}"), None, None).1
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    kubelet.run(pod_namespace, &id);
    kubelet.append_log(pod_namespace, &id, "hello from bosun\n");
    kubelet.succeed(pod_namespace, &id);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, body) = request(port, "GET", &format!("/api/v1/runs/{id}"), None, None);
        let run: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        if run["state"] == "success" {
            break;
        }
        assert!(Instant::now() < deadline, "run {id}: {run}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, log) = request(port, "GET", &format!("/api/v1/runs/{id}/log"), None, None);
    assert!(log.contains("hello from bosun"), "{log:?}");
    // On the database, this replica leads by the store's lease (the only
    // replica: it took the lease at once).
    let (_, leader) = request(port, "GET", "/api/v1/leader", None, None);
    let leader: serde_json::Value = serde_json::from_str(&leader).unwrap();
    let want = if replicated { "postgres" } else { "sqlite" };
    assert_eq!(leader["store"], want, "{leader}");
    assert_eq!(leader["leader"], true, "{leader}");
    assert_eq!(leader["term"].is_i64(), replicated, "{leader}");
    // Its pod says so, patched with the manifest's grants.
    if replicated {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self_label(plane).as_deref() != Some("true") {
            assert!(
                Instant::now() < deadline,
                "the pod's label: {:?}",
                self_label(plane)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

// ---------------------------------------------------------------------------
// The image and the systemd unit

/// `bosun serve`'s command line, as the binary parses it.
#[derive(clap::Parser, Debug)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    Serve(bosun_daemon::serve::ServeArgs),
}

fn serve_args(args: &[String]) -> bosun_daemon::serve::ServeArgs {
    let cli = Cli::try_parse_from(std::iter::once("bosun".to_string()).chain(args.iter().cloned()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let Command::Serve(serve) = cli.command;
    serve
}

/// The Dockerfile's instructions: continuation lines joined, comments and
/// the parser directive dropped.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || (t.is_empty() && current.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(t);
                let (op, rest) = current.split_once(' ').unwrap_or((&current, ""));
                out.push((op.to_uppercase(), rest.trim().to_string()));
                current.clear();
            }
        }
    }
    out
}

/// Whether the `.dockerignore` patterns leave `path` out of the context
/// (the last matching pattern wins; `*`, `**/NAME`, paths and their
/// directories: what deploy/Dockerfile.dockerignore uses).
fn ignored(patterns: &[String], path: &str) -> bool {
    let mut out = false;
    for p in patterns {
        let (negated, p) = match p.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, p.as_str()),
        };
        let matches = if p == "*" {
            true
        } else if let Some(name) = p.strip_prefix("**/") {
            path.split('/').any(|c| c == name)
        } else {
            path == p || path.starts_with(&format!("{p}/"))
        };
        if matches {
            out = !negated;
        }
    }
    out
}

#[test]
fn the_dockerfile_builds_bosun_for_the_manifests() {
    let text = read(&deploy("Dockerfile"));
    let steps = instructions(&text);
    let patterns: Vec<String> = read(&deploy("Dockerfile.dockerignore"))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    // Multi-stage: a build stage and the image.
    let stages: Vec<usize> = steps
        .iter()
        .enumerate()
        .filter(|(_, (op, _))| op == "FROM")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(stages.len(), 2, "{steps:?}");
    let (build, image) = steps.split_at(stages[1]);
    assert!(build[stages[0]].1.ends_with(" AS build"), "{:?}", build[0]);
    // The build's Rust is at least the workspace's rust-version.
    let workspace = read(&repo().join("Cargo.toml"));
    let needed = workspace
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .unwrap()
        .trim_matches('"');
    let rust = steps
        .iter()
        .find_map(|(op, rest)| (op == "ARG").then(|| rest.strip_prefix("RUST_VERSION="))?)
        .unwrap();
    let version = |v: &str| -> Vec<u32> { v.split('.').map(|n| n.parse().unwrap()).collect() };
    assert!(version(rust) >= version(needed), "{rust} < {needed}");
    // What the build copies from the context exists and is in the context.
    for (op, rest) in build.iter().filter(|(op, _)| op == "COPY") {
        let words: Vec<&str> = rest.split_whitespace().collect();
        assert!(!words[0].starts_with("--from"), "{op} {rest}");
        for source in &words[..words.len() - 1] {
            assert!(
                repo().join(source).exists(),
                "COPY {source}: not in the repository"
            );
            assert!(
                !ignored(&patterns, source),
                "COPY {source}: left out of the context"
            );
        }
    }
    for unwanted in [
        "target",
        "crates/bosun/target",
        ".git",
        "bosun-data",
        "docs",
    ] {
        assert!(
            ignored(&patterns, unwanted),
            "{unwanted} is sent to the build"
        );
    }
    // The image: git and make installed, the binary from the build stage,
    // a non-root user (the Deployment's), tini running bosun.
    let run = image
        .iter()
        .filter(|(op, _)| op == "RUN")
        .map(|(_, r)| r.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let install = run
        .split("apt-get install")
        .nth(1)
        .unwrap()
        .split("&&")
        .next()
        .unwrap();
    for package in ["git", "make", "ca-certificates", "tini"] {
        assert!(
            install.split_whitespace().any(|w| w == package),
            "{package} is not installed: {install}"
        );
    }
    let copied = image
        .iter()
        .find_map(|(op, rest)| (op == "COPY").then(|| rest.strip_prefix("--from=build "))?)
        .unwrap();
    let (from, to) = copied.split_once(' ').unwrap();
    assert!(
        build
            .iter()
            .any(|(op, rest)| op == "RUN" && rest.contains(from)),
        "{from} is not made by the build stage"
    );
    let user = image
        .iter()
        .rev()
        .find_map(|(op, rest)| (op == "USER").then_some(rest))
        .unwrap();
    let (uid, gid) = user.split_once(':').unwrap();
    let bosun = manifest("bosun.yaml");
    let pod_security = the_deployment(&bosun)
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .security_context
        .clone()
        .unwrap();
    assert_eq!(Some(uid.parse::<i64>().unwrap()), pod_security.run_as_user);
    assert_eq!(Some(gid.parse::<i64>().unwrap()), pod_security.run_as_group);
    assert_ne!(uid, "0");
    let json_list = |op: &str| -> Vec<String> {
        let (_, rest) = image.iter().rev().find(|(o, _)| o == op).unwrap();
        serde_json::from_str(rest).unwrap_or_else(|e| panic!("{op} {rest}: {e}"))
    };
    let entrypoint = json_list("ENTRYPOINT");
    assert_eq!(entrypoint.last().map(String::as_str), Some(to.trim()));
    assert_eq!(entrypoint[0], "/usr/bin/tini");
    // The default command is `bosun serve` on the paths the Deployment
    // mounts, with a token.
    let serve = serve_args(&json_list("CMD"));
    assert_eq!(serve.data_dir, Path::new("/var/lib/bosun"));
    assert!(serve.api_token_file.is_some());
    let deployment = serve_args(
        bosun_container(the_deployment(&bosun))
            .args
            .as_ref()
            .unwrap(),
    );
    assert_eq!(serve.config.config, deployment.config.config);
    assert_eq!(serve.config.job_config, deployment.config.job_config);
    assert_eq!(serve.api_token_file, deployment.api_token_file);
    assert_eq!(serve.data_dir, deployment.data_dir);
    assert_eq!(serve.listen, deployment.listen);
}

#[test]
fn the_systemd_unit_runs_bosun_serve_as_its_own_user() {
    let text = read(&deploy("systemd/bosun.service"));
    let mut settings: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || t.starts_with('[') || (t.is_empty() && current.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(t);
                let (k, v) = current.split_once('=').unwrap();
                settings
                    .entry(k.trim().to_string())
                    .or_default()
                    .push(v.trim().to_string());
                current.clear();
            }
        }
    }
    let one = |key: &str| -> &str {
        let v = settings
            .get(key)
            .unwrap_or_else(|| panic!("no {key}= in the unit"));
        assert_eq!(v.len(), 1, "{key}");
        &v[0]
    };
    // A dedicated user, never root; its state directory is bosun's data
    // directory; the token comes through systemd's credentials.
    assert_eq!(one("User"), "bosun");
    let (credential, source) = one("LoadCredential").split_once(':').unwrap();
    assert!(source.starts_with("/etc/bosun/"));
    let exec: Vec<String> = one("ExecStart")
        .split_whitespace()
        .map(|w| w.replace("%d", "/run/credentials/bosun.service"))
        .collect();
    assert_eq!(exec[0], "/usr/local/bin/bosun");
    let serve = serve_args(&exec[1..]);
    assert_eq!(
        serve.data_dir,
        Path::new("/var/lib").join(one("StateDirectory"))
    );
    assert_eq!(
        serve.api_token_file.as_deref(),
        Some(
            Path::new("/run/credentials/bosun.service")
                .join(credential)
                .as_path()
        )
    );
    assert!(serve.listen.ip().is_loopback());
    // Local runs outlive a restart under their supervisor.
    assert_eq!(one("KillMode"), "process");
    for (key, value) in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("CapabilityBoundingSet", ""),
    ] {
        assert_eq!(one(key), value, "{key}");
    }
}
