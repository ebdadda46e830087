//! Kubeconfig files of a control plane, written as JSON.

/// A kubeconfig for `server` with `user`, as JSON (a YAML subset every
/// kubeconfig reader accepts).
pub fn kubeconfig(
    context: &str,
    server: &str,
    ca_pem: &str,
    user: serde_json::Value,
    namespace: &str,
) -> String {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}],
        "users": [{"name": context, "user": user}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}],
        "current-context": context,
        "preferences": {},
    })
    .to_string()
}
