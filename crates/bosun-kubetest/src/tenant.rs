//! [`Tenant`]: one test's namespace on a control plane, and bosun's
//! service account in it, bound to a Role with exactly the verbs bosun
//! needs.

use std::path::PathBuf;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::Client;

use crate::kubeconfig::kubeconfig;
use crate::runtime;

/// The verbs on `pods` bosun's Role grants (bosun's health probe asks for
/// each), beside `get` on `pods/log`.
pub const POD_VERBS: [&str; 6] = ["create", "delete", "list", "watch", "get", "patch"];

/// A namespace of a control plane, and bosun's identity in it.
#[derive(Clone)]
pub struct Tenant {
    /// The namespace.
    pub namespace: String,
    /// The kubeconfig context's name.
    pub context: String,
    /// A kubeconfig whose context `context` is bosun's service account in
    /// `namespace` (a real token from `TokenRequest`).
    pub kubeconfig: PathBuf,
    admin: Client,
}

impl std::fmt::Debug for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenant")
            .field("namespace", &self.namespace)
            .field("context", &self.context)
            .finish()
    }
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(str::to_string),
        ..ObjectMeta::default()
    }
}

fn role(namespace: &str, pod_verbs: &[&str]) -> Role {
    Role {
        metadata: meta("bosun", Some(namespace)),
        rules: Some(vec![
            PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["pods".into()]),
                verbs: pod_verbs.iter().map(|v| v.to_string()).collect(),
                ..PolicyRule::default()
            },
            PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["pods/log".into()]),
                verbs: vec!["get".into()],
                ..PolicyRule::default()
            },
        ]),
    }
}

impl Tenant {
    /// Makes the tenant on the control plane at `url` (CA `ca_pem`) as
    /// `admin`; its kubeconfig goes into `dir`.
    pub(crate) fn create(
        admin: Client,
        url: &str,
        ca_pem: &str,
        dir: &std::path::Path,
        namespace: &str,
        context: &str,
    ) -> Tenant {
        let ns = namespace.to_string();
        let token = runtime().block_on({
            let admin = admin.clone();
            async move {
                let pp = PostParams::default();
                Api::<Namespace>::all(admin.clone())
                    .create(
                        &pp,
                        &Namespace {
                            metadata: meta(&ns, None),
                            ..Namespace::default()
                        },
                    )
                    .await
                    .unwrap_or_else(|e| panic!("namespace {ns}: {e}"));
                let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), &ns);
                for name in ["default", "bosun"] {
                    sas.create(
                        &pp,
                        &ServiceAccount {
                            metadata: meta(name, Some(&ns)),
                            ..ServiceAccount::default()
                        },
                    )
                    .await
                    .unwrap_or_else(|e| panic!("service account {ns}/{name}: {e}"));
                }
                Api::<Role>::namespaced(admin.clone(), &ns)
                    .create(&pp, &role(&ns, &POD_VERBS))
                    .await
                    .unwrap_or_else(|e| panic!("role: {e}"));
                Api::<RoleBinding>::namespaced(admin.clone(), &ns)
                    .create(
                        &pp,
                        &RoleBinding {
                            metadata: meta("bosun", Some(&ns)),
                            role_ref: RoleRef {
                                api_group: "rbac.authorization.k8s.io".into(),
                                kind: "Role".into(),
                                name: "bosun".into(),
                            },
                            subjects: Some(vec![Subject {
                                kind: "ServiceAccount".into(),
                                name: "bosun".into(),
                                namespace: Some(ns.clone()),
                                ..Subject::default()
                            }]),
                        },
                    )
                    .await
                    .unwrap_or_else(|e| panic!("role binding: {e}"));
                let request = TokenRequest {
                    spec: TokenRequestSpec {
                        audiences: vec![],
                        expiration_seconds: Some(24 * 3600),
                        ..TokenRequestSpec::default()
                    },
                    ..TokenRequest::default()
                };
                let answer: TokenRequest = sas
                    .create_subresource("token", "bosun", &pp, &request)
                    .await
                    .unwrap_or_else(|e| panic!("token request: {e}"));
                answer.status.expect("a token").token
            }
        });
        settled(&admin, namespace, &POD_VERBS);
        let path = dir.join(format!("{namespace}-{context}.kubeconfig"));
        let text = kubeconfig(
            context,
            url,
            ca_pem,
            serde_json::json!({"token": token}),
            namespace,
        );
        std::fs::write(&path, text).expect("tenant kubeconfig");
        Tenant {
            namespace: namespace.to_string(),
            context: context.to_string(),
            kubeconfig: path,
            admin,
        }
    }

    /// Grants bosun only `pod_verbs` on pods from now on (the Role is
    /// replaced).
    pub fn grant(&self, pod_verbs: &[&str]) {
        let (admin, ns) = (self.admin.clone(), self.namespace.clone());
        let mut role = role(&ns, pod_verbs);
        runtime().block_on(async move {
            let api: Api<Role> = Api::namespaced(admin, &ns);
            let old = api.get("bosun").await.expect("the role");
            role.metadata.resource_version = old.metadata.resource_version;
            api.replace("bosun", &PostParams::default(), &role)
                .await
                .expect("role replaced");
        });
        settled(&self.admin, &self.namespace, pod_verbs);
    }

    /// Gives bosun's creations of `resource` (its API group and plural
    /// name: `("", "pods")`, `("tekton.dev", "pipelineruns")`) in the
    /// namespace a priority level of their own on the API server, with one
    /// share of its concurrency (3 seats at kube-apiserver's default limits)
    /// and no queue: a creation over those seats is shed at once (429, with
    /// `Retry-After`). Returns the priority level's name (its
    /// `apiserver_flowcontrol_rejected_requests_total{priority_level}`
    /// counts the sheds).
    pub fn shed_creations_over_three(&self, resource: (&str, &str)) -> String {
        use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
        let (group, plural) = resource;
        let name = format!("bosun-creations-{}-{plural}", self.namespace);
        let level: PriorityLevelConfiguration = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 1, "lendablePercent": 0,
                "limitResponse": {"type": "Reject"}}}
        }))
        .expect("a priority level");
        let schema: FlowSchema = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {
                "priorityLevelConfiguration": {"name": name},
                "matchingPrecedence": 100,
                "rules": [{
                    "subjects": [{"kind": "ServiceAccount",
                        "serviceAccount": {"name": "bosun", "namespace": self.namespace}}],
                    "resourceRules": [{"verbs": ["create"], "apiGroups": [group],
                        "resources": [plural], "namespaces": [self.namespace]}]
                }]
            }
        }))
        .expect("a flow schema");
        let admin = self.admin.clone();
        runtime().block_on(async move {
            let pp = PostParams::default();
            Api::<PriorityLevelConfiguration>::all(admin.clone())
                .create(&pp, &level)
                .await
                .expect("the priority level created");
            Api::<FlowSchema>::all(admin)
                .create(&pp, &schema)
                .await
                .expect("the flow schema created");
        });
        name
    }
}

/// Waits until kube-apiserver's authorizer allows bosun's service account in
/// `namespace` exactly `pod_verbs` of [`POD_VERBS`] on pods. The RBAC
/// authorizer reads Roles through an informer, so a Role just written may
/// not be what the next request is judged by; a test that checks a grant at
/// once would race it.
fn settled(admin: &Client, namespace: &str, pod_verbs: &[&str]) {
    assert!(
        pod_verbs.iter().all(|v| POD_VERBS.contains(v)),
        "{pod_verbs:?}: only verbs of {POD_VERBS:?} can be waited for"
    );
    let want: Vec<bool> = POD_VERBS.iter().map(|v| pod_verbs.contains(v)).collect();
    judged_as(admin, namespace, ("", "pods"), &POD_VERBS, &want);
}

/// Waits (up to 30 s, then panics) until kube-apiserver's authorizer
/// judges bosun's service account in `namespace` as `want` says for each
/// of `verbs` on `resource` (its API group and plural name): asked by
/// SubjectAccessReviews, as the authorizer itself would judge a request.
pub(crate) fn judged_as(
    admin: &Client,
    namespace: &str,
    (group, resource): (&str, &str),
    verbs: &[&str],
    want: &[bool],
) {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let user = format!("system:serviceaccount:{namespace}:bosun");
    let (admin, ns) = (admin.clone(), namespace.to_string());
    let review = |verb: &str| SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.clone()),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.clone()),
                verb: Some(verb.into()),
                group: (!group.is_empty()).then(|| group.to_string()),
                resource: Some(resource.into()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let reviews: Vec<SubjectAccessReview> = verbs.iter().map(|v| review(v)).collect();
    runtime().block_on(async move {
        let api: Api<SubjectAccessReview> = Api::all(admin);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let mut got = Vec::new();
            for review in &reviews {
                let answer = api
                    .create(&PostParams::default(), review)
                    .await
                    .unwrap_or_else(|e| panic!("subject access review: {e}"));
                got.push(answer.status.is_some_and(|s| s.allowed));
            }
            if got == want {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the authorizer of {namespace} never settled on {want:?} for {verbs:?} on {resource}: {got:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    });
}
