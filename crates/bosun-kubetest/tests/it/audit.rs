//! The audit log of an audited control plane counts each request once, by
//! its user: a tenant's service account apart from the admin, a watch when
//! it starts.

use std::time::{Duration, Instant};

use bosun_kubetest::audit::{self, ADMIN_USER};
use bosun_kubetest::{ControlPlane, Options};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams, WatchParams};

use crate::common::{client_of, tokio};

#[test]
fn the_audit_log_counts_requests_by_user_verb_and_resource() {
    let plane = ControlPlane::audited(Options::default());
    let tenant = plane.tenant("audited", "build-a");
    let bosun = audit::service_account("audited", "bosun");
    let before = plane.audit_counts();
    let rt = tokio();
    let pods: Api<Pod> = Api::namespaced(rt.block_on(client_of(&tenant)), "audited");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "test", "image": "alpine"}]},
    }))
    .unwrap();
    // A watch, still open when the log is read.
    let watch = rt.block_on(async {
        pods.create(&PostParams::default(), &pod).await.unwrap();
        pods.get("p").await.unwrap();
        pods.get("p").await.unwrap();
        let mut watch = pods
            .watch(&WatchParams::default().timeout(60), "0")
            .await
            .unwrap()
            .boxed();
        let _ = watch.next().await;
        watch
    });
    plane.kubelet().run("audited", "p");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ours = plane.audit_counts().since(&before).of_user(&bosun);
        if ours.get("watch", "pods", "") == 1 {
            assert_eq!(ours.get("create", "pods", ""), 1, "{ours:?}");
            assert_eq!(ours.get("get", "pods", ""), 2, "{ours:?}");
            assert_eq!(ours.total(), 4, "{ours:?}");
            break;
        }
        assert!(Instant::now() < deadline, "{ours:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(watch);
    // The harness's kubelet, as the admin: the binding and the status.
    let admin = plane.audit_counts().since(&before).of_user(ADMIN_USER);
    assert_eq!(admin.get("create", "pods", "binding"), 1, "{admin:?}");
    assert_eq!(admin.get("patch", "pods", "status"), 1, "{admin:?}");
}
