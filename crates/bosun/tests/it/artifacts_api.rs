//! `GET /api/v1/runs/{id}/artifacts[/{*path}]` through a real `bosun serve`:
//! a run on a local cluster, its artifacts written into its directory by the
//! test (as a decorated run would, while it runs), listed and served; paths
//! that climb out, links and special files refused; every answer sandboxed.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use crate::common;
use crate::common::wait_state;

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: gone, context: {cluster: c, user: u}}]\ncurrent-context: gone\n";

const JOBS: &str = r#"
periodics:
- name: slow
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  spec: {containers: [{image: x, command: ["sleep", "120"]}]}
- name: quick
  cron: "0 0 31 2 *"
  spec: {containers: [{image: x, command: ["true"]}]}
- name: on-kubernetes
  cron: "0 0 31 2 *"
  cluster: k8s
  spec: {containers: [{image: x, command: ["true"]}]}
"#;

/// An answer: status, headers (names lowercased) and body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    /// The value of header `name`, if present.
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {} {}", self.status, self.body))
    }
}

/// The API token mutations need (reads of artifacts need none).
const TOKEN: &str = "s3cret";

/// `GET path`, without a token.
fn get(port: u16, path: &str) -> Answer {
    send(port, "GET", path, None)
}

/// `METHOD path`, failing if the daemon does not answer within a (generous)
/// minute: a request that hangs (a FIFO opened for reading) is a failure.
fn send(port: u16, method: &'static str, path: &str, token: Option<&'static str>) -> Answer {
    let (tx, rx) = mpsc::channel();
    let p = path.to_string();
    std::thread::spawn(move || {
        let _ = tx.send(common::request_full(port, method, &p, None, token));
    });
    let (status, head, body) = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{method} {path} got no answer"));
    let answer = Answer { status, head, body };
    // Whatever the answer, it is sandboxed and not kept.
    for (name, value) in [
        ("x-content-type-options", "nosniff"),
        ("content-security-policy", "sandbox; default-src 'none'"),
        ("cache-control", "no-store"),
    ] {
        assert_eq!(
            answer.header(name).as_deref(),
            Some(value),
            "{method} {path}: {name} in\n{}",
            answer.head
        );
    }
    assert_ne!(
        answer
            .header("content-type")
            .unwrap_or_default()
            .to_ascii_lowercase()
            .split(';')
            .next(),
        Some("text/html"),
        "{method} {path}"
    );
    answer
}

fn trigger(port: u16, job: &str) -> String {
    let body = format!(r#"{{"job": "{job}"}}"#);
    let (status, body) = common::request(port, "POST", "/api/v1/runs", Some(&body), Some(TOKEN));
    assert_eq!(status, 201, "{body}");
    let run: serde_json::Value = serde_json::from_str(&body).unwrap();
    run["id"].as_str().unwrap().to_string()
}

/// `(name, type, size)` of every entry of a listing, in its order.
fn entries(listing: &serde_json::Value) -> Vec<(String, String, Option<u64>)> {
    listing["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("a listing: {listing}"))
        .iter()
        .map(|e| {
            assert!(e["modified"].is_string(), "{e}");
            (
                e["name"].as_str().unwrap().to_string(),
                e["type"].as_str().unwrap().to_string(),
                e["size"].as_u64(),
            )
        })
        .collect()
}

fn entry(name: &str, kind: &str, size: Option<u64>) -> (String, String, Option<u64>) {
    (name.to_string(), kind.to_string(), size)
}

/// An HTML artifact with a script.
const PAGE: &str = "<html><script>alert(document.cookie)</script></html>";

/// What a decorated run leaves in its artifacts directory, and what a
/// hostile job could add.
fn write_artifacts(logs: &Path) {
    let artifacts = logs.join("artifacts");
    std::fs::create_dir_all(artifacts.join("sub")).unwrap();
    std::fs::write(logs.join("started.json"), r#"{"timestamp":1700000000}"#).unwrap();
    std::fs::write(logs.join("build-log.txt"), "line 1\nline 2\n").unwrap();
    std::fs::write(artifacts.join("sub/deep.txt"), "deep\n").unwrap();
    std::fs::write(artifacts.join("junit.xml"), "<testsuite/>").unwrap();
    std::fs::write(artifacts.join("page.html"), PAGE).unwrap();
    std::fs::write(artifacts.join("README"), "no extension\n").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", artifacts.join("passwd")).unwrap();
    std::os::unix::fs::symlink("/etc", artifacts.join("etc")).unwrap();
    std::os::unix::fs::symlink("sub", artifacts.join("sub-link")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        artifacts.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

#[test]
fn a_local_runs_artifacts_are_listed_and_served_safely() {
    let d = tempfile::tempdir().unwrap();
    let dir: PathBuf = d.path().to_path_buf();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("k.yaml"), KUBECONFIG).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "build_clusters:\n  default: {{kind: local}}\n  k8s: {{kind: kubernetes, kubeconfig: {}, context: gone}}\n",
            dir.join("k.yaml").display()
        ),
    )
    .unwrap();
    std::fs::write(dir.join("jobs/jobs.yaml"), JOBS).unwrap();
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    let token_file = dir.join("token");
    let daemon = common::serve(
        &dir,
        &["--api-token-file".as_ref(), token_file.as_os_str()],
        &[],
    );
    let port = daemon.port;

    let slow = trigger(port, "slow");
    wait_state(port, &slow, |s| s == "pending");
    let base = format!("/api/v1/runs/{slow}/artifacts");

    // Nothing written yet.
    let a = get(port, &base);
    assert_eq!(a.status, 404, "{}", a.body);
    assert!(a.json()["error"]
        .as_str()
        .unwrap()
        .contains("no artifacts yet"));

    // The local cluster's runs live in DATA/runs/ALIAS/ID; artifacts in logs/.
    let logs = dir.join("data/runs/default").join(&slow).join("logs");
    assert!(logs.parent().unwrap().is_dir(), "the run's directory");
    write_artifacts(&logs);

    // The root, with or without its slash.
    for path in [base.clone(), format!("{base}/")] {
        let a = get(port, &path);
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        assert_eq!(
            a.header("content-type").as_deref(),
            Some("application/json")
        );
        assert_eq!(
            entries(&a.json()),
            [
                entry("artifacts", "dir", None),
                entry("build-log.txt", "file", Some(14)),
                entry("started.json", "file", Some(24)),
            ],
            "{path}"
        );
    }
    // A subdirectory: links and the FIFO are listed as what they are.
    for path in [format!("{base}/artifacts"), format!("{base}/artifacts/")] {
        let a = get(port, &path);
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        assert_eq!(
            entries(&a.json()),
            [
                entry("README", "file", Some(13)),
                entry("etc", "symlink", None),
                entry("fifo", "other", None),
                entry("junit.xml", "file", Some(12)),
                entry("page.html", "file", Some(PAGE.len() as u64)),
                entry("passwd", "symlink", None),
                entry("sub", "dir", None),
                entry("sub-link", "symlink", None),
            ],
            "{path}"
        );
    }
    let a = get(port, &format!("{base}/artifacts/sub"));
    assert_eq!(entries(&a.json()), [entry("deep.txt", "file", Some(5))]);

    // Files: their bytes, text and JSON inline.
    let a = get(port, &format!("{base}/build-log.txt"));
    assert_eq!((a.status, a.body.as_str()), (200, "line 1\nline 2\n"));
    assert_eq!(
        a.header("content-type").as_deref(),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(a.header("content-disposition"), None);
    let a = get(port, &format!("{base}/started.json"));
    assert_eq!(
        (a.status, a.body.as_str()),
        (200, r#"{"timestamp":1700000000}"#)
    );
    assert_eq!(
        a.header("content-type").as_deref(),
        Some("application/json")
    );
    let a = get(port, &format!("{base}/artifacts/sub/deep.txt"));
    assert_eq!((a.status, a.body.as_str()), (200, "deep\n"));
    let a = get(port, &format!("{base}/artifacts/README"));
    assert_eq!((a.status, a.body.as_str()), (200, "no extension\n"));
    assert_eq!(
        a.header("content-type").as_deref(),
        Some("text/plain; charset=utf-8")
    );
    // HTML (and XML) never on bosun's origin: bytes to download, sandboxed.
    for name in ["page.html", "junit.xml"] {
        let a = get(port, &format!("{base}/artifacts/{name}"));
        assert_eq!(a.status, 200, "{name}: {}", a.body);
        assert_eq!(
            a.header("content-type").as_deref(),
            Some("application/octet-stream"),
            "{name}"
        );
        assert_eq!(
            a.header("content-disposition").as_deref(),
            Some("attachment"),
            "{name}"
        );
    }
    assert_eq!(get(port, &format!("{base}/artifacts/page.html")).body, PAGE);

    // Links are never followed: to a file, to a directory outside, to a
    // directory inside, at the end of the path or in its middle.
    for path in [
        "artifacts/passwd",
        "artifacts/etc",
        "artifacts/etc/",
        "artifacts/etc/passwd",
        "artifacts/sub-link",
        "artifacts/sub-link/deep.txt",
    ] {
        let a = get(port, &format!("{base}/{path}"));
        assert_eq!(a.status, 404, "{path}: {}", a.body);
        assert!(
            a.json()["error"]
                .as_str()
                .unwrap()
                .contains("symbolic link"),
            "{path}: {}",
            a.body
        );
        assert!(!a.body.contains("root:"), "{path}: {}", a.body);
    }
    // A FIFO is refused at once (not opened waiting for a writer).
    let a = get(port, &format!("{base}/artifacts/fifo"));
    assert_eq!(a.status, 404, "{}", a.body);
    assert!(
        a.body.contains("neither a regular file nor a directory"),
        "{}",
        a.body
    );
    // Missing, or a file taken for a directory.
    for path in ["nothing", "artifacts/nothing.txt", "build-log.txt/x"] {
        let a = get(port, &format!("{base}/{path}"));
        assert_eq!(a.status, 404, "{path}: {}", a.body);
        assert!(
            a.json()["error"].as_str().unwrap().contains("no artifact"),
            "{path}"
        );
    }

    // Climbing out, plainly or percent-encoded, absolute paths, empty
    // components and NUL bytes: refused before the filesystem is touched.
    // (The request line is sent as is: no client normalizes it away.)
    for path in [
        "..",
        "../",
        "../../../../../../etc/passwd",
        "artifacts/../../slow.log",
        "artifacts/sub/../../build-log.txt",
        "%2e%2e",
        "%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
        "artifacts/%2e%2e/build-log.txt",
        "./build-log.txt",
        "/etc/passwd",
        "%2fetc%2fpasswd",
        "artifacts//sub",
        "build-log.txt%00.json",
    ] {
        let a = get(port, &format!("{base}/{path}"));
        assert_eq!(a.status, 400, "{path}: {}", a.body);
        assert!(
            a.json()["error"]
                .as_str()
                .unwrap()
                .contains("bad artifact path"),
            "{path}: {}",
            a.body
        );
        assert!(!a.body.contains("root:"), "{path}");
    }
    // Not UTF-8: the extractor's own refusal, sandboxed all the same.
    assert_eq!(get(port, &format!("{base}/%ff")).status, 400);

    // The artifacts directory itself swapped for a link (to a directory the
    // job could point anywhere): not followed either.
    let real = logs.with_file_name("logs.real");
    std::fs::rename(&logs, &real).unwrap();
    std::os::unix::fs::symlink(&real, &logs).unwrap();
    for path in [base.clone(), format!("{base}/build-log.txt")] {
        let a = get(port, &path);
        assert_eq!(a.status, 404, "{path}: {}", a.body);
        assert!(a.body.contains("symbolic link"), "{path}: {}", a.body);
    }
    std::fs::remove_file(&logs).unwrap();
    std::fs::rename(&real, &logs).unwrap();
    assert_eq!(get(port, &format!("{base}/build-log.txt")).status, 200);

    // A run that ended without writing any.
    let quick = trigger(port, "quick");
    wait_state(port, &quick, |s| s == "success");
    let a = get(port, &format!("/api/v1/runs/{quick}/artifacts/"));
    assert_eq!(a.status, 404, "{}", a.body);
    assert_eq!(
        a.json()["error"],
        format!("run {quick} has no artifacts"),
        "{}",
        a.body
    );

    // A run on a Kubernetes cluster (unreachable: it waits, as triggered).
    let kube = trigger(port, "on-kubernetes");
    let a = get(port, &format!("/api/v1/runs/{kube}/artifacts"));
    assert_eq!(a.status, 404, "{}", a.body);
    let why = a.json()["error"].as_str().unwrap().to_string();
    assert!(
        why.contains("Kubernetes") && why.contains("sidecar"),
        "{why}"
    );

    // An unknown run.
    for path in [
        "/api/v1/runs/nope/artifacts",
        "/api/v1/runs/nope/artifacts/build-log.txt",
    ] {
        let a = get(port, path);
        assert_eq!(a.status, 404, "{path}: {}", a.body);
        assert_eq!(a.json()["error"], "run nope not found");
    }

    // Reading is not a mutation: no token needed (every GET above went
    // without one), as for the log. Other methods are refused, sandboxed too.
    for token in [None, Some(TOKEN)] {
        let a = send(port, "POST", &format!("{base}/build-log.txt"), token);
        assert_eq!(a.status, 405, "{}", a.body);
        let a = send(port, "DELETE", &base, token);
        assert_eq!(a.status, 405, "{}", a.body);
    }

    let (status, body) = common::request(
        port,
        "POST",
        &format!("/api/v1/runs/{slow}/abort"),
        None,
        Some(TOKEN),
    );
    assert_eq!(status, 202, "{body}");
    wait_state(port, &slow, |s| s == "aborted");
}
