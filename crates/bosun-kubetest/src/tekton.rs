//! Tekton on the test control plane: its `PipelineRun` and `TaskRun`
//! resources, its admission check and a hand-played controller.
//!
//! - [`install`] registers the `tekton.dev/v1` `pipelineruns` and `taskruns`
//!   CustomResourceDefinitions (apiextensions v1, a structural schema that
//!   keeps every field, `x-kubernetes-preserve-unknown-fields`, and the
//!   `status` subresource, as Tekton's own CRDs have) and a validating
//!   admission webhook: kube-apiserver sends every `PipelineRun` created or
//!   updated to a server of this harness, which runs Tekton's own defaulting
//!   and validation on it ([`validate`]: `tools/tekton`'s `tekton-validate`,
//!   built from `github.com/tektoncd/pipeline`). A PipelineRun Tekton would
//!   refuse is refused by the API server, as Tekton's webhook refuses it
//!   (`admission webhook "validation.webhook.pipeline.tekton.dev" denied the
//!   request: validation failed: ...`). Because the CRD's schema checks
//!   nothing, this is what tells a test that bosun's PipelineRuns are ones
//!   Tekton takes. [`reviews`] lists what the webhook saw.
//! - [`grant`]: bosun's verbs on `pipelineruns` and `taskruns` in a
//!   tenant's namespace (a Role of their own beside the tenant's pod Role).
//! - [`play`]: plays Tekton's controller for the PipelineRuns of one
//!   namespace: for each, in its embedded `pipelineSpec`'s order (`tasks`,
//!   then `finally`), a TaskRun and its pod (one container `step-NAME` per
//!   step, each with a log of its own, run through the hand-played
//!   [`Kubelet`](crate::Kubelet), so logs flow through `pods/log`), the steps
//!   ending as the test's [`Script`] says, and the PipelineRun's `Succeeded`
//!   condition (`True`/`Succeeded`, `False`/`Failed`, `False`/`Cancelled`
//!   once `spec.status` is `Cancelled`). A PipelineRun deleted has its
//!   TaskRuns and pods deleted, as the garbage collector would.
//!
//! What it does not play: `runAfter` and results (tasks run one after the
//! other, in the order written), `when`, retries, timeouts, `taskRef` and
//! `pipelineRef` (such a PipelineRun fails, `CouldntGetPipeline`), sidecars.

use bosun_base::sync::Lock;
use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::api::{GroupVersionKind, PostParams};
use kube::Client;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};

use crate::plane::ControlPlane;
use crate::runtime;
use crate::tenant::Tenant;

/// The verbs bosun's Role grants on `pipelineruns` and `taskruns` (bosun's
/// health probe asks for each on `pipelineruns`, and `get, list, watch` on
/// `taskruns`, when a cluster has pipeline jobs).
pub const PIPELINE_VERBS: [&str; 6] = ["create", "delete", "list", "watch", "get", "patch"];

/// Where the validator comes from when it is set.
pub const VALIDATE_ENV: &str = "BOSUN_TEKTON_VALIDATE";

/// The name of the webhook, Tekton's own.
const WEBHOOK: &str = "validation.webhook.pipeline.tekton.dev";

/// `tekton.dev/v1` `pipelineruns`.
pub fn pipeline_runs() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tekton.dev", "v1", "PipelineRun"),
        "pipelineruns",
    )
}

/// `tekton.dev/v1` `taskruns`.
pub fn task_runs() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tekton.dev", "v1", "TaskRun"),
        "taskruns",
    )
}

fn crd(kind: &str, plural: &str, short: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": format!("{plural}.tekton.dev"),
            "labels": {"app.kubernetes.io/part-of": "tekton-pipelines", "pipeline.tekton.dev/release": "v1.0.0"},
        },
        "spec": {
            "group": "tekton.dev",
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "plural": plural,
                "singular": kind.to_lowercase(),
                "shortNames": [short],
                "categories": ["tekton", "tekton-pipelines"],
            },
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                }},
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Succeeded", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Succeeded\")].status"},
                    {"name": "Reason", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Succeeded\")].reason"},
                    {"name": "StartTime", "type": "date", "jsonPath": ".status.startTime"},
                    {"name": "CompletionTime", "type": "date", "jsonPath": ".status.completionTime"},
                ],
            }],
        },
    }))
    .expect("a CustomResourceDefinition")
}

/// The control planes (by URL) Tekton is installed on.
fn installed() -> &'static Mutex<HashSet<String>> {
    static INSTALLED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    INSTALLED.get_or_init(Mutex::default)
}

/// Registers Tekton's PipelineRun and TaskRun resources and its admission
/// check on `plane` (once per plane; later calls return at once), and waits
/// until both are in force. Panics when the validator is not built (see
/// [`validator`]).
pub fn install(plane: &ControlPlane) {
    let mut done = installed().locked();
    if done.contains(&plane.url()) {
        return;
    }
    validator();
    let admin = plane.admin();
    let hook = webhook();
    runtime().block_on({
        let admin = admin.clone();
        async move {
            let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
            for c in [
                crd("PipelineRun", "pipelineruns", "pr"),
                crd("TaskRun", "taskruns", "tr"),
            ] {
                match crds.create(&PostParams::default(), &c).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => panic!("CRD: {e}"),
                }
            }
            for name in ["pipelineruns.tekton.dev", "taskruns.tekton.dev"] {
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    let c = crds.get(name).await.expect("the CRD");
                    let established = c.status.and_then(|s| s.conditions).is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.type_ == "Established" && c.status == "True")
                    });
                    if established {
                        break;
                    }
                    assert!(Instant::now() < deadline, "{name} never established");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": WEBHOOK},
                "webhooks": [{
                    "name": WEBHOOK,
                    "clientConfig": {
                        "url": format!("https://127.0.0.1:{}/resource-validation", hook.port),
                        "caBundle": base64_encode(hook.ca_pem.as_bytes()),
                    },
                    "rules": [{
                        "apiGroups": ["tekton.dev"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["pipelineruns"],
                        "scope": "Namespaced",
                    }],
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 30,
                }],
            }))
            .expect("a webhook configuration");
            let hooks: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
            match hooks.create(&PostParams::default(), &config).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => panic!("webhook configuration: {e}"),
            }
        }
    });
    // In force once a PipelineRun Tekton refuses is refused (a dry run:
    // nothing is stored). Until the API server has loaded the webhook, the
    // CRD's schema lets it through.
    let api: Api<DynamicObject> = Api::namespaced_with(admin, "default", &pipeline_runs());
    let refused: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": "kubetest-webhook-probe", "namespace": "default"},
        "spec": {},
    }))
    .expect("a PipelineRun");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (api, pr) = (api.clone(), refused.clone());
        let answer = runtime().block_on(async move {
            let params = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            api.create(&params, &pr).await
        });
        match answer {
            Err(kube::Error::Api(s)) if s.message.contains(WEBHOOK) => break,
            other => assert!(
                Instant::now() < deadline,
                "the Tekton webhook is not in force: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    done.insert(plane.url());
}

/// Grants bosun's service account of `tenant` only `verbs` on
/// `pipelineruns` and `taskruns` (a Role `bosun-tekton`, created or
/// replaced, bound to it).
pub fn grant(plane: &ControlPlane, tenant: &Tenant, verbs: &[&str]) {
    let (admin, ns) = (plane.admin(), tenant.namespace.clone());
    let mut role: Role = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "bosun-tekton", "namespace": ns},
        "rules": [{
            "apiGroups": ["tekton.dev"],
            "resources": ["pipelineruns", "taskruns"],
            "verbs": verbs,
        }],
    }))
    .expect("a Role");
    let binding: RoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "bosun-tekton", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bosun-tekton"},
        "subjects": [{"kind": "ServiceAccount", "name": "bosun", "namespace": ns}],
    }))
    .expect("a RoleBinding");
    runtime().block_on(async move {
        let roles: Api<Role> = Api::namespaced(admin.clone(), &ns);
        let pp = PostParams::default();
        match roles.get_opt("bosun-tekton").await.expect("the role") {
            Some(old) => {
                role.metadata.resource_version = old.metadata.resource_version;
                roles
                    .replace("bosun-tekton", &pp, &role)
                    .await
                    .expect("role replaced");
            }
            None => {
                roles.create(&pp, &role).await.expect("role created");
            }
        }
        let bindings: Api<RoleBinding> = Api::namespaced(admin, &ns);
        match bindings.create(&pp, &binding).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("role binding: {e}"),
        }
    });
    settled(plane, tenant, verbs);
}

/// Waits until the API server's authorizer judges by the grant (RBAC's
/// cache is filled asynchronously: a request right after the RoleBinding may
/// still be refused).
fn settled(plane: &ControlPlane, tenant: &Tenant, verbs: &[&str]) {
    let want = vec![true; verbs.len()];
    crate::tenant::judged_as(
        &plane.admin(),
        &tenant.namespace,
        ("tekton.dev", "pipelineruns"),
        verbs,
        &want,
    );
}

/// The `tekton-validate` binary: `$BOSUN_TEKTON_VALIDATE`, else what
/// `tools/tekton/build.sh --check` prints. Panics, saying how to build it,
/// when neither has it.
pub fn validator() -> PathBuf {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        if let Some(path) = std::env::var_os(VALIDATE_ENV) {
            let path = PathBuf::from(path);
            return if path.is_file() {
                Ok(path)
            } else {
                Err(format!(
                    "${VALIDATE_ENV}={} is not a file: run tools/test --setup-only to build tekton-validate and print the path to export",
                    path.display()
                ))
            };
        }
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tools/tekton/build.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg("--check")
            .output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "tekton-validate (Tekton's own PipelineRun validation) is needed by this test and is not built: run the tests with tools/test, which builds it (or tools/test --setup-only, then export what it prints). {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    });
    match found {
        Ok(path) => path.clone(),
        Err(e) => panic!("{e}"),
    }
}

/// Runs Tekton's own defaulting and validation on each PipelineRun (as its
/// admission webhook does, unknown fields refused): per document, `Ok` or
/// Tekton's error text.
pub fn validate(pipeline_runs: &[Value]) -> Vec<Result<(), String>> {
    use std::io::Write;
    let mut child = std::process::Command::new(validator())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tekton-validate runs");
    {
        let mut stdin = child.stdin.take().expect("its stdin");
        for pr in pipeline_runs {
            serde_json::to_writer(&mut stdin, pr).expect("writing to tekton-validate");
            stdin.write_all(b"\n").expect("writing to tekton-validate");
        }
    }
    let out = child.wait_with_output().expect("tekton-validate ends");
    assert!(
        out.status.code().is_some_and(|c| c == 0 || c == 1),
        "tekton-validate failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<Result<(), String>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let a: Value = serde_json::from_str(l).expect("tekton-validate's answer");
            if a["ok"] == true {
                Ok(())
            } else {
                Err(a["error"].as_str().unwrap_or_default().to_string())
            }
        })
        .collect();
    assert_eq!(
        answers.len(),
        pipeline_runs.len(),
        "one answer per document"
    );
    answers
}

/// One PipelineRun the webhook checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Review {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `CREATE` or `UPDATE`.
    pub operation: String,
    /// Tekton's refusal, if it refused it.
    pub refused: Option<String>,
}

/// The webhook's server: its port, the CA its certificate chains to, and
/// what it checked.
struct Webhook {
    port: u16,
    ca_pem: String,
    reviews: Arc<Mutex<Vec<Review>>>,
}

/// The PipelineRuns the webhook checked (on any control plane), oldest
/// first; dry runs (the harness's own probe) are left out.
pub fn reviews() -> Vec<Review> {
    webhook().reviews.locked().clone()
}

fn base64_encode(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// The webhook's server (one per test process), started on first use with a
/// certificate of its own.
fn webhook() -> &'static Webhook {
    static HOOK: OnceLock<Webhook> = OnceLock::new();
    HOOK.get_or_init(|| {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate().expect("a key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "bosun-kubetest tekton webhook CA");
        let ca_cert = ca.self_signed(&ca_key).expect("the CA");
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().expect("a key");
        let mut leaf =
            CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("leaf parameters");
        leaf.distinguished_name.push(DnType::CommonName, WEBHOOK);
        let cert = leaf.signed_by(&key, &issuer).expect("the certificate");
        let certs = CertificateDer::pem_slice_iter(cert.pem().as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("webhook certificate");
        let key =
            PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).expect("webhook key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("webhook TLS");
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let listener = runtime()
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("webhook port");
        let port = listener.local_addr().expect("webhook address").port();
        let reviews = Arc::new(Mutex::new(Vec::new()));
        runtime().spawn(serve(listener, Arc::new(tls), reviews.clone()));
        Webhook {
            port,
            ca_pem: ca_cert.pem(),
            reviews,
        }
    })
}

type Body = BoxBody<Bytes, Infallible>;

async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    reviews: Arc<Mutex<Vec<Review>>>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let (acceptor, reviews) = (acceptor.clone(), reviews.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper::service::service_fn(move |req| {
                let reviews = reviews.clone();
                async move { Ok::<_, Infallible>(admit(req, reviews).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                .await;
        });
    }
}

/// Answers one AdmissionReview as Tekton's validating webhook: the object
/// defaulted and validated by Tekton's own code.
async fn admit(
    req: hyper::Request<hyper::body::Incoming>,
    reviews: Arc<Mutex<Vec<Review>>>,
) -> hyper::Response<Body> {
    let respond = |status: u16, body: Value| {
        hyper::Response::builder()
            .status(status)
            .header("Content-Type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())).boxed())
            .expect("a response")
    };
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return respond(400, json!({"error": e.to_string()})),
    };
    let review: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return respond(400, json!({"error": e.to_string()})),
    };
    let request = &review["request"];
    let object = request["object"].clone();
    let answer = tokio::task::spawn_blocking(move || validate(&[object]).remove(0))
        .await
        .unwrap_or_else(|e| Err(format!("the validator panicked: {e}")));
    if request["dryRun"] != true {
        reviews.locked().push(Review {
            namespace: request["namespace"].as_str().unwrap_or_default().into(),
            name: request["object"]["metadata"]["name"]
                .as_str()
                .or(request["name"].as_str())
                .unwrap_or_default()
                .into(),
            operation: request["operation"].as_str().unwrap_or_default().into(),
            refused: answer.clone().err(),
        });
    }
    let response = match answer {
        Ok(()) => json!({"uid": request["uid"], "allowed": true}),
        Err(e) => json!({
            "uid": request["uid"],
            "allowed": false,
            "status": {"status": "Failure", "message": format!("validation failed: {e}")},
        }),
    };
    respond(
        200,
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
    )
}

/// What one step does when the played controller runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// It writes `log` and exits with `code`.
    Exit {
        /// Its output.
        log: String,
        /// Its exit code.
        code: i32,
    },
    /// It writes `log` and runs until its PipelineRun is cancelled.
    Hold {
        /// Its output.
        log: String,
    },
}

impl Step {
    /// Writes `log` and exits 0.
    pub fn ok(log: &str) -> Step {
        Step::Exit {
            log: log.into(),
            code: 0,
        }
    }
}

/// The step being run, for the test's [`Script`].
#[derive(Clone, Debug)]
pub struct StepCall {
    /// The PipelineRun's name.
    pub pipeline_run: String,
    /// The pipeline task's name.
    pub task: String,
    /// The step's name.
    pub step: String,
    /// The step as written in the task's spec.
    pub spec: Value,
}

/// What each step does: the test's answer.
pub type Script = Arc<dyn Fn(&StepCall) -> Step + Send + Sync>;

/// The played controller of one namespace; it stops when dropped.
pub struct Player {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Player {
    /// The PipelineRuns it has taken up, in order.
    pub fn seen(&self) -> Vec<String> {
        self.seen.locked().clone()
    }
}

impl Drop for Player {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Plays Tekton's controller for every PipelineRun of namespace `ns` on
/// `plane` (Tekton must be [`install`]ed), each step doing what `script`
/// says.
pub fn play(plane: &'static ControlPlane, ns: &str, script: Script) -> Player {
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let player = Player {
        stop: stop.clone(),
        seen: seen.clone(),
    };
    let ns = ns.to_string();
    std::thread::spawn(move || {
        let api: Api<DynamicObject> = Api::namespaced_with(plane.admin(), &ns, &pipeline_runs());
        // Uid to name, of the PipelineRuns being played.
        let mut playing: HashMap<String, String> = HashMap::new();
        while !stop.load(Ordering::SeqCst) {
            let list = {
                let api = api.clone();
                runtime().block_on(async move { api.list(&ListParams::default()).await })
            };
            let Ok(list) = list else {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            };
            let now: HashMap<String, DynamicObject> = list
                .items
                .into_iter()
                .filter_map(|pr| Some((pr.metadata.uid.clone()?, pr)))
                .collect();
            // Gone: the garbage collector deletes what they owned.
            for (uid, name) in playing.clone() {
                if !now.contains_key(&uid) {
                    playing.remove(&uid);
                    collect(plane.admin(), &ns, &name);
                }
            }
            for (uid, pr) in now {
                if playing.contains_key(&uid) {
                    continue;
                }
                let name = pr.metadata.name.clone().unwrap_or_default();
                playing.insert(uid, name.clone());
                seen.locked().push(name);
                let run = Run {
                    plane,
                    ns: ns.clone(),
                    pr,
                    script: script.clone(),
                    stop: stop.clone(),
                    children: Vec::new(),
                };
                std::thread::spawn(move || run.play());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    player
}

/// Deletes the TaskRuns and pods of PipelineRun `name`.
fn collect(admin: Client, ns: &str, name: &str) {
    let selector = format!("tekton.dev/pipelineRun={name}");
    let (ns, trs) = (ns.to_string(), task_runs());
    runtime().block_on(async move {
        let lp = ListParams::default().labels(&selector);
        let dp = DeleteParams::default();
        let tr: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &ns, &trs);
        let _ = tr.delete_collection(&dp, &lp).await;
        let pods: Api<Pod> = Api::namespaced(admin, &ns);
        if let Ok(list) = pods.list(&lp).await {
            for p in list.items {
                if let Some(n) = p.metadata.name {
                    let _ = pods.delete(&n, &dp).await;
                }
            }
        }
    });
}

/// How a task ended.
enum TaskEnd {
    Succeeded,
    Failed,
    Cancelled,
    /// The PipelineRun is gone, or the player stopped.
    Gone,
}

/// One PipelineRun being played.
struct Run {
    plane: &'static ControlPlane,
    ns: String,
    pr: DynamicObject,
    script: Script,
    stop: Arc<AtomicBool>,
    /// `childReferences`, in the order the TaskRuns were made.
    children: Vec<Value>,
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

fn condition(status: &str, reason: &str, message: &str) -> Value {
    json!([{
        "type": "Succeeded",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now(),
    }])
}

impl Run {
    fn name(&self) -> String {
        self.pr.metadata.name.clone().unwrap_or_default()
    }

    fn prs(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.plane.admin(), &self.ns, &pipeline_runs())
    }

    /// The PipelineRun now (`None` once it is gone or the player stopped).
    fn current(&self) -> Option<DynamicObject> {
        if self.stop.load(Ordering::SeqCst) {
            return None;
        }
        let (api, name) = (self.prs(), self.name());
        runtime()
            .block_on(async move { api.get_opt(&name).await })
            .ok()
            .flatten()
            .filter(|pr| pr.metadata.uid == self.pr.metadata.uid)
    }

    /// Whether the PipelineRun asks to be cancelled (`None`: it is gone).
    fn cancelled(&self) -> Option<bool> {
        let pr = self.current()?;
        let status = pr.data["spec"]["status"].as_str().unwrap_or_default();
        Some(matches!(status, "Cancelled" | "PipelineRunCancelled"))
    }

    fn patch_status(&self, api: Api<DynamicObject>, name: &str, status: Value) {
        let name = name.to_string();
        let _ = runtime().block_on(async move {
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
        });
    }

    fn pr_status(&self, status: Value) {
        self.patch_status(self.prs(), &self.name(), status);
    }

    fn play(mut self) {
        let started = now();
        let spec = self.pr.data["spec"]["pipelineSpec"].clone();
        if !spec.is_object() {
            self.pr_status(json!({
                "startTime": started,
                "completionTime": now(),
                "conditions": condition("False", "CouldntGetPipeline", "bosun-kubetest plays only PipelineRuns with an embedded pipelineSpec"),
            }));
            return;
        }
        self.pr_status(json!({
            "startTime": started,
            "conditions": condition("Unknown", "Running", "Tasks Completed: 0 (Failed: 0, Cancelled 0), Skipped: 0"),
        }));
        let tasks: Vec<(Value, &str)> = spec["tasks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| (t.clone(), "tasks"))
            .chain(
                spec["finally"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| (t.clone(), "finally")),
            )
            .collect();
        let (mut completed, mut failed, mut skipped) = (0, 0, 0);
        let mut cancelled = false;
        for (task, member_of) in &tasks {
            match self.cancelled() {
                None => return,
                Some(true) => {
                    cancelled = true;
                    break;
                }
                Some(false) => {}
            }
            if failed > 0 && *member_of == "tasks" {
                skipped += 1;
                continue;
            }
            match self.run_task(task, member_of) {
                TaskEnd::Succeeded => completed += 1,
                TaskEnd::Failed => {
                    completed += 1;
                    failed += 1;
                }
                TaskEnd::Cancelled => {
                    cancelled = true;
                    break;
                }
                TaskEnd::Gone => return,
            }
            let message = format!(
                "Tasks Completed: {completed} (Failed: {failed}, Cancelled 0), Incomplete: {}, Skipped: {skipped}",
                tasks.len() - completed - skipped
            );
            self.pr_status(json!({
                "conditions": condition("Unknown", "Running", &message),
                "childReferences": self.children,
            }));
        }
        let (status, reason, message) = if cancelled {
            (
                "False",
                "Cancelled",
                format!("PipelineRun \"{}\" was cancelled", self.name()),
            )
        } else if failed > 0 {
            (
                "False",
                "Failed",
                format!("Tasks Completed: {completed} (Failed: {failed}, Cancelled 0), Skipped: {skipped}"),
            )
        } else {
            (
                "True",
                "Succeeded",
                format!(
                    "Tasks Completed: {completed} (Failed: 0, Cancelled 0), Skipped: {skipped}"
                ),
            )
        };
        self.pr_status(json!({
            "completionTime": now(),
            "conditions": condition(status, reason, &message),
            "childReferences": self.children,
        }));
    }

    /// Runs one pipeline task: its TaskRun, its pod, its steps.
    fn run_task(&mut self, task: &Value, member_of: &str) -> TaskEnd {
        let pr_name = self.name();
        let task_name = task["name"].as_str().unwrap_or_default().to_string();
        let tr_name = child_name(&pr_name, &format!("-{task_name}"));
        let pod_name = child_name(&tr_name, "-pod");
        let Some(task_spec) = task["taskSpec"].as_object().cloned() else {
            return TaskEnd::Failed;
        };
        let steps: Vec<Value> = task_spec
            .get("steps")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let step_names: Vec<String> = steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s["name"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .map_or_else(|| format!("unnamed-{i}"), str::to_string)
            })
            .collect();
        // Labels propagate: the PipelineRun's, then Tekton's own.
        let mut labels = self.pr.metadata.labels.clone().unwrap_or_default();
        for (k, v) in [
            ("tekton.dev/pipeline", pr_name.as_str()),
            ("tekton.dev/pipelineRun", pr_name.as_str()),
            ("tekton.dev/pipelineTask", task_name.as_str()),
            ("tekton.dev/memberOf", member_of),
        ] {
            labels.insert(k.into(), v.into());
        }
        if let Some(uid) = &self.pr.metadata.uid {
            labels.insert("tekton.dev/pipelineRunUID".into(), uid.clone());
        }
        let annotations = self.pr.metadata.annotations.clone().unwrap_or_default();
        let tr: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "tekton.dev/v1",
            "kind": "TaskRun",
            "metadata": {
                "name": tr_name,
                "namespace": self.ns,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [{
                    "apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "name": pr_name,
                    "uid": self.pr.metadata.uid, "controller": true, "blockOwnerDeletion": true,
                }],
            },
            "spec": {
                "taskSpec": task_spec,
                "params": task["params"].as_array().cloned().unwrap_or_default(),
                "serviceAccountName": self.pr.data["spec"]["taskRunTemplate"]["serviceAccountName"].as_str().unwrap_or("default"),
            },
        }))
        .expect("a TaskRun");
        let trs: Api<DynamicObject> =
            Api::namespaced_with(self.plane.admin(), &self.ns, &task_runs());
        let created = {
            let trs = trs.clone();
            runtime().block_on(async move { trs.create(&PostParams::default(), &tr).await })
        };
        let tr_uid = match created {
            Ok(tr) => tr.metadata.uid,
            Err(_) => return TaskEnd::Failed,
        };
        self.children.push(json!({
            "apiVersion": "tekton.dev/v1",
            "kind": "TaskRun",
            "name": tr_name,
            "pipelineTaskName": task_name,
        }));
        self.pr_status(json!({"childReferences": self.children}));
        let mut pod_labels = labels.clone();
        pod_labels.insert("tekton.dev/taskRun".into(), tr_name.clone());
        if let Some(uid) = &tr_uid {
            pod_labels.insert("tekton.dev/taskRunUID".into(), uid.clone());
        }
        pod_labels.insert(
            "app.kubernetes.io/managed-by".into(),
            "tekton-pipelines".into(),
        );
        let containers: Vec<Value> = steps
            .iter()
            .zip(&step_names)
            .map(|(s, n)| {
                json!({
                    "name": format!("step-{n}"),
                    "image": s["image"].as_str().unwrap_or("busybox"),
                    "command": ["/tekton/bin/entrypoint"],
                })
            })
            .collect();
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "namespace": self.ns,
                "labels": pod_labels,
                "annotations": annotations,
                "ownerReferences": [{
                    "apiVersion": "tekton.dev/v1", "kind": "TaskRun", "name": tr_name,
                    "uid": tr_uid, "controller": true, "blockOwnerDeletion": true,
                }],
            },
            "spec": {"restartPolicy": "Never", "containers": containers},
        }))
        .expect("a pod");
        let kubelet = self.plane.kubelet();
        kubelet.separate_container_logs(&self.ns, &pod_name);
        let pods: Api<Pod> = Api::namespaced(self.plane.admin(), &self.ns);
        let created = {
            let pods = pods.clone();
            runtime().block_on(async move { pods.create(&PostParams::default(), &pod).await })
        };
        let pod = match created {
            Ok(p) => p,
            Err(_) => return TaskEnd::Failed,
        };
        kubelet.run_pod(&pod);
        let step_status = |states: &[Value]| -> Value {
            step_names
                .iter()
                .zip(states)
                .map(|(n, s)| json!({"name": n, "container": format!("step-{n}"), "state": s}))
                .collect()
        };
        let running = json!({"running": {"startedAt": now()}});
        let mut states: Vec<Value> = vec![running; steps.len()];
        self.patch_status(
            trs.clone(),
            &tr_name,
            json!({
                "podName": pod_name,
                "startTime": now(),
                "conditions": condition("Unknown", "Running", "Not all Steps in the Task have finished executing"),
                "steps": step_status(&states),
            }),
        );
        let mut failure: Option<String> = None;
        for (i, (step, name)) in steps.iter().zip(&step_names).enumerate() {
            let container = format!("step-{name}");
            if failure.is_some() {
                // After a failed step the rest do not run.
                states[i] = terminated(1, "Error");
                continue;
            }
            let call = StepCall {
                pipeline_run: pr_name.clone(),
                task: task_name.clone(),
                step: name.clone(),
                spec: step.clone(),
            };
            let (log, code) = match (self.script)(&call) {
                Step::Exit { log, code } => (log, Some(code)),
                Step::Hold { log } => (log, None),
            };
            if !log.is_empty() {
                kubelet.append_container_log(&self.ns, &pod_name, &container, &log);
            }
            let code = match code {
                Some(code) => code,
                None => loop {
                    match self.cancelled() {
                        None => return TaskEnd::Gone,
                        Some(true) => {
                            // Tekton cancels the TaskRun and deletes its pod.
                            self.patch_status(
                                trs.clone(),
                                &tr_name,
                                json!({
                                    "completionTime": now(),
                                    "conditions": condition("False", "TaskRunCancelled", &format!("TaskRun \"{tr_name}\" was cancelled. ")),
                                }),
                            );
                            let (pods, name) = (pods.clone(), pod_name.clone());
                            let _ = runtime().block_on(async move {
                                pods.delete(&name, &DeleteParams::default()).await
                            });
                            return TaskEnd::Cancelled;
                        }
                        Some(false) => std::thread::sleep(Duration::from_millis(100)),
                    }
                },
            };
            kubelet.end_container_log(&self.ns, &pod_name, &container);
            states[i] = terminated(code, if code == 0 { "Completed" } else { "Error" });
            if code != 0 {
                failure = Some(format!("\"{container}\" exited with code {code}"));
            }
            if i + 1 < steps.len() || failure.is_some() {
                self.pod_status(&pods, &pod_name, &step_names, &states, None);
            }
        }
        let phase = if failure.is_some() {
            "Failed"
        } else {
            "Succeeded"
        };
        for n in &step_names {
            kubelet.end_container_log(&self.ns, &pod_name, &format!("step-{n}"));
        }
        self.pod_status(&pods, &pod_name, &step_names, &states, Some(phase));
        let (status, reason, message) = match &failure {
            None => (
                "True",
                "Succeeded",
                "All Steps have completed executing".to_string(),
            ),
            Some(why) => ("False", "Failed", why.clone()),
        };
        self.patch_status(
            trs,
            &tr_name,
            json!({
                "completionTime": now(),
                "conditions": condition(status, reason, &message),
                "steps": step_status(&states),
            }),
        );
        match failure {
            None => TaskEnd::Succeeded,
            Some(_) => TaskEnd::Failed,
        }
    }

    /// The step pod's container states (and its phase, once it ended).
    fn pod_status(
        &self,
        pods: &Api<Pod>,
        pod: &str,
        steps: &[String],
        states: &[Value],
        phase: Option<&str>,
    ) {
        let statuses: Vec<Value> = steps
            .iter()
            .zip(states)
            .enumerate()
            .map(|(i, (n, s))| {
                json!({
                    "name": format!("step-{n}"),
                    "image": "busybox",
                    "imageID": "docker-pullable://busybox",
                    "containerID": format!("containerd://{:064x}", i + 1),
                    "ready": s.get("running").is_some(),
                    "started": s.get("running").is_some(),
                    "restartCount": 0,
                    "state": s,
                })
            })
            .collect();
        let mut status = json!({"containerStatuses": statuses});
        if let Some(phase) = phase {
            status["phase"] = json!(phase);
        }
        let (pods, name) = (pods.clone(), pod.to_string());
        let _ = runtime().block_on(async move {
            pods.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
        });
    }
}

/// The name of a child of `parent`, as Tekton makes one: `parent` and
/// `suffix`, or, when that is longer than 63 characters (a label value),
/// `parent` cut, a hash of it, and `suffix`.
fn child_name(parent: &str, suffix: &str) -> String {
    use std::hash::{Hash, Hasher};
    const LONGEST: usize = 63;
    if parent.len() + suffix.len() <= LONGEST {
        return format!("{parent}{suffix}");
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    parent.hash(&mut h);
    let hash = format!("{:016x}", h.finish());
    let head = LONGEST.saturating_sub(suffix.len() + hash.len());
    let cut = parent.get(..head).unwrap_or(parent);
    format!("{cut}{hash}{suffix}")
}

fn terminated(code: i32, reason: &str) -> Value {
    json!({"terminated": {
        "exitCode": code,
        "reason": reason,
        "startedAt": now(),
        "finishedAt": now(),
        "containerID": "containerd://1",
    }})
}
