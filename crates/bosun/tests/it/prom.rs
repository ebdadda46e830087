//! A real Prometheus for tests: Debian's `prometheus` and `promtool`, history
//! backfilled into a fresh TSDB (`promtool tsdb create-blocks-from
//! openmetrics`), the server started on a loopback port with a configuration
//! that scrapes nothing, and SIGKILLed when dropped (or when the test's
//! thread ends: the parent-death signal).
//!
//! Missing binaries fail the test, with how to install them: tools/test
//! installs them (as CI does), and a test that skipped silently would prove
//! nothing.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `name` on `PATH` (or in `/usr/bin`, where Debian puts it).
fn find(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{name}` not found on PATH: these tests run a real Prometheus. \
                 Install it with `apt-get install -y prometheus` (Debian's package has \
                 `prometheus` and `promtool`), or run the tests with tools/test, which \
                 installs it"
            )
        })
}

/// One series: its labels and its samples (Unix seconds, value), oldest first.
pub struct Series {
    pub labels: Vec<(&'static str, String)>,
    pub samples: Vec<(i64, f64)>,
}

/// `series` of the counter `metric` as OpenMetrics text, ending in `# EOF`.
///
/// The family is declared `unknown`, not `counter`: OpenMetrics names a
/// counter's samples `<name>_total`, and Prow's counter is exposed (and
/// queried) as `prowjob_state_transitions`, without the suffix.
pub fn openmetrics(metric: &str, series: &[Series]) -> String {
    use std::fmt::Write;
    let mut out = format!("# HELP {metric} Test history.\n# TYPE {metric} unknown\n");
    for s in series {
        let labels: Vec<String> = s
            .labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect();
        let labels = labels.join(",");
        for (t, v) in &s.samples {
            writeln!(out, "{metric}{{{labels}}} {v} {t}").unwrap();
        }
    }
    out.push_str("# EOF\n");
    out
}

/// A running Prometheus, killed on drop.
pub struct Prometheus {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// A port that was free a moment ago (Prometheus cannot say which port it
/// took for `:0`, so the test picks one; a port taken in between is retried).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A serving certificate for an https Prometheus, and the CA that signed it.
pub struct Tls {
    pub cert_pem: String,
    pub key_pem: String,
    pub ca_pem: String,
}

/// A user Prometheus asks for with HTTP basic auth: its name, its
/// password, and the password's bcrypt hash (Prometheus' web config holds
/// the hash).
pub struct BasicUser {
    pub name: &'static str,
    pub password: &'static str,
    pub bcrypt: &'static str,
}

fn ready(url: &str, tls: Option<&Tls>, basic: Option<&BasicUser>) -> bool {
    use ureq::tls::{Certificate, RootCerts, TlsConfig};
    let mut config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(2)));
    if let Some(tls) = tls {
        let ca = Certificate::from_pem(tls.ca_pem.as_bytes()).unwrap();
        config = config.tls_config(
            TlsConfig::builder()
                .root_certs(RootCerts::new_with_certs(&[ca]))
                .build(),
        );
    }
    let agent: ureq::Agent = config.build().into();
    let mut req = agent.get(format!("{url}/-/ready"));
    if let Some(u) = basic {
        use base64::Engine;
        let pair =
            base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", u.name, u.password));
        req = req.header("Authorization", &format!("Basic {pair}"));
    }
    req.call().is_ok_and(|r| r.status() == 200)
}

impl Prometheus {
    /// Backfills `history` (OpenMetrics text) into a new TSDB and starts
    /// Prometheus on it; returns once `/-/ready` answers 200.
    pub fn start(history: &str) -> Prometheus {
        Prometheus::start_with(history, None, None)
    }

    /// As [`Prometheus::start`], serving https with `tls` when given, and
    /// asking for `basic` with HTTP basic auth when given (Prometheus' own
    /// `--web.config.file`: `tls_server_config`, `basic_auth_users`).
    pub fn start_with(history: &str, tls: Option<&Tls>, basic: Option<&BasicUser>) -> Prometheus {
        let (prometheus, promtool) = (find("prometheus"), find("promtool"));
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let input = dir.path().join("history.om");
        std::fs::write(&input, history).unwrap();
        let out = Command::new(&promtool)
            .args(["tsdb", "create-blocks-from", "openmetrics"])
            .arg(&input)
            .arg(&data)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool could not backfill: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // No scrape targets: the TSDB holds the backfill and nothing else.
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            "global:\n  scrape_interval: 1m\nscrape_configs: []\n",
        )
        .unwrap();
        let mut web = String::new();
        if let Some(tls) = tls {
            let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
            std::fs::write(&cert, &tls.cert_pem).unwrap();
            std::fs::write(&key, &tls.key_pem).unwrap();
            web += &format!(
                "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
                cert.display(),
                key.display()
            );
        }
        if let Some(u) = basic {
            web += &format!("basic_auth_users:\n  {}: '{}'\n", u.name, u.bcrypt);
        }
        let web_config = (!web.is_empty()).then(|| {
            let path = dir.path().join("web.yml");
            std::fs::write(&path, &web).unwrap();
            path
        });
        let scheme = if tls.is_some() { "https" } else { "http" };
        let log = dir.path().join("prometheus.log");
        for attempt in 1..=5 {
            let port = free_port();
            let url = format!("{scheme}://127.0.0.1:{port}");
            let mut cmd = Command::new(&prometheus);
            if let Some(web) = &web_config {
                cmd.arg(format!("--web.config.file={}", web.display()));
            }
            cmd.arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", data.display()))
                // The backfill is days old: a retention of years keeps it.
                .arg("--storage.tsdb.retention.time=3650d")
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap());
            bosun_base::process::die_with_parent(&mut cmd);
            let mut child = cmd.spawn().unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if ready(&url, tls, basic) {
                    return Prometheus {
                        child: Some(child),
                        url,
                        log,
                        _dir: dir,
                    };
                }
                if let Some(status) = child.try_wait().unwrap() {
                    let text = std::fs::read_to_string(&log).unwrap_or_default();
                    if text.contains("address already in use") && attempt < 5 {
                        break; // another port
                    }
                    panic!("prometheus exited ({status}):\n{text}");
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "prometheus not ready after 60 s:\n{}",
                        std::fs::read_to_string(&log).unwrap_or_default()
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        unreachable!("the last attempt panics")
    }

    /// SIGKILL, and wait for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.kill();
    }
}
