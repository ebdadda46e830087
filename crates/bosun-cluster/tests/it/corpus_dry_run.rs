//! The whole test-infra corpus against a real kube-apiserver: for each of
//! the 3,849 jobs of `../shared/corpus/test-infra` (Prow's own job
//! configuration: 1335 periodics, 2261 presubmits, 253 postsubmits), the pod
//! bosun would create for a run of it (`pod_for_run` on a run made by the
//! store's template, as the daemon makes runs) is created with `dryRun=All`
//! by bosun's service account, on the real kube-apiserver of
//! `bosun-kubetest`. The server validates and admits it (its default
//! admission plugins: ServiceAccount, Priority, RuntimeClass, ...) and stores
//! nothing. Any refusal fails the test, and the message lists every refused
//! job (file, kind, name) with the server's answer.
//!
//! Every corpus job is decorated: its run carries its decoration config as
//! bosun-config resolves it (the job's own over the matching
//! `plank.default_decoration_config_entries` of the corpus's `config.yaml`,
//! `Snapshot::decoration_config` / `periodic_decoration`), and its pod has
//! Prow's pod utilities (clonerefs, initupload, place-entrypoint, sidecar,
//! entrypoint in every test container, their volumes). The secrets those
//! volumes name (`service-account`, ...) do not exist in the namespace: the
//! API server admits a pod without them (the kubelet waits for them), as
//! this test shows.
//!
//! What stands in for what:
//! - a presubmit's run gets plausible refs (its repository, a branch it runs
//!   on, a pull request, SHAs), a postsubmit's the same without the pull;
//!   the store's run template completes them from the job as Prow's
//!   `completePrimaryRefs` does (`path_alias`, `clone_uri`, ...). A
//!   periodic's run is made as the daemon makes it (no refs, its
//!   `extra_refs`);
//! - each pre/postsubmit run carries its job's status context (the
//!   `prow.k8s.io/context` annotation a ProwJob has; bosun's run template
//!   does not record it yet, see `kube/pod.rs`), so the context labels are
//!   checked by the server too;
//! - a real build cluster has the service accounts, priority classes and
//!   runtime classes its jobs name: the test creates the ones the corpus's
//!   pods name, as the admin, before the dry run. Nothing else is set up or
//!   relaxed.
//!
//! `cargo test -p bosun-cluster --test it corpus_dry_run:: -- --nocapture` prints
//! the summary line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_cluster::kube::pod::pod_for_run;
use bosun_config::types::{JobBase, JobType, Pull, Refs};
use bosun_config::{load, LoadOptions, OsFiles, Snapshot};
use bosun_kubetest::ControlPlane;
use bosun_store::template::{RunTemplate, SpecSnapshot};
use bosun_store::{NewRun, Run};
use futures_util::{stream, StreamExt};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;

/// The corpus's jobs, as `bosun-config` loads them (the other corpus tests
/// assert the same figures).
const PERIODICS: usize = 1335;
const PRESUBMITS: usize = 2261;
const POSTSUBMITS: usize = 253;
/// Requests in flight at once.
const CONCURRENCY: usize = 16;
/// How long one dry-run creation may take before it counts as refused.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
const NAMESPACE: &str = "corpus";

fn corpus() -> PathBuf {
    let beside =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/test-infra/config");
    let root = beside
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from("/work/shared/corpus/test-infra/config"));
    assert!(
        root.join("jobs").is_dir(),
        "the test-infra corpus is not at {} (nor beside the project)",
        root.display()
    );
    root
}

/// One job's pod, or why it could not be built.
struct Item {
    /// The job's file, relative to the corpus.
    file: String,
    kind: JobType,
    job: String,
    pod: Result<Pod, String>,
}

/// A 40-hex SHA made from `seed`.
fn sha(seed: u64) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed_b05a;
    (0..5)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            format!("{:08x}", (x >> 32) as u32)
        })
        .collect()
}

/// A branch the job runs on: its first `branches` entry that is a literal
/// name once its anchors and escaped dots are read (`^release-1\.30$`),
/// else `master`.
fn branch(branches: &[String]) -> String {
    branches
        .iter()
        .map(|b| {
            b.trim_start_matches('^')
                .trim_end_matches('$')
                .replace("\\.", ".")
        })
        .find(|b| {
            !b.is_empty()
                && b.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        })
        .unwrap_or_else(|| "master".into())
}

/// Plausible refs of a run of `base` on `org_repo` at `branch` (a pull
/// request when `pull` is given); the run template completes them from the
/// job.
fn refs(base: &JobBase, org_repo: &str, branch: String, seed: u64, pull: bool) -> Refs {
    let (org, repo) = org_repo.split_once('/').unwrap_or((org_repo, ""));
    let link = format!("https://github.com/{org}/{repo}");
    let base_sha = sha(seed);
    let pulls = if pull {
        let number = 10_000 + seed as i64;
        let head = sha(seed + 1_000_000);
        vec![Pull {
            number,
            author: "a-contributor".into(),
            sha: head.clone(),
            title: Some(format!("Fix the flaky <{}> test & more", base.name)),
            ref_: None,
            link: Some(format!("{link}/pull/{number}")),
            commit_link: Some(format!("{link}/pull/{number}/commits/{head}")),
            author_link: Some("https://github.com/a-contributor".into()),
        }]
    } else {
        vec![]
    };
    Refs {
        org: org.into(),
        repo: repo.into(),
        repo_link: Some(link.clone()),
        base_ref: Some(branch),
        base_link: Some(format!("{link}/commit/{base_sha}")),
        base_sha: Some(base_sha),
        pulls,
        ..Refs::default()
    }
}

/// The run made from `new` (as the store would, with id and build id from
/// `seed`) and its pod in `NAMESPACE`.
fn pod_of(new: NewRun, context: Option<&str>, seed: u64) -> Result<Pod, String> {
    let spec: SpecSnapshot =
        serde_json::from_str(new.spec.json()).map_err(|e| format!("spec snapshot: {e}"))?;
    let id = format!("{:08x}-0c0a-4d57-9a11-{:012x}", seed, seed * 7919);
    let at = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let mut run: Run = new.into_run(id, 1_800_000_000_000_000_000 + seed as i64, "h".into(), at);
    if let Some(context) = context {
        Arc::make_mut(&mut run.annotations).insert("prow.k8s.io/context".into(), context.into());
    }
    pod_for_run(&run, &spec, NAMESPACE).map_err(|e| format!("pod_for_run: {e}"))
}

/// Whether `pod` has Prow's pod utilities: place-entrypoint, the sidecar
/// last, entrypoint in its first container.
fn decorated(pod: &Pod) -> bool {
    let Some(spec) = &pod.spec else {
        return false;
    };
    let init = spec.init_containers.iter().flatten();
    init.clone().any(|c| c.name == "place-entrypoint")
        && spec.containers.last().is_some_and(|c| c.name == "sidecar")
        && spec.containers[0].command.as_deref() == Some(&["/tools/entrypoint".to_string()][..])
}

fn relative(root: &Path, file: &str) -> String {
    Path::new(file)
        .strip_prefix(root)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| file.to_string())
}

/// Every job's pod: periodics, then presubmits and postsubmits by repo.
fn items(root: &Path, snapshot: &Snapshot) -> Vec<Item> {
    let mut items = Vec::new();
    let mut seed = 0u64;
    let mut next = || {
        seed += 1;
        seed
    };
    for p in &snapshot.periodics {
        let decoration = snapshot.periodic_decoration(p);
        let new = RunTemplate::periodic(p, snapshot.pod_spec(p), decoration).run(None);
        items.push(Item {
            file: relative(root, &p.origin.file),
            kind: JobType::Periodic,
            job: p.base.name.clone(),
            pod: pod_of(new, None, next()),
        });
    }
    for (org_repo, jobs) in &snapshot.presubmits {
        for p in jobs {
            let seed = next();
            let refs = refs(&p.base, org_repo, branch(&p.kind.branches), seed, true);
            let template = RunTemplate::new(
                &p.base,
                JobType::Presubmit,
                None,
                snapshot.pod_spec(p),
                snapshot.decoration_config(p, org_repo),
            );
            items.push(Item {
                file: relative(root, &p.origin.file),
                kind: JobType::Presubmit,
                job: p.base.name.clone(),
                pod: pod_of(template.run(Some(refs)), Some(&p.kind.context), seed),
            });
        }
    }
    for (org_repo, jobs) in &snapshot.postsubmits {
        for p in jobs {
            let seed = next();
            let refs = refs(&p.base, org_repo, branch(&p.kind.branches), seed, false);
            let template = RunTemplate::new(
                &p.base,
                JobType::Postsubmit,
                None,
                snapshot.pod_spec(p),
                snapshot.decoration_config(p, org_repo),
            );
            items.push(Item {
                file: relative(root, &p.origin.file),
                kind: JobType::Postsubmit,
                job: p.base.name.clone(),
                pod: pod_of(template.run(Some(refs)), Some(&p.kind.context), seed),
            });
        }
    }
    items
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(str::to_string),
        ..ObjectMeta::default()
    }
}

/// What the pods name that a build cluster provides: service accounts,
/// priority classes, runtime classes.
#[derive(Default)]
struct Named {
    service_accounts: BTreeSet<String>,
    priority_classes: BTreeSet<String>,
    runtime_classes: BTreeSet<String>,
}

fn named(items: &[Item]) -> Named {
    let mut n = Named::default();
    for spec in items
        .iter()
        .filter_map(|i| i.pod.as_ref().ok())
        .filter_map(|p| p.spec.as_ref())
    {
        let add = |set: &mut BTreeSet<String>, v: &Option<String>| {
            if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                set.insert(v.to_string());
            }
        };
        add(&mut n.service_accounts, &spec.service_account_name);
        add(&mut n.service_accounts, &spec.service_account);
        add(&mut n.priority_classes, &spec.priority_class_name);
        add(&mut n.runtime_classes, &spec.runtime_class_name);
    }
    n
}

/// Creates, as the admin, what the corpus's pods name that a build cluster
/// would have and this one does not yet (the tenant has `default` and
/// `bosun`; kube-apiserver has its `system-` priority classes).
async fn provide(admin: Client, named: &Named) {
    async fn ensure<K>(api: &Api<K>, name: &str, object: K)
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize,
        K: serde::de::DeserializeOwned,
    {
        let have = api
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if have.is_none() {
            api.create(&PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), NAMESPACE);
    for name in &named.service_accounts {
        let sa = ServiceAccount {
            metadata: meta(name, Some(NAMESPACE)),
            ..ServiceAccount::default()
        };
        ensure(&sas, name, sa).await;
    }
    let pcs: Api<PriorityClass> = Api::all(admin.clone());
    for name in &named.priority_classes {
        let pc = PriorityClass {
            metadata: meta(name, None),
            value: 1000,
            ..PriorityClass::default()
        };
        ensure(&pcs, name, pc).await;
    }
    let rcs: Api<RuntimeClass> = Api::all(admin);
    for name in &named.runtime_classes {
        // The handler is the node's business; any DNS label will do here.
        let rc = RuntimeClass {
            metadata: meta(name, None),
            handler: "handler".into(),
            ..RuntimeClass::default()
        };
        ensure(&rcs, name, rc).await;
    }
}

async fn client_of(tenant: &bosun_kubetest::Tenant) -> Client {
    let kubeconfig = Kubeconfig::read_from(&tenant.kubeconfig).expect("the tenant's kubeconfig");
    let options = KubeConfigOptions {
        context: Some(tenant.context.clone()),
        ..KubeConfigOptions::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .expect("the tenant's config");
    Client::try_from(config).expect("bosun's client")
}

/// The server's answer to a refused creation, in one line.
fn refusal(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        e => e.to_string(),
    }
}

#[test]
fn every_corpus_job_pod_is_admitted_by_a_real_api_server() {
    let root = corpus();
    let loaded = load(
        &LoadOptions {
            config: Some(root.join("prow/config.yaml")),
            job_config: vec![root.join("jobs")],
            ..LoadOptions::default()
        },
        &OsFiles,
    );
    let snapshot = loaded.snapshot.as_ref().unwrap_or_else(|| {
        panic!(
            "the corpus does not load: {:#?}",
            &loaded.diagnostics[..loaded.diagnostics.len().min(10)]
        )
    });
    let counts = snapshot.counts();
    assert_eq!(
        (counts.periodics, counts.presubmits, counts.postsubmits),
        (PERIODICS, PRESUBMITS, POSTSUBMITS),
        "the corpus's jobs as loaded"
    );
    let items = items(&root, snapshot);
    // Every corpus job says `decorate: true`: every pod built has the pod
    // utilities (a pod that could not be built counts as refused below).
    let undecorated: Vec<&str> = items
        .iter()
        .filter(|i| i.pod.as_ref().is_ok_and(|p| !decorated(p)))
        .map(|i| i.job.as_str())
        .collect();
    assert!(
        undecorated.is_empty(),
        "pods without the pod utilities: {undecorated:?}"
    );

    // The harness's calls block on its own runtime: outside ours.
    let plane = ControlPlane::shared();
    let tenant = plane.tenant(NAMESPACE, "corpus");
    let admin = plane.admin();
    let named = named(&items);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let started = Instant::now();
    let (tried, refused) = rt.block_on(async {
        provide(admin, &named).await;
        let bosun = client_of(&tenant).await;
        let pods: Api<Pod> = Api::namespaced(bosun, NAMESPACE);
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let answers: Vec<(usize, Result<(), String>)> = stream::iter(items.iter().enumerate())
            .map(|(i, item)| {
                let (pods, dry_run) = (pods.clone(), dry_run.clone());
                async move {
                    let pod = match &item.pod {
                        Ok(pod) => pod,
                        Err(e) => return (i, Err(e.clone())),
                    };
                    let answer = tokio::time::timeout(REQUEST_TIMEOUT, pods.create(&dry_run, pod))
                        .await
                        .map_err(|_| format!("no answer in {REQUEST_TIMEOUT:?}"))
                        .and_then(|r| r.map(drop).map_err(|e| refusal(&e)));
                    (i, answer)
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let tried = answers.len();
        let mut refused: Vec<(usize, String)> = answers
            .into_iter()
            .filter_map(|(i, a)| a.err().map(|e| (i, e)))
            .collect();
        refused.sort();
        (tried, refused)
    });
    let secs = started.elapsed().as_secs_f64();
    // A dry run stores nothing: the namespace is still empty.
    let stored = rt.block_on(async {
        Api::<Pod>::namespaced(plane.admin(), NAMESPACE)
            .list(&Default::default())
            .await
            .expect("the namespace's pods")
            .items
            .len()
    });
    assert_eq!(stored, 0, "pods were stored: not a dry run");
    eprintln!(
        "corpus dry run: {tried} jobs tried, {} accepted, {} refused, {secs:.1} s \
         ({} service accounts, {} priority classes, {} runtime classes provided)",
        tried - refused.len(),
        refused.len(),
        named.service_accounts.len(),
        named.priority_classes.len(),
        named.runtime_classes.len(),
    );
    assert_eq!(
        tried,
        PERIODICS + PRESUBMITS + POSTSUBMITS,
        "every job of the corpus tried"
    );
    if !refused.is_empty() {
        // How many jobs got each answer (the pod's name left out), then
        // every refused job with the server's whole answer.
        let mut classes: BTreeMap<String, usize> = BTreeMap::new();
        for (i, why) in &refused {
            let name = items[*i]
                .pod
                .as_ref()
                .ok()
                .and_then(|p| p.metadata.name.clone());
            let class = match name {
                Some(name) => why.replace(&name, "<pod>"),
                None => why.clone(),
            };
            *classes.entry(class).or_default() += 1;
        }
        let mut text = format!(
            "{} of {tried} jobs' pods refused; {} kinds of answer:\n",
            refused.len(),
            classes.len()
        );
        for (class, n) in &classes {
            text.push_str(&format!("  {n} x {class}\n"));
        }
        text.push_str("every refused job:\n");
        for (i, why) in &refused {
            let item = &items[*i];
            text.push_str(&format!(
                "  {}: {} {}: {why}\n",
                item.file,
                item.kind.as_str(),
                item.job
            ));
        }
        panic!("{text}");
    }
}
