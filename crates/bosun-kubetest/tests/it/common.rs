//! Helpers that more than one module uses.

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;

/// A current-thread runtime for a test's client calls.
pub fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A client with a tenant's credentials (its kubeconfig and context).
pub async fn client_of(tenant: &bosun_kubetest::Tenant) -> Client {
    let kubeconfig = Kubeconfig::read_from(&tenant.kubeconfig).unwrap();
    let options = KubeConfigOptions {
        context: Some(tenant.context.clone()),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}
