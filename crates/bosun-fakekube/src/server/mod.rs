//! The fake API server process: certificates, kubeconfig, the two listeners, and
//! the lifetime rules (exit on stdin EOF, SIGTERM/SIGINT, or parent exit).
//!
//! * Kubernetes API: `https://127.0.0.1:PORT` (TLS 1.2/1.3 via rustls with the
//!   *ring* provider, HTTP/1.1 only), certificate for `127.0.0.1` and `localhost`
//!   signed by a CA generated at start-up; every request needs
//!   `Authorization: Bearer <token>` (401 otherwise).
//! * Control API: `http://127.0.0.1:PORT2`, no auth.
//!
//! When `/control/down` is set, the Kubernetes API either closes connections (mode
//! `refuse`, the default: new connections are closed right after accept, open ones
//! at once; the port stays bound) or answers 503 `ServiceUnavailable` to every
//! request (mode `503`; kube-rs retries those by default).

mod control;
mod error;
mod kube_api;
mod selector;
mod store;

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use tokio::net::TcpListener;

pub use error::ApiError;
use store::Shared;

use crate::wire::{DownMode, Ready};

type BoxError = Box<dyn Error + Send + Sync>;

/// Command-line options of `bosun-fakekube`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    /// Where `kubeconfig` and `ready.json` are written.
    pub dir: PathBuf,
    /// Name of the kubeconfig context (and cluster and user).
    pub context: String,
    /// Namespace of the context.
    pub namespace: String,
    /// Exit when stdin reaches EOF (on by default; `--ignore-stdin` turns it off).
    pub exit_on_stdin_eof: bool,
}

pub const USAGE: &str =
    "usage: bosun-fakekube --dir DIR [--context NAME] [--namespace NS] [--ignore-stdin]

A fake Kubernetes API server for tests (not a Kubernetes implementation).
Writes DIR/kubeconfig and DIR/ready.json, prints the ready JSON line on stdout,
and exits when stdin closes, on SIGTERM/SIGINT, or when its parent exits.";

impl Args {
    /// Parses the arguments after the program name.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut dir = None;
        let mut context = "fake".to_string();
        let mut namespace = "default".to_string();
        let mut exit_on_stdin_eof = true;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (arg.clone(), None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            match flag.as_str() {
                "--dir" => dir = Some(PathBuf::from(value()?)),
                "--context" => context = value()?,
                "--namespace" => namespace = value()?,
                "--ignore-stdin" => exit_on_stdin_eof = false,
                "-h" | "--help" => return Err(USAGE.to_string()),
                other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
            }
        }
        let dir = dir.ok_or_else(|| format!("--dir is required\n{USAGE}"))?;
        Ok(Args {
            dir,
            context,
            namespace,
            exit_on_stdin_eof,
        })
    }
}

/// A CA and a server certificate for `127.0.0.1` and `localhost`.
struct Certs {
    ca_pem: String,
    server_der: Vec<u8>,
    server_key_der: Vec<u8>,
}

fn generate_certs() -> Result<Certs, rcgen::Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "bosun-fakekube CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let server_key = KeyPair::generate()?;
    let mut server =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?;
    server
        .distinguished_name
        .push(DnType::CommonName, "bosun-fakekube");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    server.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let server_cert = server.signed_by(&server_key, &issuer)?;
    Ok(Certs {
        ca_pem: ca_cert.pem(),
        server_der: server_cert.der().to_vec(),
        server_key_der: server_key.serialize_der(),
    })
}

fn tls_config(certs: &Certs) -> Result<rustls::ServerConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![certs.server_der.clone().into()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certs.server_key_der.clone())),
        )?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The kubeconfig, as JSON (a YAML subset every kubeconfig reader accepts).
fn kubeconfig(args: &Args, server: &str, ca_pem: &str, token: &str) -> serde_json::Value {
    let name = &args.context;
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": name,
            "cluster": {
                "server": server,
                "certificate-authority-data":
                    base64::engine::general_purpose::STANDARD.encode(ca_pem),
            },
        }],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{
            "name": name,
            "context": {"cluster": name, "user": name, "namespace": args.namespace},
        }],
        "current-context": name,
        "preferences": {},
    })
}

/// Writes `contents` to `path` through a temporary file and a rename, so readers
/// never see half a file.
fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents)?;
    std::fs::rename(&tmp, path)
}

fn refusing(shared: &Shared) -> bool {
    shared.read().down == Some(DownMode::Refuse)
}

/// Serves the Kubernetes API over TLS on `listener`, one task per connection.
/// While the API is down in `refuse` mode, connections are closed.
async fn serve_tls(
    listener: TcpListener,
    config: rustls::ServerConfig,
    shared: Arc<Shared>,
    app: axum::Router,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if refusing(&shared) {
            drop(tcp);
            continue;
        }
        let acceptor = acceptor.clone();
        let app = app.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut changed = shared.subscribe();
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = TowerToHyperService::new(app);
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service);
            tokio::pin!(connection);
            // Dropping the connection future closes the socket.
            loop {
                tokio::select! {
                    _ = &mut connection => return,
                    r = changed.changed() => {
                        if r.is_err() || refusing(&shared) {
                            return;
                        }
                    }
                }
            }
        });
    }
}

/// Exits the process when stdin reaches EOF (the spawning test went away).
fn exit_on_stdin_eof() {
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        std::process::exit(0);
    });
}

/// Exits the process when its parent exits (it is re-parented).
fn exit_with_parent() {
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(250));
        if std::os::unix::process::parent_id() != parent {
            std::process::exit(0);
        }
    });
}

/// Runs the server until SIGTERM/SIGINT (or stdin EOF / parent exit, which exit
/// the process directly).
pub async fn run(args: Args) -> Result<(), BoxError> {
    exit_with_parent();
    if args.exit_on_stdin_eof {
        exit_on_stdin_eof();
    }
    std::fs::create_dir_all(&args.dir)?;
    let certs = generate_certs()?;
    let tls = tls_config(&certs)?;

    let api_listener = TcpListener::bind("127.0.0.1:0").await?;
    let control_listener = TcpListener::bind("127.0.0.1:0").await?;
    let api_addr = api_listener.local_addr()?;
    let control_addr = control_listener.local_addr()?;
    let token = format!("fake-{}", uuid::Uuid::new_v4().simple());
    let shared = Arc::new(Shared::new(token.clone(), api_addr.to_string()));

    let api_url = format!("https://{api_addr}");
    let kubeconfig_path = args.dir.join("kubeconfig");
    let config = kubeconfig(&args, &api_url, &certs.ca_pem, &token);
    write_atomically(
        &kubeconfig_path,
        serde_json::to_string_pretty(&config)?.as_bytes(),
    )?;

    tokio::spawn(serve_tls(
        api_listener,
        tls,
        shared.clone(),
        kube_api::router(shared.clone()),
    ));
    let control_app = control::router(shared);
    tokio::spawn(async move {
        let _ = axum::serve(control_listener, control_app).await;
    });

    // Signal handlers exist before anyone can read the ready line, so a
    // SIGTERM sent right after it ends the process cleanly.
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let ready = Ready {
        api: api_url,
        control: format!("http://{control_addr}"),
        kubeconfig: kubeconfig_path.display().to_string(),
    };
    let line = serde_json::to_string(&ready)?;
    write_atomically(&args.dir.join("ready.json"), line.as_bytes())?;
    {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{line}")?;
        stdout.flush()?;
    }

    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_arguments() {
        let args = Args::parse(strings(&[
            "--dir",
            "/tmp/x",
            "--context=ci",
            "--ignore-stdin",
        ]))
        .unwrap();
        assert_eq!(args.dir, PathBuf::from("/tmp/x"));
        assert_eq!(args.context, "ci");
        assert_eq!(args.namespace, "default");
        assert!(!args.exit_on_stdin_eof);
        assert!(Args::parse(strings(&["--context", "x"])).is_err());
        assert!(Args::parse(strings(&["--dir"])).is_err());
        assert!(Args::parse(strings(&["--dir", "d", "--bogus"])).is_err());
    }

    #[test]
    fn certificates_make_a_server_config() {
        let certs = generate_certs().unwrap();
        assert!(certs.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        tls_config(&certs).unwrap();
    }
}
