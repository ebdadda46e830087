//! The old path of [`crate::kube::pod`], kept for the daemon's controller.
//!
//! [`pod_for_run`] here gives its error as text because the controller chains
//! it with text errors (`bosun/src/controller.rs`, a revival); once that
//! caller maps the error itself, this module can become a plain re-export.

pub use crate::kube::pod::{PodError, BUILD_ID_LABEL, CREATED_BY, ID_LABEL};

use bosun_store::template::SpecSnapshot;
use bosun_store::Run;
use k8s_openapi::api::core::v1::Pod;

/// [`crate::kube::pod::pod_for_run`], its error as text.
pub fn pod_for_run(run: &Run, spec: &SpecSnapshot, namespace: &str) -> Result<Pod, String> {
    crate::kube::pod::pod_for_run(run, spec, namespace).map_err(|e| e.to_string())
}
