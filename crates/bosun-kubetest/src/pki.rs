//! The control plane's certificates and keys, generated for each control
//! plane and written as files for kube-apiserver's flags:
//!
//! - one CA (`ca.crt`) that signs everything: the API server's serving
//!   certificate, the harness kubelet's serving certificate (the API server
//!   verifies it with `--kubelet-certificate-authority`) and the admin's
//!   client certificate (`--client-ca-file`);
//! - the admin: `CN=bosun-test-admin, O=system:masters`, as envtest's, which
//!   RBAC lets do anything;
//! - the service-account signing key pair (`sa.key`, `sa.pub`), so the API
//!   server issues real tokens through `TokenRequest`.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A certificate and its private key, PEM.
#[derive(Clone, Debug)]
pub struct Pair {
    /// The certificate.
    pub cert_pem: String,
    /// Its PKCS#8 private key.
    pub key_pem: String,
}

/// Everything a control plane needs, in memory and on disk under `dir`.
#[derive(Debug)]
pub struct Pki {
    /// Where the files are.
    pub dir: PathBuf,
    /// The CA certificate.
    pub ca_pem: String,
    /// kube-apiserver's serving pair (127.0.0.1, localhost).
    pub apiserver: Pair,
    /// The harness kubelet's serving pair (127.0.0.1).
    pub kubelet: Pair,
    /// The admin's client pair (`system:masters`).
    pub admin: Pair,
}

impl Pki {
    /// `dir/ca.crt`
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }
}

fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    cn: &str,
    org: Option<&str>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> Result<Pair, rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params =
        CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
    params.distinguished_name.push(DnType::CommonName, cn);
    if let Some(org) = org {
        params
            .distinguished_name
            .push(DnType::OrganizationName, org);
    }
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let cert = params.signed_by(&key, issuer)?;
    Ok(Pair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Generates a new PKI and writes it under `dir`: `ca.crt`, `apiserver.crt`,
/// `apiserver.key`, `admin.crt`, `admin.key`, `sa.key`, `sa.pub`.
pub fn generate(dir: &Path) -> Result<Pki, String> {
    let e = |e: rcgen::Error| format!("generating certificates: {e}");
    let ca_key = KeyPair::generate().map_err(e)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "bosun-kubetest CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).map_err(e)?;
    let issuer = Issuer::new(ca, ca_key);
    let server = ExtendedKeyUsagePurpose::ServerAuth;
    let apiserver = leaf(
        &issuer,
        "kube-apiserver",
        None,
        &["127.0.0.1", "localhost", "kubernetes.default.svc"],
        server.clone(),
    )
    .map_err(e)?;
    let kubelet = leaf(
        &issuer,
        "kubelet",
        None,
        &["127.0.0.1", "localhost"],
        server,
    )
    .map_err(e)?;
    let admin = leaf(
        &issuer,
        "bosun-test-admin",
        Some("system:masters"),
        &[],
        ExtendedKeyUsagePurpose::ClientAuth,
    )
    .map_err(e)?;
    let sa = KeyPair::generate().map_err(e)?;
    let pki = Pki {
        dir: dir.to_path_buf(),
        ca_pem: ca_cert.pem(),
        apiserver,
        kubelet,
        admin,
    };
    let files = [
        ("ca.crt", pki.ca_pem.clone()),
        ("apiserver.crt", pki.apiserver.cert_pem.clone()),
        ("apiserver.key", pki.apiserver.key_pem.clone()),
        ("admin.crt", pki.admin.cert_pem.clone()),
        ("admin.key", pki.admin.key_pem.clone()),
        ("sa.key", sa.serialize_pem()),
        ("sa.pub", sa.public_key_pem()),
    ];
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(pki)
}
