//! bosun's integration tests, in one test binary: a module per area. Each
//! module was a test binary of its own, and every one of them was compiled
//! and linked again whenever a crate of the daemon changed.
//!
//! The modules' tests run in this one process, in parallel. What is shared
//! per test binary is shared by all of them: `ControlPlane::shared()`
//! (`bosun-kubetest`) serves `deploy_manifests`, `kubernetes` and
//! `pipelines_kube`, each test in namespaces of its own (`kubernetes`'s are
//! `k-*`, `pipelines_kube`'s `tk-*`, `deploy_manifests`' `bosun`,
//! `test-pods`, `rbac-probe` and `serve-pods`): a new test takes a name no
//! other test uses. `pipelines_kube` installs Tekton's resources and its
//! admission webhook (PipelineRuns only) there.
//!
//! `common` is what the modules share; `web_support` the dashboard tests'
//! daemon and HTTP client; `prom` a real Prometheus. Run one module with
//! `cargo test -p bosun --test it MODULE::`.

mod common;
/// The port a daemon logs (shared with the benchmarks).
#[path = "../../examples/common/proc.rs"]
mod proc;
mod prom;
mod web_support;

mod artifacts_api;
mod check_golden;
mod check_pipelines;
mod cli;
mod decorated_local;
mod deploy_manifests;
mod dispatch_openshift;
mod dispatch_writeback;
mod dispatcher;
mod kubernetes;
mod local_executor;
mod pipelines_kube;
mod pipelines_local;
mod placement;
mod prometheus;
mod pull_requests;
mod quickstart_pipeline;
mod readme_walkthrough;
mod replicas;
mod replicas_api;
mod replicas_kube;
mod repos;
mod serve;
mod web_browser;
mod web_pages;
mod web_pulls;
