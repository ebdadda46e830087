//! A real Kubernetes control plane for bosun's tests, as controller-runtime's
//! envtest provides one, built here from Go modules: `kube-apiserver`
//! (k8s.io/kubernetes v1.37.2) and `etcd` (v3.7.0), built by
//! `tools/kube/build.sh` into a cache outside the clone and started by the
//! tests on loopback.
//!
//! - [`ControlPlane`]: etcd and kube-apiserver with generated certificates
//!   ([`pki`]), the RBAC authorizer, service-account tokens, and an admin
//!   (`system:masters`) client. [`ControlPlane::shared`] is one server per
//!   test binary; [`ControlPlane::dedicated`] gives a test its own, to stop
//!   ([`ControlPlane::stop_apiserver`]), hang ([`ControlPlane::pause`],
//!   SIGSTOP) or compact ([`ControlPlane::compact`]).
//! - [`Tenant`]: a test's namespace, and bosun's service account in it bound
//!   to a Role with exactly the verbs bosun needs (a real token, through
//!   `TokenRequest`), written as a kubeconfig.
//! - [`audit`]: [`ControlPlane::audited`] turns kube-apiserver's audit log
//!   on, and counts its requests by user, verb, resource and subresource
//!   (`apiserver_request_total` has no user label).
//! - [`Kubelet`]: there is no kubelet and no scheduler; the tests play them
//!   through the real API (binding, status, finishing graceful deletions) and
//!   the harness serves pod logs as a kubelet, behind kube-apiserver's
//!   `pods/log` proxy.
//! - [`tekton`]: Tekton's `PipelineRun` and `TaskRun` resources, its
//!   admission check (Tekton's own validation, `tools/tekton`) and a
//!   hand-played Tekton controller.
//!
//! What this cannot show: no container runtime runs anything, and nothing but
//! the test writes pod statuses; there is no controller-manager (no garbage
//! collector, no namespace deletion, no node lifecycle controller).
//!
//! The API is blocking (for the daemon's tests, which are synchronous): each
//! call runs on this crate's own tokio runtime, so it must not be called from
//! inside another runtime's task.

pub mod audit;
pub mod kubeconfig;
pub mod kubelet;
pub mod metrics;
pub mod pki;
pub mod plane;
pub mod postgres;
pub mod process;
pub mod tekton;
pub mod tenant;

pub use kubelet::{Kubelet, Outcome, NODE};
pub use plane::{ControlPlane, Options};
pub use tenant::{Tenant, POD_VERBS};

use std::sync::OnceLock;

/// The harness's own runtime (its log server, its kubelet's deletions, and
/// every blocking call).
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kubetest")
            .enable_all()
            .build()
            .expect("the harness runtime")
    })
}
