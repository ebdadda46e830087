//! TLS to the database, with rustls (the TLS stack of bosun's Kubernetes
//! client too): a connection is encrypted when the URL's `sslmode` asks for
//! it (`require`) or allows it and the server offers it (`prefer`, the
//! default); `sslmode=disable` never encrypts.
//!
//! An encrypted connection always checks the server's certificate and its
//! name (the URL's host): against the CA certificates of
//! `--store-ca-file` when given (a managed database's CA bundle, or a
//! cluster's own CA), else against the system's trusted roots. A server
//! whose certificate does not check out is refused, never used unverified,
//! whatever `sslmode` says: an unverified connection hands the database's
//! password and every run to whoever sits in the middle.

use std::path::Path;
use std::sync::Arc;

use bosun_store::StoreError;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

/// How connections to the database are made (plain or TLS, as `sslmode`
/// says).
pub type Connector = tokio_postgres_rustls::MakeRustlsConnect;

/// The connector that checks servers against the CA certificates of the PEM
/// file `ca_file`, else against the system's roots.
pub fn connector(ca_file: Option<&Path>) -> Result<Connector, StoreError> {
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    StoreError::Invalid(format!("the store's CA file {}: {e}", path.display()))
                })?;
            if certs.is_empty() {
                return Err(StoreError::Invalid(format!(
                    "the store's CA file {} holds no certificate",
                    path.display()
                )));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| {
                    StoreError::Invalid(format!("the store's CA file {}: {e}", path.display()))
                })?;
            }
        }
        None => {
            // What the system trusts; a root it cannot read is left out (a
            // server signed by it is then refused, saying why).
            let found = rustls_native_certs::load_native_certs();
            for e in &found.errors {
                tracing::debug!(error = %e, "a system root certificate was not read");
            }
            let (added, _) = roots.add_parsable_certificates(found.certs);
            tracing::debug!(roots = added, "the system's roots for TLS to the store");
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| StoreError::Invalid(format!("TLS to the store: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}
