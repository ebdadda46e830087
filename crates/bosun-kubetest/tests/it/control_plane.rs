//! The harness against its own real control plane: what bosun's Kubernetes
//! tests rely on it to do (validation, RBAC through a service account's
//! token, binding and status, graceful deletion finished by the kubelet,
//! logs proxied to the kubelet, 410 Gone after compaction).

use std::time::{Duration, Instant};

use bosun_kubetest::{ControlPlane, Options, Outcome};
use futures_util::{AsyncBufReadExt, StreamExt, TryStreamExt};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams, PostParams, WatchEvent, WatchParams};
use kube::Client;

use crate::common::{client_of, tokio};

fn pod(name: &str, container: Option<&str>) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"created-by-prow": "true"}},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "containers": [{"name": container, "image": "alpine", "command": ["true"]}],
        },
    }))
    .unwrap()
}

async fn allowed(client: &Client, ns: &str, verb: &str) -> bool {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.into()),
                verb: Some(verb.into()),
                resource: Some("pods".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    answer.status.unwrap().allowed
}

#[test]
fn a_service_account_creates_pods_the_tests_run_and_log() {
    let plane = ControlPlane::shared();
    let tenant = plane.tenant("harness-a", "build-a");
    let kubelet = plane.kubelet();
    let ns = tenant.namespace.clone();
    let rt = tokio();
    let client = rt.block_on(client_of(&tenant));
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    // Real validation: a container must be named.
    let refused = rt
        .block_on(pods.create(&PostParams::default(), &pod("nameless", None)))
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("{refused}")
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status
            .message
            .contains("spec.containers[0].name: Required value"),
        "{status:?}"
    );
    rt.block_on(pods.create(&PostParams::default(), &pod("p1", Some("test"))))
        .unwrap();
    // RBAC: bosun's Role, no more.
    assert!(rt.block_on(allowed(&client, &ns, "create")));
    assert!(!rt.block_on(allowed(&client, &ns, "deletecollection")));
    assert!(!rt.block_on(allowed(&client, "default", "create")));
    tenant.grant(&["get", "list", "watch", "delete", "patch"]);
    assert!(!rt.block_on(allowed(&client, &ns, "create")));
    let forbidden = rt
        .block_on(pods.create(&PostParams::default(), &pod("p0", Some("test"))))
        .unwrap_err();
    assert!(
        matches!(&forbidden, kube::Error::Api(s) if s.code == 403),
        "{forbidden}"
    );
    tenant.grant(&bosun_kubetest::POD_VERBS);

    // The kubelet: logs through kube-apiserver's proxy, following.
    kubelet.run(&ns, "p1");
    kubelet.append_log(&ns, "p1", "one\n");
    let lines = rt.block_on(async {
        let params = LogParams {
            follow: true,
            ..Default::default()
        };
        let stream = pods.log_stream("p1", &params).await.unwrap();
        let mut lines = stream.lines();
        let first = lines.next().await.unwrap().unwrap();
        kubelet_append(&ns, "two\n");
        let second = lines.next().await.unwrap().unwrap();
        kubelet_finish(&ns);
        let rest: Vec<String> = lines.try_collect().await.unwrap();
        (first, second, rest)
    });
    assert_eq!((lines.0.as_str(), lines.1.as_str()), ("one", "two"));
    assert!(lines.2.is_empty(), "{:?}", lines.2);
    let p = kubelet.pod(&ns, "p1").unwrap();
    let status = p.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Succeeded"));
    assert_eq!(
        status.container_statuses.unwrap()[0]
            .state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        0
    );

    // Graceful deletion: a bound, running pod stays, with its
    // deletionTimestamp, until the kubelet confirms.
    rt.block_on(pods.create(&PostParams::default(), &pod("p2", Some("test"))))
        .unwrap_or_else(|e| panic!("{e}"));
    kubelet.run(&ns, "p2");
    kubelet.hold_deletion(&ns, "p2", true);
    kubelet.delete_gracefully(&ns, "p2");
    std::thread::sleep(Duration::from_millis(800));
    let lingering = kubelet.pod(&ns, "p2").expect("still there");
    assert!(lingering.metadata.deletion_timestamp.is_some());
    kubelet.hold_deletion(&ns, "p2", false);
    let deadline = Instant::now() + Duration::from_secs(10);
    while kubelet.pod(&ns, "p2").is_some() {
        assert!(Instant::now() < deadline, "the kubelet never confirmed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// From another thread: the harness's calls block, and this one is inside a
/// runtime.
fn kubelet_append(ns: &str, text: &str) {
    let (ns, text) = (ns.to_string(), text.to_string());
    std::thread::spawn(move || {
        ControlPlane::shared()
            .kubelet()
            .append_log(&ns, "p1", &text)
    })
    .join()
    .unwrap();
}

fn kubelet_finish(ns: &str) {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        ControlPlane::shared()
            .kubelet()
            .finish(&ns, "p1", Outcome::success())
    })
    .join()
    .unwrap();
}

#[test]
fn a_watch_from_before_a_compaction_is_gone() {
    let plane = ControlPlane::dedicated(Options {
        pods_watch_cache: false,
        compaction: false,
        min_request_timeout: None,
    });
    let tenant = plane.tenant("harness-gone", "gone");
    let ns = tenant.namespace.clone();
    let rt = tokio();
    let pods: Api<Pod> = Api::namespaced(plane.admin(), &ns);
    let old = rt
        .block_on(pods.create(&PostParams::default(), &pod("g1", Some("test"))))
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    // Compacted at the revision after g3's: the watch would start at g2's.
    for name in ["g2", "g3"] {
        rt.block_on(pods.create(&PostParams::default(), &pod(name, Some("test"))))
            .unwrap();
    }
    plane.compact();
    let first = rt.block_on(async {
        let mut stream = pods
            .watch(&WatchParams::default(), &old)
            .await
            .unwrap()
            .boxed();
        stream.next().await
    });
    match first {
        Some(Ok(WatchEvent::Error(e))) => assert_eq!(e.code, 410, "{e:?}"),
        Some(Err(kube::Error::Api(e))) => assert_eq!(e.code, 410, "{e:?}"),
        other => panic!("not 410 Gone: {other:?}"),
    }
    // kube-apiserver's request counter sees the creations.
    let creates = plane.request_total(|l| l.get("resource") == "pods" && l.get("verb") == "POST");
    assert!(creates >= 2.0, "{creates}");
}
