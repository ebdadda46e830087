//! What the dashboard's tests share: a daemon with every page's data (local
//! clusters, one trusted, one kept full; the dispatcher; periodics with
//! schedules in words and a time zone), tokens, and an HTTP client that
//! sends any header (cookies, `Origin`, `Sec-Fetch-Site`, forms).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common;

/// The API token.
pub const API_TOKEN: &str = "act-s3cret";
/// The read token.
pub const READ_TOKEN: &str = "look-s3cret";

pub const CONFIG: &str = "scheduler:
  enabled: true
dispatcher:
  relocatable_clusters: [build-a]
  unit: job
build_clusters:
  default: {kind: local, run_as: nobody, blocked: true}
  build-a: {kind: local, run_as: nobody, max_concurrency: 8}
  build-b: {kind: local, run_as: nobody, max_concurrency: 8, capacity: 300}
  parked: {kind: local, run_as: nobody, max_concurrency: 1, blocked: true}
  vault:
    kind: local
    run_as: nobody
    blocked: true
    trusted: [{jobs: ['secure-.*'], types: [periodic]}]
";

/// `never` fires only when triggered.
pub const JOBS: &str = r#"periodics:
- name: quick
  cron: "0 0 31 2 *"
  cluster: build-a
  spec: {containers: [{image: x, command: ["sh", "-c", "echo hello from quick"]}]}
- name: greenlight
  cron: "0 0 31 2 *"
  cluster: build-b
  spec: {containers: [{image: x, command: ["sh", "-c", "echo starting; sleep 3; echo done"]}]}
- name: slow
  cron: "0 0 31 2 *"
  cluster: build-b
  spec: {containers: [{image: x, command: ["sleep", "60"]}]}
- name: hourly
  cron: "H * * * *"
  cluster: build-b
  spec: {containers: [{image: x, command: ["true"]}]}
- name: nightly-paris
  cron: "30 2 * * 1-5"
  timezone: Europe/Paris
  cluster: build-b
  spec: {containers: [{image: x, command: ["true"]}]}
- name: parked-holder
  cron: "0 0 31 2 *"
  cluster: parked
  spec: {containers: [{image: x, command: ["sleep", "60"]}]}
- name: parked-job
  cron: "0 0 31 2 *"
  cluster: parked
  spec: {containers: [{image: x, command: ["true"]}]}
- name: secure-backup
  cron: "0 0 31 2 *"
  cluster: vault
  spec: {containers: [{image: x, command: ["true"]}]}
"#;

/// A daemon on `dir` (world-readable: local runs run as `nobody`) with the
/// tokens asked for.
pub fn start(dir: &Path, api_token: bool, read_token: bool) -> common::Serve {
    start_with(dir, api_token, read_token, "")
}

/// [`start`], with `more_jobs` after [`JOBS`].
pub fn start_with(dir: &Path, api_token: bool, read_token: bool, more_jobs: &str) -> common::Serve {
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    std::fs::write(dir.join("jobs/jobs.yaml"), format!("{JOBS}{more_jobs}")).unwrap();
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    if api_token {
        std::fs::write(dir.join("api-token"), format!("{API_TOKEN}\n")).unwrap();
        args.push("--api-token-file".into());
        args.push(dir.join("api-token").into());
    }
    if read_token {
        std::fs::write(dir.join("read-token"), format!("{READ_TOKEN}\n")).unwrap();
        args.push("--read-token-file".into());
        args.push(dir.join("read-token").into());
    }
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    common::serve(dir, &args, &[])
}

/// An answer: status, headers and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The value cookie `name` is set to, if it is.
    pub fn set_cookie(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
            .find_map(|(_, v)| {
                let (kv, _) = v.split_once(';').unwrap_or((v, ""));
                let (k, val) = kv.split_once('=')?;
                (k == name).then(|| val.to_string())
            })
    }

    /// The raw `Set-Cookie` header of cookie `name`.
    pub fn set_cookie_line(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
            .map(|(_, v)| v.as_str())
            .find(|v| v.starts_with(&format!("{name}=")))
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {} {}", self.status, self.body))
    }

    /// The value of the first `name="csrf"` input of the page.
    pub fn csrf(&self) -> String {
        let at = self
            .body
            .find(r#"name="csrf" value=""#)
            .unwrap_or_else(|| panic!("no CSRF field in {}", self.body));
        let rest = &self.body[at + r#"name="csrf" value=""#.len()..];
        rest[..rest.find('"').unwrap()].to_string()
    }
}

/// `METHOD path` with `headers` and `body`, over a connection of its own.
pub fn call(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Answer {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.unwrap_or("");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        common::dechunk(body)
    } else {
        body.to_string()
    };
    Answer {
        status,
        headers,
        body,
    }
}

/// `GET path` with `headers`.
pub fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> Answer {
    call(port, "GET", path, headers, None)
}

/// A form body: `k=v&...`, percent-encoded.
pub fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `POST path` with a form body and `headers`.
pub fn post_form(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    pairs: &[(&str, &str)],
) -> Answer {
    let mut h = headers.to_vec();
    h.push(("Content-Type", "application/x-www-form-urlencoded"));
    call(port, "POST", path, &h, Some(&form(pairs)))
}

/// A run's state, through the API (`token` for reads, if they need one).
pub fn run_state(port: u16, id: &str, token: Option<&str>) -> serde_json::Value {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("Authorization", a)])
        .unwrap_or_default();
    get(port, &format!("/api/v1/runs/{id}"), &headers).json()
}

/// Waits until run `id` is in `state`.
pub fn wait_state(port: u16, id: &str, state: &str, token: Option<&str>) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let run = run_state(port, id, token);
        if run["state"] == state {
            return run;
        }
        assert!(Instant::now() < deadline, "never {state}: {run}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Triggers `job` through the API; its id.
pub fn trigger(port: u16, job: &str, token: Option<&str>) -> String {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(a) = auth.as_deref() {
        headers.push(("Authorization", a));
    }
    let a = call(
        port,
        "POST",
        "/api/v1/runs",
        &headers,
        Some(&format!(r#"{{"job": "{job}"}}"#)),
    );
    assert_eq!(a.status, 201, "{}", a.body);
    a.json()["id"].as_str().unwrap().to_string()
}

/// Waits for the dispatcher's first plan.
pub fn wait_plan(port: u16) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let a = get(port, "/api/v1/dispatch/plan", &[]);
        if a.status == 200 {
            return a.json();
        }
        assert!(Instant::now() < deadline, "no plan: {a:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The first server-sent event of `path` (its `event:` and `data:` lines),
/// read as it comes (the stream itself does not end).
pub fn first_event(port: u16, path: &str, headers: &[(&str, &str)]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some(at) = text.find("event: html") {
            if let Some(end) = text[at..].find("\n\n") {
                return text[at..at + end].to_string();
            }
        }
        assert!(Instant::now() < deadline, "no event from {path}: {text}");
        match s.read(&mut buf) {
            Ok(0) => panic!("{path} ended without an event: {text}"),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) => panic!("{path}: {e}: {text}"),
        }
    }
}
